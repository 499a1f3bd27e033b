"""What a call reads on the host: the classifiers of syncguard's interceptors.

Each Python entry point that can read device data (``Tensor.item``, ``x[mask]``,
``torch.tensor(list, device=)``...) has a classifier here: given the call's arguments, the
sync it makes (its kind, the ATen op, the device, how many reads, why) or None. The ATen ops
seen below Python (the simulated device's kernels, compiled graphs, the dispatch net) are
classified here too (:func:`aten_classifier`), from the same rules and the committed op sync
models. Nothing here patches or reports: :mod:`syncguard.core.intercept` does.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

import torch

from ..devicenames import HARDWARE
from . import events as E
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
    if device_type in HARDWARE:
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


# -- ATen ops ------------------------------------------------------------------------------
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
    for backend in HARDWARE:
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


