"""``calibrate --write-model FILE``: the merged op model goes where the user says, never into
the installed package (the calibration child process is replaced by a fake here)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any, List

import pytest

from syncguard.cli import EXIT_OK, EXIT_USAGE, main
from syncguard.core.opmodel import _DIR


def _fake_calibration(monkeypatch: pytest.MonkeyPatch) -> None:
    def fake_run(cmd: List[str], **kw: Any) -> subprocess.CompletedProcess[str]:
        out = Path(cmd[cmd.index("--out") + 1])
        out.mkdir(parents=True, exist_ok=True)
        entry = {"op": "aten::multinomial", "reads": 0, "when": "always",
                 "evidence": "calibrated", "where": "measured"}
        (out / "calibration.json").write_text(json.dumps({
            "backend": "npu", "model": {"entries": [entry]},
            "versions": {"torch": "2.13.0"}}))
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(subprocess, "run", fake_run)


def test_write_model_writes_the_named_file_only(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    _fake_calibration(monkeypatch)
    installed = Path(_DIR) / "npu.json"
    before = installed.read_bytes()
    target = tmp_path / "models" / "npu.json"
    rc = main(["calibrate", "--out", str(tmp_path / "cal"), "--write-model", str(target)])
    assert rc == EXIT_OK, capsys.readouterr().err
    assert installed.read_bytes() == before  # the installed package is never written
    model = json.loads(target.read_text())
    entry = next(e for e in model["entries"] if e["op"] == "aten::multinomial")
    assert entry["evidence"] == "calibrated" and model["versions"] == {"torch": "2.13.0"}
    # the other entries of the installed model are kept
    assert len(model["entries"]) == len(json.loads(before)["entries"])
    assert f"Wrote {target}" in capsys.readouterr().err


def test_write_model_needs_a_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    _fake_calibration(monkeypatch)
    installed = Path(_DIR) / "npu.json"
    before = installed.read_bytes()
    assert main(["calibrate", "--out", str(tmp_path), "--write-model"]) == EXIT_USAGE
    assert installed.read_bytes() == before
    assert "--write-model: expected one argument" in capsys.readouterr().err
