"""Host values to the device without a host wait: pinned staging buffers and a non-blocking copy,
the way engines build their batch tensors (the scenario runner stages its slot and position
tensors with it; the case study's batch metadata too).
"""

from __future__ import annotations

from typing import Any, Optional, Sequence, Tuple, Union

import torch

#: The device is the host: tensors are made directly, no host-to-device copy.
BUILD_HOST = "host"
#: Pinned staging buffers and ``.to(device, non_blocking=True)``: the host does not wait.
BUILD_PINNED = "pinned-nonblocking"
#: Pinned memory unavailable: pageable buffers with ``non_blocking=True`` (the driver may wait).
BUILD_PAGEABLE = "pageable-nonblocking"

DeviceLike = Union[str, torch.device]


class HostStager:
    """Copies host lists to a device: pinned staging + non-blocking copy, or a fallback.

    The first staging decides the mode for the stager's lifetime: ``"host"`` when the device
    is the CPU, ``"pinned-nonblocking"`` when a pinned buffer can be allocated, else
    ``"pageable-nonblocking"`` (``fallback_reason`` then holds the pinning error).
    """

    def __init__(self, device: DeviceLike) -> None:
        self.device = torch.device(device)
        self.mode: Optional[str] = BUILD_HOST if self.device.type == "cpu" else None
        self.fallback_reason: Optional[str] = None

    def _host_buffer(self, shape: Tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
        if self.mode is None:
            try:
                buffer = torch.empty(shape, dtype=dtype).pin_memory()
            except (RuntimeError, NotImplementedError) as exc:
                self.mode = BUILD_PAGEABLE
                self.fallback_reason = str(exc).splitlines()[0] if str(exc) else repr(exc)
            else:
                self.mode = BUILD_PINNED
                return buffer
        if self.mode == BUILD_PINNED:
            return torch.empty(shape, dtype=dtype).pin_memory()
        return torch.empty(shape, dtype=dtype)

    def stage(
        self, values: Sequence[Any], dtype: torch.dtype, shape: Optional[Tuple[int, ...]] = None
    ) -> torch.Tensor:
        """A device tensor holding ``values`` (reshaped to ``shape`` when given)."""
        host = torch.tensor(list(values), dtype=dtype)
        if shape is not None:
            host = host.reshape(shape)
        if self.mode == BUILD_HOST:
            return host
        buffer = self._host_buffer(tuple(host.shape), dtype)
        buffer.copy_(host)
        return buffer.to(self.device, non_blocking=True)
