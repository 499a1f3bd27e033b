"""Errors come before the run and in one or two lines: a bad argument, ``exec`` without ``--``,
a misspelled ``--loop`` method of a class whose base is a library's."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from _cli import cli, forget, one_error_line, program_env
from _paths import ROOT

from syncguard.errors import EXIT_USAGE
from syncguard.execute.hooks import parse_step, static_missing

TOKEN_LOOP = ROOT / "examples" / "token_loop"


@pytest.mark.parametrize("argv", [
    ["run", "--device", "gpu"],
    ["exec", "--device", "gpu", "--", "python", "x.py"],
    ["show"],
])
def test_an_argument_error_is_two_lines_not_the_usage(capsys: pytest.CaptureFixture,
                                                      argv: list) -> None:
    rc, out, err = cli(capsys, *argv)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert rc == EXIT_USAGE and not out
    assert len(lines) <= 2, err
    assert lines[0].startswith(f"syncguard {argv[0]}: error: ") and "usage:" not in err
    assert f"syncguard {argv[0]} --help" in lines[-1]


def test_exec_without_double_dash_is_refused_before_the_program_runs(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    prog = tmp_path / "prog.py"
    prog.write_text("print('the program ran')\n")
    rc, out, err = cli(capsys, "exec", "--device", "sim", "--out", str(tmp_path / "o"),
                       "python", str(prog), "--tokens", "4")
    assert rc == EXIT_USAGE and "the program ran" not in out
    assert "put `--` before the program" in one_error_line(err)
    assert not (tmp_path / "o").exists()


def test_misspelled_loop_method_of_a_torch_module_fails_before_the_run(
        tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    program_env(monkeypatch)
    monkeypatch.chdir(TOKEN_LOOP)
    forget("model", "stopping")
    try:
        rc, out, err = cli(capsys, "exec", "--device", "sim", "--loop", "model:TinyDecoder.fwd",
                           "--out", str(tmp_path / "o"), "--", "python", "generate.py",
                           "--tokens", "2")
    finally:
        forget("model", "stopping")
    line = one_error_line(err)
    assert rc == EXIT_USAGE and not out  # the program never printed a token
    assert "model.TinyDecoder has no attribute 'fwd'" in line
    assert "torch.nn.modules.module.Module" in line and "did you mean 'forward'?" in line


def _missing(tmp_path: Path, source: str, spec: str):
    path = tmp_path / "m.py"
    path.write_text(textwrap.dedent(source))
    return static_missing(parse_step(spec, "--loop"), str(path))


def test_static_missing_follows_bases_it_knows_and_only_those(tmp_path: Path) -> None:
    chain = """
        import collections

        class A:
            def step(self): ...

        class B(A):
            pass

        class C(collections.OrderedDict):
            pass
    """
    assert "has no attribute 'stepp'" in _missing(tmp_path, chain, "m:B.stepp")
    assert "did you mean 'step'?" in _missing(tmp_path, chain, "m:B.stepp")
    assert _missing(tmp_path, chain, "m:B.step") is None  # inherited from A
    assert _missing(tmp_path, chain, "m:C.move_to_end") is None  # OrderedDict's own
    assert "no attribute 'nope'" in _missing(tmp_path, chain, "m:C.nope")
    # a base from a module not imported yet: only running the program can tell
    unknown = "from some_unimported_pkg import Base\n\nclass D(Base):\n    pass\n"
    assert _missing(tmp_path, unknown, "m:D.anything") is None
    # a class attribute set in the body may be the method
    assigned = "class E(object):\n    fwd = None\n"
    assert _missing(tmp_path, assigned, "m:E.fwd") is None
