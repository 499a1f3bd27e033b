"""``syncguard exec``: a decode loop with known syncs (two in step 2, one on a worker thread in
step 3, one in step 5), run in both forms on the simulated device."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Dict, Iterator, List, Tuple

import pytest
from _paths import ROOT, TESTS

from syncguard.cli import main
from syncguard.results import format as results
from syncguard.results import loader

HERE = os.path.join(str(TESTS), "data", "exec")
ENGINE = os.path.join(HERE, "loopdemo", "engine.py")
STEP = "loopdemo.engine:Engine.step"


def _line(tag: str) -> int:
    with open(ENGINE) as f:
        for i, line in enumerate(f, 1):
            if f"# sync: {tag}" in line:
                return i
    raise AssertionError(tag)


@pytest.fixture
def demo(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Run from the demo's folder; forget its modules afterwards (each run imports afresh)."""
    monkeypatch.chdir(HERE)
    yield
    for name in [m for m in sys.modules if m == "loopdemo" or m.startswith("loopdemo.")]:
        del sys.modules[name]


def _forms(prog_args: List[str]) -> Dict[str, List[str]]:
    return {"script": ["--", "python", "decode.py", *prog_args],
            "module": ["-m", "loopdemo.run", *prog_args]}


def _exec(tmp_path, form: str, opts: List[str], prog_args: List[str] = ()) -> Tuple[int, str]:
    out = str(tmp_path / "out")
    argv = ["exec", "--device", "sim", "--out", out, "--force", *opts]
    rc = main(argv + _forms(list(prog_args))[form])
    return rc, out


def _tool_frames(tb: str) -> List[str]:
    """Lines of a printed traceback that name a file of syncguard's own package (the test
    must not depend on the checkout's path, which may contain "syncguard" itself)."""
    import syncguard

    pkg = os.path.dirname(os.path.abspath(syncguard.__file__)) + os.sep
    return [ln for ln in tb.splitlines() if pkg in ln or 'File "syncguard' in ln]


def _per_step(out: str, name: str = "result.jsonl") -> Dict[int, int]:
    res = loader.load(os.path.join(out, name))
    return {s.step: s.syncs for s in res.steps}


@pytest.mark.parametrize("form", ["script", "module"])
def test_exact_counts_and_lines(demo, tmp_path, form, capsys):
    rc, out = _exec(tmp_path, form, ["--step", STEP])
    assert rc == 0
    assert "decoded 8 tokens" in capsys.readouterr().out  # the program ran, its stdout intact
    assert _per_step(out) == {0: 0, 1: 0, 2: 2, 3: 1, 4: 0, 5: 1, 6: 0, 7: 0}
    res = loader.load(os.path.join(out, "result.jsonl"))
    assert {s.path for s in res.steps} == {"Engine.step"}
    assert res.complete and all(s.pass_ == "exec" for s in res.steps)
    sites = {(e["step"], os.path.basename(e["filename"]), e["lineno"], e["thread"])
             for e in res.events if not e["allowed"] and e["path"] != results.OUTSIDE_PATH}
    assert sites == {
        (2, "engine.py", _line("two-a"), "MainThread"),
        (2, "engine.py", _line("two-b"), "MainThread"),
        (3, "engine.py", _line("worker"), "sampler-worker"),
        (5, "engine.py", _line("five"), "MainThread"),
    }
    # the final readback of the loop is outside every step: noted, not a step
    assert [n.get("outside_steps") for n in res.notes] == [1]
    # one readable line in the reports: relative path, no Python list, said once
    (note,) = res.notes
    with open(os.path.join(HERE, "loopdemo", "run.py")) as f:
        line = next(i for i, t in enumerate(f, 1) if "final readback, outside every step" in t)
    assert note["message"] == ("1 hidden sync outside every step (not gated): "
                               f"{note['sites'][0]} x1") and note["sites"][0].endswith(
        f"run.py:{line}") and not os.path.isabs(note["sites"][0])
    # and per site in the result, as events of no step, after the last step (7)
    (ev,) = [e for e in res.events if e["path"] == results.OUTSIDE_PATH]
    assert (os.path.basename(ev["filename"]), ev["lineno"], ev["step"], ev["after_step"],
            ev["kind"], ev["count"]) == ("run.py", line, None, 7, "d2h_copy", 1)
    assert [(r["lineno"], r["count"]) for r in results.outside_sites(res)] == [(line, 1)]


@pytest.mark.parametrize("form", ["script", "module"])
def test_max_syncs_gate(demo, tmp_path, form, capsys):
    rc, _ = _exec(tmp_path, form, ["--step", STEP, "--max-syncs", "0"])
    assert rc == 1
    text = capsys.readouterr().out
    assert f"engine.py:{_line('two-a')}" in text
    rc, out = _exec(tmp_path, form, ["--step", STEP, "--max-syncs", "0"], ["--fixed"])
    assert rc == 0
    assert set(_per_step(out).values()) == {0}


def test_markers_and_warmup(demo, tmp_path):
    rc, out = _exec(tmp_path, "script", ["--warmup", "3"], ["--markers"])
    assert rc == 0
    res = loader.load(os.path.join(out, "result.jsonl"))
    assert {s.path for s in res.steps} == {"decode"}
    assert [(s.step, s.warmup, s.syncs) for s in res.steps if s.syncs] == [
        (2, True, 2), (3, False, 1), (5, False, 1)]
    # warm-up steps 0-2 are not counted: two hidden syncs left
    assert _exec(tmp_path, "script", ["--warmup", "3", "--max-syncs", "2"], ["--markers"])[0] == 0
    assert _exec(tmp_path, "script", ["--warmup", "3", "--max-syncs", "1"], ["--markers"])[0] == 1


def test_whole_program_is_one_step(demo, tmp_path):
    rc, out = _exec(tmp_path, "module", [])
    assert rc == 0
    res = loader.load(os.path.join(out, "result.jsonl"))
    assert [(s.path, s.step, s.syncs) for s in res.steps] == [("program", 0, 5)]
    assert not res.notes


@pytest.mark.parametrize("form", ["script", "module"])
def test_program_exit_code_wins(demo, tmp_path, form):
    rc, out = _exec(tmp_path, form, ["--step", STEP, "--max-syncs", "0"], ["--exit", "7"])
    assert rc == 7
    assert len(_per_step(out)) == 8
    # the program ran to its end, but failed: the footer and the report header say so
    res = loader.load(os.path.join(out, "result.jsonl"))
    assert res.complete
    assert res.footer["exit_code"] == 7 and res.footer["reason"] == "program exited 7"
    with open(os.path.join(out, "report.md")) as f:
        assert "program exited 7" in f.read()


@pytest.mark.parametrize("form", ["script", "module"])
def test_program_traceback_is_the_programs(demo, tmp_path, form, capsys):
    rc, out = _exec(tmp_path, form, ["--step", STEP], ["--fail-at", "3"])
    assert rc == 1
    err = capsys.readouterr().err
    assert "RuntimeError: engine failed at step 3" in err
    tb = err[err.index("Traceback"):err.index("RuntimeError: engine failed")]
    assert "run.py" in tb and not _tool_frames(tb) and "runpy" not in tb
    assert sorted(_per_step(out)) == [0, 1, 2, 3]  # every finished step kept
    footer = loader.load(os.path.join(out, "result.jsonl")).footer
    assert footer["exit_code"] == 1 and footer["reason"] == "program raised RuntimeError"


@pytest.mark.parametrize("form", ["script", "module"])
def test_ctrl_c_keeps_finished_steps(demo, tmp_path, form, capsys):
    rc, out = _exec(tmp_path, form, ["--step", STEP], ["--interrupt-at", "6"])
    assert rc == 130
    res = loader.load(os.path.join(out, "result.jsonl"))
    assert not res.complete
    assert {s.step: s.syncs for s in res.steps} == {0: 0, 1: 0, 2: 2, 3: 1, 4: 0, 5: 1}
    assert os.path.exists(os.path.join(out, "report.md"))
    assert "interrupted: kept 6 finished steps" in capsys.readouterr().err
    assert res.footer["exit_code"] == 130 and res.footer["reason"] == "interrupted"


@pytest.mark.parametrize("markers", [False, True])
def test_ctrl_c_inside_a_step_drops_only_that_step(demo, tmp_path, markers):
    opts = [] if markers else ["--step", STEP]
    args = ["--interrupt-in-step", "5"] + (["--markers"] if markers else [])
    rc, out = _exec(tmp_path, "script", opts, args)
    assert rc == 130
    assert _per_step(out) == {0: 0, 1: 0, 2: 2, 3: 1, 4: 0}  # step 5 never finished


def test_missing_attribute_fails_before_start(demo, tmp_path, capsys):
    rc, out = _exec(tmp_path, "script", ["--step", "loopdemo.engine:Engine.nope"])
    assert rc == 2
    err = capsys.readouterr()
    assert "decoded" not in err.out  # the program never started
    assert err.err.count("\n") == 1 and "has no attribute 'nope'" in err.err


def test_missing_module_reported_after_the_run(demo, tmp_path, capsys):
    rc, out = _exec(tmp_path, "script", ["--step", "loopdemo.absent:step"])
    assert rc == 2
    cap = capsys.readouterr()
    assert "decoded 8 tokens" in cap.out
    assert "--step loopdemo.absent:step: module loopdemo.absent was never imported" in cap.err


def test_bad_program_and_step_spec(demo, tmp_path, capsys):
    assert main(["exec", "--device", "sim", "--out", str(tmp_path), "--", "python",
                 "nope.py"]) == 2
    assert "nope.py: no such file" in capsys.readouterr().err
    assert main(["exec", "--device", "sim", "--out", str(tmp_path), "-m", "no_such_mod"]) == 2
    assert main(["exec", "--step", "noqualname", "--", "python", "decode.py"]) == 2
    assert "expected MODULE:QUALNAME" in capsys.readouterr().err


@pytest.mark.parametrize("spec,args,name", [
    ("selfloop:decode_step", [], "decode_step"),
    ("__main__:Loop.run_one", ["--static"], "Loop.run_one"),
])
def test_step_in_the_script_itself(demo, tmp_path, spec, args, name):
    out = str(tmp_path / "o")
    rc = main(["exec", "--device", "sim", "--out", out, "--step", spec, "--", "python",
               "selfloop.py", *args])
    assert rc == 0
    res = loader.load(os.path.join(out, "result.jsonl"))
    assert {s.path for s in res.steps} == {name}
    assert _per_step(out) == {0: 0, 1: 0, 2: 2, 3: 1, 4: 0, 5: 1}


def test_step_in_the_module_itself(demo, tmp_path):
    rc, out = _exec(tmp_path, "module", ["--step", "loopdemo.run:main"], ["--steps", "4"])
    assert rc == 0
    # the whole of main() is one step: engine steps 2 and 3, and the final readback
    assert _per_step(out) == {0: 4}
    # `-m PKG` runs PKG.__main__: the package itself is an ordinary import
    out = str(tmp_path / "pkg")
    assert main(["exec", "--device", "sim", "--out", out, "--step", STEP, "-m", "loopdemo"]) == 0
    assert _per_step(out) == {0: 0, 1: 0, 2: 2, 3: 1, 4: 0, 5: 1, 6: 0, 7: 0}


def test_script_step_errors_and_traceback(demo, tmp_path, capsys):
    out = str(tmp_path / "o")
    base = ["exec", "--device", "sim", "--out", out, "--force"]
    assert main(base + ["--step", "selfloop:nope", "--", "python", "selfloop.py"]) == 2
    assert "has no attribute 'nope'" in capsys.readouterr().err
    rc = main(base + ["--step", "selfloop:decode_step", "--", "python", "selfloop.py",
                      "--fail"])
    assert rc == 1
    err = capsys.readouterr().err
    tb = err[err.index("Traceback"):err.index("ValueError: selfloop failed")]
    line = next(i for i, t in enumerate(open(os.path.join(HERE, "selfloop.py")), 1)
                if "raise ValueError" in t)
    assert f'selfloop.py", line {line}, in <module>' in tb and not _tool_frames(tb)


def test_command_forms():
    from syncguard.execute.program import Program, ProgramError, parse_command

    assert parse_command(["--", "python", "a.py", "-x"], None) == Program("a.py", ["-x"])
    assert parse_command(["a.py"], None) == Program("a.py", [])
    assert parse_command(["--", "python3", "-m", "pkg.m", "--y"], None) == Program(
        "pkg.m", ["--y"], module=True)
    assert parse_command([], ["pkg.m", "1"]) == Program("pkg.m", ["1"], module=True)
    for bad in ([], ["--"], ["python", "-c", "print(1)"], ["python", "-m"], ["python", "-O",
                                                                            "a.py"]):
        with pytest.raises(ProgramError):
            parse_command(bad, None)
    # python -u (unbuffered output) is the one interpreter option that applies in-process
    assert parse_command(["--", "python", "-u", "a.py", "1"], None) == Program(
        "a.py", ["1"], unbuffered=True)
    assert parse_command(["--", "python", "-u", "-m", "pkg.m"], None) == Program(
        "pkg.m", [], module=True, unbuffered=True)


def test_python_u_makes_the_programs_output_unbuffered(tmp_path, capsys):
    import sys as _sys

    from syncguard.execute.program import parse_command, run

    script = tmp_path / "u.py"
    script.write_text("import sys\nprint(sys.stdout.write_through)\n")
    before = getattr(_sys.stdout, "write_through", None)
    run(parse_command(["--", "python", "-u", str(script)], None))
    assert capsys.readouterr().out.strip() == "True"  # the program saw unbuffered output
    assert getattr(_sys.stdout, "write_through", None) == before  # restored after


def test_report_files_not_overwritten_without_force(demo, tmp_path, capsys):
    out = str(tmp_path / "o")
    args = ["exec", "--device", "sim", "--out", out, "--", "python", "decode.py", "--steps", "1"]
    assert main(args) == 0
    assert main(args) == 2
    assert "pass --force" in capsys.readouterr().err


def test_a_link_in_out_is_a_clash_too(demo, tmp_path, capsys):
    # as for run: a (dangling) symbolic link where a report goes is not written through
    out = tmp_path / "o"
    out.mkdir()
    (out / "result.jsonl").symlink_to(tmp_path / "elsewhere.jsonl")
    args = ["exec", "--device", "sim", "--out", str(out), "--", "python", "decode.py",
            "--steps", "1"]
    assert main(args) == 2
    assert "pass --force" in capsys.readouterr().err
    assert not (tmp_path / "elsewhere.jsonl").exists()


def test_show_and_compare_read_exec_results(demo, tmp_path, capsys):
    _, a = _exec(tmp_path, "script", ["--step", STEP])
    capsys.readouterr()
    assert main(["show", os.path.join(a, "result.jsonl"), "--width", "120"]) == 0
    shown = capsys.readouterr().out
    assert "Engine.step" in shown and f"engine.py:{_line('five')}" in shown
    b = str(tmp_path / "fixed")
    assert main(["exec", "--device", "sim", "--out", b, "--step", STEP, "--", "python",
                 "decode.py", "--fixed"]) == 0
    capsys.readouterr()
    assert main(["compare", os.path.join(a, "result.jsonl"),
                 os.path.join(b, "result.jsonl"), "--width", "120"]) == 0
    assert "Engine.step" in capsys.readouterr().out


def test_subprocess_run(tmp_path):
    """One real `syncguard exec` process: argv, exit code and files as a user sees them."""
    out = str(tmp_path / "o")
    env = {**os.environ, "COLUMNS": "120"}
    p = subprocess.run([sys.executable, "-m", "syncguard", "exec", "--device", "sim", "--out",
                        out, "--step", STEP, "--max-syncs", "0", "--", "python", "decode.py",
                        "--steps", "3"], cwd=HERE, capture_output=True, text=True, env=env,
                       timeout=300)
    assert p.returncode == 1, p.stderr
    assert "decoded 3 tokens, argv=['--steps', '3']" in p.stdout
    assert _per_step(out) == {0: 0, 1: 0, 2: 2}


def test_two_ranks_on_gloo(tmp_path, capsys):
    """torchrun, 2 ranks on gloo: one result per rank, merged with a rank column by show and
    check; the gate fails on the rank that syncs (and the rank's own exec exits 1)."""
    out = str(tmp_path / "ranks")
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    p = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone",
                        "--nproc-per-node", "2", "-m", "syncguard", "exec", "--device", "sim",
                        "--out", out, "--max-syncs", "0", "--", "python", "dist_demo.py"],
                       cwd=HERE, capture_output=True, text=True, env=env, timeout=600)
    assert p.returncode != 0  # rank 1 is over budget, so torchrun reports a failed child
    assert sorted(os.listdir(out)) == ["result.rank0.jsonl", "result.rank1.jsonl"]
    merged = loader.load(out)
    assert sorted({(s.rank, s.scenario) for s in merged.steps}) == [
        (0, "dist_demo.py [rank 0]"), (1, "dist_demo.py [rank 1]")]
    assert {(s.rank, s.step): s.syncs for s in merged.steps if s.syncs} == {(1, 2): 1}
    assert list(merged.steps_df()["rank"].unique()) == [0, 1]
    assert main(["show", out, "--width", "140"]) == 0
    shown = capsys.readouterr().out
    assert "dist_demo.py [rank 0]" in shown and "dist_demo.py [rank 1]" in shown
    assert main(["check", out, "--max-syncs", "0"]) == 1
    text = capsys.readouterr().out
    assert "OK    dist_demo.py [rank 0]" in text and "FAIL  dist_demo.py [rank 1]" in text
    assert main(["check", out, "--max-syncs", "1"]) == 0


def test_formats_and_rank_env(demo, tmp_path, capsys):
    from syncguard.execute.engine import rank_from_env, result_name

    assert rank_from_env({"RANK": "3", "WORLD_SIZE": "4"}) == 3
    assert rank_from_env({"RANK": "3"}) is None and rank_from_env({}) is None
    assert result_name(1) == "result.rank1.jsonl" and result_name(None) == "result.jsonl"
    rc, _ = _exec(tmp_path, "script", ["--step", STEP, "--max-syncs", "0", "--format",
                                       "github"])
    assert rc == 1
    out = capsys.readouterr().out
    assert "::error file=" in out and f"line={_line('five')}" in out
    rc, _ = _exec(tmp_path, "script", ["--format", "sarif"])
    assert rc == 2 and "needs --max-syncs" in capsys.readouterr().err


def test_check_gates_a_recorded_exec_run_with_a_baseline(demo, tmp_path, capsys):
    _, out = _exec(tmp_path, "script", ["--step", STEP])
    base = str(tmp_path / "base.json")
    assert main(["check", out, "--update-baseline", base]) == 0
    assert main(["check", out, "--baseline", base]) == 0  # nothing new since the baseline
    assert main(["check", out, "--max-syncs", "3"]) == 1
    assert main(["check", out, "--max-syncs", "4"]) == 0
    capsys.readouterr()
    assert main(["check", str(tmp_path / "missing"), "--max-syncs", "0"]) == 2


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_forked_child_does_not_write_into_the_parents_result(tmp_path, monkeypatch):
    prog = tmp_path / "forky.py"
    prog.write_text(
        "import os\nimport torch\nimport syncguard\n\n"
        "x = torch.ones(2, device='npu')\n"
        "for i in range(3):\n"
        "    with syncguard.step('decode'):\n"
        "        x.sum().item()\n"
        "    if i == 1:\n"
        "        pid = os.fork()\n"
        "        if pid == 0:\n"
        "            with syncguard.step('child'):\n"
        "                x.sum().item()\n"
        "            os._exit(0)\n"
        "        os.waitpid(pid, 0)\n")
    monkeypatch.chdir(tmp_path)
    out = str(tmp_path / "o")
    assert main(["exec", "--device", "sim", "--out", out, "--", "python", str(prog)]) == 0
    res = loader.load(os.path.join(out, "result.jsonl"))
    # the parent's rows are its own three steps; the child's step is a row of its own process
    mine = [(s.path, s.step, s.syncs) for s in res.steps if s.scenario == "forky.py"]
    assert mine == [("decode", i, 1) for i in range(3)]
    (child,) = res.header["processes"]
    assert child["complete"] and child["steps"] == 1
    assert [(s.scenario, s.path, s.syncs) for s in res.steps if s.scenario != "forky.py"] == [
        (f"forky.py [{child['label']}]", "child", 1)]


TWO_STEPS = (
    "import torch\n\n"
    "x = torch.ones(2, device='npu')\n\n\n"
    "def a():\n"
    "    return x.sum().item()\n\n\n"
    "def b():\n"
    "    x.sum().item()\n"
    "    return x.max().item()\n\n\n"
    "for _ in range(3):\n"
    "    a()\n"
    "    b()\n")


def test_two_steps_in_the_script_itself(tmp_path, monkeypatch, capsys):
    """The second ``__main__`` target is defined after the first: it stays pending until
    its own def, and both are gated."""
    (tmp_path / "two.py").write_text(TWO_STEPS)
    monkeypatch.chdir(tmp_path)
    out = str(tmp_path / "o")
    rc = main(["exec", "--device", "sim", "--out", out, "--step", "__main__:a", "--step",
               "__main__:b", "--max-syncs", "3", "--", "python", "two.py"])
    err = capsys.readouterr().err
    assert "has no attribute" not in err and "outside every step" not in err
    assert rc == 1  # b: 6 hidden syncs over the budget of 3; a: 3
    res = loader.load(os.path.join(out, "result.jsonl"))
    assert [(s.path, s.step, s.syncs) for s in res.steps] == [
        (n, i, k) for i in range(3) for n, k in (("a", 1), ("b", 2))]


@pytest.mark.parametrize("fmt,name", [("sarif", "syncguard.sarif"), ("junit", "junit.xml")])
def test_sarif_and_junit_default_to_a_file_under_out(demo, tmp_path, capsys, fmt, name):
    """Without -o the CI file goes under --out, never to stdout (the program's own output
    goes there and would make it unparseable)."""
    import json
    import xml.etree.ElementTree as ET

    rc, out = _exec(tmp_path, "script", ["--step", STEP, "--max-syncs", "0", "--format", fmt])
    assert rc == 1
    cap = capsys.readouterr()
    assert cap.out.startswith("decoded 8 tokens")  # the program's own output, then the gate's
    assert "$schema" not in cap.out and "<testsuite" not in cap.out and "<?xml" not in cap.out
    path = os.path.join(out, name)
    assert f"Wrote {path}" in cap.err
    with open(path) as f:
        text = f.read()
    if fmt == "sarif":
        assert json.loads(text)["runs"][0]["results"]
    else:
        assert list(ET.fromstring(text).iter("failure"))
    # a second run does not overwrite it without --force
    argv = ["exec", "--device", "sim", "--out", out, "--step", STEP, "--max-syncs", "0",
            "--format", fmt, "--", "python", "decode.py"]
    assert main(argv) == 2


SIGTERM_AT_3 = (
    "import os\nimport signal\nimport torch\nimport syncguard\n\n"
    "x = torch.ones(2, device='npu')\n"
    "for i in range(6):\n"
    "    if i == 3:\n"
    "        os.kill(os.getpid(), signal.SIGTERM)\n"
    "    with syncguard.step('decode'):\n"
    "        x.sum().item()\n")


@pytest.mark.skipif(not hasattr(os, "kill") or os.name == "nt", reason="needs POSIX SIGTERM")
def test_sigterm_is_handled_like_ctrl_c(tmp_path, monkeypatch, capsys):
    """SIGTERM (timeout, schedulers, CI): the finished steps and reports are kept, one line
    says so, exit 143; `check` on the kept result gates what it kept and says INCOMPLETE."""
    (tmp_path / "term.py").write_text(SIGTERM_AT_3)
    monkeypatch.chdir(tmp_path)
    out = str(tmp_path / "o")
    rc = main(["exec", "--device", "sim", "--out", out, "--", "python", "term.py"])
    assert rc == 143
    err = capsys.readouterr().err
    assert "terminated (SIGTERM): kept 3 finished steps" in err
    assert os.path.exists(os.path.join(out, "report.md"))
    res = loader.load(os.path.join(out, "result.jsonl"))
    assert not res.complete
    assert res.footer["reason"] == "terminated" and res.footer["exit_code"] == 143
    assert [s.step for s in res.steps] == [0, 1, 2]
    assert main(["check", out, "--max-syncs", "3"]) == 0  # gated on the 3 steps it kept
    err = capsys.readouterr().err
    assert len([ln for ln in err.splitlines() if "INCOMPLETE" in ln]) == 1
    assert "terminated" in err
    assert main(["check", out, "--max-syncs", "2"]) == 1


RAISING_STEP = (
    "import torch\n\n"
    "x = torch.ones(2, device='npu')\n\n\n"
    "def step(i):\n"
    "    x.sum().item()\n"
    "    if i == 1:\n"
    "        raise KeyError(i)\n"
    "    x.max().item()\n\n\n"
    "for i in range(3):\n"
    "    try:\n"
    "        step(i)\n"
    "    except KeyError:\n"
    "        pass\n")


def test_a_step_that_raises_keeps_its_syncs_and_is_marked(tmp_path, monkeypatch):
    (tmp_path / "raising.py").write_text(RAISING_STEP)
    monkeypatch.chdir(tmp_path)
    out = str(tmp_path / "o")
    assert main(["exec", "--device", "sim", "--out", out, "--step", "__main__:step", "--",
                 "python", "raising.py"]) == 0  # the program caught it: not a failure
    res = loader.load(os.path.join(out, "result.jsonl"))
    assert [(s.step, s.syncs, s.labels) for s in res.steps] == [
        (0, 2, None), (1, 1, {"raised": "KeyError"}), (2, 2, None)]


def test_exec_reports_have_no_ratio_between_step_names(tmp_path, monkeypatch):
    """Two step names of one program are not alternatives of one step: no ratio or saved
    columns or verdict between them, an exec latency legend, no batch size or branch."""
    from syncguard.renderers import markdown
    from syncguard.results import analysis

    (tmp_path / "two.py").write_text(TWO_STEPS)
    monkeypatch.chdir(tmp_path)
    out = str(tmp_path / "o")
    assert main(["exec", "--device", "sim", "--out", out, "--step", "__main__:a", "--step",
                 "__main__:b", "--", "python", "two.py"]) == 0
    res = loader.load(os.path.join(out, "result.jsonl"))
    sm = analysis.summary(res)
    assert sm["ratio_vs_baseline"].isna().all() and sm["saved_per_token_us"].isna().all()
    md = markdown.render(res)
    assert "ratio" not in md and "saved" not in md and "saves" not in md
    assert "timed pass without interceptors" not in md
    assert "host time per step call, measured under the guard" in md
    per_step = [ln for ln in md.splitlines() if ln.startswith("| 0 ")]
    cells = [c.strip() for c in per_step[0].split("|")]
    # no batch (not known in exec) and no branch column: step, a syncs, a ms, b syncs, b ms
    assert len(cells) == 7 and "| batch" not in md and "branch |" not in md
    assert cells[3] != "-" and float(cells[3]) > 0  # a's host time of step 0, in ms


def test_max_syncs_per_step(demo, tmp_path, capsys):
    """--max-syncs is a total per step name over the run (4 here); --max-syncs-per-step
    budgets each step call: the worst step (2, step 2) decides."""
    assert _exec(tmp_path, "script", ["--step", STEP, "--max-syncs", "2"])[0] == 1
    assert _exec(tmp_path, "script", ["--step", STEP, "--max-syncs-per-step", "2"])[0] == 0
    capsys.readouterr()
    rc, out = _exec(tmp_path, "script", ["--step", STEP, "--max-syncs-per-step", "1"])
    assert rc == 1
    text = capsys.readouterr().out
    assert f"engine.py:{_line('two-a')}" in text and "per step" in text
    assert f"engine.py:{_line('five')}" not in text  # step 5 has 1: within the budget
    res = loader.load(os.path.join(out, "result.jsonl"))
    assert res.header["options"]["max_syncs_per_step"] == 1
    assert main(["check", out]) == 1  # the recorded per-step budget gates again
    assert _exec(tmp_path, "script", ["--step", STEP, "--max-syncs-per-step", "2"])[0] == 0
    assert main(["check", out]) == 0  # not a total budget of 0
    assert _exec(tmp_path, "script", ["--max-syncs-per-step", "-1"])[0] == 2


@pytest.mark.slow
def test_tests_pass_from_a_checkout_named_syncguard(tmp_path):
    """A plain ``git clone`` makes a folder named ``syncguard``: the traceback tests, which
    look for syncguard's frames, must pass from there too."""
    import shutil

    root = str(ROOT)
    git = shutil.which("git")
    if git is None or subprocess.run([git, "-C", root, "rev-parse", "HEAD"],
                                     capture_output=True).returncode != 0:
        pytest.skip("needs git and a git checkout")
    clone = tmp_path / "syncguard" / "syncguard"
    subprocess.run([git, "clone", "-q", "--no-hardlinks", root, str(clone)], check=True)
    # the working tree's version of this file and the code it tests, committed or not
    for rel in ("tests/execute/test_exec.py", "syncguard/execute/program.py"):
        shutil.copyfile(os.path.join(root, rel), clone / rel)
    env = dict(os.environ, PYTHONPATH=str(clone))
    env.pop("PYTEST_ADDOPTS", None)
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        "-p", "no:xdist", "tests/execute/test_exec.py", "-k",
                        "traceback and not checkout_named"],
                       cwd=clone, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert "3 passed" in r.stdout
