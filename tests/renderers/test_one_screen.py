"""The main job's answer on one screen: a headline per path (its count, its site once, the
host-time verdict), then a summary with the columns that fit the terminal: at most 40 lines at
80 columns, no number cut, the scenario and path columns kept, at 80, 100 and 120 columns."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, List

import pytest

from syncguard.renderers import terminal
from syncguard.results import format as results
from syncguard.results import loader

SCENARIOS = ["boundary", "greedy_mix", "min_p", "realistic", "seeded", "steady", "tiny_vocab"]
PATHS = ["legacy", "flag", "flag-recompute"]
FUNCTION = "top_k_top_p_min_p_sampling_from_logits_ascend_with_branch"
SITE = "sglang_ascend_sampling/sampler.py"


def _case_study_like(path: Path) -> Path:
    """A result shaped as the case study's: 7 scenarios x 3 paths, legacy syncing once per
    step at one site with a long function name, 8 timed rounds with latencies of 1 to 4 digits
    before the point."""
    lines: List[Dict[str, Any]] = [{
        "type": "header", "schema": 1, "created": 0,
        "env": {"syncguard": "0.1.0", "torch": "2.13.0", "device": "sim"},
        "options": {"baseline": None}, "scenarios": {},
        "timeline": {"profile": "910b", "device": "Huawei Ascend 910B"}}]
    for k, sc in enumerate(SCENARIOS):
        for p in PATHS:
            for i in range(6):
                syncs = int(p == "legacy" and i > 0 and not (sc == "greedy_mix" and i == 5))
                if syncs:
                    lines.append({
                        "type": "event", "scenario": sc, "path": p, "pass": "counted",
                        "kind": "scalar_read", "api": "Tensor.__bool__", "op": None,
                        "filename": SITE, "lineno": 219, "function": FUNCTION, "stack": [],
                        "step": i, "thread": "MainThread", "allowed": False, "reason": None,
                        "warmup": False, "count": 1})
                lines.append({"type": "step", "scenario": sc, "path": p, "pass": "counted",
                              "step": i, "warmup": i == 0, "batch_size": 2, "syncs": syncs,
                              "allowed": 1, "latency_ms": 1.0,
                              "modeled_ms": 0.5 + 10 * k, "bubble_us": 300 + 200 * k,
                              "sync_cost_us": 35.0 * syncs, "sync_bubble_us": 30.0 * syncs})
        for rnd in range(8):
            for i in range(6):
                for j, p in enumerate(PATHS):
                    ms = (1.9 + 3 * k) * 10 ** (k % 4) * (1 + 0.01 * ((i * 7 + rnd * 3 + j) % 5))
                    lines.append({"type": "step", "scenario": sc, "path": p, "pass": "timed",
                                  "step": i, "warmup": i == 0, "batch_size": 2, "syncs": 0,
                                  "allowed": 0, "latency_ms": ms, "round": rnd})
    lines.append({"type": "footer", "complete": True})
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def case_study(tmp_path_factory: pytest.TempPathFactory) -> results.RunResult:
    return loader.load(str(_case_study_like(tmp_path_factory.mktemp("r") / "result.jsonl")))


@pytest.mark.parametrize("width", [80, 100, 120])
def test_the_answer_fits_one_screen_with_nothing_cut(case_study: results.RunResult,
                                                     width: int) -> None:
    text = terminal.render(case_study, width=width, steps=False, sites=False, legend=False,
                           brief=True)
    lines = text.splitlines()
    assert len(lines) <= 40, text
    assert max(len(ln.rstrip()) for ln in lines) <= width
    assert "…" not in text, text  # no number or name cut short
    # one headline per path, the site named once (not once per scenario)
    for p in PATHS:
        assert sum(ln.startswith(f"{p}: ") for ln in lines) == 1, text
    assert " ".join(text.split()).count("sampler.py:219") == 1, text
    assert "Verdict" not in text
    assert "legacy: 1.00 hidden syncs per step in 6 of 7 scenarios (greedy_mix 0.80)" in \
        " ".join(text.split())
    assert "flag: 0 hidden syncs per step in all 7 scenarios; host time vs legacy:" in \
        " ".join(text.split())
    # the table keeps its scenario and path columns and every scenario
    head = next(ln for ln in lines if "path" in ln.split())
    assert "scenario" in head.split()
    assert all(sc in text for sc in SCENARIOS)


@pytest.mark.parametrize("width", [80, 100, 120])
def test_the_whole_report_cuts_no_number_at_any_width(case_study: results.RunResult,
                                                      width: int) -> None:
    text = terminal.render(case_study, width=width)
    assert "…" not in text
    summary = text[text.index("Summary"):text.index("Verdict")]
    assert all(sc in summary for sc in SCENARIOS) and "scenario" in summary


def test_a_wide_terminal_keeps_the_columns_a_narrow_one_gives_up(
        case_study: results.RunResult) -> None:
    narrow = terminal.render(case_study, width=80, steps=False, sites=False, legend=False)
    wide = terminal.render(case_study, width=200, steps=False, sites=False, legend=False)
    assert "p99" in wide and "p99" not in narrow


def test_a_sites_modeled_wait_reads_per_read_not_as_the_steps_cost() -> None:
    """The verdict's modeled cost (78 us a step) and a site's modeled stall (20,227 us) read
    as two different things: the site's columns are per read, and the legend says which is
    the cost."""
    import pandas as pd

    from syncguard.renderers import _common, _tables

    st = pd.DataFrame([{
        "scenario": "realistic", "path": "legacy", "site": f"{SITE}:219", "function": FUNCTION,
        "api": "Tensor.__bool__", "op": "", "kind": "scalar_read", "allowed": False,
        "reason": "", "count": 49, "steps": "1-49", "per_step": True, "rate": 1.0,
        "modeled_stall_us": 20227.0, "modeled_bubble_us": 40.0}])
    headers = _tables.sites_tbl(st, False).headers
    assert "modeled host wait us/read" in headers and "modeled device idle us/read" in headers
    modeled = dict(_common.LEGEND)["modeled"]
    assert "per read" in modeled and "cost per step" in modeled
