"""The simulated device's backend on torch 2.7 and 2.8 (no ``torch._C._acc`` yet).

Selected by :mod:`syncguard.sim.device` when torch lacks ``torch._C._acc`` (torch < 2.9), or
when the environment variable ``SYNCGUARD_SIM_BACKEND=wrapper`` is set (to test this route on
a newer torch). It changes how device tensors are made and how ops reach the shared kernel
(:func:`syncguard.sim.kernel._run`), not what the kernel does, so the hook sees the same ops:

* Setup uses the public pieces: ``torch.utils.rename_privateuse1_backend(name)``,
  ``torch.utils.generate_methods_for_privateuse1_backend()`` and
  ``torch._register_device_module(name, npu_module)``. Python cannot register PrivateUse1
  hooks or a device guard before torch 2.9; the device guard is supplied through ctypes (see
  :func:`_install_device_guard`), the hooks are not needed (pinned memory has its own CPU
  kernels, see :mod:`syncguard.sim.pinned`).
* A device tensor is a :class:`~syncguard.sim.kernel.SimTensor` made by
  ``torch.Tensor._make_wrapper_subclass(..., device=npu:0)`` with the sizes, strides and offset
  of its CPU values ``_v``. Such a tensor carries the Python dispatch key, so every op with a
  device tensor argument reaches ``SimTensor.__torch_dispatch__`` (:func:`torch_dispatch`),
  after autograd and after CompositeImplicitAutograd decompositions, the same point where the
  torch >= 2.9 backend kernel sees it. CompositeExplicitAutograd ops arrive undecomposed, as
  they do there (where they get direct PrivateUse1 registrations). The composite kernels that
  backend keeps are replayed here in Python: ``copy_``/``copy`` go through
  ``aten::_copy_from`` (as PyTorch's composite does for a device it does not know),
  ``_to_copy`` runs :func:`syncguard.sim.kernel._to_copy_kernel`, ``_pin_memory`` of a device
  tensor raises as PyTorch does.
* Ops without a tensor argument (factories with ``device="npu"``: ``empty.memory_format``,
  ``empty_strided``, ``zeros``, ``full``, ``arange``, ``randn``...), and ops run where the
  Python key is excluded (``torch.tensor(..., device="npu")`` builds its result so), dispatch
  to PrivateUse1, where the same Python kernels as on torch >= 2.9 are registered (a boxed
  fallback plus the CompositeExplicitAutograd ops), plus per-op ``_copy_from`` kernels.
* torch 2.7/2.8's C++ ``Tensor.tolist`` and ``Tensor.numpy`` refuse tensor subclasses:
  ``SimTensor`` has its own, doing what those do for a device tensor (one
  ``aten::_copy_from`` to the host) and wrapped by syncguard's interceptor under the same API
  names and classifiers as ``Tensor.tolist``/``Tensor.numpy``, so guards report them alike.

Differences from the torch >= 2.9 route: ``x.detach()`` (and other non-differentiable views)
reaches the kernel twice on torch 2.7/2.8 (autograd shallow-copies a Python-dispatch tensor
through ``aten::detach``; not a host read, so no count changes); ``untyped_storage()`` of a
device tensor is a placeholder that has a size but no data; the device guard's streams are
the CPU no-op's; the device guard needs c10's exported ``device_guard_impl_registry`` and a
little-endian Linux or macOS build (x86-64, aarch64).
"""

from __future__ import annotations

import ctypes
import os
import sys
from typing import Any, Callable, Dict, List, Optional, Tuple

import torch

from syncguard.core import classify, intercept
from syncguard.sim import device as _dev
from syncguard.sim import kernel as _k

#: The simulated device (``name:0``), set by :func:`setup`.
_DEVICE: Optional[torch.device] = None
_LIBC10 = "libc10.dylib" if sys.platform == "darwin" else "libc10.so"
_REGISTRY_SYMBOL = "_ZN3c104impl26device_guard_impl_registryE"
_VTABLE_ENTRIES = 32
_MAKE = getattr(torch.Tensor, "_make_wrapper_subclass", None)
_COPY_FROM = torch.ops.aten._copy_from.default
_EMPTY_STRIDED = torch.ops.aten.empty_strided.default
_TO_COPY = torch.ops.aten._to_copy.default
_TOLIST = torch._C.TensorBase.tolist
_NUMPY = torch._C.TensorBase.numpy
_DETACH = torch.ops.aten.detach.default
_CPU = torch.device("cpu")


def available() -> Optional[str]:
    """None if this torch has what the route needs, else what it lacks."""
    need = [
        ("torch.utils.rename_privateuse1_backend", hasattr(torch.utils,
                                                            "rename_privateuse1_backend")),
        ("torch.utils.generate_methods_for_privateuse1_backend",
         hasattr(torch.utils, "generate_methods_for_privateuse1_backend")),
        ("torch._register_device_module", hasattr(torch, "_register_device_module")),
        ("torch.Tensor._make_wrapper_subclass", _MAKE is not None),
        ("torch.library.Library.fallback", hasattr(torch.library.Library, "fallback")),
    ]
    missing = [n for n, ok in need if not ok]
    if not missing:
        problem = _guard_problem()
        if problem is not None:
            missing.append(problem)
    return ", ".join(missing) if missing else None


# --------------------------------------------------------------------------------------------
# Tensors
# --------------------------------------------------------------------------------------------


def wrap(v: torch.Tensor) -> Any:
    """A new device wrapper around CPU tensor ``v`` (aliases ``v``: no copy)."""
    w = _MAKE(  # type: ignore[misc]
        _k.SimTensor, v.shape, strides=v.stride(), storage_offset=v.storage_offset(),
        dtype=v.dtype, device=_DEVICE, requires_grad=False,
    )
    w._v = v
    return w


class _Shell(torch.Tensor):
    """A value-less device tensor with given metadata, only for torch's printing prefix."""

    @classmethod
    def __torch_dispatch__(  # type: ignore[override]
            cls, func: Any, types: Any, args: Tuple[Any, ...] = (),
            kwargs: Optional[Dict[str, Any]] = None) -> Any:
        raise RuntimeError(f"syncguard.sim: {func} on a printing shell")


# torch's printing names a subclass by its class name: "tensor(" as for a plain tensor.
_Shell.__name__ = "tensor"


def _tolist_impl(self: Any) -> Any:
    # torch 2.7/2.8's C++ tolist refuses tensor subclasses; this is what it does for a device
    # tensor: one device-to-host copy (aten::_copy_from), then the host list.
    return _TOLIST(_TO_COPY(self, device=_CPU))


def _numpy_impl(self: Any, *, force: bool = False) -> Any:
    # torch 2.7/2.8's C++ numpy refuses tensor subclasses; this is what it does for a device
    # tensor.
    if not force:
        raise TypeError(
            f"can't convert {self.device} device type tensor to numpy. Use Tensor.cpu() to "
            f"copy the tensor to host memory first."
        )
    return _NUMPY(_TO_COPY(_DETACH(self), device=_CPU), force=True)


def make_numpy() -> Callable[..., Any]:
    """``SimTensor.numpy``, wrapped as syncguard's interceptor wraps ``Tensor.numpy``."""
    return intercept._wrap(_numpy_impl, "Tensor.numpy", classify._numpy)


def make_tolist() -> Callable[..., Any]:
    """``SimTensor.tolist``, wrapped as syncguard's interceptor wraps ``Tensor.tolist`` (with the
    same API name and classifier), so a guard reports it exactly as on torch >= 2.9, where
    ``Tensor.tolist`` itself works on a device tensor."""
    return intercept._wrap(_tolist_impl, "Tensor.tolist", classify._d2h)


def shell(shape: Any, dtype: torch.dtype) -> torch.Tensor:
    return _MAKE(_Shell, shape, dtype=dtype, device=_DEVICE)  # type: ignore[misc, no-any-return]


# --------------------------------------------------------------------------------------------
# __torch_dispatch__
# --------------------------------------------------------------------------------------------


def _copy_(args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Any:
    # aten::copy_(Tensor(a!) self, Tensor src, bool non_blocking=False): PyTorch's composite
    # returns early for a copy onto itself, else re-dispatches a device it does not know to
    # aten::_copy_from(src, self, non_blocking).
    dst, src = args[0], args[1]
    if dst is src:
        return dst
    rest = args[2:3] if len(args) > 2 else (
        (kwargs["non_blocking"],) if "non_blocking" in kwargs else ())
    _COPY_FROM(src, dst, *rest)
    return dst


def _copy(args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Any:
    # aten::copy(Tensor self, Tensor src, bool non_blocking=False): the composite allocates
    # with empty_strided (self has no real storage) and copy_'s into it.
    self = args[0]
    r = _EMPTY_STRIDED(self.shape, self.stride(), dtype=self.dtype, device=self.device)
    return _copy_((r,) + tuple(args[1:]), kwargs)


def _to_copy(args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Any:
    return _k._to_copy_kernel(None, *args, **kwargs)


def _pin_memory(args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Any:
    raise RuntimeError(
        f"cannot pin '{_k._NAME}{str(args[0].dtype).rsplit('.', 1)[-1].capitalize()}Type' "
        f"only dense CPU tensors can be pinned"
    )


_Handler = Callable[[Tuple[Any, ...], Dict[str, Any]], Any]
_COMPOSITE: Dict[Any, _Handler] = {
    torch.ops.aten.copy_.default: _copy_,
    torch.ops.aten.copy.default: _copy,
    torch.ops.aten._to_copy.default: _to_copy,
    torch.ops.aten._pin_memory.default: _pin_memory,
}
_COMPOSITE_IDS: Dict[int, _Handler] = {id(k): v for k, v in _COMPOSITE.items()}


def torch_dispatch(cls: Any, func: Any, types: Any, args: Tuple[Any, ...] = (),
                   kwargs: Optional[Dict[str, Any]] = None) -> Any:
    """``SimTensor.__torch_dispatch__``: every op with a device tensor argument."""
    if kwargs is None:
        kwargs = {}
    h = _COMPOSITE_IDS.get(id(func))
    if h is not None:
        return h(args, kwargs)
    info = _k._INFO.get(id(func))
    return _k._run_observed(info if info is not None else _k._info(func), args, kwargs)


# --------------------------------------------------------------------------------------------
# Setup
# --------------------------------------------------------------------------------------------

# --- the device guard ---
#
# Before torch 2.9 Python cannot register a DeviceGuardImplInterface for PrivateUse1, and
# without one every C++ path that guards a device tensor's device (indexing, ``nonzero``, an
# index-less ``.to("npu")``...) fails with "PyTorch is not linked with support for npu
# devices". The guard here is PyTorch's own no-op CPU guard (``NoOpDeviceGuardImpl<CPU>``,
# registered in c10's ``device_guard_impl_registry``) with the entries that name a device
# replaced: its virtual table is copied and ``type()``, ``exchangeDevice()`` and
# ``getDevice()`` answer for ``npu:0`` (ctypes callbacks); everything else stays the CPU no-op
# (streams: ``getStream()`` names the CPU default stream; nothing of syncguard's asks). The
# object is written into the empty PrivateUse1 slot of the registry (as
# C10_REGISTER_GUARD_IMPL would).

_GUARD_KEEP: List[Any] = []  # the ctypes objects the registered guard points into


def _device_type_index(name: str) -> int:
    """c10::DeviceType's number for ``name`` (the stubs do not type the enum as int)."""
    return int(getattr(torch._C._autograd.DeviceType, name))


def _guard_registry() -> Any:
    """c10's ``device_guard_impl_registry`` (one pointer per device type) via ctypes."""
    pu1 = _device_type_index("PrivateUse1")
    lib = ctypes.CDLL(os.path.join(os.path.dirname(torch.__file__), "lib", _LIBC10))
    return (ctypes.c_void_p * (pu1 + 1)).in_dll(lib, _REGISTRY_SYMBOL)


def _guard_problem() -> Optional[str]:
    """None if the device guard can be installed here, else why not (no side effects)."""
    if sys.platform == "win32" or sys.byteorder != "little":
        return "a little-endian Linux or macOS build (for the device guard)"
    try:
        registry = _guard_registry()
    except (OSError, ValueError) as e:
        return f"c10's device_guard_impl_registry, reachable through ctypes ({e})"
    if not registry[_device_type_index("CPU")]:
        return "a registered CPU device guard in c10"
    return None


def _install_device_guard() -> None:
    """Register the device guard described above for PrivateUse1 (once per process)."""
    pu1 = _device_type_index("PrivateUse1")
    cpu = _device_type_index("CPU")
    registry = _guard_registry()
    if registry[pu1]:
        return  # a guard is registered already
    cpu_impl = registry[cpu]
    if not cpu_impl:
        raise _k.SimulatedDeviceError("c10 has no CPU device guard registered")
    vptr = ctypes.c_void_p.from_address(cpu_impl).value
    assert vptr is not None
    word = ctypes.sizeof(ctypes.c_void_p)
    # Offset-to-top and type info precede the virtual functions (Itanium C++ ABI); copy more
    # entries than the interface has (23 in torch 2.7/2.8), reading only mapped read-only data.
    n = 2 + _VTABLE_ENTRIES
    vtable = (ctypes.c_void_p * n)()
    ctypes.memmove(vtable, vptr - 2 * word, n * word)
    dev = pu1  # c10::Device{PrivateUse1, index 0}: two int8 fields, type in the low byte

    type_fn = ctypes.CFUNCTYPE(ctypes.c_int8, ctypes.c_void_p)(lambda this: pu1)
    exchange_fn = ctypes.CFUNCTYPE(ctypes.c_uint16, ctypes.c_void_p, ctypes.c_uint16)(
        lambda this, d: dev)
    get_fn = ctypes.CFUNCTYPE(ctypes.c_uint16, ctypes.c_void_p)(lambda this: dev)
    # The first three virtual functions, in declaration order since torch 1.x: type(),
    # exchangeDevice(Device), getDevice().
    for i, fn in ((0, type_fn), (1, exchange_fn), (2, get_fn)):
        vtable[2 + i] = ctypes.cast(fn, ctypes.c_void_p).value
    obj = (ctypes.c_void_p * 2)(ctypes.addressof(vtable) + 2 * word, 0)
    _GUARD_KEEP.extend([vtable, obj, type_fn, exchange_fn, get_fn])
    registry[pu1] = ctypes.addressof(obj)


def setup(name: str, backend_module: Any) -> None:
    """Rename PrivateUse1 to ``name`` and register ``backend_module`` as ``torch.<name>``."""
    global _DEVICE
    torch.utils.rename_privateuse1_backend(name)
    _DEVICE = torch.device(name, 0)
    torch.utils.generate_methods_for_privateuse1_backend()
    torch._register_device_module(name, backend_module)
    _install_device_guard()


def register_kernels(libs: Any) -> None:
    """The kernels this route needs besides the shared PrivateUse1/CPU ones."""
    lib = torch.library.Library("aten", "IMPL")
    # torch 2.7/2.8's boxed Python fallback cannot serve an op whose first tensor argument is a
    # Python-owned host tensor (its trampoline looks for a per-op registration: "func !=
    # nullptr" INTERNAL ASSERT). Host tensors meet the PrivateUse1 kernels only where the
    # Python dispatch key is excluded (``torch.tensor(..., device="npu")``), through the
    # transfer ops: register those per op.
    for opname in ("_copy_from", "_copy_from_and_resize"):
        lib.impl(opname, _k._make_kernel(getattr(torch.ops.aten, opname).default),
                 "PrivateUse1", with_keyset=True)
    libs.append(lib)
    intercept._never_compile(torch_dispatch.__code__)  # as the shared kernels (kernel.py)


def _install() -> None:
    """Make this module the simulated device's route: device tensors become
    ``__torch_dispatch__`` wrapper subclasses (run by :mod:`syncguard.sim` at import, on the
    wrapper route only)."""
    _dev._route = sys.modules[__name__]
    _k.SimTensor.__torch_dispatch__ = classmethod(torch_dispatch)  # type: ignore[assignment]
    _k.SimTensor.tolist = make_tolist()  # type: ignore[method-assign]
    _k.SimTensor.numpy = make_numpy()  # type: ignore[method-assign]
    _k._wrap = wrap  # type: ignore[assignment]
    _k._shell = shell  # type: ignore[assignment]


if _dev.WRAPPER_ROUTE:
    _install()
