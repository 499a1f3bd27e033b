"""``syncguard lint`` on hostile trees and files: every file it reads goes through the one
loader of untrusted files, every file it writes through the one writer, a file it cannot read
or analyse fails it in every format (as a linter's syntax error), gitignore patterns are
matched in bounded time, and the names git quotes are unquoted for ``--diff``."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import List

import pytest

from syncguard.cli import main
from syncguard.lint import lint_paths
from syncguard.lint.files import iter_files

posix = pytest.mark.skipif(os.name == "nt", reason="FIFOs and devices need POSIX")
HOT = "import torch\n\ndef f(x: torch.Tensor):\n    return x.item()\n"
DEEP = "x = " + "(" * 300 + "1" + ")" * 300 + "\n"


def _run(capsys: pytest.CaptureFixture, *argv: str) -> tuple:
    capsys.readouterr()
    rc = main(list(argv))
    cap = capsys.readouterr()
    return rc, cap.out, cap.err


@posix
def test_a_fifo_named_py_is_an_error_not_a_hang(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture) -> None:
    monkeypatch.chdir(tmp_path)
    os.mkfifo("hang.py")
    Path("ok.py").write_text("x = 1\n")
    rc, out, err = _run(capsys, "lint", ".")
    assert rc == 1, err
    assert "hang.py" in err and "FIFO" in err and "Traceback" not in err


@posix
def test_a_fifo_given_by_name_is_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                          capsys: pytest.CaptureFixture) -> None:
    monkeypatch.chdir(tmp_path)
    os.mkfifo("hang.py")
    rc, _, err = _run(capsys, "lint", "hang.py")
    assert rc == 1 and "hang.py" in err and "FIFO" in err


@posix
def test_a_device_node_named_py_is_an_error_not_read(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    monkeypatch.chdir(tmp_path)
    try:
        os.mknod("zero.py", 0o666 | stat.S_IFCHR, os.makedev(1, 5))  # /dev/zero
    except (PermissionError, OSError):
        pytest.skip("mknod needs root")
    rc, _, err = _run(capsys, "lint", ".")
    assert rc == 1 and "zero.py" in err and "device" in err


def test_a_file_over_the_size_cap_is_an_error_finding(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    from syncguard.lint import files

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(files, "MAX_SOURCE_BYTES", 4096)
    Path("big.py").write_text("x = 1\n" * 2000)
    rep = lint_paths(["big.py"])
    assert rep.error_items and rep.error_items[0]["path"] == "big.py"
    assert "larger than" in rep.error_items[0]["message"]


@pytest.mark.parametrize("fmt", ["text", "github", "sarif", "json"])
@pytest.mark.parametrize("source", [DEEP, "def f(:\n"], ids=["nested-too-deeply", "syntax"])
def test_a_file_not_analysed_fails_in_every_format(
        fmt: str, source: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture) -> None:
    monkeypatch.chdir(tmp_path)
    Path("bad.py").write_text(source)
    rc, out, err = _run(capsys, "lint", "bad.py", "--format", fmt)
    assert rc == 1, (out, err)
    err_lines = [ln for ln in err.splitlines() if "bad.py" in ln]
    assert len(err_lines) == 1 and err_lines[0].startswith("syncguard: error: bad.py")
    if fmt == "json":
        assert json.loads(out)["summary"]["error_items"][0]["path"] == "bad.py"
    elif fmt == "sarif":
        run = json.loads(out)["runs"][0]
        assert [r["ruleId"] for r in run["results"]] == ["syncguard-lint-error"]
        assert run["invocations"][0]["executionSuccessful"] is False
    else:
        assert "bad.py" in out and ("error" in out)


def test_fail_on_never_still_exits_0(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                     capsys: pytest.CaptureFixture) -> None:
    monkeypatch.chdir(tmp_path)
    Path("bad.py").write_text("def f(:\n")
    assert _run(capsys, "lint", "bad.py", "--fail-on", "never")[0] == 0


def test_a_latin1_coding_cookie_is_analysed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture) -> None:
    monkeypatch.chdir(tmp_path)
    Path("l1.py").write_bytes(b"# -*- coding: latin-1 -*-\n# caf\xe9\n" + HOT.encode())
    rep = lint_paths(["l1.py"])
    assert not rep.errors
    assert [f.api for f in rep.reported] == ["Tensor.item"]


# ------------------------------------------------------------------------- gitignore
@pytest.mark.parametrize("line", ["!", "foo\\", "\\"])
def test_gitignore_lines_git_cannot_read_are_ignored(line: str, tmp_path: Path) -> None:
    (tmp_path / ".gitignore").write_text(f"{line}\nskip.py\n")
    (tmp_path / "skip.py").write_text("x = 1\n")
    (tmp_path / "keep.py").write_text("x = 1\n")
    got = [os.path.basename(p) for p in iter_files([str(tmp_path)])]
    assert got == ["keep.py"]


def test_exclude_lines_git_cannot_read_are_ignored(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("x = 1\n")
    assert [os.path.basename(p) for p in iter_files([str(tmp_path)], ["!", "x\\"],
                                                     str(tmp_path))] == ["a.py"]


def test_a_backtracking_pattern_is_matched_by_a_linear_engine(tmp_path: Path) -> None:
    """``*a*a*a*a*a*a*a*azz`` against a 200-character name backtracks exponentially in
    Python's re (over a minute); the spec must use RE2 (no timing in the test: the engine)."""
    from syncguard.lint import files

    assert files._BACKEND == "re2"
    spec = files.gitignore_spec(["*a*a*a*a*a*a*a*azz"])
    assert not spec.match_file("a" * 200)


# ------------------------------------------------------------------------- baselines
@posix
def test_baseline_from_a_fifo_is_refused_without_blocking(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    monkeypatch.chdir(tmp_path)
    Path("a.py").write_text(HOT)
    os.mkfifo("base.json")
    rc, _, err = _run(capsys, "lint", "a.py", "--baseline", "base.json")
    assert rc == 2 and "FIFO" in err


@posix
def test_baseline_from_pyproject_fifo_is_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    monkeypatch.chdir(tmp_path)
    Path("a.py").write_text(HOT)
    os.mkfifo("base.json")
    Path("pyproject.toml").write_text('[tool.syncguard.lint]\nbaseline = "base.json"\n')
    rc, _, err = _run(capsys, "lint", "a.py")
    assert rc == 2 and "FIFO" in err


def test_deep_json_baseline_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                        capsys: pytest.CaptureFixture) -> None:
    monkeypatch.chdir(tmp_path)
    Path("a.py").write_text(HOT)
    Path("base.json").write_text("[" * 100000 + "]" * 100000)
    rc, _, err = _run(capsys, "lint", "a.py", "--baseline", "base.json")
    assert rc == 2 and "nested deeper" in err and "Traceback" not in err


def test_update_baseline_never_follows_a_planted_link(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    monkeypatch.chdir(tmp_path)
    Path("a.py").write_text(HOT)
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    # the old writer's predictable temporary name, planted as a link
    os.symlink(victim, f"base.json.tmp{os.getpid()}")
    rc, _, err = _run(capsys, "lint", "a.py", "--update-baseline", "base.json")
    assert rc == 0, err
    assert victim.read_text() == "precious\n"
    assert json.loads(Path("base.json").read_text())["format"] == "syncguard-lint-baseline"


def test_update_baseline_into_a_folder_is_exit_2(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    monkeypatch.chdir(tmp_path)
    Path("a.py").write_text(HOT)
    os.mkdir("base.json")
    rc, _, err = _run(capsys, "lint", "a.py", "--update-baseline", "base.json")
    assert rc == 2 and "folder" in err
    assert os.listdir("base.json") == [] and sorted(os.listdir(".")) == ["a.py", "base.json"]


@pytest.mark.parametrize("flag", ["--update-baseline", "-o"])
def test_a_full_disk_is_one_line_exit_2(flag: str, tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch,
                                        capsys: pytest.CaptureFixture) -> None:
    monkeypatch.chdir(tmp_path)
    Path("a.py").write_text(HOT)

    def enospc(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", enospc)
    rc, _, err = _run(capsys, "lint", "a.py", flag, "out.json")
    assert rc == 2, err
    assert [ln for ln in err.splitlines() if ln.startswith("syncguard: error: out.json")]
    assert sorted(os.listdir(".")) == ["a.py"], "a temporary file was left behind"


@posix
def test_update_baseline_writes_a_device_in_place(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture) -> None:
    monkeypatch.chdir(tmp_path)
    Path("a.py").write_text(HOT)
    try:
        os.mknod("null.json", 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    except (PermissionError, OSError):
        pytest.skip("mknod needs root")
    rc, _, err = _run(capsys, "lint", "a.py", "--update-baseline", "null.json")
    assert rc == 0, err
    assert stat.S_ISCHR(os.lstat("null.json").st_mode), "the device was replaced by a file"


def test_output_is_not_overwritten_without_force(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    monkeypatch.chdir(tmp_path)
    Path("a.py").write_text(HOT)
    Path("out.txt").write_text("keep\n")
    rc, _, err = _run(capsys, "lint", "a.py", "-o", "out.txt")
    assert rc == 2 and "--force" in err and Path("out.txt").read_text() == "keep\n"
    rc, _, err = _run(capsys, "lint", "a.py", "-o", "out.txt", "--force")
    assert rc == 1 and "Tensor.item" in Path("out.txt").read_text()


def test_wrote_line_is_escaped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                               capsys: pytest.CaptureFixture) -> None:
    monkeypatch.chdir(tmp_path)
    Path("a.py").write_text(HOT)
    rc, _, err = _run(capsys, "lint", "a.py", "-o", "x\n::error::y.txt")
    assert not [ln for ln in err.splitlines() if ln.startswith("::")]
    assert "Wrote x\\n" in err


# ------------------------------------------------------------------------- escaping
@pytest.mark.skipif(sys.platform == "darwin", reason="macOS file names must be UTF-8")
def test_sarif_of_a_non_utf8_file_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                       capsys: pytest.CaptureFixture) -> None:
    monkeypatch.chdir(tmp_path)
    with open(b"caf\xe9.py", "w") as f:
        f.write(HOT)
    for fmt in ("sarif", "text", "json", "github"):
        rc, out, err = _run(capsys, "lint", ".", "--format", fmt)
        assert rc == 1, (fmt, err)
        out.encode("utf-8")  # no lone surrogate reaches the output
    rc, out, _ = _run(capsys, "lint", ".", "--format", "sarif")
    uri = json.loads(out)["runs"][0]["results"][0]["locations"][0]["physicalLocation"][
        "artifactLocation"]["uri"]
    assert uri == "caf%E9.py"


def test_github_file_property_names_the_real_file(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture) -> None:
    monkeypatch.chdir(tmp_path)
    os.mkdir("::a")  # the terminal escaping would make it "\x3a:a", a folder not there
    Path("::a/x,y.py").write_text(HOT)
    rc, out, _ = _run(capsys, "lint", ".", "--format", "github")
    first = out.splitlines()[0]
    assert first.startswith("::warning file=%3A%3Aa/x%2Cy.py,line=4,"), first


# ------------------------------------------------------------------------- --diff
def _git(tmp: Path, *cmd: str) -> None:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    subprocess.run(["git", *cmd], cwd=tmp, check=True, env=env, capture_output=True)


@pytest.mark.parametrize("name", ["café.py", "tab\there.py", 'q"uote.py'])
def test_diff_keeps_findings_in_names_git_quotes(
        name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture) -> None:
    monkeypatch.chdir(tmp_path)
    _git(tmp_path, "init", "-q")
    Path(name).write_text("x = 1\n")
    _git(tmp_path, "add", "-A")
    _git(tmp_path, "commit", "-qm", "base")
    Path(name).write_text(HOT)
    rc, out, err = _run(capsys, "lint", ".", "--diff", "HEAD")
    assert rc == 1, (out, err)
    assert "Tensor.item" in out


def test_unquote() -> None:
    from syncguard.lint.diff import unquote

    got: List[str] = [unquote('"b/caf\\303\\251.py"'), unquote('"a\\tb\\\\c\\"d"'),
                      unquote("plain.py")]
    assert got == ["b/café.py", 'a\tb\\c"d', "plain.py"]
