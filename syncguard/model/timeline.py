"""A modeled device timeline for the simulated device: deterministic, noise-free, labelled.

The simulated backend hands every op it runs to the recorder
(:class:`syncguard.sim.kernel.OpRecorder`); :class:`~syncguard.model.recorder.Recorder` turns
each into a launch with a host cost and a device duration from a device profile
(:mod:`syncguard.model.profile`), and :func:`replay` runs a discrete-event model of three
stages:

- the host (Python) thread pays ``launch_us`` per kernel (``view_us`` per view or allocation);
- an optional submission stage (torch_npu's task queue) pays ``submit_us`` per kernel before
  it reaches the stream (0 on CUDA, which launches from the calling thread);
- the device stream runs kernels in order, each for
  ``kernel_us + combine(bytes / mem_gbps, flops / peak)`` (``combine`` is max: a roofline);
  a sort or top-k makes ``sort_passes`` passes over its data (a radix sort), a matmul of M
  rows reaches ``M / (M + matmul_half_rows)`` of its peak (decode-sized tiles are mostly
  empty);
- at most ``queue_depth`` launched kernels may be pending: a launch beyond that blocks the
  host until the oldest completes (real launch queues block at about 1024 entries).

A host read (a sync) waits until the stream has drained every kernel queued before it, then
pays ``sync_rtt_us`` (the host wake-up; a read's own copy is its copy op's device time, paid
once); the device stays idle from the drain until the next kernel arrives. Explicit waits are
syncs too: ``synchronize()`` of the device or a stream waits for the drain, ``Event.synchronize``
only for the work queued before the event's ``record`` (an async copy into pinned memory
followed by an event waits for the copy, not for later kernels). ``Stream.wait_event``,
``Stream.wait_stream`` and ``Event.wait`` are device-side waits: the host does not block,
and on the one modeled in-order stream (the simulated device runs every stream in one order)
the work they wait for is already queued ahead of every later launch, so they are met by
construction and change nothing (a model of several concurrent streams would need them). For
each sync the replay gives the host stall and the device idle (bubble) it caused; for the step,
its modeled latency and total device idle. The cost of a path's hidden syncs is the step's
modeled latency minus the same ops replayed with the hidden reads treated as plain kernels.

Nothing here is measured: every number derives from the recorded op stream (shapes, dtypes,
op names) and the profile's parameters, each of which names its source (a public spec with a
link, ``estimate`` with the reasoning, or ``calibrated`` with versions).
"""

from __future__ import annotations

import collections
import dataclasses
import threading
from typing import Any, Deque, Dict, List, Optional, Sequence, Set, Tuple

from ..sim import kernel as simkernel
from ..sim import npu_module
from .profile import Profile
from .recorder import Op, Recorder, op_shape_texts, same_ops

#: Op-level detail (for trace.json) is kept for this many non-warm-up steps per path (as many
#: as the profiler trace of a real device keeps, syncguard.driving.timing.PROFILED_STEPS; the detail
#: costs the counted pass time on every op).
TRACE_STEPS = 3


@dataclasses.dataclass
class SyncMark:
    """One host read in a replayed step (times in us from the step's start): issued at
    ``host_us``, the stream drained at ``drain_us``, the host resumed at ``resume_us``;
    ``stall_us`` = resume - issue; ``bubble_us`` = device idle from the drain until the next
    kernel starts (or the step ends)."""

    index: int
    op: str
    site: str
    api: str
    allowed: Optional[bool]
    host_us: float
    drain_us: float
    resume_us: float
    stall_us: float
    bubble_us: float = 0.0

    @property
    def hidden(self) -> bool:
        return self.allowed is False


@dataclasses.dataclass
class Replay:
    """A replayed step: ``latency_us`` (host end, or the stream's if later), ``busy_us``
    (kernel time), ``bubble_us`` (= latency - busy: device idle), its syncs, and per op
    ``(name, host_start, host_end, dev_start, dev_end)`` (dev_* None without a kernel);
    ``queue_wait_us``: host time blocked on a full launch queue."""

    latency_us: float
    busy_us: float
    bubble_us: float
    syncs: List[SyncMark]
    spans: List[Tuple[str, float, float, Optional[float], Optional[float]]]
    queue_wait_us: float = 0.0


def _site(events: List[Any]) -> Tuple[str, str, Optional[bool]]:
    if not events:
        return "(unattributed)", "", None
    e = events[0]
    allowed = all(bool(getattr(x, "allowed", False)) for x in events)
    return f"{getattr(e, 'filename', '?')}:{getattr(e, 'lineno', '?')}", \
        str(getattr(e, "api", "") or ""), allowed


def replay(ops: Sequence[Op], profile: Profile, skip_syncs: Optional[Set[int]] = None,
           spans: bool = True) -> Replay:
    """Replay one step's ops from an idle pipeline (the previous step ended in its token
    readback, which drains the stream). Syncs at indices in ``skip_syncs`` are replayed as
    ordinary launches (the counterfactual without them). ``spans=False`` skips the per-op
    spans (faster)."""
    p = profile.values
    submit, rtt = p["submit_us"], p["sync_rtt_us"]
    depth = int(p.get("queue_depth", 0.0))
    if len(ops) <= depth:  # fewer launches than the queue holds: it is never full
        depth = 0
    skip = skip_syncs or ()
    host = sub_free = dev_free = busy = queue_wait = 0.0
    open_sync: Optional[SyncMark] = None
    syncs: List[SyncMark] = []
    out: List[Tuple[str, float, float, Optional[float], Optional[float]]] = []
    pending: Deque[float] = collections.deque()  # end times of launched kernels, in order
    recorded: Dict[int, float] = {}  # event key -> when the work before its record is done
    for i, op in enumerate(ops):
        h0 = host
        host += op.host_us
        d0: Optional[float] = None
        d1: Optional[float] = None
        dev = op.dev_us
        tag = op.tag
        if tag is not None and tag[0] == "record":
            recorded[tag[1]] = dev_free if dev_free > sub_free else sub_free
        if dev > 0.0:
            if depth:  # a full launch queue blocks the host until the oldest kernel ends
                while pending and pending[0] <= host:
                    pending.popleft()
                if len(pending) >= depth:
                    free_at = pending[len(pending) - depth]
                    for _ in range(len(pending) - depth + 1):
                        pending.popleft()
                    queue_wait += free_at - host
                    host = free_at
            ready = host
            if submit > 0.0:
                ready = (host if host > sub_free else sub_free) + submit
                sub_free = ready
            d0 = ready if ready > dev_free else dev_free
            if open_sync is not None:
                open_sync.bubble_us += d0 - dev_free
                open_sync = None
            d1 = d0 + dev
            dev_free = d1
            busy += dev
            if depth:
                pending.append(d1)
        if op.sync and i not in skip:
            if tag is not None and tag[0] == "event":  # only the work before the record
                drain = recorded.get(tag[1], 0.0)
            else:
                drain = dev_free if dev_free > sub_free else sub_free
            resume = (host if host > drain else drain) + rtt
            site, api, allowed = _site(op.events)
            mark = SyncMark(i, op.name, site, api, allowed, host, drain, resume, resume - host)
            syncs.append(mark)
            open_sync = mark  # two reads with no kernel between: the idle goes to the later
            host = resume
        if spans:
            out.append((op.name, h0, host, d0, d1))
    latency = host if host > dev_free else dev_free
    if open_sync is not None:
        open_sync.bubble_us += latency - max(dev_free, open_sync.drain_us)
    return Replay(latency, busy, latency - busy, syncs, out, queue_wait)


_SYNC_FIELDS = tuple(f.name for f in dataclasses.fields(SyncMark))


@dataclasses.dataclass
class StepCost:
    """One step's model: the replay, plus what its hidden syncs cost: ``sync_cost_us``
    (modeled latency minus the replay without them) and ``sync_bubble_us`` (device idle
    they caused: the same difference of idle time)."""

    replay: Replay
    sync_cost_us: float
    sync_bubble_us: float


    def record_fields(self) -> Dict[str, Any]:
        """The StepRecord fields: ``modeled_ms``, ``bubble_us``, ``sync_cost_us``,
        ``sync_bubble_us``."""
        return {"modeled_ms": self.replay.latency_us / 1000.0,
                "bubble_us": self.replay.bubble_us, "sync_cost_us": self.sync_cost_us,
                "sync_bubble_us": self.sync_bubble_us}


def model_step(ops: Sequence[Op], profile: Profile, spans: bool = True) -> StepCost:
    """Replay ``ops`` with and without their hidden syncs (see :class:`StepCost`);
    ``spans`` as for :func:`replay`."""
    full = replay(ops, profile, spans=spans)
    hidden = {m.index for m in full.syncs if m.hidden}
    if not hidden:
        return StepCost(full, 0.0, 0.0)
    without = replay(ops, profile, hidden, spans=False)
    return StepCost(full, full.latency_us - without.latency_us,
                    full.bubble_us - without.bubble_us)


# -- wiring for the runner ----------------------------------------------------------------------
_ACTIVE: List[Recorder] = []


def event_record(event: Any) -> None:
    """The simulated ``Event.record`` (no-op unless a step model records)."""
    if _ACTIVE and threading.get_ident() == _ACTIVE[-1].thread:
        _ACTIVE[-1].event_record(id(event))


def event_wait(event: Any) -> None:
    """The simulated ``Event.synchronize``, before the guard reports it (no-op unless a step
    model records)."""
    if _ACTIVE and threading.get_ident() == _ACTIVE[-1].thread:
        _ACTIVE[-1].event_wait(id(event))


#: :func:`event_record` and :func:`event_wait`, as the simulated device's event observers.
_EVENT_HOOKS = (event_record, event_wait)


def device_work(name: str, ms: float) -> None:
    """Record a modeled kernel of ``ms`` ms while a step model records (no-op otherwise):
    the scenario's ``[logits] forward_ms``, a forward pass that exists only in the model."""
    if _ACTIVE:
        _ACTIVE[-1].device_work(name, ms)


class StepModel:
    """The modeled timeline of a counted pass on the simulated device. Use as a context
    manager (installs the recorder as the device's, always removes it); :meth:`begin` and
    :meth:`end` bracket each step; :meth:`on_event` receives the guard's events."""

    #: Reuse the previous step's replay for a step with the same ops (False: replay every
    #: step, the reference the tests compare with).
    memo = True

    def __init__(self, profile: Profile, device_type: str = "npu") -> None:
        self.profile = profile
        self.rec = Recorder(profile, device_type)
        self.kept = 0
        self._last: Optional[_Replayed] = None  # the last step replayed
        self._outer: Any = None

    def __enter__(self) -> StepModel:
        self._outer = simkernel.RECORDER  # a model inside another's pass: restored at exit
        simkernel.RECORDER = self.rec
        if _EVENT_HOOKS not in npu_module.EVENT_OBSERVERS:
            npu_module.EVENT_OBSERVERS.append(_EVENT_HOOKS)
        _ACTIVE.append(self.rec)
        return self

    def __exit__(self, *exc: Any) -> None:
        if simkernel.RECORDER is self.rec:
            simkernel.RECORDER = self._outer
        if self.rec in _ACTIVE:
            _ACTIVE.remove(self.rec)

    def on_event(self, ev: Any) -> None:
        self.rec.on_event(ev)

    def begin(self, warmup: bool = False) -> None:
        """A step starts: what was recorded before it is dropped; a traced step (the first
        :data:`TRACE_STEPS` non-warm-up steps) keeps its ops' input shapes."""
        self.rec.take()
        self.rec.shapes = [] if not warmup and self.kept < TRACE_STEPS else None

    def end(self, warmup: bool) -> Tuple[StepCost, Dict[str, Any]]:
        """The step's cost and its ``timeline`` result line (op spans and input shapes for
        the first :data:`TRACE_STEPS` non-warm-up steps only). A step whose ops are those of
        the previous replayed step (decode steps repeat) takes that step's replay: the same
        ops, the same numbers (:func:`same_ops`); a traced step shows its own shapes (the
        previous step's texts when they are equal)."""
        shapes, self.rec.shapes = self.rec.shapes, None  # this step's: no later op adds any
        ops = self.rec.take()
        traced = self.kept < TRACE_STEPS  # a traced step's replay is yet to come: keep spans
        keep = traced and not warmup and shapes is not None
        last = self._last
        if last is not None and (not keep or last.spans is not None) and \
                same_ops(ops, last.ops):
            cost = last.cost
            last.ops = ops  # equal: the newer records are the ones the next step shares
        else:
            cost = model_step(ops, self.profile, spans=traced)
            last = _Replayed(ops, cost, [{f: getattr(m, f) for f in _SYNC_FIELDS}
                                         for m in cost.replay.syncs])
            if traced:
                last.spans = cost.replay.spans  # written as JSON lists
            if self.memo:
                self._last = last
        r = cost.replay
        line: Dict[str, Any] = {
            "profile": self.profile.name, "warmup": warmup, "ops": len(ops),
            "latency_us": r.latency_us, "busy_us": r.busy_us, "bubble_us": r.bubble_us,
            "hidden_cost_us": cost.sync_cost_us, "hidden_bubble_us": cost.sync_bubble_us,
            "syncs": [dict(d) for d in last.syncs],
        }
        if keep:
            self.kept += 1
            if last.shapes != shapes:
                last.shapes = shapes
                last.texts = op_shape_texts(shapes or [])
            # shared with the line of the step replayed (the lines are written, not changed)
            line["spans"] = last.spans
            line["shapes"] = last.texts
        return cost, line


class _Replayed:
    """A replayed step, kept for the next: its ops, cost and sync dicts and, when its line
    showed them, its spans, input shapes and their texts."""

    __slots__ = ("ops", "cost", "syncs", "spans", "shapes", "texts")

    def __init__(self, ops: List[Op], cost: StepCost, syncs: List[Dict[str, Any]]) -> None:
        self.ops = ops
        self.cost = cost
        self.syncs = syncs
        self.spans: Optional[List[Tuple[str, float, float, Optional[float],
                                        Optional[float]]]] = None
        self.shapes: Optional[List[Any]] = None
        self.texts: Optional[List[List[str]]] = None
