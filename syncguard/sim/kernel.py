"""The simulated device's tensors and the one kernel every ATen op on them runs through.

On torch >= 2.9 (``torch.utils.backend_registration``; torch 2.7 and 2.8 take the route of
:mod:`syncguard.sim.wrapper_backend`, which feeds the same kernel):

* A device tensor is a :class:`SimTensor`: a storage-less PrivateUse1 ``TensorImpl`` from
  ``torch._C._acc.create_empty_tensor`` whose ``__class__`` is reassigned, holding its values
  in ``_v``, an ordinary CPU tensor. The wrapper's sizes, strides and storage offset mirror
  ``_v`` exactly (strides and offset are set by redispatching ``aten::set_`` to its Meta kernel,
  which only edits metadata), so PyTorch's composite code computes the same views it would for
  a real device tensor.
* One boxed Python kernel runs every ATen op on the PrivateUse1 key: a ``fallback`` for ops
  with no kernel there, plus direct registrations for the ops that have a
  CompositeExplicitAutograd(NonFunctional) kernel (those take precedence over a backend
  fallback; left alone, ``detach``/``alias`` would return bare tensors without values and
  every structured op would arrive as ``empty`` + ``op.out``). The transfer ops ``copy_`` and
  ``copy`` keep their composite kernels and ``_to_copy`` gets a Python copy of its composite
  kernel, so that every host/device transfer reaches the backend as ``aten::_copy_from``
  (``_to_copy``'s own composite would allocate the host result of a non-blocking
  device-to-host copy with ``pin_memory=True``, which the Python hooks cannot serve).
* Before each op the kernel calls ``syncguard.core.aten.backend_op_hook(op, args, kwargs,
  device_type=name)``; ``args``/``kwargs`` hold the :class:`SimTensor` wrappers as the caller
  passed them. Then it unwraps device tensors to their CPU values, maps ``device=npu`` to CPU,
  runs the op, and wraps tensor results. A view op returns a wrapper around the CPU view,
  which shares the base's CPU storage, so in-place ops through a view change the base.
  In-place and ``out=`` ops return the caller's own wrapper (metadata refreshed if the op
  resized it).

"""

from __future__ import annotations

import threading
from typing import Any, Callable, Dict, Iterator, List, Optional, Protocol, Set, Tuple

import torch
from torch._tensor_str import _str_intern, _tensor_str
from torch.utils._python_dispatch import _disable_current_modes

from syncguard.core import aten as _aten
from syncguard.core import intercept as _intercept
from syncguard.core.plain import PLAIN as _PLAIN
from syncguard.core.plain import is_plain as _is_plain

from ..errors import SyncguardError
from .pinned import empty_pinned, is_pinned_cpu, pin_memory_cpu


class SimulatedDeviceError(SyncguardError, RuntimeError):
    """The simulated device cannot be set up (or used) in this process, and why."""


_NAME = "npu"  # the backend name; set at setup, read on the hot path
_CPU = torch.device("cpu")


# --------------------------------------------------------------------------------------------
# The tensor wrapper
# --------------------------------------------------------------------------------------------


class SimTensor(torch.Tensor):
    """A tensor of the simulated device. Its values live in ``_v``, a CPU tensor.

    Never construct one directly: create tensors with ``device="npu"`` or ``.to("npu")``.
    """

    # Plain-tensor semantics for torch functions (no subclass re-wrapping of results).
    __torch_function__ = torch._C._disabled_torch_function_impl  # type: ignore[assignment]

    _v: torch.Tensor

    def __repr__(self, *, tensor_contents: Optional[str] = None) -> str:  # type: ignore[override]
        return _format_tensor(self, tensor_contents)

    def __format__(self, format_spec: str) -> str:
        if self.dim() == 0:
            return self.item().__format__(format_spec)
        return object.__format__(self, format_spec)

    def __reduce_ex__(self, proto: Any) -> Tuple[Any, ...]:  # type: ignore[override]
        # Same as torch does for storage-less device tensors (xla, mtia, Python backends):
        # pickle a CPU copy and rebuild with ``.to(device)``; torch.load(weights_only=True)
        # allows the rebuild function.
        return (
            torch._utils._rebuild_device_tensor_from_cpu_tensor,
            (self.cpu(), self.dtype, str(self.device), self.requires_grad),
        )

    def __deepcopy__(self, memo: Dict[int, Any]) -> SimTensor:
        if id(self) in memo:
            return memo[id(self)]  # type: ignore[no-any-return]
        new = self.clone()
        memo[id(self)] = new
        return new  # type: ignore[return-value]

    def view(self, *args: Any, **kwargs: Any) -> torch.Tensor:  # type: ignore[override]
        # aten::view.dtype is a non-differentiable view: autograd's ADInplaceOrView layer
        # returns a shallow copy of the backend's result (a plain tensor without values), so
        # reinterpreting views are made here, through the backend kernel, instead.
        if len(args) == 1 and isinstance(args[0], torch.dtype) and not kwargs:
            return _view_dtype(self, args[0])
        if not args and set(kwargs) == {"dtype"}:
            return _view_dtype(self, kwargs["dtype"])
        return torch.Tensor.view(self, *args, **kwargs)

    def data_ptr(self) -> int:  # type: ignore[override]
        """The address of the backing CPU values (views of one base share its storage)."""
        return int(self._v.data_ptr())


# None when this torch lacks it: setup then refuses with SimulatedDeviceError (_refusal).
_create_empty: Callable[[Any, torch.dtype], torch.Tensor] = getattr(
    getattr(torch._C, "_acc", None), "create_empty_tensor", None)  # type: ignore[assignment]
_META_KS = torch._C.DispatchKeySet(torch._C.DispatchKey.Meta)
_SET_STORAGE = torch.ops.aten.set_.source_Storage_storage_offset
# The backend's own work calls ATen ops, never the (possibly intercepted) Python methods.
_COPY_ = torch.ops.aten.copy_.default
_RESIZE_ = torch.ops.aten.resize_.default
_EMPTY_LIKE = torch.ops.aten.empty_like.default
_TO_COPY = torch.ops.aten._to_copy.default


def _restride(w: torch.Tensor, v: torch.Tensor) -> None:
    """Make wrapper ``w``'s sizes/strides/offset equal ``v``'s (metadata only, no data)."""
    _SET_STORAGE.redispatch(
        _META_KS, w, w.untyped_storage(), v.storage_offset(), v.shape, v.stride()
    )


def _wrap(v: torch.Tensor) -> SimTensor:
    """A new device wrapper around CPU tensor ``v`` (aliases ``v``: no copy).

    Replaced by :func:`syncguard.sim.wrapper_backend.wrap` on the wrapper route."""
    w = _create_empty(v.shape, v.dtype)
    if v.storage_offset() or v.stride() != w.stride():
        _restride(w, v)
    w.__class__ = SimTensor
    w._v = v  # type: ignore[attr-defined]
    return w  # type: ignore[return-value]


def _refresh(w: Any) -> None:
    """After an op that may resize/restride its mutable argument, mirror the CPU metadata."""
    if type(w) is SimTensor:
        v = w._v
        if (v.shape != w.shape or v.stride() != w.stride()
                or v.storage_offset() != w.storage_offset()):
            _restride(w, v)
    elif type(w) is list or type(w) is tuple:
        for x in w:
            _refresh(x)


def is_simulated(t: Any) -> bool:
    """Whether ``t`` is a tensor of the simulated device."""
    return isinstance(t, SimTensor)


def host_value(t: torch.Tensor) -> torch.Tensor:
    """The CPU tensor holding a simulated tensor's values: an alias, no copy, never reported.

    A CPU tensor is returned as is. For syncguard's own checks (e.g. contract validation).
    """
    if isinstance(t, SimTensor):
        return t._v
    if t.device.type == "cpu":
        return t
    raise SimulatedDeviceError(f"host_value: {t.device} tensor is neither simulated nor on CPU")


# --------------------------------------------------------------------------------------------
# Printing
# --------------------------------------------------------------------------------------------


def _format_tensor(t: SimTensor, tensor_contents: Optional[str]) -> str:
    # Printing a device tensor reads its values: one device-to-host copy, made through the
    # backend (aten::_copy_from) as ``.cpu()`` would, but without calling the Python method
    # (interceptors of Tensor.cpu would otherwise name it). Formatting the host copy is host
    # work: nothing in it is reported.
    cpu = _TO_COPY(t, device=_CPU) if tensor_contents is None else None
    with torch.no_grad(), _disable_current_modes(), _intercept.suppressed():
        if tensor_contents is None:
            assert cpu is not None
            if cpu.numel() == 0:
                tensor_contents = "[]"
            else:
                tensor_contents = _tensor_str(cpu, len("tensor("))
        # A plain (not subclassed) PrivateUse1 shell with the same metadata gives torch's own
        # prefix and suffixes ("tensor(", device='npu:0', dtype=...), with no data access.
        shell = _shell(t.shape, t.dtype)
        return _str_intern(shell, tensor_contents=tensor_contents)  # type: ignore[no-any-return]


def _shell(shape: Any, dtype: torch.dtype) -> torch.Tensor:
    """A value-less device tensor of this metadata, for torch's printing prefix (replaced by
    :func:`syncguard.sim.wrapper_backend.shell` on the wrapper route)."""
    return _create_empty(shape, dtype)


# --------------------------------------------------------------------------------------------
# Per-op information (computed once per OpOverload from its schema)
# --------------------------------------------------------------------------------------------

# Ops that may change the sizes/strides of a mutable argument in place.
_META_MUTATORS = frozenset({
    "resize_", "resize_as_", "set_", "as_strided_", "squeeze_", "unsqueeze_", "transpose_",
    "t_", "swapdims_", "swapaxes_", "_resize_output_", "resize_as_sparse_",
})

# Index ops accept CPU index tensors next to device tensors (as CUDA/NPU do).
_CPU_INDEX_OK = frozenset({"index", "_index_put_impl_", "index_put_", "index_put", "_unsafe_index",
                           "_unsafe_index_put"})

_KernelFn = Callable[[Any, Tuple[Any, ...], Dict[str, Any]], Any]


class _OpInfo:
    __slots__ = ("op", "oid", "name", "special", "write_returns", "mutable", "refresh",
                 "has_device", "cpu_index_ok", "copy", "call")

    def __init__(self, op: Any) -> None:
        schema = op._schema
        self.op = op
        self.oid = id(op)  # the recorder's key (OpRecorder.by_op)
        # what ``op(...)`` runs (OpOverload.__call__ is ``self._op(...)``), called directly:
        # while a guard is active, OpOverload.__call__ is syncguard's (compiled graphs' reads)
        self.call = getattr(op, "_op", op)
        self.name: str = schema.name.split("::", 1)[-1]
        self.special: Optional[_KernelFn] = _SPECIAL.get(self.name)
        # a copy kernel: (src, dst, ...); between two device tensors it never syncs
        self.copy = self.name in ("_copy_from", "_copy_from_and_resize")
        arguments = list(schema.arguments)
        # (position, name, kwarg_only) of the argument each write-aliased return refers to.
        self.write_returns: Optional[List[Optional[Tuple[int, str, bool]]]] = None
        self.mutable: List[Tuple[int, str, bool]] = []
        for i, a in enumerate(arguments):
            ai = a.alias_info
            if ai is not None and ai.is_write:
                self.mutable.append((i, a.name, a.kwarg_only))
        rets: List[Optional[Tuple[int, str, bool]]] = []
        any_write = False
        for r in schema.returns:
            ri = r.alias_info
            found: Optional[Tuple[int, str, bool]] = None
            if ri is not None and ri.is_write:
                for i, a in enumerate(arguments):
                    ai = a.alias_info
                    if ai is not None and ai.is_write and set(ai.before_set) & set(ri.before_set):
                        found = (i, a.name, a.kwarg_only)
                        break
            if found is not None:
                any_write = True
            rets.append(found)
        if any_write:
            self.write_returns = rets
        self.refresh = bool(self.mutable) and (
            self.name in _META_MUTATORS or any(kw for _, _, kw in self.mutable)
        )
        self.has_device = any(a.name == "device" for a in arguments)
        self.cpu_index_ok = self.name in _CPU_INDEX_OK


def _get_arg(args: Tuple[Any, ...], kwargs: Dict[str, Any], where: Tuple[int, str, bool]) -> Any:
    i, name, kw_only = where
    if not kw_only and i < len(args):
        return args[i]
    return kwargs.get(name)


# Keyed by id(op): OpOverload.__hash__ is Python code, and the info keeps the op alive, so
# the id is never reused while cached.
_INFO: Dict[int, _OpInfo] = {}
_INFO_LOCK = threading.Lock()


def _info(op: Any) -> _OpInfo:
    info = _INFO.get(id(op))
    if info is None:
        with _INFO_LOCK:
            info = _INFO.get(id(op))
            if info is None:
                info = _OpInfo(op)
                _INFO[id(op)] = info
    return info


# --------------------------------------------------------------------------------------------
# The kernel
# --------------------------------------------------------------------------------------------


def _foreign(a: torch.Tensor, info: _OpInfo) -> torch.Tensor:
    """A non-simulated tensor passed to an op on the simulated device."""
    dev = a.device
    if dev.type == _NAME:
        raise SimulatedDeviceError(
            f"{info.name}: got a {_NAME} tensor that has no simulated values (a plain "
            f"PrivateUse1 tensor, not a SimTensor). Known source: aten::view.dtype called "
            f"other than as tensor.view(dtype) (autograd returns a shallow copy for this "
            f"non-differentiable view); otherwise a syncguard.sim bug"
        )
    if dev.type == "cpu" and a.dim() > 0 and not info.cpu_index_ok:
        raise RuntimeError(
            f"Expected all tensors to be on the same device, but found at least two devices, "
            f"{_NAME}:0 and cpu! (when running {info.name} on the simulated device)"
        )
    return a


def _unwrap(a: Any, info: _OpInfo) -> Any:
    t = type(a)
    if t is SimTensor:
        return a._v
    if t is list or t is tuple:
        for x in a:
            if isinstance(x, torch.Tensor):
                return [_unwrap(y, info) for y in a]
        return a
    if t is torch.device:
        return _CPU if a.type == _NAME else a
    if isinstance(a, torch.Tensor):
        return _foreign(a, info)
    return a


def _wrap_out(out: Any, cargs: List[Any], args: Tuple[Any, ...]) -> Any:
    t = type(out)
    if t is torch.Tensor:
        # An op that returns its input itself (``_conj`` of a real tensor...) keeps the wrapper.
        if cargs and out is cargs[0] and type(args[0]) is SimTensor:
            return args[0]
        return _wrap(out)
    if t is tuple or t is list:
        return t(_wrap_out(x, cargs, args) for x in out)
    if isinstance(out, torch.Tensor):  # a CPU subclass result: wrap its values as they are
        return _wrap(out)
    return out


def _run(info: _OpInfo, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Any:
    op = info.op
    _aten.backend_op_hook(op, args, kwargs, device_type=_NAME)
    if info.special is not None:
        return info.special(op, args, kwargs)
    cargs = [a._v if type(a) is SimTensor else _unwrap(a, info) for a in args]
    ckwargs = {k: _unwrap(v, info) for k, v in kwargs.items()} if kwargs else kwargs
    return _result(info, args, kwargs, cargs, info.call(*cargs, **ckwargs))


def _result(info: _OpInfo, args: Tuple[Any, ...], kwargs: Dict[str, Any], cargs: List[Any],
            out: Any) -> Any:
    """What an op returns on the simulated device, from ``out``, what it returned on the
    CPU values ``cargs``: the argument it wrote (its wrapper), or new wrappers."""
    wr = info.write_returns
    if wr is not None:
        if info.refresh:
            for where in info.mutable:
                _refresh(_get_arg(args, kwargs, where))
        if len(wr) == 1:
            w0 = wr[0]
            return _get_arg(args, kwargs, w0) if w0 is not None else _wrap_out(out, cargs, args)
        return tuple(
            _get_arg(args, kwargs, w) if w is not None else _wrap_out(o, cargs, args)
            for w, o in zip(wr, out)
        )
    if info.mutable:
        if info.refresh:
            for where in info.mutable:
                _refresh(_get_arg(args, kwargs, where))
        if out is None:
            return None
    if info.has_device:
        dev = kwargs.get("device")
        if dev is not None and torch.device(dev).type != _NAME:
            return out  # e.g. empty_like(x, device="cpu"): the result stays on the host
    return _wrap_out(out, cargs, args)


def _view_dtype(t: SimTensor, dtype: torch.dtype) -> Any:
    return _run(_info(torch.ops.aten.view.dtype), (t, dtype), {})


#: Called after every op on the simulated device as ``cb(op, args, kwargs, out)``. An
#: observer must not keep ``out``: a factory function called from Python (``torch.arange``,
#: ``torch.zeros``...) hands its caller a shallow copy of a result that is referenced
#: elsewhere when the kernel returns (autograd's ``make_variable``), and that copy has no
#: simulated values.
OP_OBSERVERS: List[Callable[[Any, Tuple[Any, ...], Dict[str, Any], Any], None]] = []


class OpRecorder(Protocol):
    """What the device hands every op it runs on the recorder's thread (the modeled
    timeline, :class:`syncguard.model.recorder.Recorder`, is one). An op whose arguments
    are device tensors and plain values and whose result is a device tensor (or a tuple of
    them) the device records itself: it appends to ``ops`` the record the recorder filed in
    ``by_op[id(op)]`` under its bytes (``(bytes, elements)`` with ``count_elements``), bytes
    being all its tensors' (inputs and results) and elements its results' (a copy between
    two device tensors: under its source's bytes), and while
    ``shapes`` is a list (one flat list per step: no objects per op), its inputs' dtypes
    and shapes (``dtype, shape, dtype, shape...``) then ``None``, the op's end; each shape
    the one equal object in ``sizes`` (a traced step then keeps no new objects: a garbage
    collection of them cost more than reading them). Every other
    op, or one with no record yet, goes to ``record(op, args, kwargs, out)``. (A Python call
    per op would cost the simulated device about a tenth of its own work on small tensors;
    an op that repeats costs it a lookup: benchmarks/bench_timeline.py.)"""

    thread: int
    by_op: Dict[int, Dict[Any, Any]]
    ops: List[Any]
    shapes: Optional[List[Any]]
    sizes: Dict[Any, Any]
    count_elements: bool

    def record(self, op: Any, args: Tuple[Any, ...], kwargs: Dict[str, Any],
               out: Any) -> None: ...

    def add_shapes(self, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> None:
        """While ``shapes`` is a list, append what ``record`` would of an op's inputs (for
        an op the device looked up other than inline)."""


#: The recorder of the op stream (:class:`OpRecorder`), or None; set by the model.
RECORDER: Optional[OpRecorder] = None
_get_ident = threading.get_ident


#: whether an op ran on the simulated device in this process (``exec``'s evidence that the
#: program used the device at all: syncguard.execute.follow.device_used)
USED = False


def _run_observed(info: _OpInfo, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Any:
    """:func:`_run`, then the :data:`OP_OBSERVERS`. On the :data:`RECORDER`'s thread the op
    goes to the recorder (:class:`OpRecorder`) as it runs: the bytes it touches are summed
    from the CPU values it runs on, so its record costs a lookup (inline: a call per op is
    the model's cost too)."""
    global USED
    USED = True
    rec = RECORDER
    if rec is None or _get_ident() != rec.thread:
        res = _run(info, args, kwargs)
    else:
        op = info.op
        _aten.backend_op_hook(op, args, kwargs, device_type=_NAME)
        if info.special is not None:
            res = info.special(op, args, kwargs)
            r = None
            if info.copy and len(args) > 1 and type(args[0]) is SimTensor and \
                    type(args[1]) is SimTensor:  # device to device: filed by the source's bytes
                by = rec.by_op.get(info.oid)
                if by is not None:
                    r = by.get(args[0]._v.nbytes)
            if r is None:
                rec.record(op, args, kwargs, res)
            else:
                rec.ops.append(r)
                rec.add_shapes(args, kwargs)
        else:
            fast = True  # only device tensors and plain values: its record may be filed
            nb = 0  # the bytes of the device tensors among the arguments
            sh = rec.shapes  # a traced step's: each input's dtype and shape, then None
            mark = 0
            if sh is not None:
                mark = len(sh)
                sizes = rec.sizes
            cargs: List[Any] = []
            for a in args:
                if type(a) is SimTensor:
                    v = a._v
                    nb += v.nbytes
                    cargs.append(v)
                    if sh is not None:
                        sh.append(v.dtype)
                        sz = v.shape
                        sh.append(sizes.setdefault(sz, sz))
                else:
                    if fast and type(a) not in _PLAIN and not _is_plain(a):
                        fast = False
                    cargs.append(_unwrap(a, info))
            ckwargs = kwargs
            if kwargs:
                ckwargs = {}
                for k, a in kwargs.items():
                    if type(a) is SimTensor:
                        v = a._v
                        nb += v.nbytes
                        ckwargs[k] = v
                        if sh is not None:
                            sh.append(v.dtype)
                            sz = v.shape
                            sh.append(sizes.setdefault(sz, sz))
                    else:
                        if fast and type(a) not in _PLAIN and not _is_plain(a):
                            fast = False
                        ckwargs[k] = _unwrap(a, info)
            res = _result(info, args, kwargs, cargs, info.call(*cargs, **ckwargs))
            r = None
            by = rec.by_op.get(info.oid) if fast else None  # two int-keyed lookups: no tuple
            if by is not None:
                if type(res) is SimTensor:
                    v = res._v  # its values: what record() keyed (the same bytes, elements)
                    r = by.get((nb + v.nbytes, v.numel()) if rec.count_elements
                               else nb + v.nbytes)
                elif type(res) is tuple and res:  # sort, topk, max.dim...: device tensors
                    ne = 0
                    for o in res:
                        if type(o) is not SimTensor:
                            break
                        v = o._v
                        nb += v.nbytes
                        ne += v.numel()
                    else:
                        r = by.get((nb, ne) if rec.count_elements else nb)
            if r is not None:
                rec.ops.append(r)
                if sh is not None:
                    sh.append(None)
            else:
                if sh is not None:
                    del sh[mark:]  # record() adds them
                rec.record(op, args, kwargs, res)
    for cb in OP_OBSERVERS:
        cb(info.op, args, kwargs, res)
    return res


def _on_meta(args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> bool:
    """Whether an op's tensors are data-less ``meta`` tensors carrying this device's dispatch
    keys: torch.compile's fake tensors of the device (``FakeTensor.__new__`` detaches its meta
    value with the device's keys; aot_autograd and inductor run such ops too)."""
    for a in args:
        if isinstance(a, torch.Tensor):
            return type(a) is not SimTensor and a.is_meta
    for a in kwargs.values():
        if isinstance(a, torch.Tensor):
            return type(a) is not SimTensor and a.is_meta
    return False


def _fallback(keyset: Any, op: Any, *args: Any, **kwargs: Any) -> Any:
    if args and type(args[0]) is not SimTensor and _on_meta(args, kwargs):
        # no values to run on or read: what the Meta backend does (shapes, strides, aliases);
        # run here, the op would come back to this kernel for ever
        return op.redispatch(_META_KS, *args, **kwargs)
    info = _INFO.get(id(op))
    return _run_observed(info if info is not None else _info(op), args, kwargs)


def _make_kernel(op: Any) -> Callable[..., Any]:
    info = _info(op)

    def kernel(keyset: Any, *args: Any, **kwargs: Any) -> Any:
        if args and type(args[0]) is not SimTensor and _on_meta(args, kwargs):
            return op.redispatch(_META_KS, *args, **kwargs)  # as _fallback does
        return _run_observed(info, args, kwargs)

    return kernel


# ---- special ops ---------------------------------------------------------------------------


def _copy_from(op: Any, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Any:
    # aten::_copy_from(Tensor self, Tensor dst, bool non_blocking=False) -> Tensor
    # self is the source. Host-to-device when dst is simulated, device-to-host when dst is CPU.
    src, dst = args[0], args[1]
    s = src._v if type(src) is SimTensor else src
    _COPY_(dst._v if type(dst) is SimTensor else dst, s)
    return dst


def _copy_from_and_resize(op: Any, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Any:
    # aten::_copy_from_and_resize(Tensor self, Tensor dst) -> Tensor
    src, dst = args[0], args[1]
    s = src._v if type(src) is SimTensor else src
    d = dst._v if type(dst) is SimTensor else dst
    _RESIZE_(d, s.shape)
    _COPY_(d, s)
    _refresh(dst)
    return dst


def _record_stream(op: Any, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Any:
    return None  # one simulated stream of execution: nothing to record


def _set_from_storage(op: Any, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Any:
    raise SimulatedDeviceError(
        f"aten::set_ with a Storage is not supported on the simulated {_NAME} device "
        f"(simulated tensors keep their values in a CPU tensor, not in their storage)"
    )


def _to_copy_kernel(keyset: Any, self: Any, **kw: Any) -> Any:
    """aten::_to_copy to, from or on the simulated device: PyTorch's composite kernel, in Python.

    The composite allocates the host result of ``to("cpu", non_blocking=True)`` with
    ``pin_memory=True``, which the Python PrivateUse1 hooks cannot serve; here that result is
    allocated in simulated pinned memory. As with the composite, the hook sees the allocation
    (for a device result) and the copy (``aten::_copy_from``), not ``_to_copy`` itself.
    """
    v = self._v if type(self) is SimTensor else self
    dtype = kw.get("dtype") or self.dtype
    device = kw.get("device")
    target = torch.device(device) if device is not None else self.device
    non_blocking = bool(kw.get("non_blocking", False))
    mf = kw.get("memory_format")
    if mf is None:
        mf = torch.preserve_format
    if target.type == "cpu":
        out = _EMPTY_LIKE(v, dtype=dtype, device=target, memory_format=mf)
        if (non_blocking or kw.get("pin_memory")) and out.layout == torch.strided:
            out = empty_pinned(out.shape, out.stride(), dtype)
    else:
        out = _EMPTY_LIKE(self, dtype=dtype, device=target, memory_format=mf)
    return _COPY_(out, self, non_blocking)


def _set_storage_kernel(keyset: Any, *args: Any, **kwargs: Any) -> Any:
    """``aten::set_`` of a device tensor with a storage: one of host bytes (a
    :class:`syncguard.sim.storage.SimStorage`, which ``torch.load`` onto the device rebuilds
    its tensors from) makes the tensor's values a view of those bytes; a device storage (the
    empty placeholder of a simulated tensor) cannot."""
    self, source = args[0], args[1]
    if type(self) is SimTensor and isinstance(source, torch.UntypedStorage) and (
            torch._C.StorageBase.device.__get__(source).type == "cpu"):  # type: ignore[attr-defined]
        v = torch.empty(0, dtype=self.dtype)
        if len(args) > 2:
            v.set_(source, *args[2:], **kwargs)
        else:
            v.set_(source)
        self._v = v
        _restride(self, v)
        return self
    return _set_from_storage(None, args, kwargs)


_SPECIAL: Dict[str, _KernelFn] = {
    "_copy_from": _copy_from,
    "_copy_from_and_resize": _copy_from_and_resize,
    "record_stream": _record_stream,
}

# Keep PyTorch's composite kernels for these, so transfers reach the backend as _copy_from.
# (index.Tensor is NOT kept composite: its composite kernel would run aten::nonzero and then
# index.Tensor_out with the same boolean mask, so x[mask] would arrive as two host-read ops;
# run directly, x[mask] arrives as one aten::index.Tensor carrying the mask.)
_KEEP_COMPOSITE = frozenset({
    "copy_", "copy", "_to_copy", "_copy_from", "_copy_from_and_resize", "_pin_memory",
})


def _composite_ops() -> Iterator[str]:
    seen: Set[str] = set()
    for key in ("CompositeExplicitAutograd", "CompositeExplicitAutogradNonFunctional"):
        for full in torch._C._dispatch_get_registrations_for_dispatch_key(key):
            if not full.startswith("aten::") or full in seen:
                continue
            seen.add(full)
            yield full


def register(libs: List[Any]) -> None:
    """Register the kernels with the dispatcher (once per process, at setup), keeping the
    libraries in ``libs``."""
    # The kernels also run from C++ while compiled code runs (an op left out of the graph by
    # a graph break): Dynamo's frame hook must never try to compile them, nor what they call.
    for fn in (_fallback, _make_kernel(_COPY_), _to_copy_kernel, _set_storage_kernel,
               pin_memory_cpu, is_pinned_cpu):
        _intercept._never_compile(fn.__code__)
    fb = torch.library.Library("_", "IMPL")
    fb.fallback(_fallback, dispatch_key="PrivateUse1", with_keyset=True)
    libs.append(fb)

    aten = torch.library.Library("aten", "IMPL")
    implicit = set(
        torch._C._dispatch_get_registrations_for_dispatch_key("CompositeImplicitAutograd")
    )
    for full in _composite_ops():
        if full in implicit:
            continue
        opname = full[len("aten::"):]
        base, _, overload = opname.partition(".")
        if base in _KEEP_COMPOSITE or base in _SPECIAL:
            continue
        try:
            packet = getattr(torch.ops.aten, base)
            op = getattr(packet, overload or "default")
        except (AttributeError, RuntimeError):
            continue
        aten.impl(opname, _make_kernel(op), "PrivateUse1", with_keyset=True)
    aten.impl("_to_copy", _to_copy_kernel, "PrivateUse1", with_keyset=True)
    for opname in ("set_.source_Storage", "set_.source_Storage_storage_offset"):
        aten.impl(opname, _set_storage_kernel, "PrivateUse1", with_keyset=True)
    # Pinned host memory for CPU tensors (syncguard.sim.pinned).
    aten.impl("_pin_memory", pin_memory_cpu, "CPU")
    aten.impl("is_pinned", is_pinned_cpu, "CPU")
    libs.append(aten)
