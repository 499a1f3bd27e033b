"""The time left counts down evenly: corrected at every step by the time the run has taken
against its plan, not only when a scenario ends (one scenario of a run that is most of it
showed "about 7.3 min left", then "about 21 s left" at its end)."""

from __future__ import annotations

from syncguard.driving.plan import REPORT_S, Eta, Plan, Probe, ScenarioPlan


def _plan() -> Plan:
    # a small scenario of 10 steps and a big one of 100, each planned at 1 s a counted step
    # (the counted factor on top), no timed rounds
    return Plan([ScenarioPlan("small", 1, 10, 0, True, 0, 0, Probe(10, 0, (1.0,))),
                 ScenarioPlan("big", 1, 100, 0, True, 0, 0, Probe(100, 0, (1.0,)))], 0.0, None)


def test_time_left_follows_the_machine_within_one_long_scenario() -> None:
    now = [0.0]
    eta = Eta(_plan(), clock=lambda: now[0])
    lefts = []
    for i in range(110):  # every step takes 0.5 s: the machine is faster than the probe said
        now[0] += 0.5
        eta.step("small" if i < 10 else "big")
        lefts.append(eta.left_s())
    true_left = [0.5 * (109 - i) + REPORT_S * eta.factor for i in range(110)]
    half = 60  # halfway through the big scenario
    assert abs(lefts[half] - true_left[half]) <= 0.1 * true_left[half], (lefts[half],
                                                                          true_left[half])
    # it counts down: never up from one step to the next at a steady rate
    assert all(b <= a + 1e-9 for a, b in zip(lefts[20:], lefts[21:]))


def test_time_left_is_the_plan_until_a_fifth_of_it_is_done() -> None:
    now = [0.0]
    eta = Eta(_plan(), clock=lambda: now[0])
    now[0] = 30.0  # the first step paid the run's start
    eta.step("small")
    plan_left = _plan().left_s({"small": 1})
    # a step is 0.9% of the plan: the measured factor counts for 4.5% of the estimate
    assert plan_left < eta.left_s() < plan_left * 1.2
