"""Tests of syncguard.renderers: analysis numbers, terminal goldens, Markdown, HTML, CSV, JSON."""

from __future__ import annotations

import io
import json
import math
import os
import re
import sys
from typing import Any, Dict, List, Optional, Tuple

import pandas as pd
import pytest
from _paths import TESTS

from syncguard.core.events import Frame, SyncEvent
from syncguard.renderers import (
    RENDERERS,
    csv,
    format_for_path,
    html,
    markdown,
    render,
    renderer_for_path,
    terminal,
    write,
    write_reports,
)
from syncguard.results import analysis, stats
from syncguard.results.format import ResultError, RunResult, StepRecord
from syncguard.results.loader import load
from syncguard.results.writer import ResultWriter

GOLDEN_DIR = os.path.join(str(TESTS), "data", "golden")
UPDATE = os.environ.get("SYNCGUARD_UPDATE_GOLDEN") == "1"

CREATED = 1_700_000_000.0  # 2023-11-14 22:13:20 UTC
SAMPLER = "syncguard/sampling/sampler.py"
SAMPLER_LINE = 123
SAMPLER_FN = "top_k_top_p_min_p_sampling_from_logits_ascend_with_branch"
READBACK = "syncguard/driving/decode.py"
READBACK_LINE = 45

HEADER: Dict[str, Any] = {
    "syncguard": "0.1.0", "torch": "2.13.0+cpu", "torch_npu": None, "python": "3.11.7",
    "device": "npu", "device_name": "simulated NPU on CPU", "git_commit": None,
    "host": "testhost",
}

# Scenario "uniform": 12 steps, 0-1 warm-up. Timed latencies (ms) of non-warm-up steps:
# legacy 1.0 .. 1.9, flag 0.8 .. 1.7 (warm-up steps 50 ms: must not count).
U_LEGACY = [round(1.0 + 0.1 * i, 3) for i in range(10)]
U_FLAG = [round(0.8 + 0.1 * i, 3) for i in range(10)]
# Scenario "mixed": 8 steps, step 0 warm-up; legacy 2.0 ms, flag 1.0 ms; at step 5 the
# branches differ (legacy generic, flag fused); the batch shrinks from 4 to 3 at step 6.
# Its legacy hidden sync is at "<string>:1" in "<module>" (a site name with "<").


def _event(step: int, warmup: bool, *, hidden: bool, filename: str = SAMPLER,
           lineno: int = SAMPLER_LINE, function: str = SAMPLER_FN) -> SyncEvent:
    if hidden:
        return SyncEvent(kind="scalar_read", api="Tensor.__bool__",
                         op="aten::_local_scalar_dense", filename=filename, lineno=lineno,
                         function=function, stack=(Frame(filename, lineno, function),),
                         step=step, thread="MainThread", warmup=warmup, device="npu:0")
    return SyncEvent(kind="d2h_copy", api="Tensor.tolist", op=None, filename=READBACK,
                     lineno=READBACK_LINE, function="decode_step",
                     stack=(Frame(READBACK, READBACK_LINE, "decode_step"),), step=step,
                     thread="MainThread", allowed=True, reason="token readback",
                     warmup=warmup, device="npu:0")


def _write_scenario(w: ResultWriter, scenario: str, n_steps: int, n_warm: int,
                    lat: Dict[str, List[float]], hidden_site: Tuple[str, int, str],
                    branch: Dict[Tuple[str, int], str], batch: Dict[int, int],
                    stop_after: Optional[int] = None) -> None:
    written = 0
    for path in ("legacy", "flag"):
        for pass_ in ("counted", "timed"):
            for step in range(n_steps):
                if stop_after is not None and written >= stop_after:
                    return
                warm = step < n_warm
                hidden = 1 if path == "legacy" and pass_ == "counted" else 0
                allowed = 1 if pass_ == "counted" else 0
                latency = None
                if pass_ == "timed":
                    latency = 50.0 if warm else lat[path][step - n_warm]
                elif step:
                    latency = 99.0  # counted-pass latency: never used
                # the timed steps spread over 3 rounds (latency verdicts need 3 or more)
                rec = StepRecord(scenario=scenario, path=path, pass_=pass_, step=step,
                                 warmup=warm, batch_size=batch.get(step, 4),
                                 syncs=hidden, allowed=allowed, latency_ms=latency,
                                 labels={"branch": branch.get((path, step), "fused"),
                                         "eligible": path == "flag"}, tokens=[step] * 4,
                                 round=step % 3 if pass_ == "timed" else None)
                events = []
                if pass_ == "counted":
                    if hidden:
                        f, line, fn = hidden_site
                        events.append(_event(step, warm, hidden=True, filename=f,
                                             lineno=line, function=fn))
                    events.append(_event(step, warm, hidden=False))
                w.step(rec, events)
                written += 1


def make_result(tmp_path: Any, name: str = "result.jsonl", complete: bool = True,
                stop_after: Optional[int] = None, legacy_site_line: int = SAMPLER_LINE,
                flag_ms_scale: float = 1.0) -> RunResult:
    path = os.path.join(str(tmp_path), name)
    w = ResultWriter(path, dict(HEADER))
    _write_scenario(w, "uniform", 12, 2,
                    {"legacy": U_LEGACY, "flag": [x * flag_ms_scale for x in U_FLAG]},
                    (SAMPLER, legacy_site_line, SAMPLER_FN), {}, {}, stop_after)
    if stop_after is None:
        _write_scenario(w, "mixed", 8, 1, {"legacy": [2.0] * 7, "flag": [1.0] * 7},
                        ("<string>", 1, "<module>"), {("legacy", 5): "generic"},
                        {6: 3, 7: 3})
    if complete:
        w.close(True)
    else:
        assert w._f is not None
        w._f.close()  # killed: no footer
    res = load(path)
    res.header["created"] = CREATED  # deterministic header line
    return res


@pytest.fixture(autouse=True)
def _claims_from_small_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """The synthetic runs here have 7 to 10 paired timed steps per path, fewer than a claim
    needs (stats.MIN_CLAIM_SAMPLES); these tests check how a claimed difference is rendered,
    so they lower the threshold (test_a_run_with_few_timed_steps_claims_nothing keeps it)."""
    monkeypatch.setattr(stats, "MIN_CLAIM_SAMPLES", 5)


@pytest.fixture(scope="module")
def result(tmp_path_factory: pytest.TempPathFactory) -> RunResult:
    """The synthetic run (read-only: tests must not mutate it)."""
    return make_result(tmp_path_factory.mktemp("result"))


def _golden(name: str, text: str) -> None:
    """Compare ``text`` (trailing spaces stripped per line) with a golden file."""
    text = "\n".join(line.rstrip() for line in text.splitlines()) + "\n"
    path = os.path.join(GOLDEN_DIR, name)
    if UPDATE or not os.path.exists(path):
        if not UPDATE:
            pytest.fail(f"golden file {path} missing: run with SYNCGUARD_UPDATE_GOLDEN=1")
        os.makedirs(GOLDEN_DIR, exist_ok=True)
        with open(path, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
    with open(path, encoding="utf-8") as f:
        want = f.read()
    assert text == want, f"differs from {path} (SYNCGUARD_UPDATE_GOLDEN=1 rewrites it)"


def _console() -> Any:
    from rich.console import Console

    return Console(width=100, record=True, color_system=None, file=io.StringIO())


def _has_matplotlib() -> bool:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


# ---------------------------------------------------------------- analysis


def test_loaded_result_shape(result: RunResult) -> None:
    assert result.complete
    assert result.scenarios == ["uniform", "mixed"]
    assert result.paths == ["legacy", "flag"]
    assert len(result.steps) == (12 + 8) * 2 * 2


def test_summary_numbers(result: RunResult) -> None:
    sm = analysis.summary(result)
    assert list(sm.columns) == list(analysis.SUMMARY_COLUMNS)
    assert list(zip(sm["scenario"], sm["path"])) == [
        ("uniform", "legacy"), ("uniform", "flag"), ("mixed", "legacy"), ("mixed", "flag")]
    row = {(r["scenario"], r["path"]): r for r in sm.to_dict("records")}
    leg, flag = row[("uniform", "legacy")], row[("uniform", "flag")]
    # hidden syncs: counted pass, warm-up excluded
    assert leg["syncs_mean"] == 1.0 and flag["syncs_mean"] == 0.0
    assert leg["syncs_max"] == 1 and flag["syncs_max"] == 0
    assert leg["syncs_total"] == 10 and flag["syncs_total"] == 0
    assert leg["allowed_mean"] == 1.0 and flag["allowed_mean"] == 1.0
    assert leg["sites"] == 1 and flag["sites"] == 0
    assert leg["steps"] == 10 and leg["timed_steps"] == 10
    # latency: timed pass only, warm-up (50 ms) and counted pass (99 ms) left out
    ref = pd.Series(U_LEGACY)
    assert leg["p50_ms"] == pytest.approx(1.45)
    assert leg["p90_ms"] == pytest.approx(1.81)
    assert leg["p99_ms"] == pytest.approx(1.891)
    for q, col in ((0.5, "p50_ms"), (0.9, "p90_ms"), (0.99, "p99_ms")):
        assert leg[col] == pytest.approx(ref.quantile(q))
    assert leg["mean_ms"] == pytest.approx(1.45)
    assert flag["mean_ms"] == pytest.approx(1.25)
    assert leg["ratio_vs_baseline"] == pytest.approx(1.0)
    # one log-ratio per round (steps 2-11 over rounds step % 3), their geometric mean
    per_round = [1.2 / 1.4, 1.3 / 1.5, 1.25 / 1.45]
    assert flag["ratio_vs_baseline"] == pytest.approx(math.exp(sum(map(math.log, per_round)) / 3))
    assert flag["rounds"] == 3 and math.isnan(flag["rounds_needed"])
    # legacy against itself: no measurable difference, so no saving is claimed; flag's steps
    # are each 0.2 ms shorter than legacy's in every round: the interval excludes 1
    assert math.isnan(leg["saved_per_token_us"])
    assert math.isnan(leg["ratio_lo"]) and math.isnan(leg["ratio_hi"])
    assert flag["ratio_hi"] < 1.0 and flag["pairs"] == 10
    assert flag["saved_per_token_us"] == pytest.approx(200.0)
    assert leg["outliers"] == 0 and leg["p50_lo_ms"] < 1.45 < leg["p50_hi_ms"]
    assert math.isnan(leg["device_ms_mean"])
    assert leg["branches"] == "fused 10"
    mixed = row[("mixed", "legacy")]
    assert mixed["branches"] == "fused 6, generic 1"
    assert mixed["syncs_total"] == 7
    assert row[("mixed", "flag")]["ratio_vs_baseline"] == pytest.approx(0.5)
    assert row[("mixed", "flag")]["saved_per_token_us"] == pytest.approx(1000.0)


def test_a_run_with_few_timed_steps_claims_nothing(result: RunResult,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stats, "MIN_CLAIM_SAMPLES", 30)
    flag = analysis.summary(result).set_index(["scenario", "path"]).loc[("uniform", "flag")]
    assert flag["pairs"] == 10 and flag["ratio_hi"] < 1.0  # the interval alone excludes 1
    assert math.isnan(flag["saved_per_token_us"])  # no saving claimed
    text = " ".join(terminal.render(result, width=200).split())
    verdict = text[text.index("Verdict"):]
    assert "flag vs legacy evidence too thin to tell (0.86x, 95% CI " in verdict, verdict
    assert "10 timed steps per path, at least 30 needed" in verdict
    assert "faster" not in verdict and "us of host time" not in verdict


def test_summary_without_legacy_takes_the_first_path_as_baseline(result: RunResult) -> None:
    # the baseline is a parameter (issue 13): without legacy, each scenario's first path
    only_flag = RunResult(result.header, [s for s in result.steps if s.path == "flag"],
                          [e for e in result.events if e["path"] == "flag"], result.footer)
    sm = analysis.summary(only_flag)
    assert list(sm["path"]) == ["flag", "flag"] and list(sm["baseline"]) == ["flag", "flag"]
    assert list(sm["ratio_vs_baseline"]) == [1.0, 1.0]
    # the baseline against itself: no measured difference, so nothing saved is claimed
    assert sm["saved_per_token_us"].isna().all()
    sm = analysis.summary(result, baseline="flag")
    row = {(r["scenario"], r["path"]): r for r in sm.to_dict("records")}
    assert row[("mixed", "legacy")]["ratio_vs_baseline"] == pytest.approx(2.0)


def test_per_step_wide(result: RunResult) -> None:
    df = analysis.per_step(result, "mixed")
    assert list(df.columns) == [
        "step", "batch_size", "warmup", "legacy.branch", "legacy.syncs", "legacy.latency_ms",
        "flag.branch", "flag.syncs", "flag.latency_ms", "notable"]
    assert list(df["step"]) == list(range(8))
    assert list(df["warmup"]) == [True] + [False] * 7
    assert list(df["batch_size"]) == [4] * 6 + [3] * 2
    assert list(df["legacy.syncs"]) == [1] * 8 and list(df["flag.syncs"]) == [0] * 8
    assert df.loc[5, "legacy.branch"] == "generic" and df.loc[5, "flag.branch"] == "fused"
    assert list(df["flag.latency_ms"]) == [50.0] + [1.0] * 7
    # only the step whose branches differ is notable (a shrinking batch is not)
    assert list(df.index[df["notable"]]) == [5]
    assert not analysis.per_step(result, "uniform")["notable"].any()


def test_step_ranges() -> None:
    assert analysis.step_ranges([2, 3, 4, 7]) == "2-4, 7"
    assert analysis.step_ranges([7, 2, 4, 3, 3, None]) == "2-4, 7"
    assert analysis.step_ranges([]) == ""
    assert analysis.step_ranges([0]) == "0"
    assert analysis.step_ranges([1, 3, 5, 7], max_parts=2) == "1, 3, ... (+2)"


def test_elide() -> None:
    plan = analysis.elide(20, [i == 10 for i in range(20)], head=5, tail=5)
    assert plan == ([("row", i) for i in range(5)] + [("gap", 5), ("row", 10), ("gap", 4)]
                    + [("row", i) for i in range(15, 20)])
    assert analysis.elide(3, [False] * 3) == [("row", 0), ("row", 1), ("row", 2)]


def test_sites_grouping(result: RunResult) -> None:
    st = analysis.sites(result)
    assert list(st.columns) == list(analysis.SITES_COLUMNS)
    hidden = st[~st["allowed"]]
    assert hidden[["scenario", "path", "site", "api", "count", "steps"]].values.tolist() == [
        ["uniform", "legacy", f"{SAMPLER}:{SAMPLER_LINE}", "Tensor.__bool__", 10, "2-11"],
        ["mixed", "legacy", "<string>:1", "Tensor.__bool__", 7, "1-7"]]
    assert set(hidden["kind"]) == {"scalar_read"}
    assert set(hidden["op"]) == {"aten::_local_scalar_dense"}
    allowed = st[st["allowed"]]
    assert len(allowed) == 4  # the readback, per scenario and path
    assert set(allowed["site"]) == {f"{READBACK}:{READBACK_LINE}"}
    assert set(allowed["reason"]) == {"token readback"}
    assert list(allowed["steps"]) == ["2-11", "2-11", "1-7", "1-7"]
    assert len(analysis.sites(result, include_allowed=False)) == 2


def test_sites_step_ranges_with_gaps(result: RunResult) -> None:
    events = [e for e in result.events
              if e["scenario"] == "uniform" and e["step"] in (0, 2, 3, 4, 7)]
    sub = RunResult(result.header, result.steps, events, result.footer)
    st = analysis.sites(sub, include_allowed=False)
    assert list(st["steps"]) == ["2-4, 7"]  # step 0 is warm-up
    assert list(st["count"]) == [4]


def test_sites_sorted_by_line_number(result: RunResult) -> None:
    """Sites with equal counts are listed by file, then line as a number: loop.py:6 before
    loop.py:10 (not as text), in the sites table and the verdict built from it."""
    hidden = [e for e in result.events if e["scenario"] == "uniform" and e["path"] == "legacy"
              and not e["allowed"]]
    events = [{**e, "filename": "loop.py", "lineno": n} for n in (10, 6) for e in hidden]
    sub = RunResult(result.header, result.steps, events, result.footer)
    st = analysis.sites(sub, include_allowed=False)
    assert list(st["site"]) == ["loop.py:6", "loop.py:10"]
    from syncguard.renderers._common import verdicts

    text = " ".join(t for _, t in verdicts(analysis.summary(sub), st))
    assert text.index("loop.py:6") < text.index("loop.py:10")


def _with_legacy_syncs(res: RunResult, scenario: str, syncs: int) -> RunResult:
    import dataclasses

    steps = [dataclasses.replace(s, syncs=syncs)
             if s.scenario == scenario and s.path == "legacy" and s.pass_ == "counted" else s
             for s in res.steps]
    return RunResult(res.header, steps, res.events, res.footer)


def test_compare_marks_changed_count(tmp_path: Any, result: RunResult) -> None:
    b = _with_legacy_syncs(make_result(tmp_path, "b.jsonl"), "mixed", 2)
    df = analysis.compare(result, b)
    assert list(df.columns) == list(analysis.COMPARE_COLUMNS)
    rows = {(r["scenario"], r["path"]): r for r in df.to_dict("records")}
    assert len(rows) == 4
    changed = rows[("mixed", "legacy")]
    assert changed["changed"] and changed["syncs_delta"] == pytest.approx(1.0)
    assert changed["a_syncs_total"] == 7 and changed["b_syncs_total"] == 14
    assert [k for k, r in rows.items() if r["changed"]] == [("mixed", "legacy")]
    assert rows[("uniform", "flag")]["latency_ratio"] == pytest.approx(1.0)


def test_compare_states_a_latency_change_only_when_the_interval_excludes_one(
        tmp_path: Any, result: RunResult) -> None:
    # two runs compare each path's ratio to its run's baseline (legacy), round by round: the
    # fixture's flag/legacy ratio is steady over its 3 rounds, so a 10% move is measurable
    slow = make_result(tmp_path, "slow.jsonl", flag_ms_scale=1.10)
    df = analysis.compare(result, slow)
    flag = df[(df["scenario"] == "uniform") & (df["path"] == "flag")].iloc[0]
    assert flag["latency_ratio"] == pytest.approx(1.10)
    assert 1.0 < flag["ratio_lo"] < 1.10 < flag["ratio_hi"] and flag["changed"]
    legacy = df[(df["scenario"] == "uniform") & (df["path"] == "legacy")].iloc[0]
    assert math.isnan(legacy["latency_ratio"]) and not legacy["changed"]  # the baseline
    # neither run records its machine: absolute host time is not compared at all
    assert set(df["machine"]) == {"machine not recorded"} and df["host_ratio"].isna().all()
    same = analysis.compare(result, make_result(tmp_path, "same.jsonl"))
    assert not same["changed"].any()
    double = make_result(tmp_path, "double.jsonl", flag_ms_scale=2.0)
    got = {(r["scenario"], r["path"]): r["changed"]
           for r in analysis.compare(result, double).to_dict("records")}
    assert got == {("uniform", "legacy"): False, ("uniform", "flag"): True,
                   ("mixed", "legacy"): False, ("mixed", "flag"): False}
    text = terminal.render_compare(analysis.compare(result, double), title="t", width=160)
    assert "2.00x (" in text and "1 of 4 rows changed" in text
    assert "machine not recorded" in text


def test_compare_one_sided_row_is_changed(result: RunResult) -> None:
    only_legacy = RunResult(result.header, [s for s in result.steps if s.path == "legacy"],
                            result.events, result.footer)
    df = analysis.compare(only_legacy, result)
    assert df.set_index(["scenario", "path"])["changed"].to_dict() == {
        ("uniform", "legacy"): False, ("uniform", "flag"): True,
        ("mixed", "legacy"): False, ("mixed", "flag"): True}


def test_compare_paths(result: RunResult) -> None:
    df = analysis.compare_paths(result, "legacy", "flag")
    assert list(df["scenario"]) == ["uniform", "mixed"]
    assert list(df["path"]) == ["legacy vs flag"] * 2
    assert list(df["syncs_delta"]) == [-1.0, -1.0]
    assert df["changed"].all()
    assert list(df["latency_ratio"]) == pytest.approx([0.8619507, 0.5])
    text = terminal.render_compare(df, title="legacy (A) vs flag (B)")
    assert "2 of 2 rows changed" in text and "legacy (A) vs flag (B)" in text
    console = _console()
    assert terminal.render_compare(df, console, "t") == ""
    assert "2 of 2 rows changed" in console.export_text()
    md = markdown.render_compare(df, "legacy", "flag")
    assert "| uniform | legacy vs flag |" in md and "changed" in md
    assert "<table>" in html.render_compare(df, "legacy", "flag")


# ---------------------------------------------------------------- terminal


def test_terminal_golden(result: RunResult) -> None:
    console = _console()
    terminal.print_report(result, console)
    text = console.export_text()
    assert "2 hidden" in text  # uniform: 12 steps, first 5 and last 5 shown
    assert "complete" in text.splitlines()[1] or "complete" in text.splitlines()[0]
    assert "INTERRUPTED" not in text
    _golden("terminal.txt", text)


def test_terminal_interrupted_golden(tmp_path: Any) -> None:
    res = make_result(tmp_path, complete=False, stop_after=15)
    assert res.footer is None and not res.complete
    console = _console()
    terminal.print_report(res, console)
    text = console.export_text()
    assert "INTERRUPTED: 15 steps kept" in text
    _golden("terminal_interrupted.txt", text)


def test_terminal_render_and_colour(result: RunResult) -> None:
    plain = terminal.render(result, width=100, show_time=False)
    assert "\x1b[" not in plain and "2023-11-14" not in plain
    assert "syncguard 0.1.0 | torch 2.13.0+cpu | device npu" in plain
    coloured = terminal.render(result, width=100, color=True)
    assert "\x1b[" in coloured
    console = _console()  # the CLI's call: print to its console
    assert terminal.render(result, console, show_time=False) == ""
    assert console.export_text() == plain


def test_terminal_does_not_read_markup(result: RunResult) -> None:
    res = RunResult(result.header, result.steps,
                    [dict(e, function="[bold]f[/bold]") for e in result.events],
                    result.footer)
    assert "[bold]f[/bold]" in terminal.render(res, width=200)


# ---------------------------------------------------------------- Markdown


def test_markdown_report(result: RunResult) -> None:
    md = markdown.render(result)
    assert md.startswith("## syncguard report\n")
    assert "syncguard 0.1.0 · torch 2.13.0+cpu · device npu" in md
    assert ("| scenario | path | hidden syncs/step | max | allowed/step | p50 ms | p50 95% CI "
            "| p90 ms | p99 ms | outliers | ratio vs legacy | ratio 95% CI | saved us/token "
            "| branches |") in md
    assert ("| uniform | flag | 0 | 0 | 1.00 | 1.250 | 0.900-1.600 | 1.610 | 1.691 | 0 "
            "| 0.86x | 0.85-0.87x | +200.0 |") in md
    # verdicts (Tensor.__bool__ escaped so GitHub does not render it bold)
    assert ("- **uniform**: legacy: 1.00 hidden syncs per step at "
            f"`{SAMPLER}:{SAMPLER_LINE}` (Tensor.\\_\\_bool\\_\\_); flag: 0. "
            "Measured on this machine (host time per step, p50): flag vs legacy 0.86x, faster "
            "(95% CI 0.85-0.87x, 3 rounds), saves 200.0 us of host time per step.") in md
    assert "- **mixed**: legacy: 1.00 hidden syncs per step at `<string>:1`" in md
    # sites table, allowed syncs, per-step tables collapsed, legend
    assert f"| uniform | legacy | `{SAMPLER}:{SAMPLER_LINE}` | `{SAMPLER_FN}` " in md
    assert "| **10** | 2-11 |" in md
    assert "token readback" in md
    assert md.count("<details>") == 2 and md.count("</details>") == 2
    assert "| **5** | 4 | **generic** |" in md
    assert "### Legend" in md
    assert "INTERRUPTED" not in md


def test_markdown_escaping() -> None:
    assert markdown.text("a|b <c>") == "a\\|b &lt;c&gt;"
    assert markdown.code("x|y") == "`x\\|y`"
    assert markdown.code("a`b") == "``a`b``"


def test_markdown_interrupted(tmp_path: Any) -> None:
    md = markdown.render(make_result(tmp_path, complete=False, stop_after=15))
    assert "**INTERRUPTED: 15 steps kept**" in md


# ---------------------------------------------------------------- HTML

_LOAD = re.compile(r"<script[^>]*\bsrc\s*=|<link\b[^>]*\bhref\s*=|<img\b[^>]*\bsrc\s*=\s*[\"']?"
                   r"https?:|\b(?:src|href)\s*=\s*[\"']?(?:https?:)?//|url\(\s*[\"']?"
                   r"(?:https?:)?//|@import", re.IGNORECASE)


def test_html_self_contained(result: RunResult) -> None:
    doc = html.render(result)
    assert doc.startswith("<!DOCTYPE html>") and doc.rstrip().endswith("</html>")
    assert not _LOAD.search(doc), _LOAD.search(doc)
    assert "<style>" in doc
    assert "<table>" in doc and "Verdict" in doc and "<details>" in doc
    assert "INTERRUPTED" not in doc
    if _has_matplotlib():
        assert doc.count("<svg") == 2  # one figure per scenario
        assert "<?xml" not in doc and "<!DOCTYPE svg" not in doc
    else:
        assert "pip install matplotlib" in doc


def test_html_escapes_site_names(result: RunResult) -> None:
    doc = html.render(result, plots=False)
    assert "&lt;string&gt;:1" in doc and "&lt;module&gt;" in doc
    assert "<string>" not in doc and "<module>" not in doc


def test_html_without_matplotlib(result: RunResult, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ImportError
    doc = html.render(result)
    assert "<svg" not in doc
    assert "Plots need matplotlib" in doc and "pip install matplotlib" in doc
    assert "<table>" in doc


def test_html_interrupted(tmp_path: Any) -> None:
    doc = html.render(make_result(tmp_path, complete=False, stop_after=15), plots=False)
    assert "INTERRUPTED: 15 steps kept" in doc and "status-bad" in doc


# ---------------------------------------------------------------- CSV, JSON, registry


def test_csv(result: RunResult) -> None:
    steps = pd.read_csv(io.StringIO(csv.render_steps(result)))
    assert len(steps) == len(result.steps)
    assert list(steps.columns) == list(result.steps_df().columns)
    events = pd.read_csv(io.StringIO(csv.render_events(result)))
    assert len(events) == len(result.events)
    assert set(events["site"]) == {f"{SAMPLER}:{SAMPLER_LINE}", "<string>:1",
                                   f"{READBACK}:{READBACK_LINE}"}
    assert csv.render(result, "events") == csv.render_events(result)
    with pytest.raises(ValueError):
        csv.render(result, "nope")


def test_json(result: RunResult) -> None:
    doc = json.loads(RENDERERS["json"](result))
    assert set(doc) == {"header", "steps", "events", "notes", "footer", "timelines"}
    assert len(doc["steps"]) == len(result.steps)
    assert doc["footer"]["complete"] is True


def test_json_document_holds_every_line_of_the_result(tmp_path: Any,
                                                      result: RunResult) -> None:
    # the streamed document written by write() equals the in-memory one, and both hold
    # exactly the JSON Lines content (steps and events in order)
    out = os.path.join(str(tmp_path), "r.json")
    write(result, out)
    with open(out, encoding="utf-8") as f:
        streamed = json.load(f)
    doc = json.loads(result.to_json())
    assert streamed == doc
    assert doc["steps"] == [s.to_dict() for s in result.steps]
    assert doc["events"] == result.events and doc["header"] == result.header
    assert len(doc["events"]) > 0


def test_round_trip_records_to_jsonl_to_json_and_back(tmp_path: Any) -> None:
    from syncguard.core.events import Frame, SyncEvent

    path = os.path.join(str(tmp_path), "r.jsonl")
    w = ResultWriter(path, dict(HEADER))
    recs, evs = [], []
    for step in range(3):
        rec = StepRecord("s", "legacy", "counted", step, step == 0, 2, 1, 1,
                         0.25 * (step + 1), None, [step, 7],
                         labels={"branch": "fused", "eligible": True})
        ev = SyncEvent(kind="scalar_read", api="Tensor.__bool__",
                       op="aten::_local_scalar_dense", filename="m.py", lineno=3 + step,
                       function="f", stack=(Frame("m.py", 3 + step, "f"),), step=step,
                       thread="MainThread", allowed=False, reason=None, count=1,
                       device="npu", wait_us=1.5)
        w.step(rec, [ev])
        recs.append(rec)
        evs.append(ev)
    w.note(message="hello")
    w.close(True)
    a = load(path)
    assert a.steps == recs and a.complete
    assert a.events == [{"scenario": "s", "path": "legacy", "pass": "counted", **json.loads(
        json.dumps(e.to_dict()))} for e in evs]
    out = os.path.join(str(tmp_path), "r.json")
    write(a, out)
    b = load(out)
    assert (b.header, b.steps, b.events, b.footer, b.notes) == (
        a.header, a.steps, a.events, a.footer, a.notes)
    assert [n["message"] for n in b.notes] == ["hello"]


def test_load_keeps_a_torn_last_line_but_not_a_torn_middle_line(tmp_path: Any) -> None:
    path = os.path.join(str(tmp_path), "r.jsonl")
    make_result(tmp_path, "r.jsonl", complete=False)
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    n_steps = sum('"type":"step"' in line for line in lines)
    with open(path, "a", encoding="utf-8") as f:
        f.write('{"type":"step","scen')  # killed mid-write
    assert len(load(path).steps) == n_steps
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines[:3] + ['{"type": "ev'] + lines[3:]) + "\n")
    with pytest.raises(ResultError, match=r"r\.jsonl:4: not a JSON line"):
        load(path)


def test_registry_and_extensions(result: RunResult) -> None:
    assert set(RENDERERS) == {"terminal", "markdown", "html", "json", "csv-steps",
                              "csv-events", "csv-sites", "trace"}
    for name, fmt in [("r.md", "markdown"), ("r.html", "html"), ("out/R.HTML", "html"),
                      ("r.json", "json"), ("steps.csv", "csv-steps"),
                      ("events.csv", "csv-events"), ("r.txt", "terminal")]:
        assert format_for_path(name) == fmt
        assert renderer_for_path(name) is RENDERERS[fmt]
    with pytest.raises(ValueError, match="no renderer"):
        renderer_for_path("r.pdf")
    with pytest.raises(ValueError, match="unknown format"):
        render(result, "pdf")
    for fmt, fn in RENDERERS.items():
        text = fn(result)
        assert isinstance(text, str) and text, fmt


def test_write_reports(tmp_path: Any, result: RunResult) -> None:
    out = os.path.join(str(tmp_path), "reports", "run1")
    paths = write_reports(result, out)
    assert [os.path.basename(p) for p in paths] == [
        "steps.csv", "events.csv", "sites.csv", "report.md", "report.html", "result.json",
        "trace.json"]
    assert all(os.path.isfile(p) for p in paths)
    with open(paths[-2], encoding="utf-8") as f:
        assert json.load(f)["header"]["syncguard"] == "0.1.0"
    with open(paths[3], encoding="utf-8") as f:
        assert "### Verdict" in f.read()


def test_empty_result_renders(tmp_path: Any) -> None:
    path = os.path.join(str(tmp_path), "empty.jsonl")
    ResultWriter(path, dict(HEADER)).close(False, reason="KeyboardInterrupt")
    res = load(path)
    assert analysis.summary(res).empty and analysis.sites(res).empty
    for fmt, fn in RENDERERS.items():
        assert isinstance(fn(res), str), fmt
    assert "INTERRUPTED: 0 steps kept (KeyboardInterrupt)" in terminal.render(res)


def test_short_paths(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from syncguard.renderers._common import short_path, short_site

    monkeypatch.chdir(tmp_path)
    inside = os.path.join(str(tmp_path), "pkg", "mod.py")
    assert short_path(inside) == os.path.join("pkg", "mod.py")
    assert short_site(f"{inside}:12") == os.path.join("pkg", "mod.py") + ":12"
    sp = os.path.join(os.sep, "venv", "lib", "site-packages", "sglang", "x.py")
    assert short_path(sp) == os.path.join("sglang", "x.py")
    assert short_path("<string>") == "<string>"
    assert short_site("<string>:1") == "<string>:1"


def test_sim_runs_say_latency_is_cpu_time_and_dirty_trees_are_marked(result: RunResult) -> None:
    import dataclasses as dc

    sim = dc.replace(result, header={**result.header, "device": "sim", "git_commit": "abcdef123456",
                                     "git_dirty": True})
    for fmt in ("terminal", "markdown", "html"):
        text = RENDERERS[fmt](sim)
        assert "latencies are CPU time" in text, fmt
        assert "abcdef1234+dirty" in text, fmt
        assert "latencies are CPU time" not in RENDERERS[fmt](result), fmt


def test_sync_wait_per_step_reaches_the_verdict_on_hardware_only(tmp_path: Any) -> None:
    import dataclasses as dc

    res = make_result(tmp_path)
    steps = [dc.replace(s, sync_wait_us=(40.0 if s.syncs else 0.0) if s.pass_ == "counted"
                        else None) for s in res.steps]
    cuda = dc.replace(res, steps=steps, header={**res.header, "device": "cuda"})
    sm = analysis.summary(cuda)
    legacy = sm[(sm.scenario == "uniform") & (sm.path == "legacy")].iloc[0]
    assert legacy["sync_wait_us_mean"] > 0
    flag = sm[(sm.scenario == "uniform") & (sm.path == "flag")].iloc[0]
    assert flag["sync_wait_us_mean"] == 0.0
    text = markdown.render(cuda)
    assert "us per step in them" in text
    sim = dc.replace(cuda, header={**res.header, "device": "sim"})
    assert "us per step in them" not in markdown.render(sim)
    assert "sync_wait_us" in csv.render_steps(cuda).splitlines()[0]


# ---------------------------------------------------------------- one table model, goldens
def _compare_df() -> pd.DataFrame:
    """Rows that exercise every compare style: (uniform, legacy) is the issue's row, -1.00
    syncs per step at a latency ratio of 1.02 (its interval 0.99-1.05 includes 1.0 and lies
    within the margin)."""
    def row(scenario: str, path: str, a_s: float, b_s: float, a_ms: float, b_ms: float,
            changed: bool) -> Dict[str, Any]:
        nan = float("nan")
        both_s = not (math.isnan(a_s) or math.isnan(b_s))
        both_ms = not (math.isnan(a_ms) or math.isnan(b_ms))
        ratio = b_ms / a_ms if both_ms else nan
        lo, hi = ratio - 0.03, ratio + 0.03  # an interval +-0.03 around the ratio
        return {"scenario": scenario, "path": path, "a_syncs_mean": a_s, "b_syncs_mean": b_s,
                "syncs_delta": b_s - a_s if both_s else nan, "a_syncs_total": a_s * 10,
                "b_syncs_total": b_s * 10, "a_mean_ms": a_ms, "b_mean_ms": b_ms,
                "latency_delta_ms": b_ms - a_ms if both_ms else nan,
                "a_p50_ms": a_ms, "b_p50_ms": b_ms, "latency_ratio": ratio,
                "ratio_lo": lo, "ratio_hi": hi,
                "latency_changed": both_ms and stats.Ratio(ratio, lo, hi, 40).differs,
                "a_outliers": 0, "b_outliers": 1, "a_modeled_ms": nan, "b_modeled_ms": nan,
                "modeled_changed": False, "changed": changed}

    nan = float("nan")
    return pd.DataFrame([
        row("uniform", "legacy", 1.0, 0.0, 1.0, 1.02, True),   # fewer syncs: better
        row("uniform", "flag", 0.0, 1.0, 1.0, 0.90, True),     # more syncs, faster: worse
        row("mixed", "legacy", 1.0, 1.0, 1.0, 1.10, True),     # slower, interval > 1: worse
        row("mixed", "flag", 0.0, 0.0, 1.0, 0.80, True),       # faster, interval < 1: better
        row("mixed", "new", nan, 0.0, nan, 1.0, True),         # one side only: changed
        row("other", "flag", 0.0, 0.0, 1.0, 1.01, False),      # unchanged
    ], columns=list(analysis.COMPARE_COLUMNS))


GREEN, RED = "\x1b[1;32m", "\x1b[1;31m"


def test_compare_improvement_is_green_in_every_format() -> None:
    # The bug: the terminal painted a -1.00 syncs/step improvement (ratio 1.02, its interval
    # including 1.0) bold red, while Markdown and HTML marked it best.
    df = _compare_df().iloc[:1]
    text = terminal.render_compare(df, width=120, color=True)
    line = next(ln for ln in text.splitlines() if "legacy" in ln and "-1.00" in ln)
    assert f"{GREEN}-1.00" in line and RED not in line, repr(line)
    assert "\x1b[1;32m1.02x" not in line and "1.02x" in line  # no measurable change: plain
    assert "better" in line
    md = markdown.render_compare(df)
    assert "| -1.00 |" in md and "**-1.00**" not in md and "| better |" in md
    assert "-1.00" in terminal.render_compare(df, width=120)
    doc = html.render_compare(df)
    assert '<td class="r improved">-1.00</td>' in doc
    assert '<td class="r">1.02x (0.99-1.05)</td>' in doc
    assert ",-1.0,improved," in csv.render_compare(df)


def test_every_format_styles_compare_cells_alike() -> None:
    from syncguard.renderers import _tables

    t = _tables.compare_tbl(_compare_df())
    styles = [[c.style for c in r] for r in t.rows if r is not None]
    # delta, ratio and change cells of each row
    assert [(s[4], s[7], s[-1]) for s in styles] == [
        ("improved", "", "improved"), ("regressed", "improved", "regressed"),
        ("", "regressed", "regressed"), ("", "improved", "improved"), ("", "", "changed"),
        ("", "", "")]
    doc = html.render_compare(_compare_df())
    md = markdown.render_compare(_compare_df())
    coloured = terminal.render_compare(_compare_df(), width=120, color=True)
    for r, s in zip((r for r in t.rows if r is not None), styles):
        for cell, style in zip(r, s):
            if not style or not cell.text:
                continue
            assert f'class="r {style}">{cell.text}<' in doc or \
                f'class="{style}">{cell.text}<' in doc
            assert (f"**{cell.text}**" in md) == (style in ("regressed", "changed"))
            look = terminal.STYLE_LOOK[style]
            code = {"bold green": GREEN, "bold red": RED, "bold": "\x1b[1m"}[look]
            assert re.search(re.escape(code) + r" *" + re.escape(cell.text), coloured), cell


def _ansi_golden(name: str, text: str) -> None:
    _golden(name, text.replace("\x1b", "\\e"))  # readable in a diff; still every colour


def test_golden_terminal_in_colour(result: RunResult) -> None:
    _ansi_golden("terminal_color.ansi", terminal.render(result, width=100, color=True))


def test_golden_compare_terminal() -> None:
    _golden("compare.txt", terminal.render_compare(_compare_df(), width=100, title="a vs b"))
    _ansi_golden("compare_color.ansi", terminal.render_compare(_compare_df(), width=100,
                                                                 color=True, title="a vs b"))


def test_golden_markdown(result: RunResult) -> None:
    _golden("report.md", markdown.render(result))
    _golden("compare.md", markdown.render_compare(_compare_df(), "a.jsonl", "b.jsonl"))


def test_golden_html_structure(result: RunResult) -> None:
    _golden("report.html", html.render(result, plots=False))
    _golden("compare.html", html.render_compare(_compare_df(), "a.jsonl", "b.jsonl"))


def test_golden_csv(result: RunResult) -> None:
    _golden("steps.csv", csv.render_steps(result))
    _golden("events.csv", csv.render_events(result))
    _golden("compare.csv", csv.render_compare(_compare_df()))


# ---------------------------------------------------------------- in a real browser
def _chromium() -> Optional[str]:
    import shutil

    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


# Measures the page after layout: the page must not scroll sideways, and every table's box
# (which may scroll inside itself) must end inside the page.
_MEASURE = """<script>
window.addEventListener("load", () => {
  const page = document.documentElement.clientWidth;
  const bad = [];
  if (document.documentElement.scrollWidth > page) bad.push("page " +
      document.documentElement.scrollWidth + " exceeds " + page);
  document.querySelectorAll("table").forEach((t, i) => {
    const box = t.parentElement.classList.contains("tbl") ? t.parentElement : t;
    const r = box.getBoundingClientRect();
    if (r.right > page + 0.5) bad.push("table " + i + " ends at " + r.right + " beyond " + page);
  });
  document.querySelectorAll("details").forEach(d => d.open = true);
  const out = document.createElement("pre");
  out.id = "measure";
  out.textContent = "WIDTH " + page + " BAD " + JSON.stringify(bad);
  document.body.appendChild(out);
});
</script>"""


@pytest.mark.browser
@pytest.mark.skipif(_chromium() is None, reason="no headless Chromium installed "
                    "(Debian: apt-get install chromium)")
@pytest.mark.parametrize("width", [1400, 1000])
def test_html_tables_fit_the_page_in_chromium(tmp_path: Any, width: int) -> None:
    import subprocess

    # long names, as real runs have: the sites table is the widest
    long_fn = "top_k_top_p_min_p_sampling_from_logits_ascend_with_branch_and_a_long_suffix"
    res = make_result(tmp_path)
    res = RunResult(res.header, res.steps,
                    [dict(e, function=long_fn, filename="/very/long/site-packages/path/to/a/"
                          "package/module/with/many/parts/sampler_module.py")
                     for e in res.events], res.footer)
    doc = html.render(res).replace("</body>", _MEASURE + "\n</body>")
    page = tmp_path / "report.html"
    page.write_text(doc, encoding="utf-8")
    chromium = _chromium()
    assert chromium is not None
    proc = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu",
                           "--hide-scrollbars", f"--window-size={width},900",
                           "--virtual-time-budget=3000", "--dump-dom", page.as_uri()],
                          capture_output=True, text=True, timeout=120)
    m = re.search(r"WIDTH (\d+) BAD (\[.*?\])", proc.stdout)
    assert m, proc.stderr[-2000:]
    assert int(m.group(1)) > width - 50  # the window size took effect
    assert json.loads(m.group(2)) == []


def test_one_outlier_step_is_counted_not_reported_as_a_cost(tmp_path: Any) -> None:
    # the "costs 503400.7 us per token" verdict: one 500 ms hiccup in flag's timed pass
    # (a GC pause, another process) moved the mean; the paired median does not move
    path = os.path.join(str(tmp_path), "hiccup.jsonl")
    w = ResultWriter(path, dict(HEADER))
    same = list(U_LEGACY)
    hiccup = list(U_LEGACY)
    hiccup[4] = 500.0
    _write_scenario(w, "uniform", 12, 2, {"legacy": same, "flag": hiccup},
                    (SAMPLER, SAMPLER_LINE, SAMPLER_FN), {}, {})
    w.close(True)
    res = load(path)
    flag = analysis.summary(res).set_index("path").loc["flag"]
    assert flag["mean_ms"] > 40  # the mean is wrecked by the one step
    assert flag["outliers"] == 1
    assert math.isnan(flag["saved_per_token_us"])
    text = terminal.render(res, width=160)
    verdict = text[text.index("Verdict"):text.index("Per step")]
    assert "us of host time per step" not in verdict
    assert re.search(r"flag: 0\. Measured on this machine \(host time per step, p50\): flag vs "
                     r"legacy no measurable difference \(95% CI \d\.\d\d-\d\.\d\dx, 3 rounds\)",
                     " ".join(verdict.split())), verdict


def test_modeled_columns_and_verdict(result: RunResult) -> None:
    import dataclasses

    steps = []
    for s in result.steps:
        if s.pass_ == "counted" and s.scenario == "uniform":
            hidden = s.path == "legacy"
            s = dataclasses.replace(s, modeled_ms=21.1 if hidden else 20.9,
                                    bubble_us=275.0 if hidden else 85.0,
                                    sync_cost_us=190.0 if hidden else 0.0,
                                    sync_bubble_us=150.0 if hidden else 0.0)
        steps.append(s)
    header = dict(result.header, timeline={"profile": "910b", "device": "Ascend 910B"})
    res = dataclasses.replace(result, steps=steps, header=header)
    sm = analysis.summary(res).set_index(["scenario", "path"])
    assert sm.loc[("uniform", "legacy"), "modeled_ms"] == pytest.approx(21.1)
    assert sm.loc[("uniform", "legacy"), "modeled_sync_us"] == pytest.approx(190.0)
    assert sm.loc[("uniform", "flag"), "profile"] == "910b"
    assert math.isnan(sm.loc[("mixed", "legacy"), "modeled_ms"])
    text = " ".join(terminal.render(res, width=200).split())
    assert ("legacy: 1.00 hidden syncs per step at syncguard/sampling/sampler.py:"
            f"{SAMPLER_LINE} (Tensor.__bool__); flag: 0. Modeled on 910b: legacy's hidden syncs "
            "cost 190 us per step (device idle 150 us), 0.9% of a 21.1 ms modeled step, which "
            "is why throughput barely moves. Measured on this machine (host time per step, "
            "p50): flag vs legacy 0.86x, faster") in text
    # a larger share says no such thing
    costly = [dataclasses.replace(s, sync_cost_us=500.0) if s.sync_cost_us else s
              for s in steps]
    text = " ".join(terminal.render(dataclasses.replace(res, steps=costly), width=200).split())
    assert "2.4% of a 21.1 ms modeled step. Measured" in text and "barely moves" not in text
    assert "(910b)" in text  # the modeled columns name their profile
    md = markdown.render(res)
    assert "| modeled ms (910b) | bubble us (910b) |" in md


def test_compare_marks_a_moved_modeled_latency(result: RunResult) -> None:
    import dataclasses

    def modeled(ms: float, profile: str = "910b") -> RunResult:
        steps = [dataclasses.replace(s, modeled_ms=ms, bubble_us=1.0, sync_cost_us=0.0,
                                     sync_bubble_us=0.0) if s.pass_ == "counted" else s
                 for s in result.steps]
        return dataclasses.replace(result, steps=steps,
                                   header=dict(result.header, timeline={"profile": profile}))

    same = analysis.compare(modeled(0.5), modeled(0.5))
    assert not same["changed"].any() and not same["modeled_changed"].any()
    moved = analysis.compare(modeled(0.5), modeled(0.51))
    assert moved["modeled_changed"].all() and moved["changed"].all()
    # another profile: not comparable, not a change by itself
    other = analysis.compare(modeled(0.5), modeled(0.51, "h200"))
    assert not other["modeled_changed"].any() and not other["changed"].any()
    text = terminal.render_compare(moved, title="t", width=200)
    assert "0.500" in text and "0.510" in text and "4 of 4 rows changed" in text


def test_summary_colours_latency_only_when_a_ratio_is_measurable(tmp_path: Any) -> None:
    from syncguard.renderers import _tables

    # flag's steps as legacy's, reordered: no measurable ratio, so p50/p90/p99 and the ratio
    # are not painted best/worst even though their values differ; the counts still are
    path = os.path.join(str(tmp_path), "same.jsonl")
    w = ResultWriter(path, dict(HEADER))
    _write_scenario(w, "uniform", 12, 2, {"legacy": U_LEGACY, "flag": U_LEGACY[::-1]},
                    (SAMPLER, SAMPLER_LINE, SAMPLER_FN), {}, {})
    w.close(True)
    sm = analysis.summary(load(path))
    assert not sm.set_index("path").loc["flag", "ratio_lo"] > 1.0
    t = _tables.summary_tbl(sm)
    cols = [c.key for c in t.columns]
    rows = [r for r in t.rows if r is not None]
    for key in ("p50_ms", "p90_ms", "p99_ms", "ratio_vs_baseline"):
        assert all(r[cols.index(key)].style == "" for r in rows), key
    assert {r[cols.index("syncs_mean")].style for r in rows} == {"best", "worst"}
    # with a measurable ratio (the shared fixture) they are
    t2 = _tables.summary_tbl(analysis.summary(make_result(tmp_path, "m.jsonl")))
    rows2 = [r for r in t2.rows if r is not None]
    assert {r[cols.index("p50_ms")].style for r in rows2} >= {"best", "worst"}


def test_html_code_cells_break_between_parts_never_mid_word() -> None:
    assert html.code_breaks("syncguard/sampling/sampler.py:123") == (
        "syncguard/<wbr>sampling/<wbr>sampler.<wbr>py:<wbr>123")
    assert html.code_breaks("top_k<x>") == "top_<wbr>k&lt;x&gt;"
    assert html.code_breaks("Tensor.__bool__") == "Tensor.__<wbr>bool__"
    assert "overflow-wrap:anywhere" not in html.CSS


def test_latency_plot_draws_one_line_per_round(result: RunResult) -> None:
    pytest.importorskip("matplotlib")
    fig = html.plot_figure(result, "uniform")
    lines = fig.axes[0].get_lines()
    assert len(lines) == 2 * 3  # 2 paths x 3 rounds (the fixture's steps over rounds)
    for ln in lines:  # each line runs forward in steps: no zig-zag back to step 0
        xs = list(ln.get_xdata())
        assert xs == sorted(xs) and len(set(xs)) == len(xs)
    assert [t.get_text() for t in fig.axes[0].get_legend().get_texts()] == [
        "legacy (3 rounds)", "flag (3 rounds)"]
