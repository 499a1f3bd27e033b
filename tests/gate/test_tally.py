"""The gate's counts (:class:`Tally`, :class:`StepCounts`): a long run is judged from counts
per site and step, not from every event it made, and gives the verdicts the events give."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import pytest

from syncguard.core.events import Frame, SyncEvent
from syncguard.gate.verdicts import (
    Budget,
    StepCounts,
    Tally,
    Verdict,
    judge,
    per_step_verdict,
)

SOURCE = "def f(x):\n    a = x.item()\n    b = bool(x)\n    return a, b\n"
CALLERS = (Frame("drive.py", 10, "loop"), Frame("drive.py", 12, "loop"),
           Frame("drive.py", 14, "loop"))


@pytest.fixture
def src(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    (tmp_path / "m.py").write_text(SOURCE)
    monkeypatch.chdir(tmp_path)
    return str(tmp_path / "m.py")


def _ev(src: str, line: int, step: Optional[int], caller: int = 0, count: int = 1,
        allowed: bool = False, warmup: bool = False) -> SyncEvent:
    api = "Tensor.item" if line == 2 else "Tensor.__bool__"
    stack = (Frame(src, line, "f"), CALLERS[caller])
    return SyncEvent("scalar_read", api, None, src, line, "f", stack, step, "MainThread",
                     allowed=allowed, warmup=warmup, count=count)


def _reference_per_step(events: Sequence[SyncEvent], budget: int, scenario: str,
                        path: str) -> Verdict:
    """The per-step verdict as syncguard built it from every event before the tallies kept
    counts (the events of the steps over budget, judged)."""
    import dataclasses

    per: Dict[int, int] = {}
    for e in events:
        if not e.allowed and not e.warmup and e.step is not None:
            per[e.step] = per.get(e.step, 0) + e.count
    over = {i for i, n in per.items() if n > budget}
    worst = max(per.values(), default=0)
    v = judge([e for e in events if e.step in over], max_syncs=0, scenario=scenario, path=path)
    why = (f"{worst} hidden syncs in one step call, budget {budget} per step "
           f"({len(over)} of {len(per)} steps with syncs over it)")
    return dataclasses.replace(v, hidden=worst, max_syncs=budget, findings=tuple(
        dataclasses.replace(f, message=why) for f in v.findings))


def _shown(v: Verdict) -> tuple:
    """Everything a front end shows of a verdict: its text, each site's and finding's line,
    and what the CI formats read of their events (not ``step``, ``wait_us`` or ``thread``)."""
    def ev(e: SyncEvent) -> tuple:
        return (e.kind, e.api, e.op, e.filename, e.lineno, e.function, e.stack)

    return (v.scenario, v.path, v.hidden, v.max_syncs, v.failed, v.line(), v.row(), v.where(),
            v.test_line(), v.site_lines(failing_only=False), v.site_lines(),
            [(s.key, ev(s.event), s.count, s.steps, s.outside_steps) for s in v.sites],
            [(ev(f.event), f.count, f.steps, f.message) for f in v.findings])


def _plain(v: Verdict) -> tuple:
    """A verdict without the events that name its sites."""
    return (v.scenario, v.path, v.hidden, v.max_syncs, v.failed, v.line(),
            sorted((s.key, s.count, s.steps) for s in v.sites),
            sorted((f.count, tuple(f.steps), f.message) for f in v.findings))


def test_step_counts_keep_runs_not_steps() -> None:
    c = StepCounts()
    for step in range(10_000):  # one sync a step, fed one at a time
        c.add(step)
    assert c.runs() == [(0, 9_999, 1)] and len(c) == 1
    c = StepCounts()
    for step in range(1000):  # two a step, fed one at a time: the run splits and heals
        c.add(step)
        c.add(step)
    assert c.runs() == [(0, 999, 2)] and len(c) == 1
    c = StepCounts()
    for step, n in [(0, 1), (1, 1), (2, 3), (4, 1), (5, 1), (3, 2)]:  # a gap, out of order
        c.add(step, n)
    assert c.runs() == [(0, 1, 1), (2, 2, 3), (3, 3, 2), (4, 5, 1)]
    assert c.within([(1, 2), (5, 9)]) == [(1, 1, 1), (2, 2, 3), (5, 5, 1)]


def test_a_steady_loop_keeps_as_much_after_100_steps_as_after_10000(src: str) -> None:
    def tally(steps: int) -> Tally:
        t = Tally()
        for step in range(steps):
            t.add(_ev(src, 2, step))
            t.add(_ev(src, 3, step, caller=min(step // 40, 1)))  # two call paths in turn
            t.add(_ev(src, 3, step, allowed=True))
        t.add(_ev(src, 2, None))
        return t

    short, long = tally(100), tally(10_000)
    assert short.kept() == long.kept() == (3, 9) and long.events is None
    assert long.hidden == 20_001
    assert [(s.count, s.steps[:2], len(s.steps)) for s in long.sites()] == [
        (10_001, (0, 1), 10_000), (10_000, (0, 1), 10_000)]
    # a call path that changes every step keeps one event per path (bounded), its runs grow
    t = Tally().extend(_ev(src, 3, step, caller=step % 3) for step in range(300))
    assert t.kept()[0] == 3 and t.sites()[0].count == 300
    kept = Tally(keep_events=True).extend(_ev(src, 2, step) for step in range(50))
    assert kept.events is not None and len(kept.events) == 50


@pytest.mark.parametrize("seed", range(12))
def test_counts_give_the_verdicts_the_events_give(src: str, seed: int) -> None:
    """Random runs (sites, call paths, counts, warm-up, allowed, outside syncs, steps on two
    threads finishing out of order): every verdict from a Tally equals the one from the events,
    the per-step one equal to the way it was built from the events before."""
    rng = random.Random(seed)
    evs: List[SyncEvent] = []
    steps = list(range(rng.randint(1, 40)))
    if seed % 3 == 0:  # two threads: steps finish out of order
        for i in range(0, len(steps) - 1, 2):
            if rng.random() < 0.5:
                steps[i], steps[i + 1] = steps[i + 1], steps[i]
    for step in steps:
        for _ in range(rng.randint(0, 4)):
            evs.append(_ev(src, rng.choice((2, 3)), step, caller=rng.randrange(3),
                           count=rng.choice((1, 1, 2)), allowed=rng.random() < 0.2,
                           warmup=step < 2 and seed % 2 == 0))
        if rng.random() < 0.3:
            evs.append(_ev(src, 2, None))
    tally = Tally().extend(evs)
    for budget in range(4):
        got, want = per_step_verdict(tally, budget, "s", "p"), _reference_per_step(
            evs, budget, "s", "p")
        assert got == per_step_verdict(evs, budget, "s", "p")
        if steps == sorted(steps):
            assert _shown(got) == _shown(want)
        else:  # steps finished out of order: a site may be named by another of its paths
            assert _plain(got) == _plain(want)
        gate = Budget(budget, per_step=budget, outside=budget)
        assert gate.verdicts(tally, "s", "p") == gate.verdicts(evs, "s", "p")
        assert gate.outside_verdicts(tally, "s") == gate.outside_verdicts(evs, "s")
    assert judge(tally, max_syncs=0) == judge(evs, max_syncs=0)


def test_a_site_in_the_steps_over_budget_is_named_by_its_call_path_there(src: str) -> None:
    """The per-step verdict names a site by its first event in the steps over budget: here
    called from another line than the one it was first called from."""
    evs = [_ev(src, 3, 0, caller=0), _ev(src, 3, 1, caller=0),
           _ev(src, 3, 2, caller=1), _ev(src, 3, 2, caller=2)]
    v = per_step_verdict(Tally().extend(evs), 1, "s", "p")
    assert [s.event.stack[1].lineno for s in v.sites] == [12]
    assert [s.event.stack[1].lineno for s in judge(Tally().extend(evs)).sites] == [10]
    assert _shown(v) == _shown(_reference_per_step(evs, 1, "s", "p"))
