"""Run scenarios over the sampling paths: a counted pass under the guard, then a timed pass
with no interceptors, streaming every finished step to a result file."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import sys
import time
import warnings
from typing import Any, Dict, Iterator, List, Optional, Sequence

from .._escape import one_line
from ..core.events import NoDeviceTensorsWarning, SyncEvent
from ..core.guard import SyncGuard
from ..core.steps import is_warmup
from ..devicenames import HOST_KERNEL_KINDS
from ..errors import UsageError
from ..model.profile import ProfileError, load_profile
from ..model.timeline import StepModel
from ..process import signals as _signals
from ..results.environment import environment, scenario_record
from ..results.format import TIMED_PASS, StepRecord
from ..results.machine import machine_state
from ..results.writer import ResultWriter
from . import subjects
from .decode import DecodeLoop, DeviceTimer, Progress, _seed, label_fields
from .devices import Target, resolve_target
from .lineage import start as start_lineage
from .plan import Plan, plan_run
from .scenario import Scenario, ScenarioOptions
from .timing import PROFILED_KINDS, profiled_pass, timed_pass


def run_pass(sc: Scenario, path: str, target: Target, counted: bool,
             writer: Optional[ResultWriter] = None, progress: Optional[Progress] = None,
             guard_kwargs: Optional[Dict[str, Any]] = None, collect: bool = True,
             profile: Any = None, lineage: bool = False) -> List[StepRecord]:
    """One pass of ``sc`` on ``path``. Counted: under a :class:`SyncGuard` (its warm-up =
    the scenario's); timed: no interceptors at all. Each step is written as it finishes;
    with ``collect=False`` nothing per step is kept in memory (long runs stay flat).
    ``profile`` (a :class:`syncguard.model.profile.Profile`): on a counted pass on the simulated
    device, also model each step's device timeline (StepRecord.modeled_ms and friends).
    ``lineage``: on a counted pass, track where each read value came from (from the batch
    build on: :mod:`syncguard.driving.lineage`); each event then carries its verdict."""
    _seed(sc)
    tracker = None
    if lineage and counted:
        tracker = start_lineage(target)
    try:
        loop = DecodeLoop(sc, path, target)
    except BaseException:
        if tracker is not None:
            tracker.stop()
        raise
    records: List[StepRecord] = []
    timer = DeviceTimer(target)
    pass_ = "counted" if counted else TIMED_PASS
    guard: Optional[SyncGuard] = None
    step_events: List[SyncEvent] = []
    model = None
    if counted and profile is not None and target.kind == "sim":
        model = StepModel(profile, target.device.type)
    if counted:
        kw = dict(guard_kwargs or {})
        user_cb = kw.pop("on_event", None)

        def on_event(ev: SyncEvent) -> None:
            step_events.append(ev)
            if model is not None:
                model.on_event(ev)
            if user_cb is not None:
                user_cb(ev)

        kw.setdefault("exhaustive", target.exhaustive)
        guard = SyncGuard(warmup=sc.warmup, on_event=on_event, keep_events=False, **kw)
    try:
        if model is not None:
            model.__enter__()
        if guard is not None:
            guard.__enter__()
        t_prev = time.perf_counter()
        for step in range(sc.steps):
            h = timer.start()
            if model is not None:
                model.begin(is_warmup(step, sc.warmup))
            if guard is not None:
                with guard.step(step):
                    tokens, labels = loop.run_step(step)
            else:
                tokens, labels = loop.run_step(step)
            timer.stop(h)
            now = time.perf_counter()
            evs = list(step_events)
            step_events.clear()
            cost, tl = (model.end(is_warmup(step, sc.warmup)) if model is not None
                        else (None, None))
            rec = StepRecord.from_events(
                sc.name, loop.name, pass_, step, sc.warmup, evs, (now - t_prev) * 1e3,
                batch_size=len(tokens), device_ms=timer.elapsed(h), tokens=tokens,
                **label_fields(labels),
                **(cost.record_fields() if cost is not None else {}),
            )
            if collect:
                records.append(rec)
            if writer is not None:
                writer.step(rec, evs)
                if tl is not None:
                    writer.timeline({"scenario": sc.name, "path": loop.name, "step": step, **tl})
            if progress is not None:
                progress(sc.name, path, pass_, step + 1, sc.steps)
            _signals.check()  # a Ctrl-C the sampler swallowed still ends the run here
            # the next step's latency starts here: syncguard's own writing (and its fsync, about
            # once a second) and progress drawing are not the decode loop's time
            t_prev = time.perf_counter()
    finally:
        try:
            if guard is not None:
                with _signals.deferred(), warnings.catch_warnings():  # Ctrl-C/SIGTERM: deferred
                    if target.kind == "cpu":  # counting nothing is what --device cpu says
                        warnings.simplefilter("ignore", NoDeviceTensorsWarning)
                    guard.__exit__(None, None, None)
        finally:  # the guard's exit may raise (a swallowed HostSyncError): still unhook
            try:
                if model is not None:
                    model.__exit__(None, None, None)
            finally:
                if tracker is not None:
                    tracker.stop()
    return records


@dataclasses.dataclass
class RunOptions:
    device: str = "auto"
    paths: Optional[List[str]] = None
    steps: Optional[int] = None
    warmup: Optional[int] = None
    timed: bool = True
    #: the path ratios are taken against (None: each scenario's first path)
    baseline: Optional[str] = None
    profile: Optional[str] = None  # device profile of the modeled timeline (sim); None: 910b
    repeat: Optional[int] = None  # timed rounds; None: the plan's (syncguard.driving.plan)
    #: the time the run's plan aims at (s; None: plan.DEFAULT_RUN_BUDGET_S): the minimum
    #: evidence, then whole rounds and more rounds while the expected total fits
    budget_s: Optional[float] = None
    #: the user's ``--exhaustive`` (:func:`syncguard.driving.devices.exhaustive_for` decides)
    exhaustive: bool = False
    #: track the lineage of each read value in the counted passes (``--lineage``)
    lineage: bool = False
    #: torch's intra-op threads (``--threads``; None: :func:`threads_for` decides, 0: torch's
    #: own default)
    threads: Optional[int] = None


def run_options(o: ScenarioOptions, *, timed: bool = True, ratio_base: Optional[str] = None,
                repeat: Optional[int] = None, budget: Optional[float] = None,
                lineage: bool = False, threads: Optional[int] = None) -> RunOptions:
    """The :class:`RunOptions` of the scenario options as typed (``o.paths``: ``--paths``
    chunks, comma-separated; ``o.subjects``: ``--subject``) and of the timed pass, each
    checked: a bad value is one :class:`UsageError` before anything runs."""
    steps, warmup, profile = o.steps, o.warmup, o.profile
    if steps is not None and steps < 1:
        raise UsageError(f"--steps: must be >= 1, got {steps}")
    if warmup is not None and warmup < 0:
        raise UsageError(f"--warmup: must be >= 0, got {warmup}")
    if steps is not None and warmup is not None and warmup >= steps:
        raise UsageError(f"--warmup: must be < --steps ({steps}), got {warmup}")
    chosen = _parse_paths(o.paths, o.paths_flag, o.subjects)
    if repeat is not None and repeat < 1:
        raise UsageError(f"--repeat: must be >= 1, got {repeat}")
    if budget is not None and not budget > 0:
        raise UsageError(f"--budget: must be > 0 seconds, got {budget}")
    if threads is not None and threads < 0:
        raise UsageError(f"--threads: must be >= 0, got {threads}")
    if profile is not None and profile != "none":
        try:
            load_profile(profile)  # one clear line (exit 2) before anything runs
        except ProfileError as exc:
            raise UsageError(str(exc)) from None
    return RunOptions(device=o.device, paths=chosen, steps=steps, warmup=warmup, timed=timed,
                      baseline=ratio_base, repeat=repeat, budget_s=budget, profile=profile,
                      lineage=lineage, threads=threads)


def _parse_paths(raw: Optional[List[str]], flag: str,
                 specs: Sequence[str]) -> Optional[List[str]]:
    """``--paths`` (comma-separated, repeatable) then ``--subject``: registered subject names
    or ``MODULE:OBJ``, each loaded once here so a bad one fails before any run."""
    if not raw and not specs:
        return None
    out: List[str] = []
    named = [(flag, p.strip()) for chunk in raw or [] for p in chunk.split(",")]
    named += [("--subject", s.strip()) for s in specs]
    for where, p in named:
        if not subjects.known(p):
            raise UsageError(f"{where}: unknown path {p!r}; valid: "
                             f"{', '.join(subjects.registered())}, or MODULE:OBJ")
        try:
            subjects.load(p, where)
        except subjects.SubjectError as exc:
            raise UsageError(str(exc)) from None
        if p not in out:
            out.append(p)
    return out


def target(kind: str, gpu: bool = False, exhaustive: bool = False) -> Target:
    """A command's device (:func:`syncguard.driving.devices.resolve_target`, ``exhaustive``
    the user's flag), with one note line on stderr when ``auto`` did not take the NPU and
    why."""
    t = resolve_target(kind, gpu=gpu, exhaustive=exhaustive)
    if t.note:
        print(f"syncguard: note: {one_line(t.note)}", file=sys.stderr)
    return t


def prepare(scenarios: List[Scenario], opts: RunOptions) -> List[Scenario]:
    out = []
    for sc in scenarios:
        if opts.steps is not None or opts.warmup is not None:
            sc = sc.with_steps(opts.steps or sc.steps, opts.warmup)
        out.append(sc)
    return out


def paths_for(sc: Scenario, opts: RunOptions) -> List[str]:
    return [p for p in (opts.paths or list(sc.paths))]


def path_label(path: str) -> str:
    """The name results, verdicts and baselines give ``path`` (a registered name or
    ``MODULE:OBJ``): the subject's display name, as :class:`DecodeLoop` labels its steps
    (:func:`syncguard.subjects.label`; loads a ``MODULE:OBJ`` subject to read it)."""
    if not subjects.is_spec(path):
        return path
    return subjects.label(path, subjects.load(path))


#: torch's intra-op threads of a run on a device whose kernels run on the host CPU (the
#: simulated npu, the CPU): one. A second thread makes every parallel op wait for a core that
#: any other job of a shared machine may hold: on a 2-core machine at load 2 to 6, steps took
#: 2 to 30 times longer, varying from step to step, and paths' ratios moved with the load.
HOST_KERNEL_THREADS = 1


def threads_for(opts: RunOptions, target: Target) -> Optional[int]:
    """torch's intra-op threads for the run: ``opts.threads`` (0: torch's own default,
    None), else :data:`HOST_KERNEL_THREADS` on the simulated npu and the CPU, None elsewhere."""
    if opts.threads is not None:
        return opts.threads or None
    return HOST_KERNEL_THREADS if target.kind in HOST_KERNEL_KINDS else None


@contextlib.contextmanager
def torch_threads(n: Optional[int]) -> Iterator[None]:
    """torch's intra-op threads set to ``n`` (None: left alone) inside the block, restored
    after."""
    import torch

    before = torch.get_num_threads()
    if n is not None and n != before:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        if torch.get_num_threads() != before:
            torch.set_num_threads(before)


def plan_for(scenarios: List[Scenario], opts: RunOptions, target: Optional[Target] = None
             ) -> Plan:
    """Probe the machine and plan the run of ``scenarios`` (as :func:`prepare` made them)
    (:func:`syncguard.driving.plan.plan_run`), on the run's torch threads
    (:func:`threads_for`)."""
    target = target or resolve_target(opts.device, exhaustive=opts.exhaustive)
    with torch_threads(threads_for(opts, target)):
        return plan_run(scenarios, lambda sc: paths_for(sc, opts), target,
                        timed=opts.timed, repeat=opts.repeat, budget_s=opts.budget_s)


def run(scenarios: List[Scenario], opts: RunOptions, result_path: str,
        progress: Optional[Progress] = None, argv: Optional[List[str]] = None,
        lines: Optional[Any] = None, plan: Optional[Plan] = None,
        target: Optional[Target] = None) -> str:
    """Run every scenario x path of ``scenarios`` (as :func:`prepare` made them from
    ``opts``: the command prepares them once) on ``target`` (the device the command resolved
    once; resolved from ``opts.device`` when None): counted passes, then the interleaved timed
    pass of all paths (see :mod:`syncguard.driving.timing`), in the rounds of ``plan`` (see
    :mod:`syncguard.driving.plan`; made here when not given), streaming to ``result_path``,
    on the run's torch threads (:func:`threads_for`). On KeyboardInterrupt the file is closed
    as incomplete and the interrupt re-raised; every finished step is already on disk.
    ``lines``: a :class:`syncguard.lint.lines.LineRecorder` active during the counted passes
    only (never the timed ones), its note written before the footer."""
    if target is None:
        target = resolve_target(opts.device, exhaustive=opts.exhaustive)
    with torch_threads(threads_for(opts, target)):
        if plan is None:
            plan = plan_for(scenarios, opts, target)
        return _run(scenarios, opts, target, result_path, plan, progress, argv, lines)


def _run(scenarios: List[Scenario], opts: RunOptions, target: Target, result_path: str,
         plan: Plan, progress: Optional[Progress], argv: Optional[List[str]],
         lines: Optional[Any]) -> str:
    prof = None
    if target.kind == "sim" and opts.profile != "none":
        prof = load_profile(opts.profile)
    header = {
        "env": environment(target.kind, target.name), "argv": argv or [],
        # whether absolute host times compare (syncguard.results.machine)
        "machine": machine_state(),
        "options": dataclasses.asdict(opts),
        "plan": plan.record(),  # the probe's step times and the rounds they gave
        "scenarios": {s.name: {**scenario_record(s.file, s.text), "steps": s.steps,
                               "warmup": s.warmup, "max_syncs": s.max_syncs}
                      for s in scenarios},
        **({"timeline": prof.header()} if prof is not None else {}),
    }
    writer = ResultWriter(result_path, header)
    complete, reason = False, "interrupted"
    try:
        for sc in scenarios:
            for path in paths_for(sc, opts):
                with lines if lines is not None else contextlib.nullcontext():
                    run_pass(sc, path, target, True, writer, progress, collect=False,
                             profile=prof, lineage=opts.lineage)
            planned = plan.get(sc.name)
            if opts.timed and planned is not None and planned.rounds:
                # paths interleaved step by step, repeated (syncguard.driving.timing)
                timed_pass(sc, paths_for(sc, opts), target, writer, progress,
                           planned.rounds, round_steps=planned.round_steps)
            if opts.timed and target.kind in PROFILED_KINDS:  # syncguard.renderers.trace
                profiled_pass(sc, paths_for(sc, opts), target,
                              os.path.dirname(os.path.abspath(result_path)))
        complete = True
    except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM (_signals.Terminated)
        reason = _signals.reason(exc)
        raise
    finally:
        with _signals.deferred():  # the footer line is written whole
            if lines is not None:
                writer.note(**lines.note())
            writer.close(complete, reason=None if complete else reason)
    writer.raise_error()  # a full disk: one line naming the file, every line before it kept
    return result_path
