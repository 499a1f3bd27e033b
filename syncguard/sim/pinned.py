"""Simulated pinned host memory: a marker per buffer address.

The Python PrivateUse1 hooks of torch 2.13 cannot provide
``getPinnedMemoryAllocator``/``isPinnedPtr`` (only ``is_available``, ``is_built`` and
``has_primary_context`` can be overridden from Python), so ``cpu_tensor.pin_memory()`` would
raise ``NotImplementedError``. Setup therefore registers Python CPU kernels for
``aten::_pin_memory`` and ``aten::is_pinned``: pinning copies the tensor into a buffer whose
address is recorded while the buffer lives; ``is_pinned()`` looks the storage address up.
``to("cpu", non_blocking=True)`` of a device tensor returns such pinned memory, as on CUDA.
Factory functions with ``pin_memory=True`` (``torch.empty(n, pin_memory=True)``) go straight to
the C++ allocator and still raise ``NotImplementedError``: use ``.pin_memory()``.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any, Set

import torch

_COPY_ = torch.ops.aten.copy_.default

_PINNED: Set[int] = set()
_PINNED_LOCK = threading.Lock()


class _PinnedBuffer(bytearray):
    """Host memory handed out by ``pin_memory()``; its address is "pinned" while it lives."""


def _forget_pinned(ptr: int) -> None:
    with _PINNED_LOCK:
        _PINNED.discard(ptr)


def _storage_ptr(t: torch.Tensor) -> int:
    return int(t.untyped_storage().data_ptr())


def is_pinned_host(t: torch.Tensor) -> bool:
    """Whether CPU tensor ``t`` lives in (simulated) pinned host memory.

    ``t.is_pinned()`` gives the same answer once the simulated device is set up.
    """
    if t.device.type != "cpu":  # a simulated tensor's is the device's
        return False
    try:
        ptr = _storage_ptr(t)
    except RuntimeError:
        return False
    return ptr != 0 and ptr in _PINNED


def empty_pinned(shape: Any, stride: Any, dtype: torch.dtype) -> torch.Tensor:
    """An uninitialised CPU tensor in (simulated) pinned memory, with the given strides."""
    itemsize = torch.empty((), dtype=dtype).element_size()
    nbytes = 0
    if all(n > 0 for n in shape):
        nbytes = (1 + sum((n - 1) * st for n, st in zip(shape, stride))) * itemsize
    if nbytes == 0:
        return torch.empty_strided(shape, stride, dtype=dtype)
    buf = _PinnedBuffer(nbytes)
    flat = torch.frombuffer(buf, dtype=torch.uint8).view(dtype)
    out = flat.as_strided(shape, stride, 0)
    ptr = _storage_ptr(flat)
    with _PINNED_LOCK:
        _PINNED.add(ptr)
    # The tensor's storage holds the buffer; when the storage dies, the buffer does too.
    weakref.finalize(buf, _forget_pinned, ptr)
    return out


def pin_memory_cpu(self: torch.Tensor, device: Any = None) -> torch.Tensor:
    out = empty_pinned(self.shape, self.stride(), self.dtype)
    return _COPY_(out, self)  # type: ignore[no-any-return]


def is_pinned_cpu(self: torch.Tensor, device: Any = None) -> bool:
    return is_pinned_host(self)
