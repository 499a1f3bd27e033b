"""syncguard.driving.timing: the interleaved, repeated timed pass."""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Tuple

import pytest

from syncguard.driving import timing


class _Clock:
    """A fake clock: every step call advances it by the step's own cost."""

    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def _factories(clock: _Clock, log: List[Tuple[str, int]], cost: Dict[str, float],
               made: Dict[str, int]) -> Dict[str, Callable[[], Callable[[int], Any]]]:
    def factory(name: str) -> Callable[[], Callable[[int], Any]]:
        def make() -> Callable[[int], Any]:
            made[name] = made.get(name, 0) + 1
            state = {"next": 0}  # each path keeps its own state

            def step(i: int) -> Any:
                assert i == state["next"], "a path's steps run in order"
                state["next"] += 1
                log.append((name, i))
                clock.t += cost[name]
                return name, i

            return step
        return make
    return {n: factory(n) for n in cost}


def test_paths_advance_in_lockstep_with_rotating_order() -> None:
    clock, log, made = _Clock(), [], {}  # type: ignore[var-annotated]
    samples: List[timing.Sample] = []
    n = timing.interleaved(_factories(clock, log, {"a": 1.0, "b": 2.0}, made), steps=3,
                           rounds=2, on_sample=samples.append, clock=clock)
    assert n == 2 and made == {"a": 2, "b": 2}  # fresh state every round
    assert log == [("a", 0), ("b", 0), ("b", 1), ("a", 1), ("a", 2), ("b", 2),
                   ("b", 0), ("a", 0), ("a", 1), ("b", 1), ("b", 2), ("a", 2)]
    assert [(s.round, s.path, s.step, s.seconds) for s in samples[:2]] == [
        (0, "a", 0, 1.0), (0, "b", 0, 2.0)]
    assert samples[0].result == ("a", 0)


def test_auto_rounds_fill_the_budget() -> None:
    clock, log, made = _Clock(), [], {}  # type: ignore[var-annotated]
    # a round costs 10 s; budget 95 s: rounds 1-9 fit, a 10th would end at 100 s
    n = timing.interleaved(_factories(clock, log, {"a": 2.0, "b": 3.0}, made), steps=2,
                           budget_s=95.0, clock=clock)
    assert n == 9 and timing.MIN_ROUNDS == 8
    clock2, log2, made2 = _Clock(), [], {}  # type: ignore[var-annotated]
    # a tiny budget still runs the minimum number of rounds (each cut to min_steps)
    n = timing.interleaved(_factories(clock2, log2, {"a": 2.0}, made2), steps=2, budget_s=1.0,
                           clock=clock2)
    assert n == timing.MIN_ROUNDS and len(log2) == timing.MIN_ROUNDS


def test_slow_steps_get_short_rounds_from_fresh_state() -> None:
    # 2 s per step and path, 40 steps: one full round (160 s) would eat an 80 s budget 2x over;
    # instead every round stops after the step that reaches 80/8 = 10 s (3 steps), or after
    # min_steps when that is later, and a fresh round starts
    clock, log, made = _Clock(), [], {}  # type: ignore[var-annotated]
    samples: List[timing.Sample] = []
    n = timing.interleaved(_factories(clock, log, {"a": 2.0, "b": 2.0}, made), steps=40,
                           budget_s=80.0, clock=clock, on_sample=samples.append)
    assert n == timing.MIN_ROUNDS and made == {"a": n, "b": n}
    per_round = [sum(1 for s in samples if s.round == r and s.path == "a") for r in range(n)]
    assert per_round == [3] * n  # both paths ran the same steps: pairs stay whole
    assert [s.step for s in samples if s.round == 1 and s.path == "b"] == [0, 1, 2]
    clock2, log2, made2 = _Clock(), [], {}  # type: ignore[var-annotated]
    samples2: List[timing.Sample] = []
    timing.interleaved(_factories(clock2, log2, {"a": 2.0, "b": 2.0}, made2), steps=40,
                       budget_s=80.0, clock=clock2, on_sample=samples2.append, min_steps=5)
    assert max(s.step for s in samples2) == 4  # never shorter than min_steps
    # an explicit --repeat runs whole rounds
    clock3, log3, made3 = _Clock(), [], {}  # type: ignore[var-annotated]
    assert timing.interleaved(_factories(clock3, log3, {"a": 2.0}, made3), steps=40,
                              rounds=2, budget_s=1.0, clock=clock3) == 2
    assert len(log3) == 80


def test_rounds_must_be_positive() -> None:
    with pytest.raises(ValueError, match="rounds must be >= 1"):
        timing.interleaved({"a": lambda: (lambda i: None)}, steps=1, rounds=0)
