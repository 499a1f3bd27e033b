"""``syncguard run``'s plan: a short probe of the machine, then at least 30 timed steps per path
in at least 8 rounds, whole rounds and more rounds as fit --budget, and the expected total
printed at the start (syncguard.driving.plan)."""

from __future__ import annotations

import json
import os
from typing import Dict

import pytest
from _paths import TESTS

from syncguard.cli import main
from syncguard.driving import plan as planning
from syncguard.driving.devices import resolve_target
from syncguard.driving.scenario import load as load_scenario
from syncguard.results import loader
from syncguard.results.stats import MIN_CLAIM_SAMPLES

DATA = os.path.join(str(TESTS), "data", "scenarios")
SMALL, SMALL2 = os.path.join(DATA, "small.toml"), os.path.join(DATA, "small_budget.toml")


class _Sc:
    """What the plan reads of a scenario."""

    def __init__(self, name: str, steps: int, warmup: int) -> None:
        self.name, self.steps, self.warmup = name, steps, warmup


def _plan(budget: float, **costs: float) -> planning.Plan:
    """Scenarios named ``slow`` (50 steps, warm-up 3) and ``fast`` (24 steps, warm-up 2) with
    3 paths each, whose steps cost ``costs[name]`` seconds."""
    shape = {"slow": (50, 3), "fast": (24, 2), "short": (3, 1)}
    scs = [_Sc(n, *shape[n]) for n in costs]
    probes: Dict[str, planning.Probe] = {
        s.name: planning.Probe(s.steps, s.warmup, (costs[s.name],) * (s.warmup + 1))
        for s in scs}
    return planning.make_plan(scs, lambda sc: ["a", "b", "c"], probes,  # type: ignore[arg-type]
                              budget_s=budget)


def test_a_slow_scenario_gets_30_timed_steps_per_path_in_short_rounds_never_fewer() -> None:
    # 1 s per step: the counted pass alone (3 x 50 steps) is over the budget; the timed pass
    # still gives every path 8 rounds of the warm-up and 4 steps: 32 timed steps
    p = _plan(10.0, slow=1.0).get("slow")
    assert p is not None
    assert (p.rounds, p.round_steps, p.samples) == (8, 3 + 4, 32)
    assert p.samples >= MIN_CLAIM_SAMPLES == planning.MIN_TIMED_SAMPLES == 30


def test_the_budget_left_buys_whole_rounds_then_more_rounds() -> None:
    # fast: a whole round of 3 paths x 24 steps costs 0.72 s at 10 ms a step, its counted
    # pass 0.83 s, the reports 3 s: 9 whole rounds end at 10.3 s, a 10th would not fit 10.5 s
    tight = _plan(10.5, fast=0.01).get("fast")
    roomy = _plan(1000.0, fast=0.01).get("fast")
    assert tight is not None and roomy is not None
    assert tight.whole and tight.rounds == 9
    assert roomy.whole and roomy.rounds == 10  # MAX_ROUNDS: no more however long the budget
    # a slow scenario beside it: the fast one gets its whole rounds first, the slow one as
    # many steps per round as the rest of the budget allows (here, more than the minimum)
    plan = _plan(220.0, slow=0.5, fast=0.01)
    slow, fast = plan.get("slow"), plan.get("fast")
    assert slow is not None and fast is not None
    assert fast.whole and 3 + 4 < slow.round_steps < 50 and slow.rounds == 8
    assert plan.expected_s <= 220.0


def test_past_the_budget_cheap_scenarios_still_get_whole_rounds() -> None:
    # the slow scenario's minimum alone is 340 s, far over 10 s: the fast one's whole rounds
    # (10 of them, 3 x 24 steps of 1 ms each) fit the 5% headroom; the slow one stays minimal
    plan = _plan(10.0, slow=1.0, fast=0.001)
    slow, fast = plan.get("slow"), plan.get("fast")
    assert slow is not None and fast is not None
    assert (slow.rounds, slow.round_steps) == (8, 7)
    assert fast.whole and fast.rounds == 10
    assert plan.expected_s <= 1.05 * (plan.expected_s - fast.timed_s + 8 * 3 * 6 * 0.001)


def test_few_steps_after_the_warm_up_take_more_rounds() -> None:
    p = _plan(1.0, short=0.001).get("short")  # 2 steps after the warm-up: 15 whole rounds
    assert p is not None and (p.rounds, p.round_steps, p.samples) == (15, 3, 30)


def test_the_expected_time_is_the_probes_times_over_the_plan() -> None:
    plan = _plan(10.0, slow=1.0)
    p = plan.get("slow")
    assert p is not None
    counted = 3 * 50 * 1.0 * planning.COUNTED_FACTOR
    timed = 8 * 3 * 7 * 1.0
    assert plan.expected_s == pytest.approx(counted + timed + planning.REPORT_S)
    assert plan.total_steps == 3 * 50 + 8 * 3 * 7
    # --repeat: whole rounds, no budget
    scs = [_Sc("slow", 50, 3)]
    rep = planning.make_plan(scs, lambda sc: ["a"], {}, repeat=2)  # type: ignore[arg-type]
    assert rep.budget_s is None and [(s.rounds, s.round_steps) for s in rep.scenarios] == [(2, 50)]


def test_a_step_not_probed_costs_the_median_of_those_after_the_warm_up() -> None:
    p = planning.Probe(10, 1, (5.0, 1.0, 2.0, 100.0))  # a moment of contention: 100 s
    assert p.typical_s == 2.0
    assert p.cost(10) == 5.0 + 9 * 2.0  # the warm-up step as probed, the rest at the median


def test_the_probe_times_the_warm_up_then_steps_until_its_limit() -> None:
    sc = load_scenario(SMALL)
    target = resolve_target("sim")
    p = planning.probe_scenario(sc, "flag", target, limit_s=0.0)
    assert len(p.step_s) == sc.warmup + planning.PROBE_MIN_STEPS
    assert p.typical_s > 0 and p.setup_s > 0
    whole = planning.probe_scenario(sc, "flag", target, limit_s=60.0)
    assert len(whole.step_s) == sc.steps
    broken = planning.probe_scenario(sc, "no.such.module:Subject", target)
    assert broken.step_s == ()  # left for the counted pass to report


def test_a_probed_step_is_its_cpu_time_at_the_machines_load(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import itertools

    import torch

    sc = load_scenario(SMALL)
    target = resolve_target("sim")
    before = torch.get_num_threads()
    try:
        for threads, want in ((1, 0.3), (2, 0.4)):
            torch.set_num_threads(threads)
            wall = itertools.count(0.0, 0.4)  # every step: 0.4 s of wall time...
            cpu = itertools.count(0.0, 0.1)  # ...and 0.1 s of this thread's CPU time
            monkeypatch.setattr(planning.time, "thread_time", cpu.__next__)
            p = planning.probe_scenario(sc, "flag", target, clock=wall.__next__,
                                        limit_s=0.0, slowdown=3.0)
            # one torch thread: the kernels run on this thread alone, its CPU time at the
            # machine's load (3x); else the wall time
            assert p.step_s and all(x == pytest.approx(want) for x in p.step_s), threads

    finally:
        torch.set_num_threads(before)


def test_the_load_slowdown_shares_the_cores() -> None:
    assert planning.load_slowdown(0.4, 2) == 1.0  # an idle machine: the CPU time
    assert planning.load_slowdown(5.5, 2) == pytest.approx(3.25)  # 5.5 others, 2 cores
    assert planning.load_slowdown(3.0, 16) == 1.0
    assert planning.load_slowdown(100.0, 2) == planning.MAX_SLOWDOWN


def test_run_prints_the_expected_total_and_gives_every_path_30_timed_steps(tmp_path, capsys):
    out = str(tmp_path / "o")
    rc = main(["run", SMALL, SMALL2, "--device", "sim", "--out", out, "--steps", "3",
               "--warmup", "1", "--paths", "legacy,flag", "--budget", "1"])
    assert rc == 0
    err = capsys.readouterr().err
    first = next(ln for ln in err.splitlines() if ln.startswith("syncguard: "))
    assert first.startswith("syncguard: 2 scenarios, 4 scenario paths: expect about "), first
    assert "probe of this machine" in first and "at least 30 timed steps per path" in first
    # the minimum evidence over the budget is said as information, not as an error
    assert first.endswith("at least 30 timed steps per path (the least a latency verdict "
                          "needs; on this machine it takes longer than --budget 1 s)"), first
    assert "does not" not in first
    res = loader.load(os.path.join(out, "result.jsonl"))
    with open(os.path.join(out, "result.jsonl"), encoding="utf-8") as f:
        header = json.loads(f.readline())
    for sc in ("small", "small_budget"):
        for path in ("legacy", "flag"):
            timed = [s for s in res.steps if s.pass_ == "timed" and s.scenario == sc
                     and s.path == path and not s.warmup]
            assert len(timed) == header["plan"]["scenarios"][sc]["samples"] >= 30
            assert len({s.round for s in timed}) == 15  # 2 steps a round after the warm-up


def test_repeat_runs_whole_rounds(tmp_path, capsys):
    rc = main(["run", SMALL, "--device", "sim", "--out", str(tmp_path / "o"), "--steps", "2",
               "--warmup", "0", "--paths", "flag", "--repeat", "1"])
    assert rc == 0
    assert "1 whole timed round(s) each (--repeat)" in capsys.readouterr().err


def test_a_run_on_the_simulated_device_uses_one_torch_thread_and_restores_them(
        tmp_path, capsys):
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        for i, (extra, want) in enumerate((((), 1), (("--threads", "0"), 2),
                                           (("--threads", "2"), 2))):
            out = str(tmp_path / f"o{i}")
            rc = main(["run", SMALL, "--device", "sim", "--out", out, "--steps", "2",
                       "--warmup", "0", "--paths", "flag", "--repeat", "1", *extra])
            assert rc == 0, capsys.readouterr().err
            with open(os.path.join(out, "result.jsonl"), encoding="utf-8") as f:
                header = json.loads(f.readline())
            assert header["machine"]["torch_threads"] == want, extra
            assert torch.get_num_threads() == 2  # the caller's setting, restored
        rc = main(["run", SMALL, "--device", "sim", "--out", str(tmp_path / "bad"),
                   "--threads", "-1"])
        assert rc == 2 and "--threads: must be >= 0" in capsys.readouterr().err
    finally:
        torch.set_num_threads(before)
