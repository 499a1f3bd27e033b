"""``run --exhaustive``: the flag reaches the run's target and header; with ``--device cpu``,
where run counts nothing at all, a note says so instead of a silent no-op."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _cli import SMALL, cli


def _options(out: Path) -> dict:
    with open(out / "result.jsonl", encoding="utf-8") as f:
        return json.loads(f.readline())["options"]


def test_run_exhaustive_on_cpu_is_recorded_with_a_note(tmp_path: Path,
                                                       capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "o"
    rc, _, err = cli(capsys, "run", SMALL, "--device", "cpu", "--exhaustive", "--no-timed",
                     "--out", str(out))
    assert rc == 0
    assert "syncguard: note: --exhaustive: run --device cpu counts no syncs" in err
    assert _options(out)["exhaustive"] is True


def test_run_without_the_flag_has_no_note(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "o"
    rc, _, err = cli(capsys, "run", SMALL, "--device", "cpu", "--no-timed", "--out", str(out))
    assert rc == 0 and "--exhaustive" not in err
    assert _options(out)["exhaustive"] is False
