"""Where ``run`` and ``exec`` write without ``--out``: one folder, ``reports/``, a new
``<time>-<device>`` folder per run (never a clash between two runs of one second), and
``reports/latest`` pointing at the most recent one; ``--out`` overrides all of it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from _paths import TESTS

import syncguard
from syncguard import _paths
from syncguard.cli import main

SMALL = str(TESTS / "data" / "scenarios" / "small.toml")
STEPS = ("import syncguard\n"
         "for i in range(2):\n"
         "    with syncguard.step('decode'):\n"
         "        pass\n")


def _run(capsys: pytest.CaptureFixture, *extra: str) -> int:
    rc = main(["run", SMALL, "--device", "sim", "--no-timed", "--steps", "2", "--warmup", "0",
               "--paths", "flag", *extra])
    capsys.readouterr()
    return rc


def test_runs_go_under_reports_with_latest_pointing_at_the_newest(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(_paths.REPORTS_ENV, raising=False)
    assert _run(capsys) == 0 and _run(capsys) == 0  # twice, most likely within one second
    assert sorted(os.listdir(tmp_path)) == ["reports"]  # nothing else in the working folder
    reports = tmp_path / "reports"
    runs = sorted(p.name for p in reports.iterdir() if p.name != "latest")
    assert len(runs) == 2 and all(n.endswith(("-sim", "-sim-2")) for n in runs), runs
    latest = reports / "latest"
    assert latest.is_symlink() and os.readlink(latest) == max(runs, key=lambda n: (
        (reports / n / "result.jsonl").stat().st_mtime_ns))
    assert (latest / "report.html").is_file()
    assert syncguard.load(str(latest)).steps.shape[0] == 2  # the reader takes the link
    # exec writes beside them with its own link: run's latest stays on run's report
    (tmp_path / "prog.py").write_text(STEPS)
    before = os.readlink(latest)
    assert main(["exec", "--device", "cpu", "--", "python", "prog.py"]) == 0
    capsys.readouterr()
    assert os.readlink(latest) == before
    assert os.readlink(reports / "latest-exec").endswith("-exec-cpu")
    assert (reports / "latest-exec" / "result.jsonl").is_file()
    assert sorted(os.listdir(tmp_path)) == ["prog.py", "reports"]


def test_keep_runs_prunes_the_oldest_of_each_kind_and_nothing_of_the_users(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(_paths.REPORTS_ENV, raising=False)
    reports = tmp_path / "reports"
    old = ["20200101-000000-sim", "20200101-000001-sim", "20200101-000001-sim-2",
           "20200101-000002-exec-cpu"]
    for name in old + ["mine"]:
        (reports / name).mkdir(parents=True)
        (reports / name / "result.jsonl").write_text("")
    (reports / "20200101-000003-sim").mkdir()  # not a report (no result): never removed
    monkeypatch.setenv(_paths.KEEP_ENV, "2")
    assert _run(capsys) == 0
    left = sorted(p.name for p in reports.iterdir())
    new = os.readlink(reports / "latest")
    # run's two newest (the one just made and the newest before it); exec's folder, the
    # user's own and the folder without a result untouched
    assert left == sorted(["20200101-000001-sim-2", new, "20200101-000002-exec-cpu",
                           "20200101-000003-sim", "mine", "latest"]), left
    monkeypatch.setenv(_paths.KEEP_ENV, "two")
    assert _run(capsys) == 2


def test_out_overrides_and_a_folder_named_latest_is_never_replaced(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(_paths.REPORTS_ENV, raising=False)
    assert _run(capsys, "--out", "mine") == 0
    assert sorted(os.listdir(tmp_path)) == ["mine"]  # no reports/, no latest
    (tmp_path / "reports" / "latest").mkdir(parents=True)  # the user's own folder
    (tmp_path / "reports" / "latest" / "keep").write_text("x")
    assert _run(capsys) == 0
    assert not (tmp_path / "reports" / "latest").is_symlink()
    assert (tmp_path / "reports" / "latest" / "keep").read_text() == "x"


def test_the_reports_folder_can_be_named_in_the_environment(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(_paths.REPORTS_ENV, str(tmp_path / "elsewhere" / "sg"))
    assert _run(capsys) == 0
    assert sorted(os.listdir(tmp_path)) == ["elsewhere"]
    assert (tmp_path / "elsewhere" / "sg" / "latest" / "result.jsonl").is_file()


def test_a_new_report_folder_never_reuses_a_name(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(_paths.REPORTS_ENV, str(tmp_path))
    first = _paths.new_report_dir("sim", stamp="20250101-000000")
    os.makedirs(first)
    second = _paths.new_report_dir("sim", stamp="20250101-000000")
    assert (os.path.basename(first), os.path.basename(second)) == (
        "20250101-000000-sim", "20250101-000000-sim-2")
