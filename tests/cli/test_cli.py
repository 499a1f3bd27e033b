"""The ``syncguard`` command: in process through :func:`syncguard.cli.main`, and as real
subprocesses (console script, ``python -m syncguard``, an interrupted run).

Every run uses the small fixture scenarios in tests/data/scenarios (tiny vocabulary, few
steps); nothing here runs the built-in ``realistic`` scenario."""

from __future__ import annotations

import contextlib
import csv
import importlib.util
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import pytest
from _paths import TESTS
from _subprocess import env, run_stopped

from sglang_ascend_sampling import PATHS
from syncguard.cli import EXIT_INTERRUPTED, EXIT_OK, EXIT_OVER, EXIT_USAGE, main
from syncguard.driving.decode import READBACK
from syncguard.driving.scenario import load as load_scenario
from syncguard.results import format as results
from syncguard.results import loader

DATA = TESTS / "data" / "scenarios"
SMALL = str(DATA / "small.toml")
SMALL_BUDGET = str(DATA / "small_budget.toml")
LONG = str(DATA / "long.toml")
SAMPLER = "sglang_ascend_sampling/sampler.py"
REPORTS = ("result.jsonl", "result.json", "steps.csv", "events.csv", "report.md",
           "report.html")
STEPS, WARMUP = 4, 1
WIDE = ["--width", "200"]


def _norm(path: Optional[str]) -> str:
    return (path or "").replace(os.sep, "/")


def _lines(text: str) -> List[str]:
    return [ln for ln in text.splitlines() if ln.strip()]


def _one_error_line(err: str) -> str:
    lines = _lines(err)
    assert len(lines) == 1, f"one stderr line expected, got: {err!r}"
    assert lines[0].startswith("syncguard: error: "), lines[0]
    assert "Traceback" not in err
    return lines[0]


def cli(capsys: pytest.CaptureFixture, *argv: str) -> Tuple[int, str, str]:
    capsys.readouterr()
    rc = main(list(argv))
    cap = capsys.readouterr()
    return rc, cap.out, cap.err


# -- one small run, shared by the run/show/compare tests -------------------------------------
@pytest.fixture(scope="module")
def small_run(tmp_path_factory: pytest.TempPathFactory) -> Dict[str, Any]:
    out = tmp_path_factory.mktemp("run") / "out"
    so, se = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(so), contextlib.redirect_stderr(se):
        rc = main(["run", SMALL, "--device", "sim", "--out", str(out), "--steps", str(STEPS),
                   "--warmup", str(WARMUP), "--repeat", "3", *WIDE])
    return {"rc": rc, "out": out, "stdout": so.getvalue(), "stderr": se.getvalue(),
            "jsonl": str(out / "result.jsonl")}


@pytest.fixture(scope="module")
def small_result(small_run: Dict[str, Any]) -> results.RunResult:
    assert small_run["rc"] == EXIT_OK, small_run["stderr"]
    return loader.load(small_run["jsonl"])


def _counted(res: results.RunResult, path: str) -> List[results.StepRecord]:
    return [s for s in res.steps if s.path == path and s.pass_ == "counted"]


def test_run_writes_every_report_file(small_run: Dict[str, Any]) -> None:
    assert small_run["rc"] == EXIT_OK, small_run["stderr"]
    assert "Traceback" not in small_run["stderr"]
    for name in REPORTS:
        p = small_run["out"] / name
        assert p.is_file() and p.stat().st_size > 0, name
        assert f"Wrote {p}" in small_run["stderr"]
    md = (small_run["out"] / "report.md").read_text(encoding="utf-8")
    html = (small_run["out"] / "report.html").read_text(encoding="utf-8")
    assert "small" in md and "small" in html and "<html" in html.lower()
    assert "Summary" in small_run["stdout"]


def test_run_result_covers_every_path_pass_and_step(small_result: results.RunResult) -> None:
    res = small_result
    assert res.complete
    sc = load_scenario(SMALL)
    assert res.scenarios == [sc.name]
    assert res.paths == list(sc.paths)
    assert res.header["options"]["steps"] == STEPS
    assert res.header["scenarios"][sc.name]["warmup"] == WARMUP
    for path in sc.paths:
        for pass_, rnd in [("counted", None)] + [("timed", r) for r in range(3)]:
            # the timed pass repeats the scenario in rounds (--repeat 3)
            recs = [s for s in res.steps if s.path == path and s.pass_ == pass_
                    and s.round == rnd]
            assert [s.step for s in recs] == list(range(STEPS)), (path, pass_)
            assert [s.warmup for s in recs] == [s.step < WARMUP for s in recs]
            # the batch follows the scenario's events (join, then finish)
            size = len(sc.requests)
            for s in recs:
                for ev in sc.events_at(s.step):
                    size += len(ev.join) - len(ev.finish)
                assert s.batch_size == size == len(s.tokens or []), (path, pass_, s.step)
            if pass_ == "timed":  # no interceptors on the timed pass
                assert all(s.syncs == 0 and s.allowed == 0 for s in recs)
                assert all(s.latency_ms is not None and s.latency_ms > 0 for s in recs)


def test_run_legacy_has_one_hidden_sync_per_step_in_the_sampler(
        small_result: results.RunResult) -> None:
    res = small_result
    measured = [s for s in _counted(res, "legacy") if not s.warmup]
    assert len(measured) == STEPS - WARMUP
    assert all(s.syncs == 1 for s in measured)
    for s in measured:
        hidden = [e for e in res.events if e["path"] == "legacy" and e["pass"] == "counted"
                  and e["step"] == s.step and not e["allowed"]]
        assert sum(e["count"] for e in hidden) == 1, s.step
        assert all(_norm(e["filename"]).endswith(SAMPLER) for e in hidden), hidden


def test_run_flag_paths_have_no_hidden_sync(small_result: results.RunResult) -> None:
    for path in ("flag", "flag-recompute"):
        recs = _counted(small_result, path)
        assert recs and all(s.syncs == 0 for s in recs), path
        assert not [e for e in small_result.events if e["path"] == path and not e["allowed"]]


def test_run_every_counted_step_has_exactly_the_readback(
        small_result: results.RunResult) -> None:
    res = small_result
    for path in PATHS:
        for s in _counted(res, path):
            assert s.allowed == 1, (path, s.step)
            allowed = [e for e in res.events if e["path"] == path and e["step"] == s.step
                       and e["pass"] == "counted" and e["allowed"]]
            assert [e["reason"] for e in allowed] == [READBACK]
    assert not [e for e in res.events if e["pass"] != "counted"]


def test_run_json_and_csv_agree_with_the_result_file(small_run: Dict[str, Any],
                                                     small_result: results.RunResult) -> None:
    res = small_result
    out: Path = small_run["out"]
    doc = json.loads((out / "result.json").read_text(encoding="utf-8"))
    assert doc["steps"] == [s.to_dict() for s in res.steps]
    assert doc["events"] == res.events
    assert doc["footer"]["complete"] is True
    assert doc["header"]["env"]["device"] == "sim"

    with open(out / "steps.csv", newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == len(res.steps)
    for row, rec in zip(rows, res.steps):
        assert row["scenario"] == rec.scenario and row["path"] == rec.path
        assert row["pass"] == rec.pass_ and "branch" not in row  # a label of the subject
        assert int(row["step"]) == rec.step and row["warmup"] == str(rec.warmup)
        assert int(row["batch_size"]) == rec.batch_size
        assert int(row["syncs"]) == rec.syncs and int(row["allowed"]) == rec.allowed
        assert rec.latency_ms is not None
        assert float(row["latency_ms"]) == pytest.approx(rec.latency_ms, rel=1e-12)
        assert row["device_ms"] == ("" if rec.device_ms is None else row["device_ms"])
        assert rec.labels and json.loads(row["labels"]) == rec.labels

    with open(out / "events.csv", newline="", encoding="utf-8") as f:
        erows = list(csv.DictReader(f))
    assert len(erows) == len(res.events) > 0
    for row, ev in zip(erows, res.events):
        assert row["site"] == f"{ev['filename']}:{ev['lineno']}"
        assert (row["path"], row["pass"], int(row["step"])) == (ev["path"], ev["pass"],
                                                                ev["step"])
        assert int(row["count"]) == ev["count"] and row["allowed"] == str(ev["allowed"])
        assert row["kind"] == ev["kind"] and row["api"] == ev["api"]


def test_run_refuses_to_overwrite_without_force(small_run: Dict[str, Any], tmp_path: Path,
                                                capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "again"
    shutil.copytree(small_run["out"], out)
    before = (out / "result.jsonl").read_bytes()
    rc, _, err = cli(capsys, "run", SMALL, "--device", "sim", "--out", str(out), "--steps", "2",
                     "--warmup", "0", "--paths", "flag", "--no-timed")
    assert rc == EXIT_USAGE
    line = _one_error_line(err)
    assert str(out / "result.jsonl") in line and "--force" in line
    assert (out / "result.jsonl").read_bytes() == before  # untouched

    rc, _, err = cli(capsys, "run", SMALL, "--device", "sim", "--out", str(out), "--steps", "2",
                     "--warmup", "0", "--paths", "flag", "--no-timed", "--force")
    assert rc == EXIT_OK, err
    res = loader.load(str(out / "result.jsonl"))
    assert res.complete and res.paths == ["flag"]
    assert {s.pass_ for s in res.steps} == {"counted"} and len(res.steps) == 2
    doc = json.loads((out / "result.json").read_text(encoding="utf-8"))
    assert len(doc["steps"]) == 2  # the derived reports were rewritten too


def test_run_any_single_report_file_blocks_the_folder(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "report.md").write_text("mine", encoding="utf-8")
    rc, _, err = cli(capsys, "run", SMALL, "--device", "sim", "--out", str(out))
    assert rc == EXIT_USAGE
    assert str(out / "report.md") in _one_error_line(err)
    assert (out / "report.md").read_text(encoding="utf-8") == "mine"
    assert not (out / "result.jsonl").exists()


def _real_torch_npu_installed() -> bool:
    mod = sys.modules.get("torch_npu")
    if mod is not None:  # syncguard's stand-in (installed by the sim device), or a real one
        return not getattr(mod, "__syncguard_standin__", False)
    return importlib.util.find_spec("torch_npu") is not None


@pytest.mark.skipif(_real_torch_npu_installed(), reason="a real torch_npu is installed here")
def test_run_device_npu_without_torch_npu(tmp_path: Path,
                                          capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "out"
    rc, _, err = cli(capsys, "run", SMALL, "--device", "npu", "--out", str(out))
    assert rc == EXIT_USAGE
    line = _one_error_line(err)
    assert "torch_npu" in line and "--device sim" in line
    assert not out.exists()  # failed before writing anything


@pytest.mark.parametrize("args, names", [
    (["--paths", "bogus"], "bogus"),
    (["--paths", "legacy,bogus"], "bogus"),
    (["--steps", "0"], "--steps"),
    (["--steps", "-2"], "--steps"),
    (["--warmup", "-1"], "--warmup"),
    (["--steps", "3", "--warmup", "3"], "--warmup"),
    (["--device", "tpu"], "tpu"),
    (["--steps", "many"], "--steps"),
])
def test_run_bad_options_exit_2(args: List[str], names: str, tmp_path: Path,
                                capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "out"
    rc, _, err = cli(capsys, "run", SMALL, "--device", "sim", "--out", str(out), *args)
    assert rc == EXIT_USAGE
    assert names in err and "Traceback" not in err
    assert not out.exists()


def test_run_missing_scenario_and_out_on_a_file(tmp_path: Path,
                                                capsys: pytest.CaptureFixture) -> None:
    missing = tmp_path / "nope.toml"
    rc, _, err = cli(capsys, "run", str(missing), "--device", "sim", "--out",
                     str(tmp_path / "o"))
    assert rc == EXIT_USAGE and str(missing) in _one_error_line(err)
    rc, _, err = cli(capsys, "run", "no_such_builtin", "--device", "sim")
    assert rc == EXIT_USAGE and "no_such_builtin" in _one_error_line(err)
    a_file = tmp_path / "file"
    a_file.write_text("x", encoding="utf-8")
    rc, _, err = cli(capsys, "run", SMALL, "--device", "sim", "--out", str(a_file))
    assert rc == EXIT_USAGE and str(a_file) in _one_error_line(err)


def test_no_command_and_help(capsys: pytest.CaptureFixture) -> None:
    rc, _, err = cli(capsys)
    assert rc == EXIT_USAGE and "usage" in err.lower()
    rc, out, _ = cli(capsys, "--help")
    assert rc == EXIT_OK and all(c in out for c in ("run", "show", "compare", "check"))
    rc, _, err = cli(capsys, "frobnicate")
    assert rc == EXIT_USAGE and "Traceback" not in err


# -- show ------------------------------------------------------------------------------------
def test_show_renders_the_summary(small_run: Dict[str, Any],
                                  capsys: pytest.CaptureFixture) -> None:
    rc, out, err = cli(capsys, "show", small_run["jsonl"], *WIDE)
    assert rc == EXIT_OK, err
    assert "Summary" in out and "complete" in out and "INTERRUPTED" not in out
    assert "small" in out and all(p in out for p in PATHS)
    assert SAMPLER in _norm(out)  # the hidden sync's site is listed


@pytest.mark.parametrize("ext, marker", [(".md", "#"), (".html", "<html"), (".json", "{")])
def test_show_writes_a_file_and_refuses_to_overwrite(
        ext: str, marker: str, small_run: Dict[str, Any], tmp_path: Path,
        capsys: pytest.CaptureFixture) -> None:
    target = tmp_path / f"x{ext}"
    rc, out, err = cli(capsys, "show", small_run["jsonl"], "-o", str(target))
    assert rc == EXIT_OK, err
    text = target.read_text(encoding="utf-8")
    assert marker in text.lower() and "small" in text
    assert "Summary" not in out  # written to the file, not the terminal
    if ext == ".json":
        assert json.loads(text)["steps"] == json.loads(
            (small_run["out"] / "result.json").read_text(encoding="utf-8"))["steps"]

    target.write_text("keep me", encoding="utf-8")
    rc, _, err = cli(capsys, "show", small_run["jsonl"], "-o", str(target))
    assert rc == EXIT_USAGE
    assert str(target) in _one_error_line(err) and "--force" in err
    assert target.read_text(encoding="utf-8") == "keep me"

    rc, _, err = cli(capsys, "show", small_run["jsonl"], "-o", str(target), "--force")
    assert rc == EXIT_OK, err
    assert target.read_text(encoding="utf-8") == text


def test_show_output_with_unknown_extension_is_a_usage_error(
        small_run: Dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    target = tmp_path / "x.pdf"
    rc, _, err = cli(capsys, "show", small_run["jsonl"], "-o", str(target))
    assert rc == EXIT_USAGE
    assert ".pdf" in _one_error_line(err)
    assert not target.exists()


@pytest.mark.parametrize("content", [
    "",
    "just some text\nand more\n",
    'name = "small"\nsteps = 3\n',
    '{"type": "header", "schema": 999}\n',
    '{"type": "step"}\n{"type": "event"}\n',
    '42\n{"type": "header", "schema": 1}\n',
])
def test_show_of_a_non_result_file_is_one_error_line(content: str, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture) -> None:
    p = tmp_path / "not_a_result.jsonl"
    p.write_text(content, encoding="utf-8")
    rc, out, err = cli(capsys, "show", str(p))
    assert rc == EXIT_USAGE
    assert str(p) in _one_error_line(err)
    assert out == ""


def test_show_of_a_missing_file(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    p = tmp_path / "missing.jsonl"
    rc, _, err = cli(capsys, "show", str(p))
    assert rc == EXIT_USAGE and str(p) in _one_error_line(err)


# -- compare ---------------------------------------------------------------------------------
def test_compare_two_paths_of_one_run(small_run: Dict[str, Any],
                                      small_result: results.RunResult,
                                      capsys: pytest.CaptureFixture) -> None:
    rc, out, err = cli(capsys, "compare", small_run["jsonl"], *WIDE)
    assert rc == EXIT_OK, err
    assert "legacy (A) vs flag (B)" in out
    row = next(ln for ln in out.splitlines() if "legacy vs flag" in ln)
    # legacy's hidden syncs per measured step (1) against flag's (0): a delta of -1
    legacy = [s.syncs for s in _counted(small_result, "legacy") if not s.warmup]
    assert sum(legacy) / len(legacy) == 1
    assert re.search(r"\b1\.00\s+0\s+-1\.00\b", row), row
    rc, out, err = cli(capsys, "compare", small_run["jsonl"], "--paths", "flag",
                       "flag-recompute", *WIDE)
    assert rc == EXIT_OK, err
    assert "flag vs flag-recompute" in out


def test_compare_two_runs(small_run: Dict[str, Any], tmp_path: Path,
                          capsys: pytest.CaptureFixture) -> None:
    a = small_run["jsonl"]
    copy = tmp_path / "copy.jsonl"
    shutil.copyfile(a, copy)
    rc, out, err = cli(capsys, "compare", a, str(copy), *WIDE)
    assert rc == EXIT_OK, err
    assert f"{a} (A) vs {copy} (B)" in " ".join(out.split())  # the title may wrap
    n_rows = len(loader.load(a).paths)
    assert f"0 of {n_rows} rows changed" in out  # identical runs: nothing changed

    b_out = tmp_path / "b"
    rc, _, err = cli(capsys, "run", SMALL, "--device", "sim", "--out", str(b_out), "--steps",
                     str(STEPS), "--warmup", str(WARMUP), "--paths", "flag", "--no-timed")
    assert rc == EXIT_OK, err
    rc, out, err = cli(capsys, "compare", a, str(b_out / "result.jsonl"), *WIDE)
    assert rc == EXIT_OK, err
    m = re.search(r"(\d+) of (\d+) rows changed", out)
    assert m is not None, out
    # legacy and flag-recompute exist in A only: at least those two are marked changed
    assert int(m.group(2)) == n_rows and int(m.group(1)) >= 2


def test_compare_writes_markdown_for_a_pr(small_run: Dict[str, Any], tmp_path: Path,
                                          capsys: pytest.CaptureFixture) -> None:
    md = tmp_path / "compare.md"
    rc, _, err = cli(capsys, "compare", small_run["jsonl"], "-o", str(md), *WIDE)
    assert rc == EXIT_OK, err
    text = md.read_text(encoding="utf-8")
    assert text.startswith("## ") and "legacy (A) vs flag (B)" in text
    assert f"[legacy]` · B: `{small_run['jsonl']} [flag]`" in text
    row = next(ln for ln in text.splitlines() if ln.startswith("| small | legacy vs flag"))
    assert "| 1.00 | 0 |" in row
    rc, _, err = cli(capsys, "compare", small_run["jsonl"], "-o", str(md), *WIDE)
    assert rc == EXIT_USAGE and "--force" in _one_error_line(err)
    rc, _, err = cli(capsys, "compare", small_run["jsonl"], "-o", str(tmp_path / "c.txt"))
    assert rc == EXIT_USAGE and ".md, .html or .csv" in _one_error_line(err)
    for name, start in (("c.html", "<!DOCTYPE html>"), ("c.csv", "scenario,path,")):
        rc, _, err = cli(capsys, "compare", small_run["jsonl"], "-o", str(tmp_path / name))
        assert rc == EXIT_OK and (tmp_path / name).read_text().startswith(start), err


def test_compare_bad_input(small_run: Dict[str, Any], tmp_path: Path,
                           capsys: pytest.CaptureFixture) -> None:
    a = small_run["jsonl"]
    rc, _, err = cli(capsys, "compare", a, "--paths", "legacy", "bogus")
    assert rc == EXIT_USAGE and "bogus" in _one_error_line(err)
    rc, _, err = cli(capsys, "compare", a, a, "--paths", "legacy", "flag")
    assert rc == EXIT_USAGE and "--paths" in _one_error_line(err)
    missing = tmp_path / "missing.jsonl"
    rc, _, err = cli(capsys, "compare", a, str(missing))
    assert rc == EXIT_USAGE and str(missing) in _one_error_line(err)


# -- check -----------------------------------------------------------------------------------
def _hidden_per_pass(path: str) -> int:
    sc = load_scenario(path)
    return sc.steps - sc.warmup  # legacy: one hidden device check per measured step


def test_check_flag_path_passes(capsys: pytest.CaptureFixture) -> None:
    rc, out, err = cli(capsys, "check", SMALL, "--device", "sim", "--path", "flag")
    assert rc == EXIT_OK, err
    assert "OK" in out and "FAIL" not in out


def test_check_legacy_path_fails_and_names_the_site(small_result: results.RunResult,
                                                    capsys: pytest.CaptureFixture) -> None:
    rc, out, err = cli(capsys, "check", SMALL, "--device", "sim", "--path", "legacy")
    assert rc == EXIT_OVER, err
    n = _hidden_per_pass(SMALL)
    assert f"{n} hidden syncs, budget 0" in out
    m = re.search(re.escape(SAMPLER) + r":(\d+)", _norm(out))
    assert m is not None, out
    # the same line the run attributed legacy's hidden sync to
    run_lines = {e["lineno"] for e in small_result.events
                 if e["path"] == "legacy" and not e["allowed"]}
    assert run_lines == {int(m.group(1))}
    assert f"x{n}" in out


def test_check_max_syncs_raises_the_budget(capsys: pytest.CaptureFixture) -> None:
    rc, out, err = cli(capsys, "check", SMALL, "--device", "sim", "--path", "legacy",
                       "--max-syncs", "1000")
    assert rc == EXIT_OK, err
    assert "budget 1000" in out
    n = _hidden_per_pass(SMALL)
    rc, out, _ = cli(capsys, "check", SMALL, "--device", "sim", "--path", "legacy",
                     "--max-syncs", str(n - 1))
    assert rc == EXIT_OVER
    rc, _, err = cli(capsys, "check", SMALL, "--device", "sim", "--max-syncs", "-1")
    assert rc == EXIT_USAGE and "--max-syncs" in _one_error_line(err)


def test_check_uses_the_scenarios_expect_budget(capsys: pytest.CaptureFixture) -> None:
    sc = load_scenario(SMALL_BUDGET)
    assert sc.max_syncs["legacy"] == _hidden_per_pass(SMALL_BUDGET)
    rc, out, err = cli(capsys, "check", SMALL_BUDGET, "--device", "sim")
    assert rc == EXIT_OK, err
    assert f"budget {sc.max_syncs['legacy']}" in out
    # one step more than the budget was written for: over budget
    rc, out, _ = cli(capsys, "check", SMALL_BUDGET, "--device", "sim", "--steps",
                     str(sc.steps + 1))
    assert rc == EXIT_OVER and "FAIL" in out


def test_check_github_format_annotates_the_site(capsys: pytest.CaptureFixture) -> None:
    rc, out, _ = cli(capsys, "check", SMALL, "--device", "sim", "--path", "legacy",
                     "--format", "github")
    assert rc == EXIT_OVER
    errors = [ln for ln in out.splitlines() if ln.startswith("::error file=")]
    assert errors, out
    assert all(SAMPLER in _norm(ln) and re.search(r",line=\d+", ln) for ln in errors)
    rc, out, _ = cli(capsys, "check", SMALL, "--device", "sim", "--path", "flag", "--format",
                     "github")
    assert rc == EXIT_OK and "::error" not in out


def test_selftest(capsys: pytest.CaptureFixture) -> None:
    rc, out, err = cli(capsys, "selftest")
    assert rc == EXIT_OK, err
    device, *probes, summary = _lines(out)
    assert device == "device: sim (simulated npu (syncguard, CPU))"  # auto, without torch_npu
    assert probes and all(ln.startswith("ok ") for ln in probes)
    assert summary == (f"selftest passed: {len(probes)} probes on cpu, npu:0, every planted "
                       "sync seen and the control clean")


# -- real subprocesses -----------------------------------------------------------------------
def _console_script() -> List[str]:
    here = Path(sys.executable).parent / ("syncguard.exe" if os.name == "nt" else "syncguard")
    if here.is_file():
        return [str(here)]
    found = shutil.which("syncguard")
    return [found] if found else [sys.executable, "-m", "syncguard"]


def test_console_script_check_legacy_exits_1() -> None:
    proc = subprocess.run([*_console_script(), "check", SMALL, "--device", "sim", "--path",
                           "legacy"], capture_output=True, text=True, env=env(), timeout=300)
    assert proc.returncode == EXIT_OVER, proc.stderr
    assert SAMPLER in _norm(proc.stdout)
    assert "Traceback" not in proc.stderr


def test_subprocess_bad_input_is_one_line_without_traceback(tmp_path: Path) -> None:
    proc = subprocess.run([*_console_script(), "run", "nonexistent.toml"], capture_output=True,
                          text=True, env=env(), cwd=tmp_path, timeout=300)
    assert proc.returncode == EXIT_USAGE
    assert "nonexistent.toml" in _one_error_line(proc.stderr)
    assert not (tmp_path / "reports").exists()


@pytest.mark.skipif(os.name == "nt", reason="SIGINT to a child process needs POSIX")
def test_interrupted_run_keeps_finished_steps(tmp_path: Path,
                                              capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "out"
    result = out / "result.jsonl"
    sc = load_scenario(LONG)
    rc, stdout, stderr = run_stopped(tmp_path, LONG, signal.SIGINT, 3, timeout=180,
                                     exit_timeout=120)
    assert rc == EXIT_INTERRUPTED, stderr
    assert "Traceback" not in stderr
    assert "interrupted" in stderr and str(result) in stderr

    res = loader.load(str(result))
    assert not res.complete
    assert res.footer is not None and res.footer.get("reason") == "interrupted"
    assert 3 <= len(res.steps) < sc.steps
    assert [s.step for s in res.steps] == list(range(len(res.steps)))
    assert "INTERRUPTED" in stdout
    for name in REPORTS:  # the reports were still written from what was kept
        assert (out / name).is_file(), name

    rc, shown, err = cli(capsys, "show", str(result), *WIDE)
    assert rc == EXIT_OK, err
    assert "INTERRUPTED" in shown and f"{len(res.steps)} steps kept" in shown


def test_parsing_show_and_compare_do_not_import_torch(tmp_path: Path) -> None:
    # parsing must stay instant on a 910B host, where importing torch + torch_npu takes seconds,
    # and reading a result back (show, compare) needs no torch at all
    code = textwrap.dedent(f"""
        import sys
        from syncguard.cli import main
        from syncguard.results.format import StepRecord
        from syncguard.results.writer import ResultWriter
        assert main(['run', '--help']) == 0
        assert main(['run', '--device', 'tpu']) == 2
        p = {str(tmp_path / "r.jsonl")!r}
        w = ResultWriter(p, {{"device": "sim", "scenarios": []}})
        w.step(StepRecord("s", "flag", "counted", 0, False, 1, 0, 1, 0.5), [])
        w.close(True)
        assert main(['show', p]) == 0
        assert main(['show', p, '-o', {str(tmp_path / "r.html")!r}]) == 0
        assert main(['compare', p, p]) == 0
        assert 'torch' not in sys.modules, 'torch imported'
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "invalid choice: 'tpu'" in proc.stderr
    assert (tmp_path / "r.html").stat().st_size > 0


def test_check_refuses_to_gate_when_the_self_test_fails(monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture) -> None:
    # "0 syncs" must never mean "the detector was off": a blind guard is exit 3, not 0
    from syncguard.cli import EXIT_INTERNAL
    from syncguard.core import selftest as _selftest
    from syncguard.core.events import SelfTestError

    def blind(device: Optional[str] = None) -> List[str]:
        raise SelfTestError("syncguard self-test failed on cpu: bool(tensor) gave 0 syncs")

    monkeypatch.setattr(_selftest, "selftest", blind)
    rc, out, err = cli(capsys, "check", SMALL, "--device", "sim", "--path", "flag")
    assert rc == EXIT_INTERNAL
    assert "self-test failed" in _one_error_line(err) and "OK" not in out


def test_internal_error_is_exit_3_with_one_line(monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture) -> None:
    from syncguard.cli import EXIT_INTERNAL
    from syncguard.driving import runner

    def boom(*a: Any, **k: Any) -> None:
        raise RuntimeError("kaboom")

    monkeypatch.setattr(runner, "run_pass", boom)
    rc, _, err = cli(capsys, "check", SMALL, "--device", "sim", "--path", "flag")
    assert rc == EXIT_INTERNAL
    line = _one_error_line(err)
    assert "internal error: RuntimeError: kaboom" in line and "SYNCGUARD_DEBUG" in line


def test_check_allow_list_from_option_and_pyproject(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture) -> None:
    base = ["check", SMALL, "--device", "sim", "--path", "legacy",
            "--config", str(tmp_path / "none.toml")]
    rc, _, err = cli(capsys, *base)
    assert rc == EXIT_USAGE and "none.toml: cannot read" in _one_error_line(err)
    empty = tmp_path / "empty.toml"
    empty.write_text("[project]\nname = 'x'\n", encoding="utf-8")
    base[-1] = str(empty)
    rc, out, _ = cli(capsys, *base)
    assert rc == EXIT_OVER and f"{SAMPLER}:" in out
    line = re.search(re.escape(SAMPLER) + r":(\d+)", out).group(1)  # type: ignore[union-attr]
    rc, out, _ = cli(capsys, *base, "--allow", f"{SAMPLER}:{line}")
    assert rc == EXIT_OK, out
    rc, out, _ = cli(capsys, *base, "--allow", f"{SAMPLER}:1")  # another line: still fails
    assert rc == EXIT_OVER
    cfg = tmp_path / "pyproject.toml"
    cfg.write_text(f'[tool.syncguard]\nallow = [{{site = "sampler.py:{line}", reason = "k"}}]\n',
                   encoding="utf-8")
    rc, out, _ = cli(capsys, *base[:-1], str(cfg))
    assert rc == EXIT_OK, out
    cfg.write_text("[tool.syncguard]\nallow = [3]\n", encoding="utf-8")
    rc, _, err = cli(capsys, *base[:-1], str(cfg))
    assert rc == EXIT_USAGE and str(cfg) in _one_error_line(err)
    cfg.write_text("[tool.syncguard]\nallwo = ['x.py:1']\n", encoding="utf-8")  # a typo
    rc, _, err = cli(capsys, *base[:-1], str(cfg))
    line = _one_error_line(err)
    assert rc == EXIT_USAGE and "allwo: unknown key" in line and str(cfg) in line


def test_timed_rounds_draw_the_counted_pass_tokens(small_result: results.RunResult) -> None:
    # each path keeps its own random generator in the interleaved timed pass: every round
    # samples exactly the counted pass's tokens
    res = small_result
    for path in res.paths:
        counted = [s.tokens for s in _counted(res, path)]
        rounds = sorted({s.round for s in res.steps if s.pass_ == "timed"})
        assert len(rounds) >= 3
        for r in rounds:
            timed = [s.tokens for s in res.steps
                     if s.path == path and s.pass_ == "timed" and s.round == r]
            assert timed == counted, (path, r)


@pytest.mark.parametrize("argv, loads, spares", [
    (["--help"], [], ["syncguard.cli.run", "syncguard.lint", "syncguard.driving.runner"]),
    (["lint", "--help"], ["syncguard.cli.lint"],
     ["syncguard.cli.run", "syncguard.cli.check", "syncguard.driving.check",
      "syncguard.driving.calibration"]),
])
def test_the_command_line_imports_only_the_command_typed(
        argv: List[str], loads: List[str], spares: List[str]) -> None:
    """``syncguard --help`` lists the commands without importing them, and a command imports
    its own module only: the first screen does not pay for every command's implementation."""
    code = ("import sys\nfrom syncguard.cli import main\n"
            "try:\n    main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in sys.modules if m.startswith('syncguard')))\n")
    out = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True,
                         env=env(), timeout=120)
    loaded = set(json.loads(out.stdout.splitlines()[-1].replace("'", '"')))
    assert set(loads) <= loaded
    assert not set(spares) & loaded, sorted(set(spares) & loaded)
