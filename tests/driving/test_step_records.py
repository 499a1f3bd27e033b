"""Step records built in one place (``StepRecord.from_events``) and warm-up decided in one
place (``steps.is_warmup``): the counted pass, the timed pass, ``exec`` and the guard agree on
which steps are warm-up and on what a step's record counts."""

from __future__ import annotations

from typing import Any, List, Tuple

import pytest
from _paths import TESTS

import syncguard
from syncguard.core import steps
from syncguard.core.events import SyncEvent
from syncguard.core.steps import is_warmup
from syncguard.results.format import TIMED_PASS, ExecStep, StepRecord
from syncguard.results.writer import ResultWriter

SMALL = str(TESTS / "data" / "scenarios" / "small.toml")


def _ev(step: int, count: int = 1, allowed: bool = False, wait_us: Any = None) -> SyncEvent:
    return SyncEvent("scalar_read", "Tensor.item", None, "m.py", 3, "f", (), step,
                     "MainThread", allowed=allowed, count=count, wait_us=wait_us)


class _Writer:
    def __init__(self) -> None:
        self.steps: List[Tuple[StepRecord, List[SyncEvent]]] = []

    def step(self, rec: StepRecord, evs: List[SyncEvent]) -> None:
        self.steps.append((rec, evs))

    def exec_step(self, st: ExecStep, evs: List[SyncEvent]) -> None:
        self.steps.append((st.record(), list(evs)))

    def exec_reads(self, st: ExecStep, reads: Any) -> None:  # as ResultWriter's
        ResultWriter.exec_reads(self, st, reads)  # type: ignore[arg-type]


def test_is_warmup() -> None:
    assert [is_warmup(i, 2) for i in range(4)] == [True, True, False, False]
    assert not is_warmup(0, 0)
    assert not is_warmup(None, 3)  # outside every step: never warm-up


def test_from_events_counts_the_steps_syncs() -> None:
    evs = [_ev(4, count=2, wait_us=30.0), _ev(4, wait_us=None), _ev(4, allowed=True,
                                                                    wait_us=500.0)]
    rec = StepRecord.from_events("sc", "legacy", "counted", 4, 2, evs, 1.5, batch_size=3,
                                 tokens=[1, 2, 3])
    assert (rec.warmup, rec.syncs, rec.allowed, rec.sync_wait_us) == (False, 3, 1, 30.0)
    assert (rec.latency_ms, rec.batch_size, rec.tokens, rec.labels) == (1.5, 3, [1, 2, 3], None)
    warm = StepRecord.from_events("sc", "legacy", "counted", 1, 2, [], 1.0)
    assert warm.warmup and warm.syncs == 0 and warm.sync_wait_us == 0.0
    timed = StepRecord.from_events("sc", "legacy", TIMED_PASS, 4, 2, [], 1.0, round=3)
    assert timed.sync_wait_us is None and timed.round == 3 and not timed.warmup


def test_counted_and_timed_passes_and_the_guard_agree_on_warmup() -> None:
    from syncguard.driving import devices, runner, scenario
    from syncguard.driving.timing import timed_pass

    sc = scenario.load(SMALL).with_steps(5, 2)
    target = devices.resolve_target("sim")
    seen: List[SyncEvent] = []
    recs = runner.run_pass(sc, "legacy", target, True, guard_kwargs={"on_event": seen.append})
    assert [r.warmup for r in recs] == [is_warmup(i, 2) for i in range(5)] == \
        [True, True, False, False, False]
    assert {(e.step, e.warmup) for e in seen} == {(r.step, r.warmup) for r in recs}

    w = _Writer()
    timed_pass(sc, ["legacy"], target, w, rounds=1)  # type: ignore[arg-type]
    assert [(r.step, r.warmup) for r, _ in w.steps] == [(r.step, r.warmup) for r in recs]


def test_exec_steps_are_warm_up_per_name_and_the_program_step_never() -> None:
    from syncguard.driving import devices
    from syncguard.execute.session import PROGRAM_STEP, ExecSession

    target = devices.resolve_target("cpu")
    w = _Writer()
    s = ExecSession("prog", w, target, warmup=1)  # type: ignore[arg-type]
    for name in ("a", "a", "b", "a"):
        st = s.begin(name)
        assert st is not None
        st.end(name)
    assert [(r.path, r.step, r.warmup, r.pass_) for r, _ in w.steps] == [
        ("a", 0, True, "exec"), ("a", 1, False, "exec"), ("b", 0, True, "exec"),
        ("a", 2, False, "exec")]
    w2 = _Writer()
    whole = ExecSession("prog", w2, target, warmup=3)  # type: ignore[arg-type]
    whole.finish()
    ((rec, _),) = w2.steps
    assert rec.path == PROGRAM_STEP and not rec.warmup


@pytest.mark.parametrize("warm", [True, False])
def test_exec_marks_the_events_of_a_warm_up_step(warm: bool) -> None:
    from syncguard.driving import devices
    from syncguard.execute.session import ExecSession

    w = _Writer()
    s = ExecSession("prog", w, devices.resolve_target("cpu"),  # type: ignore[arg-type]
                    warmup=1 if warm else 0)
    prev = steps.set_recorder(s)
    try:
        with syncguard.step("a"):
            s._on_event(_ev(0, count=2))
    finally:
        steps.set_recorder(prev)
    ((rec, evs),) = w.steps
    assert rec.warmup is warm and [e.warmup for e in evs] == [warm]
    assert rec.syncs == 2 and s.totals["a"].syncs == (0 if warm else 2)
