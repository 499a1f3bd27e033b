"""The timed pass: paths interleaved step by step, repeated in rounds, like a paired benchmark.

Each path keeps its own state (its decode loop, batch and random generator); all paths
advance in lockstep: step 0 of every path, then step 1 of every path, and so on, the order
rotating from step to step so no path always runs first (or right after the other). A slow
moment of a shared machine then lands on both sides of a (round, step) pair, which is what
the paired statistics of :mod:`syncguard.results.stats` exploit.

:func:`interleaved` is generic (a mapping name -> factory of a step callable);
:func:`timed_pass` wires it to the scenario decode loops and the result writer.
"""

from __future__ import annotations

import dataclasses
import gc
import os
import time
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Mapping, Optional

from .._paths import profiler_file
from ..devicenames import HARDWARE
from ..process import signals as _signals
from ..process.atomic import write_text
from ..results.format import TIMED_PASS, StepRecord

if TYPE_CHECKING:  # pragma: no cover
    from ..results.writer import ResultWriter
    from .decode import Progress
    from .devices import Target
    from .scenario import Scenario

StepFn = Callable[[int], Any]

#: Default time budget (seconds) of the timed pass of one scenario when ``--repeat`` is not
#: given: rounds are added while the next one is expected to fit.
DEFAULT_BUDGET_S = 20.0
#: Without ``--repeat``: at least this many rounds (the unit of evidence of every latency
#: verdict, :func:`syncguard.results.stats.round_ratio`), more while the next one is expected to fit
#: in the budget, at most MAX_ROUNDS. When full rounds do not fit MIN_ROUNDS times, rounds are
#: cut short: each gets ``budget / MIN_ROUNDS`` and ends after the step that reaches it (never
#: before ``min_steps``), so slow scenarios still get MIN_ROUNDS rounds from fresh state.
MIN_ROUNDS = 8
MAX_ROUNDS = 10


@dataclasses.dataclass(frozen=True)
class Sample:
    """One timed step: ``seconds`` of host wall time around the path's step call, and what
    the step returned."""

    round: int
    path: str
    step: int
    seconds: float
    result: Any


def _order(names: List[str], k: int) -> List[str]:
    k %= len(names)
    return names[k:] + names[:k]


def interleaved(factories: Mapping[str, Callable[[], StepFn]], steps: int,
                rounds: Optional[int] = None, budget_s: Optional[float] = None,
                on_sample: Optional[Callable[[Sample], None]] = None,
                clock: Callable[[], float] = time.perf_counter, min_steps: int = 1) -> int:
    """Run every path's steps in lockstep, ``rounds`` times (each round from fresh state made
    by the path's factory). With ``rounds=None``: at least :data:`MIN_ROUNDS`, then more
    (up to :data:`MAX_ROUNDS`) while another round is expected to fit in ``budget_s``
    (default :data:`DEFAULT_BUDGET_S`); a round then ends early, after the first step (at
    least ``min_steps`` steps) that takes it past ``budget_s / MIN_ROUNDS``. Only the step
    call itself is timed; ``on_sample`` runs outside the timed region. Returns the rounds
    run."""
    names = list(factories)
    if not names or steps < 1:
        return 0
    if rounds is not None and rounds < 1:
        raise ValueError(f"rounds must be >= 1, got {rounds}")
    budget = DEFAULT_BUDGET_S if budget_s is None else budget_s
    t_start = clock()
    done = 0
    while True:
        if rounds is not None and done >= rounds:
            break
        if rounds is None and done >= MIN_ROUNDS:
            per_round = (clock() - t_start) / done
            if done >= MAX_ROUNDS or clock() - t_start + per_round > budget:
                break
        gc.collect()  # a collection owed by the previous round is not this round's time
        fns: Dict[str, StepFn] = {n: factories[n]() for n in names}
        t_round = clock()
        for step in range(steps):
            for name in _order(names, done + step):
                t0 = clock()
                res = fns[name](step)
                dt = clock() - t0
                if on_sample is not None:
                    on_sample(Sample(done, name, step, dt, res))
            if rounds is None and step + 1 >= min_steps and \
                    clock() - t_round >= budget / MIN_ROUNDS:
                break  # a short round: every path has run the same steps
        done += 1
    return done


class _RngSlot:
    """One path's random generator states (CPU, plus the device's own where it has one):
    swapped in before its step and saved after, so interleaving does not change which
    random numbers a path draws."""

    def __init__(self, target: Target) -> None:
        import torch

        mod = {"cuda": torch.cuda, "npu": getattr(torch, "npu", None)}.get(target.kind)
        self.dev = mod if mod is not None and hasattr(mod, "get_rng_state") else None
        self.save()

    def save(self) -> None:
        import torch

        self.cpu = torch.get_rng_state()
        self.dstate = self.dev.get_rng_state() if self.dev is not None else None

    def load(self) -> None:
        import torch

        torch.set_rng_state(self.cpu)
        if self.dev is not None:
            self.dev.set_rng_state(self.dstate)


def timed_pass(sc: Scenario, paths: List[str], target: Target,
               writer: Optional[ResultWriter] = None, progress: Optional[Progress] = None,
               rounds: Optional[int] = None, budget_s: Optional[float] = None,
               round_steps: Optional[int] = None) -> int:
    """The timed pass of ``sc`` over ``paths`` (no interceptors), interleaved and repeated
    (see :func:`interleaved`); one ``timed`` :class:`StepRecord` per (round, path, step),
    with ``round`` set, streamed to ``writer``. ``round_steps``: each round runs the first
    that many steps (the run's plan, :mod:`syncguard.driving.plan`; default all of them).
    Returns the rounds run."""
    import torch

    from .decode import DecodeLoop, DeviceTimer, label_fields  # torch: a timed pass only

    timer = DeviceTimer(target)
    loops: Dict[str, Any] = {}

    def factory(path: str) -> Callable[[], StepFn]:
        def make() -> StepFn:
            torch.manual_seed(sc.seed)
            loop = DecodeLoop(sc, path, target)
            loops[path] = loop
            slot = _RngSlot(target)

            def step(i: int) -> Any:
                slot.load()
                h = timer.start()
                out = loop.run_step(i)
                timer.stop(h)
                slot.save()
                return out, h

            return step
        return make

    def on_sample(s: Sample) -> None:
        (tokens, labels), h = s.result
        rec = StepRecord.from_events(
            sc.name, loops[s.path].name, TIMED_PASS, s.step, sc.warmup, [], s.seconds * 1e3,
            batch_size=len(tokens), device_ms=timer.elapsed(h), tokens=tokens, round=s.round,
            **label_fields(labels),
        )
        if writer is not None:
            writer.step(rec, [])
        if progress is not None:
            progress(sc.name, s.path, "timed", s.step + 1, sc.steps)
        _signals.check()  # a Ctrl-C the sampler swallowed still ends the run here

    steps = sc.steps if round_steps is None else max(0, min(round_steps, sc.steps))
    # a short round still has one measured step after the warm-up
    return interleaved({p: factory(p) for p in paths}, steps, rounds, budget_s, on_sample,
                       min_steps=min(steps, sc.warmup + 1))


#: Steps after the warm-up that :func:`profiled_pass` records per path.
PROFILED_STEPS = 3
#: Target kinds that get a profiler trace (the simulated device gets the modeled timeline).
PROFILED_KINDS = (*HARDWARE, "cpu")


def profiled_pass(sc: Scenario, paths: List[str], target: Target, out_dir: str) -> List[str]:
    """On a real device (and the CPU): after the timed pass, a few steps of each path under
    ``torch.profiler`` (host ops; CUDA kernels on CUDA; on an NPU host ops only: torch_npu's
    own profiler is not wired in), exported as Chrome traces that :mod:`syncguard.renderers.trace`
    merges into ``trace.json``. Separate from the timed pass: profiling perturbs timing.
    Returns the files written; a profiler that fails leaves a ``.txt`` saying why instead."""
    import torch

    from .decode import DecodeLoop  # torch: a profiled pass only

    written: List[str] = []
    try:
        from torch.profiler import ProfilerActivity, profile
    except ImportError as exc:  # pragma: no cover - torch >= 2.1 has it
        return _profiler_failed(out_dir, sc.name, paths, f"torch.profiler: {exc}")
    acts = [ProfilerActivity.CPU]
    if target.kind == "cuda":
        acts.append(ProfilerActivity.CUDA)
    for path in paths:
        file = profiler_file(out_dir, sc.name, path)
        try:
            torch.manual_seed(sc.seed)
            loop = DecodeLoop(sc, path, target)
            for step in range(min(sc.warmup, sc.steps)):
                loop.run_step(step)
            last = min(sc.steps, sc.warmup + PROFILED_STEPS)
            with profile(activities=acts) as prof:
                for step in range(sc.warmup, last):
                    with torch.profiler.record_function(f"step {step}"):
                        loop.run_step(step)
            os.makedirs(os.path.dirname(file), exist_ok=True)
            prof.export_chrome_trace(file)
            written.append(file)
        except Exception as exc:  # the run's results stand without a profiler trace
            written += _profiler_failed(out_dir, sc.name, [path],
                                        f"{type(exc).__name__}: {exc}")
    return written


def _profiler_failed(out_dir: str, scenario: str, paths: List[str], why: str) -> List[str]:
    out = []
    for path in paths:
        file = profiler_file(out_dir, scenario, path)[:-5] + ".txt"

        write_text(file, f"no torch.profiler trace: {why}\n")  # never through a link
        out.append(file)
    return out
