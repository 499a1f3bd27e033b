"""Interceptors: the Python-level entry points that read device data on the host.

This module (with ``syncguard.sim``) is the only code that touches torch internals.
Patches are process-global (so reads on every Python thread are seen), installed when the first
guard is entered and removed, exactly as they were, when the last one exits.

Rule against double counting: the outermost intercepted call that reports a sync marks the
thread busy; nothing nested inside it reports again (``x in t`` calls ``.item()`` internally;
it is one sync). A backend (the simulated device) classifies every ATen op it runs through
:func:`backend_op_hook`, which only reports when no Python-level interceptor did: a safety net
for ops reached without a patched entry point (``torch.ops.aten.nonzero``...).
"""

from __future__ import annotations

import contextlib
import functools
import sys
import threading
import weakref
from time import perf_counter as _perf
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple, Union

import torch

from . import events as E
from . import signals as _signals
from . import syncapis
from .hub import HUB, Backend, ByModel
from .opmodel import OpSyncModel, load_model

# kind, op, device, count, source. ``count`` is a ByModel mapping for an in-kernel read on a
# device type without a model of its own: each guard then applies its own ``model=``.
Hit = Tuple[str, Optional[str], Optional[str], Union[int, ByModel], Optional[str]]
#: What a classifier finds: one hit, or several for a call that syncs more than one way, in
#: the order the runtime does them (``torch.tensor([t0, t1], device=d)``: reads, then a copy).
Hits = Union[Hit, List[Hit]]
Classifier = Callable[[Tuple[Any, ...], Dict[str, Any]], Optional[Hits]]

#: A classifier's verdict "no sync, and nothing inside this call is one": the backend-level
#: safety net stays quiet for its duration.
QUIET: Hit = ("quiet", None, None, 0, None)


def register_backend(name: str, tensor_type: type, model: str) -> None:
    """Register a device backend syncguard provides (the simulated device): tensors of device
    type ``name`` are instances of ``tensor_type`` (whose own ``__repr__``/``__format__`` are
    intercepted too) and follow op sync model ``model``. Process-lifetime, like its setup."""
    HUB.register_backend(Backend(name, tensor_type, model))


def model_for(device_type: str) -> Optional[OpSyncModel]:
    """The op sync model of ``device_type`` itself (cuda, npu, a registered backend), or None:
    then each guard's own ``model=`` applies (see :func:`_model_hit`)."""
    if device_type in ("cuda", "npu"):
        return load_model(device_type)
    b = HUB.backends.get(device_type)
    return load_model(b.model) if b is not None else None


def _model_hit(op: str, d: str, args: Tuple[Any, ...], kwargs: Dict[str, Any]
               ) -> Optional[Hit]:
    """In-kernel reads of ``op`` on device type ``d``: its own model's, else a per-guard
    mapping over the models the active guards ask for (nested guards with different models
    each get their own count)."""
    own = model_for(d)
    if own is not None:
        e = own.reads(op, args, kwargs)
        if e is None:
            return None
        return (E.IN_KERNEL, op, d, e.reads, f"{own.backend} op model: {e.where}")
    by: ByModel = {}
    for name in HUB.models:
        m = load_model(name)
        e = m.reads(op, args, kwargs) if m is not None else None
        if e is not None:
            by[name] = (e.reads, f"{m.backend} op model: {e.where}")  # type: ignore[union-attr]
    return (E.IN_KERNEL, op, d, by, None) if by else None


def _api_model_hit(api: str, d: str, args: Tuple[Any, ...], kwargs: Dict[str, Any]
                   ) -> Optional[Hit]:
    """As :func:`_model_hit`, for a Python entry point whose C++ path syncs on some backends
    (``Tensor.__setitem__`` with a Python number): the model's entry for ``api``."""
    own = model_for(d)
    if own is not None:
        e = own.api_reads(api, args, kwargs)
        if e is None:
            return None
        return (e.kind, e.op, d, e.reads, f"{own.backend} op model: {e.where}")
    by: ByModel = {}
    first = None
    for name in sorted(HUB.models):
        m = load_model(name)
        e = m.api_reads(api, args, kwargs) if m is not None else None
        if e is not None:
            by[name] = (e.reads, f"{m.backend} op model: {e.where}")  # type: ignore[union-attr]
            first = first or e
    return (first.kind, first.op, d, by, None) if first is not None else None


# -- helpers ------------------------------------------------------------------------------
_Tensor = torch.Tensor


def _fake_types() -> Tuple[type, ...]:
    try:
        from torch._subclasses.fake_tensor import FakeTensor
    except ImportError:  # pragma: no cover - torch without fake tensors
        return ()
    return (FakeTensor,)


#: Tensors that hold no data (torch.compile's shape propagation): reading them syncs nothing.
_FAKE = _fake_types()


def _dev(x: Any) -> Optional[str]:
    """Device type of ``x`` if it is a tensor whose data lives on a (counted) device."""
    if isinstance(x, _Tensor):
        if type(x) is not _Tensor and _FAKE and isinstance(x, _FAKE):
            return None
        if x.is_cpu:  # the common case, without building a torch.device
            if "cpu" in HUB.extra_devices:
                return "cpu"
            HUB.seen_cpu += 1
            return None
        t = x.device.type
        if HUB.is_device_type(t):
            HUB.seen_dev += 1
            return t
    return None


def _first_dev(xs: Any) -> Optional[str]:
    for x in xs:
        d = _dev(x)
        if d is not None:
            return d
    return None


def _device_type_of(spec: Any) -> Optional[str]:
    if isinstance(spec, torch.device):
        return spec.type
    if isinstance(spec, str):
        return spec.split(":", 1)[0]
    if isinstance(spec, int) and not isinstance(spec, bool):
        return "cuda"
    return None


def _is_pinned(t: _Tensor) -> bool:
    try:
        return bool(t.is_pinned())
    except Exception:
        return False


def _h2d(src: Any, target: Optional[str], non_blocking: bool) -> Optional[Hit]:
    """A copy of host tensor ``src`` to device type ``target``: does the host wait?"""
    if target is None or not HUB.is_device_type(target) or target == "cpu":
        return None
    if non_blocking and isinstance(src, _Tensor) and _is_pinned(src):
        return None
    why = "non_blocking copy from pageable memory" if non_blocking else "blocking copy"
    return (E.H2D_COPY, "aten::_to_copy", target, 1, why)


def _empty(t: _Tensor) -> bool:
    """A tensor with no element (a copy of it moves nothing); False when that cannot be told
    without guarding on a symbolic size."""
    try:
        return t.numel() == 0 if not (_FAKE and isinstance(t, _FAKE)) else False
    except Exception:
        return False


def _a(args: Tuple[Any, ...], kwargs: Dict[str, Any], i: int, name: str, default: Any = None
       ) -> Any:
    return args[i] if len(args) > i else kwargs.get(name, default)


# -- classifiers ---------------------------------------------------------------------------
def _scalar(args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Optional[Hit]:
    d = _dev(args[0])
    if d is None or args[0].numel() != 1:
        return None
    return (E.SCALAR_READ, "aten::_local_scalar_dense", d, 1, None)


def _format(args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Optional[Hit]:
    d = _dev(args[0])
    if d is None or _empty(args[0]):  # an empty tensor prints without reading
        return None
    if args[0].dim() == 0:
        return (E.SCALAR_READ, "aten::_local_scalar_dense", d, 1, None)
    return (E.D2H_COPY, "aten::_to_copy", d, 1, "printing")


def _d2h(args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Optional[Hit]:
    d = _dev(args[0])
    if d is None or _empty(args[0]):  # copy_ returns before copying an empty tensor
        return None
    return (E.D2H_COPY, "aten::_to_copy", d, 1, None)


def _repr(args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Optional[Hit]:
    d = _dev(args[0])
    if d is None or _empty(args[0]):  # "tensor([], device=...)": nothing read
        return None
    return (E.D2H_COPY, "aten::_to_copy", d, 1, "printing")


def _numpy(args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Optional[Hit]:
    if not _a(args, kwargs, 1, "force", False):
        return None  # raises for device tensors: nothing is read
    return _d2h(args, kwargs)


def _cpu(args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Optional[Hit]:
    return _d2h(args, kwargs)


def _to(args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Optional[Hit]:
    self = args[0]
    target: Optional[str] = None
    spec: Any = None
    non_blocking = bool(kwargs.get("non_blocking", False))
    for a in args[1:]:
        if isinstance(a, bool):
            non_blocking = a
            break
        if isinstance(a, _Tensor):
            target, spec = a.device.type, a.device
        elif target is None and not isinstance(a, torch.dtype):
            target, spec = _device_type_of(a), a
    if "device" in kwargs and kwargs["device"] is not None:
        spec = kwargs["device"]
        target = _device_type_of(spec)
    if isinstance(spec, torch.device) and spec.type == "cpu" and self.is_cpu:
        # ``c.to(c.device)``, ``c.to(other_tensor)``: the tensor's own device, given as a
        # device object, returns the same tensor and copies nothing. With devices=("cpu",)
        # only "cpu" spelled as a string (or .cpu()) stands for the host.
        return None
    return _copy_dir(self, target, non_blocking)


def _copy_dir(src: _Tensor, target: Optional[str], non_blocking: bool,
              dst: Optional[_Tensor] = None) -> Optional[Hit]:
    """Does copying ``src`` to device type ``target`` make the host wait? ``dst``: the
    destination tensor when the caller gives one (``copy_``), else a new one is allocated."""
    if target is None or _empty(src) or (dst is not None and _empty(dst)):
        # copy_ returns before copying when there is nothing to copy (ATen/native/Copy.cpp
        # copy_impl: iter.numel() == 0; torch_npu's copy_ likewise): no transfer, no wait
        return None
    src_t = src.device.type
    # With devices=("cpu",) a CPU tensor is device-resident and "cpu" the host: a copy to it
    # stands for a device-to-host copy.
    if HUB.is_device_type(src_t) and target == "cpu":
        if non_blocking:
            if dst is None or _is_pinned(dst):
                # async D2H into pinned memory (``.to("cpu", non_blocking=True)`` allocates
                # its result pinned): the host does not wait (reading it early is a race)
                return None
            # into pageable memory the driver copies synchronously (CUDA's API sync rules)
            return (E.D2H_COPY, "aten::copy_", src_t, 1,
                    "non_blocking copy into pageable memory")
        return (E.D2H_COPY, "aten::_to_copy", src_t, 1, None)
    if src_t == target:
        return None
    if src_t == "cpu":
        return _h2d(src, target, non_blocking)
    return None


def _device_method(target: str) -> Classifier:
    def cls(args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Optional[Hit]:
        nb = bool(_a(args, kwargs, 2, "non_blocking", False))
        return _copy_dir(args[0], target, nb)

    return cls


def _copy_(args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Optional[Hit]:
    dst, src = args[0], _a(args, kwargs, 1, "src")
    if not isinstance(src, _Tensor):
        return None
    nb = bool(_a(args, kwargs, 2, "non_blocking", False))
    hit = _copy_dir(src, dst.device.type, nb, dst)
    if hit is not None and hit[0] == E.D2H_COPY:
        return (E.D2H_COPY, "aten::copy_", hit[2], 1, hit[4])
    return hit


def _contains(args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Optional[Hit]:
    d = _dev(args[0])
    return (E.SCALAR_READ, "aten::_local_scalar_dense", d, 1, None) if d is not None else None


def _data_dep(op: str) -> Classifier:
    def cls(args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Optional[Hit]:
        d = _first_dev(args[:2]) or _first_dev(kwargs.values())
        return (E.DATA_DEPENDENT, op, d, 1, None) if d is not None else None

    return cls


def _where(args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Optional[Hits]:
    if len(args) + len(kwargs) != 1:
        return None  # where(cond, x, y) is elementwise
    return _data_dep("aten::nonzero")(args, kwargs)


def _repeat_interleave(args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Optional[Hit]:
    if _a(args, kwargs, 3, "output_size") is not None:
        return None
    first, repeats = args[0] if args else kwargs.get("input"), _a(args, kwargs, 1, "repeats")
    if repeats is None and isinstance(first, _Tensor):
        repeats = first  # torch.repeat_interleave(repeats)
    d = _dev(repeats)
    return (E.DATA_DEPENDENT, "aten::repeat_interleave.Tensor", d, 1, None) if d else None


def _one_hot(args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Optional[Hit]:
    n = _a(args, kwargs, 1, "num_classes", -1)
    d = _dev(args[0] if args else kwargs.get("tensor"))
    if d is None:
        return None
    if n != -1:
        # A device kernel does not check the class range on the host; only the CPU kernel
        # reads min/max (seen by the dispatch net with devices=("cpu",)): model the device.
        return QUIET
    return (E.DATA_DEPENDENT, "aten::one_hot", d, 1, "num_classes inferred with max().item()")


def _has_bool_dev_index(index: Any) -> Tuple[Optional[str], int]:
    """(device of a boolean device mask in ``index``, number of device tensors used as slice
    bounds): the first lowers to nonzero, each of the second to a scalar read."""
    items = index if isinstance(index, tuple) else (index,)
    mask_dev: Optional[str] = None
    bounds = 0
    for it in items:
        if it is None or it is Ellipsis or isinstance(it, int):
            continue
        if isinstance(it, _Tensor):
            d = _dev(it)
            if d is not None and it.dtype in (torch.bool, torch.uint8):
                mask_dev = d
        elif isinstance(it, slice):
            for b in (it.start, it.stop, it.step):
                if _dev(b) is not None:
                    bounds += 1
    return mask_dev, bounds


def _host_index(index: Any) -> bool:
    """Whether ``index`` holds a host (CPU) index tensor of one or more dimensions: indexing a
    device tensor with it copies it to the device first, and the host waits for that copy
    (PyTorch's own sync-warning test expects a sync for ``x[ind_cpu]`` and ``x[ind_cpu] = y``).
    A 0-d host index is read on the host as an int: no copy."""
    items = index if isinstance(index, tuple) else (index,)
    for it in items:
        if isinstance(it, _Tensor) and it.dim() > 0 and it.numel() > 0 and _dev(it) is None \
                and not (_FAKE and isinstance(it, _FAKE)):
            return True
    return False


_HOST_INDEX_WHY = "host index tensor copied to the device"


def _getitem(args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Optional[Hit]:
    if not isinstance(args[1], (_Tensor, tuple, slice)):
        return None
    mask_dev, bounds = _has_bool_dev_index(args[1])
    if mask_dev is not None:
        return (E.DATA_DEPENDENT, "aten::index.Tensor", mask_dev, 1, "boolean mask -> nonzero")
    d = _dev(args[0])
    if d is not None and d != "cpu" and _host_index(args[1]):
        return (E.H2D_COPY, "aten::index.Tensor", d, 1, _HOST_INDEX_WHY)
    if bounds:
        return (E.SCALAR_READ, "aten::_local_scalar_dense", _dev(args[0]), bounds,
                "slice bound is a device tensor")
    return None


def _scalar_write(args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Optional[Hit]:
    """``x[index] = <Python number>``: what the device's op model says PyTorch's C++ path
    does (on CUDA the number becomes a CPU tensor: copied into a 0-d destination, or
    ``.to(device)`` for an integer index tensor; on NPU it is made on the device, and a
    boolean mask goes through nonzero). See the models' ``Tensor.__setitem__`` entries."""
    if not isinstance(args[2], (int, float, complex)):
        return None
    d = _dev(args[0])
    return _api_model_hit("Tensor.__setitem__", d, args, kwargs) if d is not None else None


def _setitem(args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Optional[Hit]:
    if not isinstance(args[1], (_Tensor, tuple, slice)):
        return _scalar_write(args, kwargs)  # x[0] = 0, x[...] = 0
    mask_dev, bounds = _has_bool_dev_index(args[1])
    value = args[2]
    if mask_dev is not None:
        if isinstance(value, _Tensor) and _dev(value) is not None:
            return (E.DATA_DEPENDENT, "aten::index_put_", mask_dev, 1,
                    "boolean mask with a device tensor value")
        if not bounds:
            # x[mask] = scalar: on CUDA it lowers to masked_fill, no host read (PyTorch's own
            # sync test); the op model says where it does not (NPU)
            return _scalar_write(args, kwargs) or QUIET
    if bounds:
        return (E.SCALAR_READ, "aten::_local_scalar_dense", _dev(args[0]), bounds,
                "slice bound is a device tensor")
    d = _dev(args[0])
    if d is None:
        return None
    if d != "cpu" and _host_index(args[1]):
        return (E.H2D_COPY, "aten::index_put_", d, 1, _HOST_INDEX_WHY)
    if isinstance(value, _Tensor) and _dev(value) == d and _device_side_index(args[1]):
        # a device-to-device assignment (``a[:] = b``): no host wait. With devices=("cpu",)
        # the dispatch net would otherwise take the CPU copy_ for a device-to-host copy.
        return QUIET
    return _scalar_write(args, kwargs)


def _device_side_index(index: Any) -> bool:
    """An index made only of ints, plain slices, None, Ellipsis and device tensors: nothing
    in it is copied from the host (a list is: it becomes a host tensor first)."""
    items = index if isinstance(index, tuple) else (index,)
    for it in items:
        if it is None or it is Ellipsis or (isinstance(it, int) and not isinstance(it, bool)):
            continue
        if isinstance(it, slice):
            if all(b is None or isinstance(b, int) for b in (it.start, it.stop, it.step)):
                continue
            return False
        if not (isinstance(it, _Tensor) and _dev(it) is not None):
            return False
    return True


def _index_put(args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Optional[Hit]:
    indices = _a(args, kwargs, 1, "indices", ())
    values = _a(args, kwargs, 2, "values")
    mask_dev, _ = _has_bool_dev_index(tuple(i for i in indices if i is not None))
    if mask_dev is not None and isinstance(values, _Tensor) and (
        values.numel() != 1 or _dev(values) is not None
    ):
        return (E.DATA_DEPENDENT, "aten::index_put_", mask_dev, 1, "boolean mask")
    d = _dev(args[0])
    if d is not None and d != "cpu" and _host_index(tuple(i for i in indices if i is not None)):
        return (E.H2D_COPY, "aten::index_put_", d, 1, _HOST_INDEX_WHY)
    return None


def _model(op: str, self_pos: int = 0) -> Classifier:
    def cls(args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Optional[Hit]:
        d = _dev(args[self_pos]) if len(args) > self_pos else None
        if d is None:
            d = _first_dev(args) or (_first_dev(kwargs.values()) if kwargs else None)
        if d is None:
            return None
        return _model_hit(op, d, args, kwargs)

    return cls


_NUMBERS = frozenset((int, float, bool, complex))


def _size(x: Any) -> int:
    """Elements of a number (1) or an array-like (numpy's ``size``)."""
    return int(getattr(x, "size", 1)) if hasattr(x, "shape") else 1


def _list_data(data: Any) -> Tuple[int, int, Optional[str]]:
    """(elements, device tensors, their device) in the nested lists/tuples ``data`` that
    ``torch.tensor`` builds from. PyTorch stores each element on the host
    (torch/csrc/utils/tensor_new.cpp recursive_store -> store_scalar, which converts a tensor
    element with its ``__float__``/``__index__``/``__bool__``: one host read per device
    tensor), then uploads the whole buffer once."""
    elements = reads = 0
    dev: Optional[str] = None
    todo = [data]
    while todo:
        seq = todo.pop()
        if not isinstance(seq, (list, tuple)):
            if isinstance(seq, _Tensor):
                elements += seq.numel()
                d = _dev(seq)
                if d is not None:
                    reads += 1
                    dev = dev or d
            else:
                elements += _size(seq)
            continue
        if _NUMBERS.issuperset(map(type, seq)):  # the common case, at C speed
            elements += len(seq)
        else:
            todo.extend(seq)
    return elements, reads, dev


_PER_ELEMENT = "each device tensor in the list is read on the host"


def _tensor_factory(device_pos: Optional[int]) -> Classifier:
    def cls(args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Optional[Hits]:
        spec = kwargs.get("device") if device_pos is None else _a(args, kwargs, device_pos,
                                                                     "device")
        target = _device_type_of(spec)
        data = args[0] if args else kwargs.get("data")
        if isinstance(data, _Tensor):
            return _copy_dir(data, target, False)
        hits: List[Hit] = []
        if isinstance(data, (list, tuple)):
            elements, reads, dev = _list_data(data)
            # one event per element read, as the runtime does them, before the upload
            hits.extend([(E.SCALAR_READ, "aten::_local_scalar_dense", dev, 1, _PER_ELEMENT)]
                        * reads)
        else:
            elements = _size(data)  # a number, an array
        if elements and target is not None:
            copy = _h2d(None, target, False)
            if copy is not None:
                hits.append(copy)
        return hits[0] if len(hits) == 1 else (hits or None)

    return cls


def _explicit(device: str) -> Classifier:
    def cls(args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Optional[Hit]:
        return (E.EXPLICIT_SYNC, None, device, 1, None)

    return cls


# -- the patch table -----------------------------------------------------------------------
Target = Tuple[Any, str, str, Classifier]  # owner, attribute, api name, classifier


#: ATen ops that read the host and that torch.compile's generated code calls as Python objects
#: (FX graphs: ``torch.ops.aten._local_scalar_dense.default(x)``, a captured ``.item()`` under
#: ``capture_scalar_outputs``; inductor's fallback kernels), through ``OpOverload.__call__``,
#: which is intercepted. No Python entry point of the program sees these reads, and on a
#: device PyTorch knows (``--device cpu``, CUDA) no backend kernel of syncguard's does either.
#: (The op objects themselves must stay as they are: their hash is their C++ handle's, and
#: fake tensors look their implementations up by it.)
_GRAPH_READ_OPS = (
    "_local_scalar_dense.default", "nonzero.default", "masked_select.default",
    "repeat_interleave.Tensor", "index.Tensor", "_unique2.default", "unique_dim.default",
    "unique_consecutive.default", "bincount.default", "equal.default",
)


@functools.cache
def _graph_read_ops() -> Dict[int, Any]:
    """``id(op) -> op`` of :data:`_GRAPH_READ_OPS` (ids: an OpOverload's own hash is Python
    code; the ops live as long as the process)."""
    ops: Dict[int, Any] = {}
    for spec in _GRAPH_READ_OPS:
        packet, _, overload = spec.partition(".")
        op = getattr(getattr(torch.ops.aten, packet, None), overload, None)
        if op is not None:
            ops[id(op)] = op
    return ops


def _graph_op(args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Optional[Hit]:
    """Classify ``OpOverload.__call__(op, *a, **k)``: one of :data:`_GRAPH_READ_OPS` on plain
    tensors of a counted device (the registered backends' kernels classify their own ops;
    tensors of torch.compile's tracing, fake or functional, hold no data)."""
    op = _graph_read_ops().get(id(args[0]))
    if op is None:
        return None
    a = args[1:]
    x = a[0] if a else next(iter(kwargs.values()), None)
    if type(x) is not _Tensor and type(x) is not torch.nn.Parameter:
        return None
    d = _dev(x)
    if d is None:
        return None
    hit = _aten_classifier(op)(a, kwargs, d)
    return None if hit is None else (hit[0], hit[1], hit[2], hit[3], hit[4] or "compiled code")


def _wrap_op_call(orig: Callable[..., Any], api: str, classify: Classifier
                  ) -> Callable[..., Any]:
    """:func:`_wrap` for ``OpOverload.__call__``: every ATen op called from Python goes through
    it (a simulated device's kernel, torch's own decompositions), so the ops it does not
    classify take the shortest way (what the original does: ``self._op(...)``)."""
    tls = HUB.tls
    ops = _graph_read_ops()

    def __call__(self: Any, /, *args: Any, **kwargs: Any) -> Any:
        if id(self) not in ops or tls.busy or not HUB.guards or _is_compiling():
            if self._namespace == "prims" and HUB.guards and not tls.busy:
                # A prim's implementation is torch's own Python (AOT autograd's passes put
                # prims.convert_element_type in compiled graphs): the Tensor methods it calls
                # (copy_) are not the program's; with devices=("cpu",) they would read as
                # device-to-host copies.
                tls.busy += 1
                try:
                    return orig(self, *args, **kwargs)
                finally:
                    tls.busy -= 1
            return orig(self, *args, **kwargs)
        hit = classify((self,) + args, kwargs)
        if hit is None or _in_fake_mode():
            return orig(self, *args, **kwargs)
        return _call_reporting(hit, str(hit[1]), orig, (self,) + args, kwargs)

    __call__.__wrapped__ = orig  # type: ignore[attr-defined]
    __call__.__name__ = "__call__"
    __call__.__qualname__ = getattr(orig, "__qualname__", "OpOverload.__call__")
    __call__.__syncguard__ = True  # type: ignore[attr-defined]
    _never_compile(__call__.__code__)
    return __call__


def _targets() -> List[Target]:
    T = torch.Tensor
    t: List[Target] = []

    def meth(name: str, cls: Classifier) -> None:
        t.append((T, name, f"Tensor.{name}", cls))

    def fn(owner: Any, prefix: str, name: str, cls: Classifier) -> None:
        if hasattr(owner, name):
            t.append((owner, name, f"{prefix}.{name}", cls))

    # The table-driven families come from syncguard.core.syncapis (shared with `syncguard lint`).
    for api in syncapis.by_classify("scalar"):
        meth(api.name, _scalar)
    meth("__format__", _format)
    meth("__repr__", _repr)
    for api in syncapis.by_classify("d2h"):
        meth(api.name, _d2h)
    meth("cpu", _cpu)
    meth("numpy", _numpy)
    meth("to", _to)
    meth("cuda", _device_method("cuda"))
    meth("copy_", _copy_)
    meth("__contains__", _contains)
    meth("__getitem__", _getitem)
    meth("__setitem__", _setitem)
    meth("index_put_", _index_put)
    meth("index_put", _index_put)
    for api in syncapis.by_classify("data_dep"):
        assert api.op is not None
        if "Tensor" in api.owners:
            meth(api.name, _data_dep(api.op))
        if "torch" in api.owners:
            fn(torch, "torch", api.name, _data_dep(api.op))
    fn(torch, "torch", "where", _where)
    meth("repeat_interleave", _repeat_interleave)
    fn(torch, "torch", "repeat_interleave", _repeat_interleave)
    fn(torch.nn.functional, "torch.nn.functional", "one_hot", _one_hot)
    meth("multinomial", _model("aten::multinomial"))
    fn(torch, "torch", "multinomial", _model("aten::multinomial"))
    meth("masked_fill_", _model("aten::masked_fill_.Tensor"))
    meth("masked_fill", _model("aten::masked_fill_.Tensor"))
    fn(torch, "torch", "masked_fill", _model("aten::masked_fill_.Tensor"))
    fn(torch, "torch", "normal", _model("aten::normal.Tensor_Tensor"))
    fn(torch, "torch", "tensor", _tensor_factory(None))
    fn(torch, "torch", "as_tensor", _tensor_factory(2))
    # explicit synchronisation
    cuda = torch.cuda
    fn(cuda, "torch.cuda", "synchronize", _explicit("cuda"))
    fn(cuda.Stream, "torch.cuda.Stream", "synchronize", _explicit("cuda"))
    fn(cuda.Event, "torch.cuda.Event", "synchronize", _explicit("cuda"))
    for b in HUB.backends.values():
        # A registered backend's tensor may print itself (the simulated device's does):
        # intercept it under the Tensor API names.
        for name, cls in (("__repr__", _repr), ("__format__", _format)):
            if name in vars(b.tensor_type):
                t.append((b.tensor_type, name, f"Tensor.{name}", cls))
    npu = getattr(torch, "npu", None)
    if npu is not None and not getattr(npu, "__syncguard_sim__", False):
        fn(npu, "torch.npu", "synchronize", _explicit("npu"))
        for cls_name in ("Stream", "Event"):
            c = getattr(npu, cls_name, None)
            if c is not None:
                fn(c, f"torch.npu.{cls_name}", "synchronize", _explicit("npu"))
        meth_npu = getattr(T, "npu", None)
        if meth_npu is not None:
            meth("npu", _device_method("npu"))
    return t


def _call_reporting(hit: Hits, api: str, call: Callable[..., Any], args: Tuple[Any, ...],
                    kwargs: Dict[str, Any]) -> Any:
    """Run ``call(*args, **kwargs)`` (a classified call) with this thread marked busy, so
    nothing nested inside reports again, and report ``hit`` (unless it is :data:`QUIET`; a
    list: each in order): before the call when a guard raises, else after it with the time
    the call took (given to the last)."""
    tls = HUB.tls
    tls.busy += 1
    try:
        if hit is QUIET:
            return call(*args, **kwargs)
        hits = hit if isinstance(hit, list) else [hit]
        if HUB.raising:  # report first: "raise" stops the call before it syncs
            for kind, op, device, count, source in hits:
                HUB.deliver(kind, api, op, device, count, source, read=args)
            return call(*args, **kwargs)
        # Time the call: on a real device, how long the host waited in this sync.
        t0 = _perf()
        out = call(*args, **kwargs)
        wait = (_perf() - t0) * 1e6
        for i, (kind, op, device, count, source) in enumerate(hits):
            HUB.deliver(kind, api, op, device, count, source,
                        wait if i == len(hits) - 1 else None, read=args)
        return out
    finally:
        tls.busy -= 1


def _compiling_fn() -> Callable[[], bool]:
    comp = getattr(torch, "compiler", None)
    f = getattr(comp, "is_compiling", None)
    if f is None:  # torch < 2.3
        f = getattr(getattr(torch, "_dynamo", None), "is_compiling", None)
    return f if f is not None else (lambda: False)


_is_compiling = _compiling_fn()
_fake_mode_key = getattr(getattr(torch._C, "_TorchDispatchModeKey", None), "FAKE", None)
_get_mode = getattr(torch._C, "_get_dispatch_mode", None)


def _in_fake_mode() -> bool:
    """torch.compile propagates shapes with fake tensors: that work reads no device data."""
    return _fake_mode_key is not None and _get_mode is not None and (
        _get_mode(_fake_mode_key) is not None)


_wrap_code_skipped = False


def _never_compile(code: Any) -> None:
    """Tell Dynamo's frame hook (in torch._C, so Dynamo need not be loaded) never to compile
    frames of ``code``, nor what they call: a wrapper called after a graph break runs as
    Python and counts what the compiled code really reads. Private, so optional."""
    ef = getattr(getattr(torch._C, "_dynamo", None), "eval_frame", None)
    setter = getattr(ef, "set_code_exec_strategy", None)
    strategy, action = getattr(ef, "_FrameExecStrategy", None), getattr(ef, "_FrameAction", None)
    if setter is None or strategy is None or action is None:
        return
    try:
        setter(code, strategy(action.SKIP, action.SKIP))
    except Exception:  # pragma: no cover - a changed private API: is_compiling() still helps
        pass


def _wrap(orig: Callable[..., Any], api: str, classify: Classifier) -> Callable[..., Any]:
    global _wrap_code_skipped
    tls = HUB.tls

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if _is_compiling():
            # Dynamo is tracing this wrapper (folding is_compiling() to True): trace only the
            # original call, never syncguard's bookkeeping (its clock, its thread state).
            return orig(*args, **kwargs)
        if tls.busy or not HUB.guards:
            return orig(*args, **kwargs)
        hit = classify(args, kwargs)
        if hit is None or _in_fake_mode():
            return orig(*args, **kwargs)
        return _call_reporting(hit, api, orig, args, kwargs)

    wrapper.__wrapped__ = orig  # type: ignore[attr-defined]
    wrapper.__name__ = getattr(orig, "__name__", api.rsplit(".", 1)[-1])
    wrapper.__qualname__ = getattr(orig, "__qualname__", wrapper.__name__)
    wrapper.__doc__ = getattr(orig, "__doc__", None)
    wrapper.__syncguard__ = True  # type: ignore[attr-defined]
    if not _wrap_code_skipped:
        _never_compile(wrapper.__code__)  # one code object for every wrapper
        _wrap_code_skipped = True
    return wrapper


class _SequenceSlots:
    """Undo a CPython side effect of patching ``__getitem__``/``__setitem__`` on a heap type,
    on that type and on every subclass of it.

    Setting a Python ``__getitem__`` on ``torch.Tensor`` fills the type's ``sq_item`` slot as
    well as ``mp_subscript`` (and ``__setitem__`` fills ``sq_ass_item``), and deleting the
    attribute again leaves them filled. CPython updates the same slots on every subclass that
    inherits the attribute (``torch.nn.Parameter``, the simulated device's tensor type, a
    user's subclass), and a subclass created while the patch is on is born with them filled.
    A filled ``sq_item`` makes every tensor of that type pass ``PySequence_Check``, so
    ``torch.tensor([t0, t0])`` of 0-d tensors tries ``len()`` on them and raises, inside the
    guard and for the rest of the process. Indexing itself goes through ``mp_subscript``
    (checked first by ``PyObject_GetItem``), so after every patch and unpatch the two sequence
    slots of the root and of every subclass alive are put back to the root's own before any
    patch. A subclass that gets the attribute from elsewhere (its own, or a base outside the
    root's ancestry) is left alone: CPython keeps its slots right. A root found with a slot
    filled by CPython's generic function though the attribute is not its own (left so by an
    earlier patch) counts as empty. Only on CPython with the standard type layout (checked
    against each type's name); elsewhere nothing is touched."""

    _AS_SEQUENCE = 13  # PyTypeObject: 3 header words, then tp_name ... tp_as_sequence
    _SQ_ITEM, _SQ_ASS_ITEM = 3, 5  # PySequenceMethods
    _NAMES = ("__getitem__", "__setitem__")  # the attribute behind each slot, in order

    def __init__(self, root: type) -> None:
        self.root = root
        self._root_mro = frozenset(root.__mro__)
        # type -> its two slots (ctypes views); None: a layout not to touch
        self._views: weakref.WeakKeyDictionary[type, Optional[Tuple[Any, Any]]] = (
            weakref.WeakKeyDictionary())
        self.orig: Optional[Tuple[Optional[int], Optional[int]]] = None
        if sys.implementation.name != "cpython" or not getattr(
                sys, "_is_gil_enabled", lambda: True)():
            return
        view = self._view(root)
        if view is None:
            return

        class _Probe:  # CPython's generic slot functions, as any Python class gets them
            def __getitem__(self, i: Any) -> None: ...
            def __setitem__(self, i: Any, v: Any) -> None: ...

        generic = self._view(_Probe)
        orig = []
        for i, name in enumerate(self._NAMES):
            v = view[i].value
            if name not in vars(root) and generic is not None and v == generic[i].value:
                v = None
            orig.append(v)
        self.orig = (orig[0], orig[1])

    def _view(self, tp: type) -> Optional[Tuple[Any, Any]]:
        try:
            return self._views[tp]
        except KeyError:
            pass
        view: Optional[Tuple[Any, Any]] = None
        try:
            import ctypes

            word = ctypes.sizeof(ctypes.c_void_p)
            name = ctypes.c_char_p.from_address(id(tp) + 3 * word).value
            seq = ctypes.c_void_p.from_address(id(tp) + self._AS_SEQUENCE * word).value
            if name == tp.__name__.encode() and seq:
                view = (ctypes.c_void_p.from_address(seq + self._SQ_ITEM * word),
                        ctypes.c_void_p.from_address(seq + self._SQ_ASS_ITEM * word))
        except Exception:  # an unexpected layout: leave the type alone
            view = None
        self._views[tp] = view
        return view

    def _tree(self) -> List[type]:
        """The root and every subclass of it alive now."""
        out: List[type] = []
        seen: set = set()
        todo = [self.root]
        while todo:
            tp = todo.pop()
            if id(tp) in seen:
                continue
            seen.add(id(tp))
            out.append(tp)
            todo.extend(type.__subclasses__(tp))
        return out

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        """While a patch set is swapped (other threads held off): the types and the slots
        to repair are found once, not at every :meth:`restore`."""
        self._plan = self._repairs()
        try:
            yield
        finally:
            self._plan = None

    _plan: Optional[List[Tuple[Any, int]]] = None

    _cache: Tuple[Any, List[Tuple[Any, int]]] = ((), [])

    def _repairs(self) -> List[Tuple[Any, int]]:
        """(slot view, slot index) of every slot of the tree to keep at the root's value;
        computed again when a type appears or goes, or gains or loses either attribute."""
        out: List[Tuple[Any, int]] = []
        if self.orig is None:
            return out
        tree = self._tree()
        key = tuple((id(tp), "__getitem__" in tp.__dict__, "__setitem__" in tp.__dict__)
                    for tp in tree)
        if key == self._cache[0]:
            return self._cache[1]
        for tp in tree:
            view = self._view(tp)
            if view is None:
                continue
            for i, name in enumerate(self._NAMES):
                if tp is not self.root and any(
                        name in vars(c) for c in tp.__mro__ if c not in self._root_mro):
                    continue
                out.append((view[i], i))
        self._cache = (key, out)
        return out

    def restore(self, name: Optional[str] = None) -> None:
        """Put the slots back (only ``name``'s slot, when given)."""
        orig = self.orig
        if orig is None:
            return
        only = self._NAMES.index(name) if name in self._NAMES else None
        for slot, i in self._plan if self._plan is not None else self._repairs():
            if (only is None or i == only) and slot.value != orig[i]:
                slot.value = orig[i]


Saved = Tuple[Any, str, bool, Any]  # owner, attribute, had its own attribute, original


def _all_targets() -> List[Target]:
    """Everything the patcher patches: the sync APIs (:func:`_targets`, the table's) and the
    route by which compiled code calls ATen ops (``OpOverload.__call__``, see
    :data:`_GRAPH_READ_OPS`: not an API a program names, so not the lint's)."""
    return _targets() + [(torch._ops.OpOverload, "__call__", "OpOverload.__call__",
                          _graph_op)]


def _restore(owner: Any, name: str, own: bool, orig: Any) -> None:
    """Put ``owner.name`` back as it was; idempotent (a retry after an interruption is safe)."""
    if own:
        if vars(owner).get(name, _MISSING) is not orig:
            setattr(owner, name, orig)
    elif name in vars(owner):
        delattr(owner, name)


_MISSING = object()
_SEQ_NAMES = ("__getitem__", "__setitem__")


def _unwrap_leftovers(targets: List[Target]) -> List[str]:
    """Remove interceptors that no bookkeeping of this patcher records (left by an earlier
    patch set whose records are gone: a guard cut short, syncguard imported afresh), so
    that nothing is wrapped twice and the originals come back. A wrapper whose original is
    what the owner inherits is deleted, else the original is set back. Returns
    ``owner.attr`` of each."""
    healed: List[str] = []
    for owner, name, _api, _cls in targets:
        v = vars(owner).get(name, _MISSING)
        while getattr(v, "__syncguard__", False) is True:
            orig = v.__wrapped__  # type: ignore[union-attr]
            inherited = next((vars(b)[name] for b in getattr(owner, "__mro__", (owner,))[1:]
                              if name in vars(b)), _MISSING)
            if inherited is orig:
                delattr(owner, name)
            else:
                setattr(owner, name, orig)
            healed.append(f"{getattr(owner, '__name__', owner)}.{name}")
            v = vars(owner).get(name, _MISSING)
    if healed:
        import logging

        logging.getLogger("syncguard").warning(
            "syncguard: removed %d interceptor(s) an earlier guard left on torch (%s)",
            len(healed), ", ".join(sorted(set(healed))[:5]))
    return healed


@contextlib.contextmanager
def _switches_held() -> Iterator[None]:
    """Ask the interpreter not to switch threads while the patch set is swapped, so other
    threads see torch before or after, not half-patched (nor a type whose sequence slots are
    briefly filled, see _SequenceSlots)."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(1000.0)
    try:
        yield
    finally:
        sys.setswitchinterval(old)


class _Patcher:
    """Owns the process-global patches: installed for the first guard, removed with the last.

    Install and uninstall are atomic: the full patch set is built first, every patch is
    recorded before it is applied (restoring is idempotent), an exception at any point of
    install rolls back every patch, and uninstall finishes restoring before it re-raises.
    Callers defer Ctrl-C around both (:func:`syncguard.core.signals.deferred`). The user count
    never goes below zero."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.users = 0
        self.saved: List[Saved] = []
        # the sequence slots of each type whose __getitem__/__setitem__ is patched, and of its
        # subclasses, as they were before the first patch (see _SequenceSlots)
        self.slots: Dict[Any, _SequenceSlots] = {}
        #: ``owner.attr`` of the interceptors an earlier patch set left installed, found and
        #: removed by the last install (see :func:`_unwrap_leftovers`)
        self.healed: List[str] = []

    def acquire(self) -> None:
        # The caller (SyncGuard.__enter__) defers Ctrl-C around this and undoes on a pending
        # signal; deferring here too keeps a direct caller's install whole.
        with _signals.deferred(), self.lock:
            if self.users == 0:
                self._install()
            self.users += 1

    def release(self) -> None:
        with _signals.deferred(), self.lock:
            if self.users <= 0:
                raise RuntimeError("syncguard: interceptors released more often than acquired")
            self.users -= 1
            if self.users == 0:
                self._uninstall()

    def _plan(self) -> List[Tuple[Any, str, bool, Any, Callable[..., Any]]]:
        plan = []
        targets = _all_targets()
        self.healed = _unwrap_leftovers(targets)
        for owner, name, api, cls in targets:
            own = name in vars(owner)
            orig = vars(owner)[name] if own else getattr(owner, name)
            wrap = _wrap_op_call if api == "OpOverload.__call__" else _wrap
            plan.append((owner, name, own, orig, wrap(getattr(owner, name), api, cls)))
            if name in _SEQ_NAMES and owner not in self.slots:
                self.slots[owner] = _SequenceSlots(owner)
        if self.healed:
            for seq in self.slots.values():
                seq.restore()
        return plan

    @contextlib.contextmanager
    def _batched(self) -> Iterator[None]:
        with contextlib.ExitStack() as stack:
            for seq in list(self.slots.values()):
                stack.enter_context(seq.batch())
            yield

    def _install(self) -> None:
        if self.saved:  # left by an interrupted uninstall: finish it first
            self._uninstall()
        plan = self._plan()
        try:
            with _switches_held(), self._batched():
                for owner, name, own, orig, wrapper in plan:
                    self.saved.append((owner, name, own, orig))  # recorded before applied
                    setattr(owner, name, wrapper)
                    if name in _SEQ_NAMES:
                        self.slots[owner].restore(name)
        except BaseException:
            self._uninstall()
            raise

    def _uninstall(self) -> None:
        error: Optional[BaseException] = None
        with _switches_held(), self._batched():
            while self.saved:
                entry = self.saved[-1]
                for _ in range(2):  # one retry: an injected or stray exception is not final
                    try:
                        _restore(*entry)
                        break
                    except BaseException as exc:
                        error = error or exc
                self.saved.pop()
                if entry[1] in _SEQ_NAMES and entry[0] in self.slots:
                    self.slots[entry[0]].restore(entry[1])
            for seq in self.slots.values():
                seq.restore()
        if error is not None:
            raise error

    @property
    def installed(self) -> bool:
        return bool(self.saved)


PATCHER = _Patcher()


def patched_attributes() -> List[str]:
    """Names of the attributes syncguard patches while a guard is active (for clean-state
    checks): ``owner.attr`` strings."""
    return [f"{getattr(o, '__name__', o)}.{n}" for o, n, _, _ in _all_targets()]


def snapshot() -> Dict[str, Any]:
    """Identity snapshot of every attribute syncguard may patch: equal before and after a
    guard means torch was left exactly as it was."""
    out: Dict[str, Any] = {}
    for owner, name, _, _ in _all_targets():
        key = f"{getattr(owner, '__qualname__', owner)}.{name}"
        out[key] = vars(owner).get(name, "<inherited>")
    return out


# -- reporting used by syncguard's own backends ----------------------------------------------
def report_sync(kind: str, api: str, op: Optional[str] = None, count: int = 1,
                device: Optional[str] = None, source: Optional[str] = None,
                read: Any = None) -> None:
    """Report one host sync to every active guard (no-op when none is active, or when an
    intercepted call on this thread already reported). May raise ``HostSyncError``.
    ``read``: the op's arguments (the tensors read), for the lineage tracker."""
    tls = HUB.tls
    if tls.busy or not HUB.guards:
        return
    tls.busy += 1
    try:
        HUB.deliver(kind, api, op, device, count, source, read=read)
    finally:
        tls.busy -= 1


@contextlib.contextmanager
def suppressed() -> Iterator[None]:
    """Inside, this thread reports nothing (syncguard's own reads, e.g. contract checks)."""
    HUB.tls.busy += 1
    try:
        yield
    finally:
        HUB.tls.busy -= 1


_SKIP = object()
_op_cache: Dict[Any, Any] = {}


def _aten_classifier(func: Any) -> Any:
    """:func:`_classify_aten` of ``func``, computed once per op."""
    c = _op_cache.get(func)
    if c is None:
        c = _op_cache[func] = _classify_aten(func)
    return c


@functools.cache
def _modelled_ops() -> frozenset:
    """Every op some committed op sync model (npu, cuda) has an entry for."""
    ops: set = set()
    for backend in ("npu", "cuda"):
        m = load_model(backend)
        if m is not None:
            ops.update(m.ops)
    return frozenset(ops)


def _classify_aten(func: Any) -> Any:
    name = func.name()
    base = name.split(".", 1)[0]
    tags = set(getattr(func, "tags", ()))
    if base == "aten::_local_scalar_dense":
        return lambda a, k, d: (E.SCALAR_READ, name, d, 1, None)
    if base == "aten::_copy_from":
        def copy_from(a: Tuple[Any, ...], k: Dict[str, Any], d: str) -> Optional[Hit]:
            src, dst = a[0], a[1]
            nb = bool(a[2]) if len(a) > 2 else bool(k.get("non_blocking", False))
            hit = _copy_dir(src, dst.device.type, nb, dst)
            return None if hit is None else (hit[0], name, hit[2], 1, hit[4])
        return copy_from
    if base == "aten::_copy_from_and_resize":
        # blocking, and it resizes an empty destination to the source's size before copying
        # (torch_npu's kernel: dst.numel() == 0 -> resize_as_): an empty destination still
        # receives the whole copy, so only the source's size decides
        def copy_resize(a: Tuple[Any, ...], k: Dict[str, Any], d: str) -> Optional[Hit]:
            hit = _copy_dir(a[0], a[1].device.type, False)
            return None if hit is None else (hit[0], name, hit[2], 1, hit[4])
        return copy_resize
    if base == "aten::index" or base == "aten::index_put" or base == "aten::index_put_":
        def index(a: Tuple[Any, ...], k: Dict[str, Any], d: str) -> Optional[Hit]:
            idx = a[1] if len(a) > 1 else ()
            for i in idx:
                if (isinstance(i, _Tensor) and i.dim() > 0 and d != "cpu"
                        and i.device.type == "cpu"):
                    return (E.H2D_COPY, name, d, 1, _HOST_INDEX_WHY)
            if base != "aten::index":
                v = a[2] if len(a) > 2 else k.get("values")
                if isinstance(v, _Tensor) and v.numel() == 1 and v.device.type == "cpu":
                    # x[mask] = 1.0 on CUDA: the scalar comes as a CPU tensor and PyTorch
                    # lowers it to masked_fill (canDispatchToMaskedFill): no nonzero, no host
                    # read (its own sync-warning test). On another device (the simulated npu)
                    # the scalar is made there: the mask goes through nonzero.
                    return None
            for i in idx:
                if isinstance(i, _Tensor) and i.dtype in (torch.bool, torch.uint8):
                    return (E.DATA_DEPENDENT, name, d, 1, "boolean mask -> nonzero")
            return None
        return index
    if base == "aten::repeat_interleave":
        def rep(a: Tuple[Any, ...], k: Dict[str, Any], d: str) -> Optional[Hit]:
            if k.get("output_size") is not None:
                return None
            return (E.DATA_DEPENDENT, name, d, 1, None)
        return rep
    dyn = getattr(torch.Tag, "dynamic_output_shape", None)
    dep = getattr(torch.Tag, "data_dependent_output", None)
    if (dyn is not None and dyn in tags) or (dep is not None and dep in tags):
        return lambda a, k, d: (E.DATA_DEPENDENT, name, d, 1, None)
    if name in _modelled_ops():
        return lambda a, k, d: _model_hit(name, d, a, k)
    return _SKIP


#: Backend-level observers (the simulated device's native count): called for every host-read
#: op a Python backend runs, whether or not a Python-level interceptor already reported it.
BACKEND_COUNTERS: List[Callable[[str, str, int], None]] = []


def backend_op_hook(func: Any, args: Tuple[Any, ...], kwargs: Dict[str, Any],
                    device_type: str) -> None:
    """Called by a Python backend (the simulated device's fallback) before it runs ATen op
    ``func`` on tensors of ``device_type``: classifies the op and reports a sync if it is one
    and no Python-level interceptor on this thread already reported it."""
    if not HUB.guards and not BACKEND_COUNTERS:
        return
    HUB.seen_dev += 1
    c = _aten_classifier(func)
    if c is _SKIP:
        return
    hit = c(args, kwargs, device_type)
    HUB.tls.last_hit = (args, hit)
    if hit is None:
        return
    kind, op, device, count, source = hit
    if isinstance(count, int):
        for cb in list(BACKEND_COUNTERS):
            cb(kind, op or func.name(), count)
    if HUB.guards and not HUB.tls.busy:
        report_sync(kind, op or func.name(), op, count, device, source, read=args)


# -- the dispatch-level safety net (``SyncGuard(exhaustive=True)``) ------------------------
def _net_hit(func: Any, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Optional[Hit]:
    """Classify one ATen op seen by the dispatch net: the reads no Python entry point sees,
    e.g. a 0-d device tensor passed where an int or a Scalar is expected (``torch.arange(n)``,
    ``x.view(n, -1)``, ``add(alpha=n)``: PyTorch's argument parser calls ``item()`` in C++)."""
    name = func.name()
    base = name.split(".", 1)[0]
    backends = HUB.backends  # their own kernels classify their ops
    if base == "aten::copy_":
        dst, src = args[0], args[1]
        if (not isinstance(src, _Tensor) or src.device.type in backends
                or dst.device.type in backends):
            return None
        nb = bool(args[2]) if len(args) > 2 else bool(kwargs.get("non_blocking", False))
        hit = _copy_dir(src, dst.device.type, nb, dst)
        return None if hit is None else (hit[0], name, hit[2], 1, hit[4])
    if base == "aten::_to_copy":
        target = kwargs.get("device")
        if target is None or args[0].device.type in backends:
            return None
        hit = _copy_dir(args[0], _device_type_of(target),
                        bool(kwargs.get("non_blocking", False)))
        return None if hit is None else (hit[0], name, hit[2], 1, hit[4])
    d = _first_dev(args) or (_first_dev(kwargs.values()) if kwargs else None)
    if d is None or d in backends:  # the simulated device's backend classifies its own ops
        return None
    c = _aten_classifier(func)
    if c is _SKIP:
        return None
    hit = c(args, kwargs, d)
    if hit is not None and base == "aten::_local_scalar_dense" and hit[4] is None:
        # no Python entry point reported it: a 0-d device tensor read in C++, most often one
        # passed where an int or Scalar is expected (torch.arange(n), x.view(n, -1)), or
        # TorchScript's aten::Bool / aten::item / aten::Int
        hit = (hit[0], hit[1], hit[2], hit[3],
               "read in C++ (a 0-d tensor used as a number, or TorchScript)")
    return hit  # type: ignore[no-any-return]


def dispatch_net() -> Any:
    """A ``TorchDispatchMode`` that reports the host reads of every ATen op run on this
    thread that no Python-level interceptor already reported. Thread-local (a dispatch mode
    is), and it puts every op through Python: opt-in, for measurement runs."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class _DispatchNet(TorchDispatchMode):
        #: set when its guard is taken down from elsewhere (another thread, or with another
        #: mode above it): left on its stack, it reports nothing more
        inert = False

        def __torch_dispatch__(self, func: Any, types: Any, args: Tuple[Any, ...] = (),
                               kwargs: Optional[Dict[str, Any]] = None) -> Any:
            kwargs = kwargs or {}
            if HUB.guards and not HUB.tls.busy and not self.inert:
                hit = _net_hit(func, args, kwargs)
                if hit is not None:
                    return _call_reporting(hit, hit[1] or func.name(), func, args, kwargs)
            return func(*args, **kwargs)

    return _DispatchNet()
