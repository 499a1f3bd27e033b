"""The run's plan: a short probe of the machine at hand, then the timed rounds of each scenario
and the expected total time, said at the start of the run.

The probe (:func:`probe`) runs each scenario's first path plainly (no interceptors) for its
warm-up and then at least 3 steps, until :data:`PROBE_SCENARIO_S` seconds have gone or the
scenario ends, timing every step (the median after the warm-up stands for the steps not
probed), the decode loop's set-up and a garbage collection. :func:`make_plan` turns those
times into each scenario's timed pass (:mod:`syncguard.driving.timing`):

- Every path gets at least :data:`MIN_TIMED_SAMPLES` timed steps after the warm-up (a latency
  claim needs them: :data:`syncguard.results.stats.MIN_CLAIM_SAMPLES`) in at least
  :data:`~syncguard.driving.timing.MIN_ROUNDS` rounds, each from fresh state: a round of a slow
  scenario runs its warm-up and ``ceil(30 / 8) = 4`` steps, not the whole scenario.
- What is left of the time budget (``--budget``, default :data:`DEFAULT_RUN_BUDGET_S`) after the
  counted passes and those minimum rounds goes first to whole rounds (the scenario's every step
  and event, cheapest scenario first; a scenario that does not fit gets as many steps per round
  as fit), then to more rounds, up to :data:`~syncguard.driving.timing.MAX_ROUNDS`. When the
  minimum alone overruns the budget, :data:`UPGRADE_HEADROOM` of it is spent that way.

The plan is fixed before the first step and recorded in the result header (``plan``): a
machine that gets busier during the run takes longer than announced rather than gathering less
evidence. Every scenario's minimum is the same on any machine; what the budget buys beyond it
follows the probe, so it may differ between two runs. ``--repeat N`` runs N whole rounds
instead.
"""

from __future__ import annotations

import dataclasses
import gc
import math
import time
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Mapping, Optional, Sequence

from ..devicenames import HOST_KERNEL_KINDS
from ..results.stats import MIN_CLAIM_SAMPLES
from .timing import MAX_ROUNDS, MIN_ROUNDS

if TYPE_CHECKING:  # pragma: no cover
    from .devices import Target
    from .scenario import Scenario

#: The whole run's default time budget (s) when ``--repeat`` is not given: what the plan aims
#: at; the minimum evidence (:data:`MIN_TIMED_SAMPLES` per path) is never cut to fit it.
DEFAULT_RUN_BUDGET_S = 180.0
#: Timed steps after the warm-up each path gets at least (when the scenario has them).
MIN_TIMED_SAMPLES = MIN_CLAIM_SAMPLES
#: At most this many rounds to reach :data:`MIN_TIMED_SAMPLES` when a scenario has very few
#: steps after its warm-up.
MAX_SAMPLE_ROUNDS = 30
#: The probe runs a scenario past its warm-up until this many seconds have gone (s), and at
#: least this many steps (their median is the scenario's step time).
PROBE_SCENARIO_S, PROBE_MIN_STEPS = 0.4, 3
#: A counted step's cost relative to a plain one (the guard's interceptors and, on the
#: simulated device, the modeled timeline): measured 1.0 to 1.3 over the case study.
COUNTED_FACTOR = 1.15
#: When the minimum evidence alone takes longer than the budget, whole rounds and more rounds
#: are still bought, cheapest first, for up to this fraction of it.
UPGRADE_HEADROOM = 0.05
#: The reports' writing at the end of a run (s; about 2 s idle, 4 s at load 6 on 2 cores).
REPORT_S = 3.0


@dataclasses.dataclass(frozen=True)
class Probe:
    """One scenario's probe: ``step_s[i]``, the seconds step ``i`` of its first path took
    (the steps probed; see :func:`probe_scenario`), ``setup_s`` the decode loop's set-up,
    ``gc_s`` a garbage collection."""

    steps: int
    warmup: int
    step_s: Sequence[float]
    setup_s: float = 0.0
    gc_s: float = 0.0

    @property
    def typical_s(self) -> float:
        """Seconds of a step not probed: the median of the probed steps after the warm-up (of
        all probed steps when none is past it; a moment of contention moves it little)."""
        after = sorted(self.step_s[self.warmup:]) or sorted(self.step_s)
        if not after:
            return 0.0
        mid = len(after) // 2
        return after[mid] if len(after) % 2 else (after[mid - 1] + after[mid]) / 2

    def cost(self, k: int) -> float:
        """Seconds for the first ``k`` steps of one path (the warm-up steps as probed, the
        rest at :attr:`typical_s`)."""
        k = max(0, min(k, self.steps))
        warm = list(self.step_s[:min(k, self.warmup)])
        return sum(warm) + (k - len(warm)) * self.typical_s


@dataclasses.dataclass(frozen=True)
class ScenarioPlan:
    """What one scenario runs: its counted pass (``counted``), then ``rounds`` timed rounds of
    ``round_steps`` steps (warm-up included) on each of ``paths`` paths."""

    name: str
    paths: int
    steps: int
    warmup: int
    counted: bool
    rounds: int
    round_steps: int
    probe: Probe

    @property
    def samples(self) -> int:
        """Timed steps after the warm-up per path."""
        return self.rounds * max(0, self.round_steps - self.warmup)

    @property
    def whole(self) -> bool:
        """Whether each round runs every step of the scenario."""
        return self.round_steps >= self.steps

    @property
    def counted_s(self) -> float:
        if not self.counted:
            return 0.0
        return self.paths * (self.probe.setup_s + self.probe.cost(self.steps) * COUNTED_FACTOR)

    @property
    def timed_s(self) -> float:
        return self.rounds * round_s(self.probe, self.paths, self.round_steps)

    @property
    def total_steps(self) -> int:
        """Steps the scenario runs (progress): counted, then timed."""
        return self.paths * (self.steps * int(self.counted) + self.rounds * self.round_steps)


def round_s(p: Probe, paths: int, round_steps: int) -> float:
    """Seconds of one timed round: a collection, each path's set-up and ``round_steps``
    steps."""
    return p.gc_s + paths * (p.setup_s + p.cost(round_steps))


@dataclasses.dataclass(frozen=True)
class Plan:
    """The run's plan: one :class:`ScenarioPlan` per scenario, the probe's own time, and the
    budget it was fitted to (None: ``--repeat`` or no timed pass)."""

    scenarios: List[ScenarioPlan]
    probe_s: float
    budget_s: Optional[float]

    def get(self, name: str) -> Optional[ScenarioPlan]:
        return next((s for s in self.scenarios if s.name == name), None)

    @property
    def expected_s(self) -> float:
        """Seconds the run is expected to take from the end of the probe: counted passes,
        timed rounds and the reports."""
        return sum(s.counted_s + s.timed_s for s in self.scenarios) + REPORT_S

    @property
    def total_steps(self) -> int:
        return sum(s.total_steps for s in self.scenarios)

    def record(self) -> Dict[str, Any]:
        """The result header's ``plan``: what was planned, and from what."""
        return {"budget_s": self.budget_s, "probe_s": round(self.probe_s, 3),
                "expected_s": round(self.expected_s, 1),
                "scenarios": {s.name: {"rounds": s.rounds, "round_steps": s.round_steps,
                                       "samples": s.samples,
                                       "step_ms": round(s.probe.typical_s * 1e3, 3)}
                              for s in self.scenarios}}

    def left_s(self, done: Mapping[str, int]) -> float:
        """The plan's seconds still to go, the reports included, with ``done[name]`` steps of
        each scenario finished."""
        return self.expected_s - sum((s.counted_s + s.timed_s)
                                     * min(1.0, done.get(s.name, 0) / s.total_steps)
                                     for s in self.scenarios if s.total_steps)

    @property
    def min_samples(self) -> int:
        """The fewest timed steps per path of any scenario with a timed pass (0: none)."""
        return min((s.samples for s in self.scenarios if s.rounds), default=0)


class Eta:
    """The time a run of ``plan`` has left as its steps finish (:meth:`step`): the plan's time
    for what is left, scaled by how long the run has taken against the plan's time for what is
    done, at every step (a machine busier than at the probe, or less busy), not only when a
    scenario ends: one slow scenario that is most of the run counts down evenly instead of
    jumping at its end. The scale comes in gradually over the first fifth of the plan (the
    first steps also pay the run's own start) and never exceeds 4x either way."""

    def __init__(self, plan: Plan, clock: Callable[[], float] = time.perf_counter) -> None:
        self.plan, self.clock = plan, clock
        self.start = clock()
        self.done: Dict[str, int] = {}
        self.finished: List[ScenarioPlan] = []

    def step(self, scenario: str) -> Optional[ScenarioPlan]:
        """Count a finished step of ``scenario``; its plan when that was its last step."""
        k = self.done[scenario] = self.done.get(scenario, 0) + 1
        sp = self.plan.get(scenario)
        if sp is None or k != sp.total_steps:
            return None
        self.finished.append(sp)
        return sp

    @property
    def factor(self) -> float:
        """How much longer (above 1) or shorter the run is taking than planned, so far."""
        work = self.plan.expected_s - REPORT_S
        planned_done = self.plan.expected_s - self.plan.left_s(self.done)
        if work <= 0 or planned_done <= 0:
            return 1.0
        measured = min(4.0, max(0.25, (self.clock() - self.start) / planned_done))
        weight = min(1.0, planned_done / (0.2 * work))
        return weight * measured + (1.0 - weight)

    def left_s(self) -> float:
        return max(0.0, self.plan.left_s(self.done) * self.factor)


def load_slowdown(load: Optional[float] = None, cores: Optional[int] = None) -> float:
    """How many times its CPU time a step on one thread takes on this machine as busy as it is
    now: the runnable jobs (the 1-minute load average, ``load``) share the ``cores`` with it,
    so ``(load + 1) / cores``, at least 1 and at most :data:`MAX_SLOWDOWN`. On a shared 2-core
    machine a run of 232 CPU-seconds took 804 s at load 4.4 to 8.8 (3.5x; this gives 3.3x at
    its start's 5.5) and one of 213 CPU-seconds 261 s at load 0.4 rising to 3 (1.2x; 1x)."""
    import os

    if load is None:
        try:
            load = os.getloadavg()[0]
        except (OSError, AttributeError):  # no load average (Windows): the idle machine
            return 1.0
    if cores is None:
        try:
            cores = len(os.sched_getaffinity(0))  # type: ignore[attr-defined]
        except (AttributeError, OSError):
            cores = os.cpu_count() or 1
    return min(MAX_SLOWDOWN, max(1.0, (load + 1.0) / max(1, cores)))


#: the most :func:`load_slowdown` says (a load average that high is mostly waiting, not work)
MAX_SLOWDOWN = 8.0


def probe_scenario(sc: Scenario, path: str, target: Target,
                   clock: Callable[[], float] = time.perf_counter,
                   limit_s: float = PROBE_SCENARIO_S, slowdown: float = 1.0) -> Probe:
    """Time ``sc`` on ``path`` (no interceptors): its set-up, its warm-up steps, then steps
    until ``limit_s`` seconds have gone since the warm-up ended (at least
    :data:`PROBE_MIN_STEPS` of them) or the scenario ends. A subject that fails is left for the
    run to report: its probe is empty.

    A step's time is its wall time; where the kernels run on this thread alone (the simulated
    npu or the CPU, one torch thread), the thread's CPU time times ``slowdown``
    (:func:`load_slowdown`: how busy the machine is, from its load average): the wall time of
    a few steps is the machine as busy as during those seconds (on a shared 2-core machine a
    460 ms step took 680 to 1200 ms while other jobs held the cores, then 455 ms through a
    whole run), and a probe that takes the geometric mean of the two announced 6.3 min for a
    run that took 13.4 min at load 4.4 to 8.8, and 7.9 min for one that took 5.3."""
    import torch

    from .decode import DecodeLoop  # torch, as above: a plan's record never needs it

    own_cpu = target.kind in HOST_KERNEL_KINDS and torch.get_num_threads() == 1

    times: List[float] = []
    t0 = clock()
    gc.collect()
    gc_s = clock() - t0
    setup_s = 0.0
    try:
        torch.manual_seed(sc.seed)
        t0 = clock()
        loop = DecodeLoop(sc, path, target)
        setup_s = clock() - t0
        t_warm: Optional[float] = None
        for step in range(sc.steps):
            if step >= sc.warmup:
                if t_warm is None:
                    t_warm = clock()
                elif step - sc.warmup >= PROBE_MIN_STEPS and clock() - t_warm >= limit_s:
                    break
            t0, c0 = clock(), time.thread_time()
            loop.run_step(step)
            wall, cpu = clock() - t0, time.thread_time() - c0
            times.append(cpu * slowdown if own_cpu and cpu > 0.0 else wall)
    except Exception:  # the counted pass says what is wrong, with its own message
        pass
    return Probe(sc.steps, sc.warmup, tuple(times), setup_s, gc_s)


def probe(scenarios: Sequence[Scenario], paths: Callable[[Scenario], List[str]],
          target: Target) -> Dict[str, Probe]:
    """:func:`probe_scenario` of every scenario on its first path, at the machine's
    :func:`load_slowdown` as the probe starts."""
    out: Dict[str, Probe] = {}
    slowdown = load_slowdown()
    for sc in scenarios:
        ps = paths(sc)
        out[sc.name] = (probe_scenario(sc, ps[0], target, slowdown=slowdown) if ps
                        else Probe(sc.steps, sc.warmup, ()))
    return out


def _minimum(steps: int, warmup: int) -> tuple:
    """(rounds, steps per round) giving every path :data:`MIN_TIMED_SAMPLES` timed steps in
    at least MIN_ROUNDS rounds, each as short as that allows."""
    after = steps - warmup
    if after <= 0:  # nothing after the warm-up: whole rounds, the minimum number of them
        return MIN_ROUNDS, steps
    per_round = math.ceil(MIN_TIMED_SAMPLES / MIN_ROUNDS)
    if after >= per_round:
        return MIN_ROUNDS, warmup + per_round
    return min(MAX_SAMPLE_ROUNDS, max(MIN_ROUNDS, math.ceil(MIN_TIMED_SAMPLES / after))), steps


def make_plan(scenarios: Sequence[Scenario], paths: Callable[[Scenario], List[str]],
              probes: Dict[str, Probe], *, counted: bool = True, timed: bool = True,
              repeat: Optional[int] = None, budget_s: Optional[float] = None,
              probe_s: float = 0.0) -> Plan:
    """The plan (see the module's docstring) from the probes' times: ``repeat`` whole rounds
    each when given, else the minimum evidence, then whole rounds and more rounds while the
    expected total fits ``budget_s`` (default :data:`DEFAULT_RUN_BUDGET_S`)."""
    plans: List[ScenarioPlan] = []
    for sc in scenarios:
        p = probes.get(sc.name) or Probe(sc.steps, sc.warmup, ())
        rounds, length = (0, 0)
        if timed:
            rounds, length = (repeat, sc.steps) if repeat is not None else \
                _minimum(sc.steps, sc.warmup)
        plans.append(ScenarioPlan(sc.name, len(paths(sc)), sc.steps, sc.warmup, counted,
                                  rounds, length, p))
    if not timed or repeat is not None:
        return Plan(plans, probe_s, None)
    budget = DEFAULT_RUN_BUDGET_S if budget_s is None else budget_s
    # when the minimum alone overruns the budget, the cheap scenarios still get their whole
    # rounds: a few seconds more, where a 2 ms step's median over 4 steps moves with one
    # moment of contention
    limit = max(budget, (probe_s + Plan(plans, probe_s, budget).expected_s)
                * (1.0 + UPGRADE_HEADROOM))

    def left() -> float:
        return limit - probe_s - Plan(plans, probe_s, budget).expected_s

    # 1. whole rounds, cheapest scenario first; the first that does not fit: as many steps
    # per round as fit
    def extra_whole(s: ScenarioPlan) -> float:
        return s.rounds * (round_s(s.probe, s.paths, s.steps)
                           - round_s(s.probe, s.paths, s.round_steps))

    for i in sorted(range(len(plans)), key=lambda i: extra_whole(plans[i])):
        s = plans[i]
        if s.whole:
            continue
        if extra_whole(s) <= left():
            plans[i] = dataclasses.replace(s, round_steps=s.steps)
            continue
        length = s.round_steps
        while length < s.steps and s.rounds * (round_s(s.probe, s.paths, length + 1)
                                               - round_s(s.probe, s.paths, s.round_steps)) \
                <= left():
            length += 1
        plans[i] = dataclasses.replace(s, round_steps=length)
    # 2. more whole rounds, up to MAX_ROUNDS, one round at a time across the scenarios
    grew = True
    while grew:
        grew = False
        for i in sorted(range(len(plans)), key=lambda i: plans[i].timed_s):
            s = plans[i]
            if s.whole and s.rounds < MAX_ROUNDS and \
                    round_s(s.probe, s.paths, s.round_steps) <= left():
                plans[i] = dataclasses.replace(s, rounds=s.rounds + 1)
                grew = True
    return Plan(plans, probe_s, budget)


def plan_run(scenarios: Sequence[Scenario], paths: Callable[[Scenario], List[str]],
             target: Target, *, counted: bool = True, timed: bool = True,
             repeat: Optional[int] = None, budget_s: Optional[float] = None,
             clock: Callable[[], float] = time.perf_counter) -> Plan:
    """Probe the machine (:func:`probe`; not for counted passes alone, a quick look) and
    :func:`make_plan`."""
    t0 = clock()
    probes = probe(scenarios, paths, target) if timed else {}  # --no-timed: a quick look
    return make_plan(scenarios, paths, probes, counted=counted, timed=timed, repeat=repeat,
                     budget_s=budget_s, probe_s=clock() - t0)
