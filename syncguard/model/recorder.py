"""The recorder of the modeled timeline: each op the simulated device runs becomes a launch
(:class:`Op`) with a host cost and a device duration from a device profile
(:class:`~syncguard.model.profile.Profile`); the simulated device hands it every op
(:class:`syncguard.sim.kernel.OpRecorder`), and the replay (:mod:`syncguard.model.timeline`)
reads the launches. Launch records that cannot sync are built once per profile and shared
(decode steps repeat their ops); a traced step keeps its ops' input shapes, flat."""

from __future__ import annotations

import threading
from typing import Any, Dict, List, Optional, Sequence, Tuple

from torch import Tensor as _Tensor

from ..core import classify
from ..core.hub import HUB
from ..core.plain import PLAIN, is_plain
from ..sim.kernel import SimTensor
from .profile import Profile

VIEW = "view"
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
#: (:class:`syncguard.sim.kernel.OpRecorder`): by ``id(op)``, then by bytes (or bytes and
#: output elements).
_BY_OP: Dict[Any, Dict[int, Dict[Any, Op]]] = {}
#: One object per shape (``torch.Size``) a traced step shows, kept for the next steps (see
#: :class:`syncguard.sim.kernel.OpRecorder`).
_SIZES: Dict[Any, Any] = {}
_OUT = object()  # in a launch key: the output tensors follow
_get_ident = threading.get_ident


def _on_host(t: Any) -> bool:
    """Whether a tensor is on the host (a simulated tensor never is: no device read)."""
    return type(t) is not SimTensor and t.device.type == "cpu"


def _arg_bytes(args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Optional[int]:
    """The bytes of the simulated tensors an op takes, or None when an argument is neither
    one nor plain (a host tensor, a tensor list): then bytes alone do not key its launch."""
    nb = 0
    for a in (*args, *kwargs.values()) if kwargs else args:
        if type(a) is SimTensor:
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
            t = a._v if type(a) is SimTensor else a  # type: ignore[attr-defined]
            out.append(t.dtype)
            s = t.shape
            out.append(_SIZES.setdefault(s, s))
        elif type(a) is list or type(a) is tuple:
            for y in a:
                if isinstance(y, _Tensor):
                    t = y._v if type(y) is SimTensor else y  # type: ignore[attr-defined]
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
        if type(a) is SimTensor:
            v = a._v
            key.append(v.dtype)
            key.append(v.shape)
        elif type(a) not in PLAIN and not is_plain(a):
            return None
    key.append(_OUT)
    outs = out if type(out) is tuple or type(out) is list else (out,)
    for o in outs:
        if type(o) is SimTensor:
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
    return (t.dtype, (t._v if type(t) is SimTensor else t).shape)


def _profile_key(profile: Profile) -> Any:
    return (profile.combine, tuple(sorted(profile.values.items())))


class Recorder:
    """Collects the ops the simulated device runs on the recording thread, with their modeled
    costs on ``profile``; :meth:`take` hands them over (and starts afresh). While
    :attr:`shapes` is a list (a traced step: ``keep_shapes``), it gets each op's inputs'
    dtypes and shapes, flat (``dtype, shape, dtype, shape..., None``: ``None`` ends each op
    recorded; :func:`op_shapes` splits them), so a traced step makes no objects per op.

    The simulated device hands it every op of a counted pass
    (:class:`syncguard.sim.kernel.OpRecorder`): an op that cannot sync, on device tensors
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
        """An op observer (:data:`syncguard.sim.kernel.OP_OBSERVERS`): :meth:`record` of
        the ops run on the recording thread. A counted pass installs the recorder as the
        device's :data:`~syncguard.sim.kernel.RECORDER` instead, which looks up the
        records already filed itself and calls :meth:`record` for the rest."""
        if _get_ident() == self.thread:
            self.record(op, args, kwargs, out)

    def record(self, op: Any, args: Tuple[Any, ...], kwargs: Dict[str, Any], out: Any) -> None:
        """Record one op: a possible sync or a copy (:meth:`_general`), else its shared
        launch record (:meth:`_shared`), then filed where the device looks it up, by
        ``id(op)`` and bytes (:class:`syncguard.sim.kernel.OpRecorder`), when it can: an
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
        outs = (out,) if type(out) is SimTensor else out if type(out) is tuple else None
        if outs:
            nb = _arg_bytes(args, kwargs)
            if nb is not None:
                ne = 0
                for o in outs:
                    if type(o) is not SimTensor:
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
                    if type(o) is SimTensor:
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
            if k.base == _COPY and len(args) > 1 and type(args[0]) is SimTensor and \
                    type(args[1]) is SimTensor:  # device to device: the device finds it itself
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
        if type(src) is SimTensor:
            n = src._v.nbytes  # type: ignore[union-attr]
            src_host = False
        else:
            n = src.nbytes if isinstance(src, _Tensor) else 0
            src_host = isinstance(src, _Tensor) and _on_host(src)
        dst_host = k.name == "_local_scalar_dense" or (
            type(dst) is not SimTensor and isinstance(dst, _Tensor) and _on_host(dst))
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


def _event_key(events: List[Any]) -> Any:
    """What :func:`_site` reads of a sync's events, unformatted (for comparing two)."""
    if not events:
        return None
    e = events[0]
    return (getattr(e, "filename", "?"), getattr(e, "lineno", "?"), getattr(e, "api", ""),
            all(getattr(x, "allowed", False) for x in events))


def same_ops(a: Sequence[Op], b: Sequence[Op]) -> bool:
    """Whether two steps' ops give the same replay: equal in length and op by op (a launch
    record the recorder shared is the same object, compared by identity at C speed; other
    ops by :meth:`Op.__eq__`: what the replay reads)."""
    return (a == b) if type(a) is list and type(b) is list else list(a) == list(b)
