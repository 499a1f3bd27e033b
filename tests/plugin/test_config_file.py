"""One rule finds the configuration file (``syncguard.driving.config.config_file``): the
nearest ``pyproject.toml`` at or above where each entry point starts (the working folder for
``check``, the first path for ``lint``, pytest's rootdir for the plugin). Once, ``check`` read
the working folder's only and the plugin its rootdir's only, while ``lint`` looked upwards:
from one folder of one tree they read different files."""

from __future__ import annotations

import pytest
from _cli import cli, one_error_line, write_result

from syncguard.cli import EXIT_USAGE

QUIET = ("-p", "no:cacheprovider", "-p", "no:benchmark", "-p", "no:hypothesispytest")


def test_every_entry_point_reads_the_nearest_pyproject_above_it(
        pytester: pytest.Pytester, capsys: pytest.CaptureFixture,
        monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = pytester.makepyprojecttoml("[tool.syncguard]\nallwo = ['model.py:3']\n")  # a typo
    sub = pytester.mkdir("sub")
    (sub / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")  # pytest's rootdir: sub
    (sub / "test_x.py").write_text("def test_x():\n    pass\n", encoding="utf-8")
    result = write_result(pytester.path / "r.jsonl", events=[{}])
    monkeypatch.chdir(sub)
    for argv in (("check", str(result)), ("lint", ".")):
        rc, _, err = cli(capsys, *argv)
        line = one_error_line(err)
        assert rc == EXIT_USAGE and str(cfg) in line and "allwo: unknown key" in line, argv
    ran = pytester.runpytest_inprocess(*QUIET)
    text = ran.stdout.str() + ran.stderr.str()
    assert ran.ret == pytest.ExitCode.USAGE_ERROR, text
    assert str(cfg) in text and "allwo: unknown key" in text
