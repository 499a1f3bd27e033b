"""The gate on its own (no torch, no device): judging events against a budget or a baseline,
the budget worked out from the command line, the configuration and a baseline, per-step
verdicts, the one baseline merge, and the verdict text, which the CI formats and the pytest
plugin print as the gate writes it."""

from __future__ import annotations

import dataclasses
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any, List, Optional

import pytest

from syncguard.core.events import H2D_COPY, SyncEvent
from syncguard.gate.baseline import Baseline, BaselineSite
from syncguard.gate.verdicts import (
    OUTSIDE_GATE,
    Budget,
    Tally,
    Verdict,
    baseline_from,
    budget,
    judge,
    per_step_verdict,
    summary,
)

SOURCE = """\
def decode(x):
    a = x.item()
    b = x.tolist()
    c = torch.as_tensor(b, device=x.device)
    return a, b, c
"""
ITEM, TOLIST, COPY = 2, 3, 4  # the lines of SOURCE that sync


@pytest.fixture
def model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A repository root as the current directory, holding pkg/model.py."""
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "model.py").write_text(SOURCE)
    monkeypatch.chdir(tmp_path)
    return str(tmp_path / "pkg" / "model.py")


def _ev(src: str, line: int, step: Optional[int], *, count: int = 1, allowed: bool = False,
        warmup: bool = False) -> SyncEvent:
    api, kind = {ITEM: ("Tensor.item", "scalar_read"), TOLIST: ("Tensor.tolist", "d2h_copy"),
                 COPY: ("torch.as_tensor", H2D_COPY)}[line]
    return SyncEvent(kind, api, "aten::_to_copy", src, line, "decode", (), step, "MainThread",
                     allowed=allowed, warmup=warmup, count=count)


def _steady(src: str) -> List[SyncEvent]:
    """Warm-up step 0, then steps 1-3 with one item() and one tolist() each, and an allowed
    readback every step: 6 hidden syncs."""
    evs = [_ev(src, ITEM, 0, warmup=True), _ev(src, TOLIST, 0, warmup=True)]
    for step in (1, 2, 3):
        evs += [_ev(src, ITEM, step), _ev(src, TOLIST, step), _ev(src, COPY, step, allowed=True)]
    return evs


# ---------------------------------------------------------------------------- judge
def test_judge_counts_hidden_syncs_against_the_budget(model: str) -> None:
    evs = _steady(model)
    ok = judge(evs, max_syncs=6, scenario="s", path="p")
    assert (ok.hidden, ok.failed, ok.findings, len(ok.sites)) == (6, False, (), 2)
    bad = judge(evs, max_syncs=5, scenario="s", path="p")
    assert bad.failed and bad.max_syncs == 5 and bad.baseline is None
    assert [(f.event.api, f.count, f.steps) for f in bad.findings] == [
        ("Tensor.item", 3, [1, 2, 3]), ("Tensor.tolist", 3, [1, 2, 3])]
    assert {f.message for f in bad.findings} == {"6 hidden syncs, budget 5"}
    # a Tally fed event by event (a guard's on_event) gives the same verdict
    assert judge(Tally().extend(evs), max_syncs=5, scenario="s", path="p") == bad


def test_judge_against_a_baseline_fails_on_new_sites_and_higher_counts(model: str) -> None:
    base = Baseline([BaselineSite.of("s", "p", k, 2, v["event"])
                     for k, v in Tally().extend(_steady(model)).grouped().items()],
                    source="base.json")
    v = judge(_steady(model) + [_ev(model, COPY, 2)], baseline=base, scenario="s", path="p")
    assert v.failed and v.max_syncs is None and v.baseline == "base.json"
    assert sorted((f.event.api, f.baseline_count, f.message) for f in v.findings) == [
        ("Tensor.item", 2, "count 3 > baseline 2"),
        ("Tensor.tolist", 2, "count 3 > baseline 2"),
        ("torch.as_tensor", None, "new site, not in the baseline")]
    cheaper = [e for e in _steady(model) if e.step != 3]
    assert not judge(cheaper, baseline=base, scenario="s", path="p").failed
    # looked up under its own scenario and path: elsewhere every site is new
    assert len(judge(cheaper, baseline=base, scenario="s", path="q").findings) == 2


def test_per_step_verdict_judges_the_worst_step_call(model: str) -> None:
    evs = [_ev(model, ITEM, 0, count=5, warmup=True),  # warm-up: not judged
           _ev(model, ITEM, 1), _ev(model, ITEM, 2), _ev(model, TOLIST, 2, count=2),
           _ev(model, COPY, 2, allowed=True), _ev(model, ITEM, 3, count=2)]
    v = per_step_verdict(evs, 2, "s", "p per step")
    assert v.failed and v.hidden == 3 and v.max_syncs == 2
    assert [(f.event.api, f.steps) for f in v.findings] == [("Tensor.tolist", [2]),
                                                             ("Tensor.item", [2])]
    assert {f.message for f in v.findings} == {
        "3 hidden syncs in one step call, budget 2 per step (1 of 3 steps with syncs over it)"}
    assert not per_step_verdict(evs, 3, "s", "p per step").failed


# ---------------------------------------------------------------------------- budget
B = Baseline([], source="base.json")


@pytest.mark.parametrize("kw, expected", [
    # check on scenarios: --max-syncs, else the scenario's [expect] for the path, else 0
    ({"configured": {"max_syncs": 4}}, Budget(4)),
    ({"max_syncs": 2, "configured": {"max_syncs": 4}}, Budget(2)),
    ({"configured": {"max_syncs": None}}, Budget(0)),
    ({"configured": {"max_syncs": 4}, "baseline": B}, Budget(4, baseline=B)),
    # exec: its own flags only; nothing given gates nothing
    ({"per_step": 1, "default": None}, Budget(None, 1)),
    ({"max_syncs": 3, "outside": 0, "default": None}, Budget(3, None, 0)),
    ({"default": None}, Budget(None)),
    # a recorded run gates again as it did...
    ({"configured": {"max_syncs": None, "max_syncs_per_step": 1}}, Budget(None, 1)),
    ({"configured": {"max_syncs": 3, "max_syncs_per_step": 1, "max_syncs_outside": 0}},
     Budget(3, 1, 0)),
    # ... unless another gate is asked for: its per-step and outside budgets then drop out
    ({"configured": {"max_syncs_per_step": 1, "max_syncs_outside": 0}, "baseline": B},
     Budget(0, baseline=B)),
    ({"max_syncs": 5, "configured": {"max_syncs_per_step": 1, "max_syncs_outside": 0}},
     Budget(5)),
    ({"updating": True, "configured": {"max_syncs_per_step": 1, "max_syncs_outside": 0}},
     Budget(0)),
    # --max-syncs-outside is used whatever else is asked for
    ({"outside": 2, "baseline": B, "configured": {"max_syncs_outside": 0}},
     Budget(0, None, 2, B)),
    # what is not a count is not a budget (a result file is untrusted input)
    ({"configured": {"max_syncs": True, "max_syncs_per_step": -1, "max_syncs_outside": "2"}},
     Budget(0)),
])
def test_budget_from_flags_configuration_and_baseline(kw: Any, expected: Budget) -> None:
    assert budget(**kw) == expected


def test_budget_gated_and_its_verdicts(model: str) -> None:
    assert not budget(default=None).gated and budget(per_step=0, default=None).gated
    assert Budget(None, baseline=B).gated
    evs = _steady(model)
    vs = Budget(6, per_step=1).verdicts(evs, "s", "p")
    assert [(v.path, v.failed, v.hidden) for v in vs] == [("p", False, 6),
                                                          ("p per step", True, 2)]
    (against,) = Budget(None, baseline=B).verdicts(evs, "s", "p")
    assert against.max_syncs is None and against.baseline == "base.json" and against.failed
    assert Budget(None).verdicts(evs, "s", "p") == []
    # a Tally (counts, not events) gives the same verdicts, the per-step one included
    assert Budget(0, per_step=1).verdicts(Tally().extend(evs), "s", "p") == \
        Budget(0, per_step=1).verdicts(evs, "s", "p")
    outside = [_ev(model, ITEM, None)]
    assert Budget(0).outside_verdicts(outside, "s") == []
    (v,) = Budget(0, outside=0).outside_verdicts(outside, "s")
    assert v.path == OUTSIDE_GATE and v.failed and v.hidden == 1


# ---------------------------------------------------------------------------- baselines
def _site(scenario: str, path: str, key: str, count: int = 1) -> BaselineSite:
    return BaselineSite(scenario, path, key, count)


def test_one_merge_for_update_baseline_and_the_locked_file_update(tmp_path: Path) -> None:
    old = Baseline([_site("a", "p", "k1", 3), _site("a", "q", "k2"), _site("b", "p", "k3")])
    new = [_site("a", "p", "k4")]
    merged = old.merged(new, [("a", "p")])
    # the judged scenario/path is replaced; its other path and other scenarios are kept
    assert {(s.scenario, s.path, s.key) for s in merged.sites} == {
        ("a", "p", "k4"), ("a", "q", "k2"), ("b", "p", "k3")}
    path = str(tmp_path / "base.json")
    old.save(path)
    assert Baseline.update(path, new, [("a", "p")]).sites == merged.sites
    assert Baseline.load(path).sites == merged.sites
    # a file not there yet: the run's sites alone
    assert Baseline.update(str(tmp_path / "new.json"), new, [("a", "p")]).sites == new


def test_baseline_from_verdicts_merges_with_what_it_keeps(model: str) -> None:
    a = judge(_steady(model), scenario="a", path="p")
    b = judge(_steady(model) + [_ev(model, COPY, 1)], scenario="b", path="p")
    old = baseline_from([a, b])
    assert len(old) == 5 and {s.site for s in old.sites} == {
        f"pkg/model.py:{n}" for n in (ITEM, TOLIST, COPY)}
    rerun = judge([], scenario="a", path="p")  # "a" again, its syncs gone
    assert baseline_from([rerun], keep=old).sites == old.merged([], [("a", "p")]).sites
    assert {s.scenario for s in baseline_from([rerun], keep=old).sites} == {"b"}
    assert len(baseline_from([rerun])) == 0


# ---------------------------------------------------------------------------- verdict text
def _three(model: str) -> List[Verdict]:
    evs = _steady(model)
    base = baseline_from([judge(evs[:5], scenario="s", path="known")])
    base = Baseline(base.sites, source="base.json")
    return [judge(evs, max_syncs=5, scenario="s", path="over"),
            judge(evs, baseline=base, scenario="s", path="known"),
            judge([], max_syncs=0, scenario="s", path="clean")]


def test_the_verdict_writes_its_lines(model: str) -> None:
    over, known, clean = _three(model)
    assert over.line() == "6 hidden syncs, budget 5"
    assert over.row() == "FAIL  s [over]: 6 hidden syncs, budget 5"
    assert known.row() == "FAIL  s [known]: 6 hidden syncs, 2 sites new or above the baseline"
    assert known.brief() == "6 hidden syncs, baseline base.json"
    assert clean.row() == "OK    s [clean]: 0 hidden syncs, budget 0"
    assert dataclasses.replace(known, failed=False, findings=()).row() == (
        "OK    s [known]: 6 hidden syncs, none new or above the baseline")
    assert over.site_lines() == [
        "pkg/model.py:2 in decode: Tensor.item (aten::_to_copy) x3, steps 1-3",
        "pkg/model.py:3 in decode: Tensor.tolist (aten::_to_copy) x3, steps 1-3"]
    assert known.site_lines()[0].endswith("x3, steps 1-3  (count 3 > baseline 1)")
    assert summary([over, known, clean]) == "2 of 3 scenario paths failed (gate: baseline " \
        "base.json)"
    assert summary([clean]) == "1 scenario path OK (gate: budget)"
    assert summary([clean, clean]) == "all 2 scenario paths OK (gate: budget)"


def test_the_test_line_says_where_the_syncs_were(model: str) -> None:
    evs = _steady(model)
    assert judge(evs).test_line() == "allowed 0 host syncs, saw 6 in steps 1-3"
    assert judge([_ev(model, ITEM, None)], max_syncs=1).test_line() == (
        "allowed 1 host sync, saw 1 in the test body")
    assert judge([_ev(model, ITEM, 1), _ev(model, ITEM, None)]).test_line() == (
        "allowed 0 host syncs, saw 2 in step 1 and outside steps")
    assert judge([]).test_line() == "allowed 0 host syncs, saw 0"
    v = judge([_ev(model, ITEM, None), _ev(model, TOLIST, None)],
              baseline=Baseline([], source="base.json"))
    assert v.test_line() == ("2 sites new or above baseline base.json, saw 2 host syncs in "
                             "the test body")


class _Loud(Verdict):
    """A verdict whose every text is a marker: a renderer that prints the markers takes its
    text from the gate; one that rebuilds the text from the verdict's numbers prints none."""

    def row(self) -> str:
        return f"ROW<{self.path}>"

    def brief(self) -> str:
        return f"BRIEF<{self.path}>"

    def site_lines(self, root: Optional[str] = None, failing_only: bool = True,
                   most: Optional[int] = None) -> List[str]:
        return [f"SITE<{self.path}:{i}>" for i, _ in enumerate(self.findings[:most])]

    def test_line(self) -> str:
        return f"TEST<{self.path}>"


def _loud(v: Verdict) -> _Loud:
    return _Loud(**{f.name: getattr(v, f.name) for f in dataclasses.fields(Verdict)})


def test_the_ci_formats_print_the_gates_text(model: str) -> None:
    from syncguard.renderers import render_gate as render

    verdicts = _three(model)
    text = render("text", verdicts).splitlines()
    expected = [f"syncguard check: {summary(verdicts)}"]
    for v in verdicts:
        expected += [v.row()] + (["      " + t for t in v.site_lines()] if v.failed else [])
    assert text == expected
    loud = [_loud(v) for v in verdicts]
    assert render("text", loud).splitlines()[1:] == [
        "ROW<over>", "      SITE<over:0>", "      SITE<over:1>",
        "ROW<known>", "      SITE<known:0>", "      SITE<known:1>", "ROW<clean>"]
    assert render("github", loud).startswith(render("text", loud))
    cases = ET.fromstring(render("junit", loud).encode()).findall(".//testcase")
    fail = cases[0].find("failure")
    assert fail is not None and fail.get("message") == "BRIEF<over>"
    assert fail.text == "BRIEF<over>\nSITE<over:0>\nSITE<over:1>\n"
    out = cases[2].find("system-out")
    assert out is not None and out.text == "BRIEF<clean>\n"


def test_the_plugin_prints_the_gates_line(model: str) -> None:
    from syncguard.pytest_plugin.report import FIXTURE_HINT, verdict_line

    v = judge(_steady(model), max_syncs=1)
    assert verdict_line(v) == f"syncguard: {v.test_line()}"
    assert verdict_line(_loud(v)) == "syncguard: TEST<>"
    copies = judge([_ev(model, COPY, None, count=2)])
    assert verdict_line(copies) == (f"syncguard: {copies.test_line()} (2 host-to-device "
                                    f"copies: {FIXTURE_HINT})")
