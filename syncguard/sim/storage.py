"""Storages on the simulated device: what ``torch.load(f, map_location="npu")`` and
``storage.to("npu")`` / ``.npu()`` make.

The Python PrivateUse1 backend has no allocator: a storage made on it
(``torch.UntypedStorage(n, device="npu")``, which ``storage.to`` and every ``torch.load``
onto the device call) ends the process with a segmentation fault. Simulated tensors keep their
values in CPU tensors, so a storage of the device is a :class:`SimStorage`: host bytes (its own
copy) that say they are on the device. ``torch.load`` rebuilds a tensor from it with
``torch.empty(0, device=storage.device).set_(storage, offset, size, stride)``; the device's
``set_`` kernel (:func:`syncguard.sim.kernel._set_storage_kernel`) makes the tensor's values a
view of those bytes. Installed by setup, process-wide, as the device itself.
"""

from __future__ import annotations

from typing import Any, Optional

import torch
import torch.storage as _storage_module

_NAME = "npu"
_ORIG_TO: Any = None
_ORIG_NEW: Any = None


class SimStorage(torch.UntypedStorage):
    """Bytes of the simulated device: a host storage whose ``device`` is the device's."""

    @property
    def device(self) -> torch.device:  # type: ignore[override]
        return torch.device(_NAME, 0)

    @property
    def is_cuda(self) -> bool:  # type: ignore[override]
        return False


def _device_of(device: Any) -> Optional[torch.device]:
    if device is None:
        return None
    if isinstance(device, int):
        return torch.device(_NAME, device)
    return device if isinstance(device, torch.device) else torch.device(device)


def _to(self: Any, device: torch.device, non_blocking: bool = False) -> Any:
    """``torch.storage._to`` (behind ``UntypedStorage.to`` and ``TypedStorage.to``), with the
    simulated device served by :class:`SimStorage`."""
    if device.type == _NAME:
        if isinstance(self, SimStorage):
            return self
        if self.device.type != "cpu":
            self = _ORIG_TO(self, torch.device("cpu"), non_blocking)
        out = SimStorage(self.nbytes())
        out.copy_(self)
        return out
    return _ORIG_TO(self, device, non_blocking)


def _npu(self: Any, device: Any = None, non_blocking: bool = False) -> Any:
    """``storage.npu(device=None, non_blocking=False)``, as torch_npu has it."""
    dev = _device_of(device) or torch.device(_NAME, 0)
    if dev.type != _NAME:
        raise ValueError(f"storage.{_NAME}(): {dev} is not a {_NAME} device")
    return self.to(device=dev, non_blocking=non_blocking)


def _new(cls: Any, *args: Any, **kwargs: Any) -> Any:
    """``torch.UntypedStorage(..., device="npu")`` makes a :class:`SimStorage` (the backend
    would crash allocating it)."""
    dev = kwargs.get("device")
    if dev is not None and not issubclass(cls, SimStorage):
        d = _device_of(dev)
        if d is not None and d.type == _NAME:
            kwargs = {k: v for k, v in kwargs.items() if k != "device"}
            return _ORIG_NEW(SimStorage, *args, **kwargs)
    return _ORIG_NEW(cls, *args, **kwargs)


def install(name: str) -> None:
    """Serve storages of device ``name`` (once per process, at setup)."""
    global _NAME, _ORIG_TO, _ORIG_NEW
    if _ORIG_TO is not None:
        return
    _NAME = name
    _ORIG_TO = _storage_module._to
    _ORIG_NEW = torch.UntypedStorage.__new__
    _storage_module._to = _to  # type: ignore[attr-defined]
    torch.UntypedStorage.__new__ = _new  # type: ignore[method-assign,assignment]
    for cls in (torch.UntypedStorage, torch.TypedStorage):
        setattr(cls, name, _npu)
