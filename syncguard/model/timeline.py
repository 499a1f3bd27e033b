"""A modeled device timeline for the simulated device: deterministic, noise-free, labelled.

The simulated backend hands every op it runs to the recorder
(:class:`syncguard.sim.device.OpRecorder`); :class:`Recorder` turns each into a launch with a
host cost and a device duration from a device :class:`Profile`, and :func:`replay` runs a
discrete-event model of three stages:

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
import math
import os
import threading
from typing import Any, Deque, Dict, List, Optional, Sequence, Set, Tuple

from ..core.plain import PLAIN, is_plain
from ..errors import SyncguardError

#: Folder of the shipped profiles (``<name>.json``).
PROFILE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "profiles")
#: The profile a run uses unless ``--profile`` says otherwise.
DEFAULT_PROFILE = "910b"
#: Numeric parameters every profile must give (unit in the file).
NUMERIC = ("mem_gbps", "matmul_tflops_16", "matmul_tflops_32", "vector_tflops", "kernel_us",
           "launch_us", "view_us", "submit_us", "sync_rtt_us", "h2d_gbps", "d2h_gbps",
           "copy_us", "forward_launch_us")
#: Parameters a profile may give (older profile files without them still load, with these
#: values, which model what those files modeled: no queue limit, one pass, full efficiency).
OPTIONAL: Dict[str, float] = {"queue_depth": 0.0, "sort_passes": 1.0, "matmul_half_rows": 0.0}
SOURCES = ("spec", "estimate", "calibrated")
#: What a profile's numbers may be, by unit (the last part of the name): (lowest, highest,
#: unit). Beyond these no device exists, and the model's sums overflow (1e308 us) or divide
#: by almost nothing (5e-324 GB/s).
PHYSICAL: Dict[str, Tuple[float, float, str]] = {
    "us": (0.0, 1e6, "us"),  # up to one second per launch, kernel or sync
    "gbps": (1e-6, 1e6, "GB/s"),  # a measured CPU stand-in can be slow: only absurd is out
    "tflops": (1e-6, 1e6, "TFLOP/s"),
    "depth": (0.0, 1e7, "launches"),  # queue_depth: 0 means no limit
    "passes": (1.0, 64.0, "passes"),  # sort_passes over memory
    "rows": (0.0, 1e9, "rows"),  # matmul_half_rows: 0 means full efficiency
}
#: Op-level detail (for trace.json) is kept for this many non-warm-up steps per path (as many
#: as the profiler trace of a real device keeps, syncguard.driving.timing.PROFILED_STEPS; the detail
#: costs the counted pass time on every op).
TRACE_STEPS = 3


class ProfileError(SyncguardError, ValueError):
    """A profile that cannot be used; the message names the file and the field."""


@dataclasses.dataclass(frozen=True)
class Profile:
    """A device profile: ``values`` (numbers, units as in :data:`NUMERIC` names: us, GB/s,
    TFLOP/s), ``combine`` (``"max"`` or ``"sum"``), and each parameter's ``sources`` line."""

    name: str
    file: str
    device: str
    stack: str
    values: Dict[str, float]
    combine: str
    sources: Dict[str, str]
    calibrated: Optional[Dict[str, Any]] = None

    def header(self) -> Dict[str, Any]:
        """What a result header records about the model (the full parameter set)."""
        return {"profile": self.name, "file": self.file, "device": self.device,
                "stack": self.stack, "combine": self.combine, "values": dict(self.values),
                "sources": dict(self.sources), "calibrated": self.calibrated,
                "label": "modeled (not measured)"}


def profile_names() -> List[str]:
    """The shipped profiles' names."""
    try:
        return sorted(n[:-5] for n in os.listdir(PROFILE_DIR) if n.endswith(".json"))
    except OSError:
        return []


def parse_profile(doc: Any, file: str) -> Profile:
    """Validate a profile document. Raises :class:`ProfileError` naming ``file`` and field."""
    if not isinstance(doc, dict):
        raise ProfileError(f"{file}: not a profile (a JSON object)")
    name = doc.get("name")
    if not isinstance(name, str) or not name:
        raise ProfileError(f"{file}: name: must be a non-empty string")
    params = doc.get("params")
    if not isinstance(params, dict):
        raise ProfileError(f"{file}: params: must be an object")
    values: Dict[str, float] = {}
    sources: Dict[str, str] = {}
    for key in (*NUMERIC, *OPTIONAL, "combine"):
        p = params.get(key)
        if p is None and key in OPTIONAL:
            values[key] = OPTIONAL[key]
            sources[key] = "default: not in the profile file"
            continue
        if not isinstance(p, dict) or "value" not in p:
            raise ProfileError(f"{file}: params.{key}: missing (an object with value and "
                               f"source)")
        src = p.get("source")
        if src not in SOURCES:
            raise ProfileError(f"{file}: params.{key}.source: must be one of "
                               f"{', '.join(SOURCES)}, got {src!r}")
        why = p.get("why")
        if not isinstance(why, str) or not why.strip():
            raise ProfileError(f"{file}: params.{key}.why: every parameter says where its "
                               f"value comes from (a link, the reasoning, or the versions)")
        sources[key] = f"{src}: {why}"
        v = p["value"]
        if key == "combine":
            if v not in ("max", "sum"):
                raise ProfileError(f"{file}: params.combine.value: must be max or sum, "
                                   f"got {v!r}")
            continue
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) \
                or v < 0:
            raise ProfileError(f"{file}: params.{key}.value: must be a number >= 0, got {v!r}")
        lo, hi, unit = PHYSICAL[key.rsplit("_", 1)[-1] if not key.startswith("matmul")
                                else "tflops"]
        if not lo <= v <= hi:
            raise ProfileError(f"{file}: params.{key}.value: {v!r} {unit} is outside the "
                               f"physical range {lo:g} to {hi:g} {unit}")
        values[key] = float(v)
    unknown = sorted(set(params) - set(NUMERIC) - set(OPTIONAL) - {"combine"})
    if unknown:
        raise ProfileError(f"{file}: params.{unknown[0]}: unknown parameter")
    cal = doc.get("calibrated")
    if cal is not None and not isinstance(cal, dict):
        raise ProfileError(f"{file}: calibrated: must be null or an object of versions")
    return Profile(name, file, str(doc.get("device", "")), str(doc.get("stack", "")), values,
                   str(params["combine"]["value"]), sources, cal)


def load_profile(name_or_file: Optional[str] = None) -> Profile:
    """A shipped profile by name (``910b``, ``h200``) or a profile file. Raises
    :class:`ProfileError`."""
    spec = name_or_file or DEFAULT_PROFILE
    path = spec if (os.sep in spec or spec.endswith(".json")) else os.path.join(
        PROFILE_DIR, f"{spec}.json")
    if not os.path.lexists(path):
        raise ProfileError(f"--profile: {spec}: no such profile file or shipped profile "
                           f"(shipped: {', '.join(profile_names())})")
    from ..core.untrusted import UntrustedError, load_json

    try:  # a regular UTF-8 file, size and nesting bounded, never blocking on a FIFO
        doc = load_json(path, "profile", 1 << 20)
    except UntrustedError as exc:
        raise ProfileError(str(exc)) from None
    return parse_profile(doc, path)


# -- recording --------------------------------------------------------------------------------
VIEW, KERNEL = "view", "kernel"
_MATMUL = frozenset({"mm", "addmm", "bmm", "baddbmm", "matmul", "linear", "addbmm"})
#: Ops that make ``sort_passes`` passes over their data (radix sort / select).
_SORTS = frozenset({"sort", "argsort", "topk", "msort", "kthvalue"})
_NO_KERNEL = frozenset({"empty", "empty_strided", "empty_like", "resize_", "set_",
                        "record_stream", "lift_fresh", "_pin_memory", "is_pinned",
                        "_has_compatible_shallow_copy_type", "_to_copy"})


_NO_EVENTS: List[Any] = []  # shared, never appended to: a sync op gets its own list


class Op:
    """One launch: ``host_us`` on the host thread, ``dev_us`` on the stream (0: no kernel),
    ``sync`` when the host reads device data; ``events`` the guard's events for a sync
    (site, allowed); ``tag``: ``("record", key)`` for an event record (no kernel),
    ``("event", key)`` for a host wait on that event, None otherwise (a sync waits for the
    drain). A launch record that cannot sync is shared by every op it costs (the recorder
    keeps them); a sync's is its own. The input shapes a traced step shows are kept beside
    the ops (:attr:`Recorder.shapes`), not in them."""

    __slots__ = ("name", "host_us", "dev_us", "sync", "events", "tag")

    def __init__(self, name: str, host_us: float, dev_us: float, sync: bool = False,
                 events: Optional[List[Any]] = None,
                 tag: Optional[Tuple[str, int]] = None) -> None:
        self.name = name
        self.host_us = host_us
        self.dev_us = dev_us
        self.sync = sync
        self.events: List[Any] = events if events is not None else _NO_EVENTS
        self.tag = tag

    def __repr__(self) -> str:
        return (f"Op({self.name!r}, host_us={self.host_us}, dev_us={self.dev_us}, "
                f"sync={self.sync})")

    def __eq__(self, other: object) -> bool:
        """Whether two ops replay alike: the same launch (name, costs, wait tag) and, for a
        sync, the same site, API and verdict (:func:`same_ops`)."""
        if not isinstance(other, Op):
            return NotImplemented
        return (self.name == other.name and self.host_us == other.host_us
                and self.dev_us == other.dev_us and self.sync == other.sync
                and self.tag == other.tag
                and (not self.sync or _event_key(self.events) == _event_key(other.events)))

    __hash__ = None  # type: ignore[assignment]  # equal by value, and changed (events)


#: How the recorder keys an op's launch record (:attr:`_OpKind.mode`): it may sync, or it
#: copies (a fresh record); a view (by the op alone); a matmul (by dtypes and shapes: its
#: cost reads them); any other kernel (by the op, bytes and output elements); a copy
#: (:attr:`_OpKind.base` only: its time depends on the direction).
_GENERAL, _VIEW, _SHAPES, _BYTES, _COPY = range(5)


class _OpKind:
    """What the recorder needs of an op, from its schema, once: its name, whether it runs a
    kernel (``kind``), its sync classifier, and how its launch record is keyed (``mode``)."""

    __slots__ = ("oid", "name", "kind", "classify", "base", "mode")

    def __init__(self, op: Any) -> None:
        from ..core import classify

        self.oid = id(op)
        schema = op._schema
        self.name: str = schema.name.split("::", 1)[-1]
        base = self.name
        rets = list(schema.returns)
        is_view = bool(rets) and all(r.alias_info is not None and not r.alias_info.is_write
                                     for r in rets)
        self.kind = VIEW if is_view or base in _NO_KERNEL else base
        c = classify._aten_classifier(op)
        self.classify = None if c is classify._SKIP else c
        # how Recorder.on_op keys its launch record (base: were it never a sync)
        self.base = (_VIEW if self.kind == VIEW else _COPY if self.name in _COPIES else
                     _SHAPES if self.name in _MATMUL else _BYTES)
        self.mode = _GENERAL if self.classify is not None or self.base == _COPY else self.base


_KINDS: Dict[int, _OpKind] = {}


_COPIES = frozenset({"_copy_from", "_copy_from_and_resize", "_local_scalar_dense"})
try:
    from torch import Tensor as _Tensor
except ImportError:  # pragma: no cover - torch is a dependency
    _Tensor = object  # type: ignore[assignment,misc]


#: The simulated device's tensor class, set by the first :class:`Recorder` (importing the
#: simulated device registers it, so not at import time); until then no class matches.
_SimT: Any = type("_NoSimTensor", (), {})


def _tensors(xs: Any) -> List[Any]:
    out = []
    for x in xs:
        if isinstance(x, _Tensor):
            out.append(x)
        elif type(x) is list or type(x) is tuple:
            for y in x:
                if isinstance(y, _Tensor):
                    out.append(y)
    return out


def _inputs(args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> List[Any]:
    """The tensors an op takes, positional then keyword (in lists too)."""
    ins = _tensors(args)
    if kwargs:
        ins += _tensors(kwargs.values())
    return ins


def _outputs(out: Any) -> List[Any]:
    """The tensors an op returns."""
    if type(out) in (list, tuple):
        return _tensors(out)
    return [out] if isinstance(out, _Tensor) else []


#: Recorded launches that do not sync, by profile and then by (op kind, tensor dtypes and
#: shapes): an op's launch record depends on nothing else, and decode steps repeat their ops,
#: so each is built once and shared (never changed after it is made: a sync, which the
#: guard's events attach to, is always a fresh :class:`Op`). Shared by every recorder of a
#: profile, so a run's later passes and rounds find their launches already costed.
_LAUNCHES: Dict[Any, Dict[Any, Op]] = {}
_LAUNCHES_MAX = 50_000  # bounded: the shapes of a run repeat
#: The same records, by profile, then filed for the simulated device's own lookup
#: (:class:`syncguard.sim.device.OpRecorder`): by ``id(op)``, then by bytes (or bytes and
#: output elements).
_BY_OP: Dict[Any, Dict[int, Dict[Any, Op]]] = {}
#: One object per shape (``torch.Size``) a traced step shows, kept for the next steps (see
#: :class:`syncguard.sim.device.OpRecorder`).
_SIZES: Dict[Any, Any] = {}
_OUT = object()  # in a launch key: the output tensors follow
_get_ident = threading.get_ident


def _on_host(t: Any) -> bool:
    """Whether a tensor is on the host (a simulated tensor never is: no device read)."""
    return type(t) is not _SimT and t.device.type == "cpu"


def _arg_bytes(args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Optional[int]:
    """The bytes of the simulated tensors an op takes, or None when an argument is neither
    one nor plain (a host tensor, a tensor list): then bytes alone do not key its launch."""
    nb = 0
    for a in (*args, *kwargs.values()) if kwargs else args:
        if type(a) is _SimT:
            nb += a._v.nbytes
        elif type(a) not in PLAIN and not is_plain(a):
            return None
    return nb


def _add_in_shapes(out: List[Any], args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> None:
    """Append the dtype and shape of each tensor an op takes (in lists too) to ``out``, a
    traced step's flat list (:attr:`Recorder.shapes`; a simulated tensor's sizes are its
    CPU values' (``_v``): read 4x faster there), then ``None``, the op's end."""
    for a in (*args, *kwargs.values()) if kwargs else args:
        if isinstance(a, _Tensor):  # a simulated tensor, a host one (an index), a foreign one
            t = a._v if type(a) is _SimT else a  # type: ignore[attr-defined]
            out.append(t.dtype)
            s = t.shape
            out.append(_SIZES.setdefault(s, s))
        elif type(a) is list or type(a) is tuple:
            for y in a:
                if isinstance(y, _Tensor):
                    t = y._v if type(y) is _SimT else y  # type: ignore[attr-defined]
                    out.append(t.dtype)
                    s = t.shape
                    out.append(_SIZES.setdefault(s, s))
    out.append(None)


def _shape_key(k: _OpKind, args: Tuple[Any, ...], kwargs: Dict[str, Any], out: Any) -> Any:
    """The launch key of a matmul (whose cost reads the shapes) or of an op of a traced step
    (whose record shows them): the op, then (dtype, shape) of each input tensor, a marker,
    each output's; None when an argument is neither a simulated tensor nor plain."""
    key: List[Any] = [k]
    for a in (*args, *kwargs.values()) if kwargs else args:
        if type(a) is _SimT:
            v = a._v
            key.append(v.dtype)
            key.append(v.shape)
        elif type(a) not in PLAIN and not is_plain(a):
            return None
    key.append(_OUT)
    outs = out if type(out) is tuple or type(out) is list else (out,)
    for o in outs:
        if type(o) is _SimT:
            v = o._v
            key.append(v.dtype)
            key.append(v.shape)
        elif isinstance(o, _Tensor):
            return None
    return tuple(key)


def _full_key(k: _OpKind, args: Tuple[Any, ...], kwargs: Dict[str, Any], out: Any) -> Any:
    """The launch key of any op: the op, then (dtype, shape) of each tensor it takes (in
    lists too), a marker, each output's."""
    return (k, *map(_dtype_shape, _inputs(args, kwargs)), _OUT,
            *map(_dtype_shape, _outputs(out)))


def _dtype_shape(t: Any) -> Any:
    """(dtype, shape) of a tensor (a simulated one's sizes read from its CPU values)."""
    return (t.dtype, (t._v if type(t) is _SimT else t).shape)


def _profile_key(profile: Profile) -> Any:
    return (profile.combine, tuple(sorted(profile.values.items())))


class Recorder:
    """Collects the ops the simulated device runs on the recording thread, with their modeled
    costs on ``profile``; :meth:`take` hands them over (and starts afresh). While
    :attr:`shapes` is a list (a traced step: ``keep_shapes``), it gets each op's inputs'
    dtypes and shapes, flat (``dtype, shape, dtype, shape..., None``: ``None`` ends each op
    recorded; :func:`op_shapes` splits them), so a traced step makes no objects per op.

    The simulated device hands it every op of a counted pass
    (:class:`syncguard.sim.device.OpRecorder`): an op that cannot sync, on device tensors
    and plain arguments, costs the device one lookup of a launch record already built
    (:data:`_LAUNCHES`) by the op and its bytes; the first op of a combination, and
    anything else, comes to :meth:`record`."""

    def __init__(self, profile: Profile, device_type: str = "npu") -> None:
        self.p = profile.values
        self.combine_max = profile.combine == "max"
        self.device_type = device_type
        self.thread = _get_ident()
        self.ops: List[Op] = []
        #: per op recorded, its inputs' dtypes and shapes then None, while a traced step
        #: records (flat)
        self.shapes: Optional[List[Any]] = None
        self.pending: List[Any] = []  # events reported before their op ran
        self.unclaimed: List[Op] = []  # sync ops whose event has not come yet
        # a kernel other than a matmul reads and writes at least one byte per output element:
        # when memory can never be faster than the vector units (bytes / memory bandwidth >=
        # elements / vector rate, both as the floats _duration divides by) and the two
        # combine by max, its time depends on its bytes alone, and its launch record is keyed
        # by them without counting its output elements
        p = self.p
        self.bytes_only = self.combine_max and \
            p["mem_gbps"] * 1e3 <= p["vector_tflops"] * 1.0 * 1e6
        self.count_elements = not self.bytes_only  # the device's key counts them too
        pk = _profile_key(profile)
        launches = _LAUNCHES.get(pk)
        if launches is None:
            if len(_LAUNCHES) >= 8:  # bounded: a process uses a profile or two
                _LAUNCHES.clear()
                _BY_OP.clear()
            launches = _LAUNCHES[pk] = {}
        self.launches = launches
        self.by_op = _BY_OP.setdefault(pk, {})
        if len(_SIZES) > _LAUNCHES_MAX:  # bounded: the shapes of a run repeat
            _SIZES.clear()
        #: one object per distinct shape a traced step shows (OpRecorder.sizes)
        self.sizes = _SIZES
        global _SimT
        from ..core.hub import HUB
        from ..sim.device import SimTensor  # the recorder observes the simulated device

        _SimT = SimTensor
        self.tls = HUB.tls  # the guard's classification of the op that just ran

    @property
    def keep_shapes(self) -> bool:
        """Whether the ops recorded now keep their input shapes (a traced step's)."""
        return self.shapes is not None

    @keep_shapes.setter
    def keep_shapes(self, on: bool) -> None:
        if not on:
            self.shapes = None
        elif self.shapes is None:
            self.shapes = [None] * len(self.ops)  # ops recorded before: no shapes known

    def _append(self, op: Op) -> None:
        """Record an op that no tensor op ran (a wait, an event, modeled work)."""
        self.ops.append(op)
        if self.shapes is not None:
            self.shapes.append(None)

    def on_event(self, ev: Any) -> None:
        """A sync event of the guard. The guard reports most reads after the call returns
        (it times the wait), so an event belongs to the sync ops run since the previous
        event; with none, to the next sync op. An explicit ``synchronize()`` runs no op: it
        becomes a wait of its own (a drain), unless it is an ``Event.synchronize`` whose
        wait :meth:`event_wait` already recorded."""
        if getattr(ev, "kind", None) == "explicit_sync" and not self.unclaimed:
            self._append(Op(str(getattr(ev, "api", "") or "synchronize"), self.p["view_us"],
                            0.0, True, [ev]))
            return
        if self.unclaimed:
            for op in self.unclaimed:
                op.events.append(ev)
            self.unclaimed = []
        else:
            self.pending.append(ev)

    def device_work(self, name: str, ms: float) -> None:
        """A modeled kernel of ``ms`` milliseconds (e.g. the forward pass, launched as one
        captured graph: ``forward_launch_us`` of host time)."""
        self._append(Op(name, self.p["forward_launch_us"], ms * 1000.0))

    def event_record(self, key: int) -> None:
        """``Event.record``: a marker on the stream (no kernel)."""
        self._append(Op("Event.record", self.p["view_us"], 0.0, tag=("record", key)))

    def event_wait(self, key: int) -> None:
        """``Event.synchronize``: the host waits for the work queued before the event's
        record; the guard's event for it follows (:meth:`on_event`)."""
        op = Op("Event.synchronize", self.p["view_us"], 0.0, True, [], ("event", key))
        self._append(op)
        self.unclaimed.append(op)

    def take(self) -> List[Op]:
        """The ops recorded since the last call (their shapes, if kept, are
        :attr:`shapes`)."""
        ops, self.ops, self.pending, self.unclaimed = self.ops, [], [], []
        return ops

    def _duration(self, nbytes: float, flops: float, peak_tflops: float,
                  eff: float = 1.0) -> float:
        mem = nbytes / (self.p["mem_gbps"] * 1e3)  # bytes / (GB/s) in us
        math_us = flops / (peak_tflops * eff * 1e6)  # flops / (TFLOP/s) in us
        work = max(mem, math_us) if self.combine_max else mem + math_us
        return self.p["kernel_us"] + work

    def _kernel_us(self, name: str, ins: List[Any], outs: List[Any]) -> float:
        """Device time of a kernel (not a view or a copy) from its inputs and outputs."""
        p = self.p
        nbytes = 0
        for t in ins:
            nbytes += t.nbytes
        numel = 0
        for t in outs:
            nbytes += t.nbytes
            numel += t.numel()
        if name in _MATMUL and len(ins) >= 2:
            a, b = ins[-2], ins[-1]
            kk = a.shape[-1] if a.dim() else 1
            m = a.numel() // max(kk, 1) if a.dim() else 1
            n = b.shape[-1] if b.dim() > 1 else 1
            flops = 2.0 * m * kk * n
            peak = p["matmul_tflops_16"] if a.dtype.itemsize <= 2 else p["matmul_tflops_32"]
            half = p["matmul_half_rows"]
            eff = m / (m + half) if half > 0 and m > 0 else 1.0
            return self._duration(float(nbytes), flops, peak, eff)
        return self._vector_us(name, nbytes, numel)

    def _vector_us(self, name: str, nbytes: int, numel: int) -> float:
        """Device time of a kernel that is not a matmul: ``nbytes`` read and written (all its
        tensors), one operation per output element (``numel``)."""
        if name in _SORTS:
            nbytes = int(nbytes * self.p["sort_passes"])
        return self._duration(float(nbytes), float(numel), self.p["vector_tflops"], 1.0)

    def on_op(self, op: Any, args: Tuple[Any, ...], kwargs: Dict[str, Any], out: Any) -> None:
        """An op observer (:data:`syncguard.sim.device.OP_OBSERVERS`): :meth:`record` of
        the ops run on the recording thread. A counted pass installs the recorder as the
        device's :data:`~syncguard.sim.device.RECORDER` instead, which looks up the
        records already filed itself and calls :meth:`record` for the rest."""
        if _get_ident() == self.thread:
            self.record(op, args, kwargs, out)

    def record(self, op: Any, args: Tuple[Any, ...], kwargs: Dict[str, Any], out: Any) -> None:
        """Record one op: a possible sync or a copy (:meth:`_general`), else its shared
        launch record (:meth:`_shared`), then filed where the device looks it up, by
        ``id(op)`` and bytes (:class:`syncguard.sim.device.OpRecorder`), when it can: an
        op on device tensors and plain arguments whose result is a device tensor or a tuple
        of them, never an op that may sync (its classifier must see every call). The
        records are the same as costing every op afresh (tests/model/test_timeline.py pins
        them)."""
        k = _KINDS.get(id(op))
        if k is None:
            k = _KINDS[id(op)] = _OpKind(op)
        self.add_shapes(args, kwargs)
        if k.mode == _GENERAL:
            self._general(k, args, kwargs, out)
            return
        rec = self._shared(k, args, kwargs, out)
        self.ops.append(rec)
        if k.mode == _SHAPES:
            return
        outs = (out,) if type(out) is _SimT else out if type(out) is tuple else None
        if outs:
            nb = _arg_bytes(args, kwargs)
            if nb is not None:
                ne = 0
                for o in outs:
                    if type(o) is not _SimT:
                        return
                    v = o._v
                    nb += v.nbytes
                    ne += v.numel()
                self._file(id(op), (nb, ne) if self.count_elements else nb, rec)

    def add_shapes(self, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> None:
        """In a traced step, the dtypes and shapes of the tensors an op takes
        (:func:`_add_in_shapes`)."""
        if self.shapes is not None:
            _add_in_shapes(self.shapes, args, kwargs)

    def _shared(self, k: _OpKind, args: Tuple[Any, ...], kwargs: Dict[str, Any],
                out: Any) -> Op:
        """The shared launch record of a view or a kernel (built the first time): a view by
        its op; a kernel on simulated tensors and plain arguments by its bytes (and output
        elements), a matmul by dtypes and shapes; anything else (a host tensor, a tensor
        list) by the dtypes and shapes of all its tensors."""
        base = k.base
        key: Any = None
        if base == _VIEW:
            rec = self.launches.get(k)
            if rec is None:
                rec = Op(k.name, self.p["view_us"], 0.0)
                self._keep(k, rec)
            return rec
        if base == _BYTES:
            arg_nb = _arg_bytes(args, kwargs)
            if arg_nb is not None:
                nb = arg_nb
                ne = 0
                for o in out if type(out) is tuple or type(out) is list else (out,):
                    if type(o) is _SimT:
                        v = o._v
                        nb += v.nbytes
                        ne += v.numel()
                    elif isinstance(o, _Tensor):
                        break
                else:
                    key = (k, nb) if self.bytes_only else (k, nb, ne)
                    rec = self.launches.get(key)
                    if rec is None:
                        rec = Op(k.name, self.p["launch_us"], self._vector_us(k.name, nb, ne))
                        self._keep(key, rec)
                    return rec
        else:  # _SHAPES
            key = _shape_key(k, args, kwargs, out)
        if key is None:
            key = _full_key(k, args, kwargs, out)
        rec = self.launches.get(key)
        if rec is None:
            rec = self._launch(k, args, kwargs, out, key)
        return rec

    def _file(self, oid: int, key: Any, rec: Op) -> None:
        """File ``rec`` where the device looks it up: ``by_op[id(op)][key]``."""
        by = self.by_op.get(oid)
        if by is None:
            by = self.by_op[oid] = {}
        elif len(by) >= _LAUNCHES_MAX:  # bounded: the shapes of a run repeat
            by.clear()
        by[key] = rec

    def _keep(self, key: Any, rec: Op) -> None:
        if len(self.launches) >= _LAUNCHES_MAX:
            self.launches.clear()
        self.launches[key] = rec

    def _launch(self, k: _OpKind, args: Tuple[Any, ...], kwargs: Dict[str, Any], out: Any,
                key: Any) -> Op:
        """Build the shared record of a view or a kernel under ``key`` (not a sync: a sync
        copies it into a fresh :class:`Op`)."""
        if k.kind == VIEW:  # a view (or an allocation) costs view_us whatever its sizes
            rec = Op(k.name, self.p["view_us"], 0.0)
        else:  # a kernel's cost depends only on the op and its tensors' dtypes and shapes
            rec = Op(k.name, self.p["launch_us"],
                     self._kernel_us(k.name, _inputs(args, kwargs), _outputs(out)))
        self._keep(key, rec)
        return rec

    def _general(self, k: _OpKind, args: Tuple[Any, ...], kwargs: Dict[str, Any],
                 out: Any) -> None:
        """An op that may sync (it has a classifier, asked here as the guard asks) or a
        copy (:meth:`_copy`): a sync's record is a fresh copy of the shared launch record,
        for the guard's events. The guard's hook classified this very call before it ran
        (the same arguments object): its answer is taken; without a guard, or for a call
        other ops ran inside, the classifier is asked again."""
        if k.classify is None:
            sync = False
        else:
            last = self.tls.last_hit
            sync = (last[1] if last is not None and last[0] is args
                    else k.classify(args, kwargs, self.device_type)) is not None
        shared = self._copy(k, args, kwargs) if k.base == _COPY else \
            self._shared(k, args, kwargs, out)
        if not sync:
            self.ops.append(shared)
            if k.base == _COPY and len(args) > 1 and type(args[0]) is _SimT and \
                    type(args[1]) is _SimT:  # device to device: the device finds it itself
                self._file(k.oid, args[0]._v.nbytes, shared)
            return
        rec = Op(k.name, shared.host_us, shared.dev_us, True)
        if self.pending:
            rec.events, self.pending = self.pending, []
        else:
            rec.events = []
            self.unclaimed.append(rec)
        self.ops.append(rec)

    def _copy(self, k: _OpKind, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Op:
        """The shared launch record of a copy, by its op, direction and bytes (the source's):
        host to device and device to host at their bandwidths after ``copy_us``, device to
        device a kernel that reads and writes them."""
        # (self, dst, ...) by position, as the device passes them; else from the keywords
        src = args[0] if args else kwargs.get("self")
        dst = args[1] if len(args) > 1 else kwargs.get("dst")
        if type(src) is _SimT:
            n = src._v.nbytes  # type: ignore[union-attr]
            src_host = False
        else:
            n = src.nbytes if isinstance(src, _Tensor) else 0
            src_host = isinstance(src, _Tensor) and _on_host(src)
        dst_host = k.name == "_local_scalar_dense" or (
            type(dst) is not _SimT and isinstance(dst, _Tensor) and _on_host(dst))
        key = (k, src_host, dst_host, n)
        rec = self.launches.get(key)
        if rec is None:
            p = self.p
            if src_host or dst_host:
                bw = p["h2d_gbps"] if src_host else p["d2h_gbps"]
                dev = p["copy_us"] + n / (bw * 1e3)
            else:  # device to device: read and write
                dev = self._duration(2.0 * n, 0.0, p["vector_tflops"])
            rec = Op(k.name, p["launch_us"], dev)
            self._keep(key, rec)
        return rec


_SHAPE_TEXT: Dict[Any, str] = {}


def op_shapes(flat: Sequence[Any]) -> List[Tuple[Any, ...]]:
    """A traced step's :attr:`Recorder.shapes` per op: ``[dtype, shape, None, None]`` ->
    ``[((dtype, shape),), ()]``."""
    out: List[Tuple[Any, ...]] = []
    start = 0
    for i, x in enumerate(flat):
        if x is None:
            out.append(tuple(zip(flat[start:i:2], flat[start + 1:i:2])))
            start = i + 1
    return out


def op_shape_texts(flat: Sequence[Any]) -> List[List[str]]:
    """:func:`shape_text` of each op's input shapes in a traced step's
    :attr:`Recorder.shapes`, kept for the next op of the same shapes (a traced step's texts
    are made once per pass; the lines never change them)."""
    out: List[List[str]] = []
    start = 0
    for i, x in enumerate(flat):  # split as op_shapes does, keyed by the flat slice: 3x faster
        if x is None:
            key = tuple(flat[start:i])
            txt = _OP_TEXT.get(key)
            if txt is None:
                if len(_OP_TEXT) > 100_000:  # bounded: shapes of a run repeat
                    _OP_TEXT.clear()
                txt = _OP_TEXT[key] = shape_text(list(zip(key[::2], key[1::2])))
            out.append(txt)
            start = i + 1
    return out


_OP_TEXT: Dict[Any, List[str]] = {}


def shape_text(shapes: Sequence[Any]) -> List[str]:
    """``[(torch.float32, torch.Size([8, 32000]))] -> ["float32[8, 32000]"]``."""
    out = []
    for key in shapes:
        txt = _SHAPE_TEXT.get(key)
        if txt is None:
            if len(_SHAPE_TEXT) > 100_000:  # bounded: shapes of a run repeat
                _SHAPE_TEXT.clear()
            txt = _SHAPE_TEXT[key] = f"{str(key[0])[6:]}{list(key[1])}"
        out.append(txt)
    return out


# -- replay -----------------------------------------------------------------------------------
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


def _event_key(events: List[Any]) -> Any:
    """What :func:`_site` reads of a sync's events, unformatted (for comparing two)."""
    if not events:
        return None
    e = events[0]
    return (getattr(e, "filename", "?"), getattr(e, "lineno", "?"), getattr(e, "api", ""),
            all(getattr(x, "allowed", False) for x in events))


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


def same_ops(a: Sequence[Op], b: Sequence[Op]) -> bool:
    """Whether two steps' ops give the same replay: equal in length and op by op (a launch
    record the recorder shared is the same object, compared by identity at C speed; other
    ops by :meth:`Op.__eq__`: what the replay reads)."""
    return (a == b) if type(a) is list and type(b) is list else list(a) == list(b)


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
        from ..sim import device as simdev
        from ..sim import npu_module

        self._outer = simdev.RECORDER  # a model inside another's pass: restored at exit
        simdev.RECORDER = self.rec
        if _EVENT_HOOKS not in npu_module.EVENT_OBSERVERS:
            npu_module.EVENT_OBSERVERS.append(_EVENT_HOOKS)
        _ACTIVE.append(self.rec)
        return self

    def __exit__(self, *exc: Any) -> None:
        from ..sim import device as simdev

        if simdev.RECORDER is self.rec:
            simdev.RECORDER = self._outer
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
