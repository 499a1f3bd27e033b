"""``syncguard run`` when its result file cannot be written (a full disk): one line naming the
file and exit 2, never an internal error; the lines written before it are kept."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from _cli import SMALL, cli


def test_a_full_disk_during_run_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture) -> None:
    if not os.path.exists("/proc/self/fd"):
        pytest.skip("needs /proc")
    real = os.fsync
    fsyncs = {"n": 0}

    def fsync(fd: int) -> None:  # the result file's third step fills the disk
        if os.path.basename(os.readlink(f"/proc/self/fd/{fd}")) == "result.jsonl":
            fsyncs["n"] += 1
            if fsyncs["n"] == 3:
                raise OSError(28, "No space left on device")
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    from syncguard.results.writer import ResultWriter

    # an fsync after every step (the writer's interval, about a second, made nil), so that the
    # disk fills while the run goes on
    monkeypatch.setattr(ResultWriter, "SYNC_INTERVAL_S", 0.0)
    out = tmp_path / "o"
    rc, _, err = cli(capsys, "run", SMALL, "--device", "sim", "--out", str(out), "--no-timed")
    assert rc == 2, err
    lines = [ln for ln in err.splitlines() if ln.startswith("syncguard: error: ")]
    assert len(lines) == 1 and "No space left on device" in lines[0], err
    assert "result.jsonl" in lines[0]
    kept = (out / "result.jsonl").read_text().splitlines()
    assert json.loads(kept[0])["type"] == "header"
    assert sum('"type":"step"' in ln for ln in kept) == 3, "the lines written were lost"


@pytest.mark.skipif(os.name == "nt", reason="flock needs POSIX")
def test_a_run_into_a_folder_another_run_writes_is_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from syncguard.process import atomic as _atomic

    out = tmp_path / "o"
    out.mkdir()
    held = _atomic.claim(str(out / "result.jsonl"), force=True)
    try:
        os.write(held, b"the other run's line\n")
        rc, _, err = cli(capsys, "run", SMALL, "--device", "sim", "--out", str(out),
                         "--no-timed", "--force")
    finally:
        os.close(held)
    assert rc == 2 and "another syncguard run" in err, err
    assert (out / "result.jsonl").read_text() == "the other run's line\n"
