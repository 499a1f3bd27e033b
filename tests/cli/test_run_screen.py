"""The main job's terminal report fits a screen: the summary and the verdicts by default, the
per-step tables, sites and legend with --verbose (the files hold everything either way), and
the HTML report's path printed last."""

from __future__ import annotations

from pathlib import Path

import pytest
from _paths import ROOT

from syncguard.cli import main

SMALL = str(ROOT / "tests" / "data" / "scenarios" / "small.toml")


def _run(tmp_path: Path, capsys: pytest.CaptureFixture, *extra: str):
    out = tmp_path / ("v" if extra else "d")
    rc = main(["run", SMALL, "--device", "sim", "--no-timed", "--out", str(out), "--width",
               "160", *extra])
    return rc, capsys.readouterr()


def test_default_report_is_the_summary_and_verdicts_then_the_html_path_last(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    rc, cap = _run(tmp_path, capsys)
    assert rc in (0, 1)
    # the answer: a headline per path, then the summary; the verdicts per scenario with -v
    assert "Summary" in cap.out and "Verdict" not in cap.out
    assert any(line.startswith("legacy: ") for line in cap.out.splitlines())
    assert "Legend" not in cap.out and "--verbose" in cap.err
    wrote = [line for line in cap.err.splitlines() if line.startswith("Wrote ")]
    assert wrote and wrote[-1].endswith("report.html"), wrote
    _, verbose = _run(tmp_path, capsys, "--verbose")
    assert "Legend" in verbose.out and "Verdict" in verbose.out
    assert len(verbose.out.splitlines()) > len(cap.out.splitlines())
