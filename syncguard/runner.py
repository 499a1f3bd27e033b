"""Run scenarios over the sampling paths: a counted pass under the guard, then a timed pass
with no interceptors, streaming every finished step to a result file."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import time
import warnings
from typing import Any, Callable, Dict, List, Optional, Tuple

import torch

from . import _signals
from ._hub import allow
from .devices import Target, resolve_target
from .events import HostSyncError, NoDeviceTensorsWarning, SyncEvent
from .guard import SyncGuard
from .machine import machine_state
from .results import ResultWriter, StepRecord, environment, scenario_record
from .scenario import Scenario

READBACK = "engine token readback (the one intended sync per step)"

Progress = Callable[[str, str, str, int, int], None]  # scenario, path, pass, step, total


# -- one decode loop ------------------------------------------------------------------------
class DecodeLoop:
    """A scenario's decode loop driving one subject (:mod:`syncguard.subjects`): joins and
    leaves, per-(request, step) logits, sampling, and the engine's token readback at the end
    of each step. ``path`` names the subject (a registered name or ``MODULE:OBJ``)."""

    def __init__(self, scenario: Scenario, path: str, target: Target,
                 subject: Optional[Any] = None) -> None:
        from . import subjects

        self.sc, self.path, self.target = scenario, path, target
        self.subject = subject if subject is not None else subjects.load(path)
        self.name = subjects.label(path, self.subject)
        dev = target.device
        all_reqs = list(scenario.requests) + [r for e in scenario.events for r in e.join]
        self.slot = {r.id: i for i, r in enumerate(all_reqs)}
        dtype = getattr(torch, scenario.dtype)
        ctx = subjects.SubjectContext(dev, target.torch_npu, scenario.deterministic,
                                      scenario.seed)
        with allow("setup: logits bank and workload"):
            g = torch.Generator().manual_seed(scenario.seed)
            bank = torch.randn(len(all_reqs), scenario.vocab_size, generator=g)
            self.bank = (bank * scenario.logits_scale).to(dtype).to(dev)
            n = scenario.workload
            self.work = (torch.randn(n, n, generator=g) / max(n, 1) ** 0.5).to(dev) if n else None
            self.state = self._call("build", list(scenario.requests), ctx)
            self.live: List[str] = [r.id for r in scenario.requests]
            self.start: Dict[str, int] = {r.id: 0 for r in scenario.requests}
            self._refresh(0)

    def _call(self, method: str, *args: Any) -> Any:
        """The subject's ``method``; an exception raised in the user's code becomes one
        :class:`~syncguard.subjects.SubjectError` line naming the subject and file:line."""
        from .subjects import SubjectError, user_error

        try:
            return getattr(self.subject, method)(*args)
        except (SubjectError, HostSyncError):
            raise
        except Exception as exc:
            err = user_error(self.name, method, exc)
            if err is None:
                raise
            raise err from exc

    def _stage(self, values: List[int]) -> torch.Tensor:
        from .staging import HostStager

        return HostStager(self.target.device).stage(values, torch.int64)

    def _refresh(self, step: int) -> None:
        """Rebuild the per-row slot and position tensors (pinned, non-blocking) after the
        batch changed: no host read of device data."""
        self.slots = self._stage([self.slot[r] for r in self.live])
        self.positions = self._stage([16 + step - self.start[r] for r in self.live])

    def apply_events(self, step: int) -> None:
        changed = False
        for ev in self.sc.events_at(step):
            if ev.finish:
                gone = set(ev.finish)
                keep = [i for i, r in enumerate(self.live) if r not in gone]
                self.state = self._call("finish", self.state, keep)
                self.live = [self.live[i] for i in keep]
                changed = True
            if ev.join:
                self.state = self._call("join", self.state, list(ev.join))
                for r in ev.join:
                    self.live.append(r.id)
                    self.start[r.id] = step
                changed = True
        if changed:
            self._refresh(step)

    def logits(self, step: int) -> torch.Tensor:
        rows = torch.index_select(self.bank, 0, self.slots)
        return torch.roll(rows, shifts=(step * 7919) % self.sc.vocab_size, dims=1).contiguous()

    def run_step(self, step: int) -> Tuple[List[int], Dict[str, Any]]:
        """One step: events, logits, the subject's sampling, the token readback (allowed).
        Returns the tokens and the subject's labels."""
        from .subjects import as_sampled, check_ids

        self.apply_events(step)
        if self.sc.forward_ms:  # exists only in the modeled timeline (syncguard.timeline)
            from .timeline import device_work

            device_work("forward (modeled)", self.sc.forward_ms)
        logits = self.logits(step)
        if self.work is not None:
            y = self.work
            for _ in range(4):
                y = torch.tanh(y @ self.work)
        res = as_sampled(self._call("sample", self.state, logits, self.positions))
        check_ids(self.name, res.ids, len(self.live))
        with allow(READBACK):
            tokens = res.ids.tolist()
        self.positions.add_(1)
        return tokens, dict(res.labels)


# -- passes ----------------------------------------------------------------------------------
class DeviceTimer:
    """Device time of a step from device events (CUDA or NPU); None elsewhere."""

    def __init__(self, target: Target) -> None:
        mod = {"cuda": torch.cuda, "npu": getattr(torch, "npu", None)}.get(target.kind)
        self.mod = mod

    def start(self) -> Any:
        if self.mod is None:
            return None
        a, b = self.mod.Event(enable_timing=True), self.mod.Event(enable_timing=True)
        a.record()
        return a, b

    def stop(self, h: Any) -> None:
        if h is not None:
            h[1].record()

    def elapsed(self, h: Any) -> Optional[float]:
        """Device ms between the two events. The end event was recorded after the token
        readback, so waiting for it costs next to nothing, but ``elapsed_time`` refuses an
        event not yet complete: wait for it, as syncguard's own read (never counted)."""
        if h is None:
            return None
        from .intercept import suppressed

        with suppressed():
            h[1].synchronize()
        return float(h[0].elapsed_time(h[1]))


def _seed(sc: Scenario) -> None:
    torch.manual_seed(sc.seed)


def label_fields(labels: Dict[str, Any]) -> Dict[str, Any]:
    """A step's :class:`StepRecord` fields from its subject's labels: ``branch`` and
    ``eligible`` (the case study's columns, kept for old readers) and the labels themselves."""
    eligible = labels.get("eligible")
    return {"branch": str(labels.get("branch", "")),
            "eligible": None if eligible is None else bool(eligible),
            "labels": labels or None}


def run_pass(sc: Scenario, path: str, target: Target, counted: bool,
             writer: Optional[ResultWriter] = None, progress: Optional[Progress] = None,
             guard_kwargs: Optional[Dict[str, Any]] = None, collect: bool = True,
             profile: Any = None) -> List[StepRecord]:
    """One pass of ``sc`` on ``path``. Counted: under a :class:`SyncGuard` (its warm-up =
    the scenario's); timed: no interceptors at all. Each step is written as it finishes;
    with ``collect=False`` nothing per step is kept in memory (long runs stay flat).
    ``profile`` (a :class:`syncguard.timeline.Profile`): on a counted pass on the simulated
    device, also model each step's device timeline (StepRecord.modeled_ms and friends)."""
    _seed(sc)
    loop = DecodeLoop(sc, path, target)
    records: List[StepRecord] = []
    timer = DeviceTimer(target)
    pass_ = "counted" if counted else "timed"
    guard: Optional[SyncGuard] = None
    step_events: List[SyncEvent] = []
    model = None
    if counted and profile is not None and target.kind == "sim":
        from .timeline import StepModel

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
                model.begin()
            if guard is not None:
                with guard.step(step):
                    tokens, labels = loop.run_step(step)
            else:
                tokens, labels = loop.run_step(step)
            timer.stop(h)
            now = time.perf_counter()
            evs = list(step_events)
            step_events.clear()
            cost, tl = model.end(step < sc.warmup) if model is not None else (None, None)
            rec = StepRecord(
                scenario=sc.name, path=loop.name, pass_=pass_, step=step,
                warmup=step < sc.warmup, batch_size=len(tokens),
                syncs=sum(e.count for e in evs if not e.allowed),
                allowed=sum(e.count for e in evs if e.allowed),
                latency_ms=(now - t_prev) * 1e3, device_ms=timer.elapsed(h), tokens=tokens,
                sync_wait_us=(sum(e.wait_us or 0.0 for e in evs if not e.allowed)
                              if counted else None),
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
            # the next step's latency starts here: syncguard's own writing (fsync) and
            # progress drawing are not the decode loop's time
            t_prev = time.perf_counter()
    finally:
        try:
            if guard is not None:
                with _signals.deferred(), warnings.catch_warnings():  # Ctrl-C/SIGTERM: deferred
                    if target.kind == "cpu":  # counting nothing is what --device cpu says
                        warnings.simplefilter("ignore", NoDeviceTensorsWarning)
                    guard.__exit__(None, None, None)
        finally:  # the guard's exit may raise (a swallowed HostSyncError): still unhook
            if model is not None:
                model.__exit__(None, None, None)
    return records


@dataclasses.dataclass
class RunOptions:
    device: str = "auto"
    paths: Optional[List[str]] = None
    steps: Optional[int] = None
    warmup: Optional[int] = None
    counted: bool = True
    timed: bool = True
    #: the path ratios are taken against (None: each scenario's first path)
    baseline: Optional[str] = None
    profile: Optional[str] = None  # device profile of the modeled timeline (sim); None: 910b
    repeat: Optional[int] = None  # timed rounds; None: as many as fit budget_s
    #: time budget of the whole run (s; None: DEFAULT_RUN_BUDGET_S), split across the
    #: scenarios: each gets an equal share of what is left, its counted pass first, its timed
    #: pass the rest of the share (at least one round)
    budget_s: Optional[float] = None


#: the whole run's default time budget (s) when ``--repeat`` is not given
DEFAULT_RUN_BUDGET_S = 180.0


def timed_budget(total_s: float, elapsed_s: float, left: int, spent_s: float) -> float:
    """The timed pass's budget (s) of the next scenario: its equal share of what is left of
    the run's ``total_s`` after ``elapsed_s`` (``left`` scenarios to go, this one included),
    less ``spent_s``, the time its counted pass took; 0 when nothing is left (the timed pass
    still runs its one round)."""
    share = (total_s - elapsed_s) / max(left, 1)
    return max(0.0, share - spent_s)


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
    from . import subjects

    if not subjects.is_spec(path):
        return path
    return subjects.label(path, subjects.load(path))


def run(scenarios: List[Scenario], opts: RunOptions, result_path: str,
        progress: Optional[Progress] = None, argv: Optional[List[str]] = None,
        lines: Optional[Any] = None) -> str:
    """Run every scenario x path (counted passes, then the interleaved timed pass of all
    paths, see :mod:`syncguard.timing`), streaming to
    ``result_path``. On KeyboardInterrupt the file is closed as incomplete and the
    interrupt re-raised; every finished step is already on disk. ``lines``: a
    :class:`syncguard.lint.lines.LineRecorder` active during the counted passes only (never
    the timed ones), its note written before the footer."""
    target = resolve_target(opts.device)
    scenarios = prepare(scenarios, opts)
    prof = None
    if target.kind == "sim" and opts.profile != "none":
        from .timeline import load_profile

        prof = load_profile(opts.profile)
    header = {
        "env": environment(target.kind, target.name), "argv": argv or [],
        "machine": machine_state(),  # whether absolute host times compare (syncguard.machine)
        "options": dataclasses.asdict(opts),
        "scenarios": {s.name: {**scenario_record(s.file, s.text), "steps": s.steps,
                               "warmup": s.warmup, "max_syncs": s.max_syncs}
                      for s in scenarios},
        **({"timeline": prof.header()} if prof is not None else {}),
    }
    writer = ResultWriter(result_path, header)
    complete, reason = False, "interrupted"
    total_s = DEFAULT_RUN_BUDGET_S if opts.budget_s is None else opts.budget_s
    t_run = time.perf_counter()
    try:
        for k, sc in enumerate(scenarios):
            t_sc = time.perf_counter()
            for path in paths_for(sc, opts):
                if opts.counted:
                    with lines if lines is not None else contextlib.nullcontext():
                        run_pass(sc, path, target, True, writer, progress, collect=False,
                                 profile=prof)
            if opts.timed:  # paths interleaved step by step, repeated (syncguard.timing)
                from .timing import timed_pass

                now = time.perf_counter()
                timed_pass(sc, paths_for(sc, opts), target, writer, progress, opts.repeat,
                           timed_budget(total_s, t_sc - t_run, len(scenarios) - k, now - t_sc))
            if opts.timed and target.kind in ("cuda", "npu", "cpu"):  # syncguard.trace
                from .timing import profiled_pass

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
    return result_path
