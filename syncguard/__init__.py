"""syncguard: count, attribute and gate hidden host-device syncs in PyTorch."""

from __future__ import annotations

from ._hub import allow
from .events import KINDS, Frame, HostSyncError, SyncEvent
from .guard import StepCount, SyncGuard
from .selftest import SelfTestError, selftest

__version__ = "0.1.0"

__all__ = [
    "KINDS", "Frame", "HostSyncError", "SelfTestError", "StepCount", "SyncEvent", "SyncGuard",
    "allow", "selftest", "simulated_device", "__version__",
]


def simulated_device(name: str = "npu", torch_npu: bool = False):  # type: ignore[no-untyped-def]
    """Set up (once) a simulated device ``name`` on the CPU and return its ``torch.device``.
    See :mod:`syncguard.sim`."""
    from .sim import simulated_device as _sd

    return _sd(name, torch_npu=torch_npu)
