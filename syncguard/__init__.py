"""syncguard: count, attribute and gate hidden host-device syncs in PyTorch.

The public names are loaded lazily (module ``__getattr__``, PEP 562): ``import syncguard`` does
not import torch, so the pytest plugin (:mod:`syncguard.pytest_plugin`, loaded by every pytest
run through its entry point) costs nothing until a test asks for a guard. ``syncguard.SyncGuard``
and ``from syncguard import SyncGuard`` import what they need on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, Dict, List, Tuple

if TYPE_CHECKING:  # pragma: no cover
    from .core.events import KINDS, Frame, HostSyncError, SyncEvent
    from .core.guard import StepCount, SyncGuard
    from .core.hub import allow
    from .core.selftest import SelfTestError, selftest
    from .core.steps import step
    from .errors import SyncguardError
    from .results.format import ResultError
    from .results.run import Run, load

from ._version import __version__

__all__ = [
    "KINDS", "Frame", "HostSyncError", "ResultError", "Run", "SelfTestError", "StepCount",
    "SyncEvent", "SyncGuard", "SyncguardError", "allow", "load", "selftest", "simulated_device",
    "step", "__version__",
]

#: public name -> (submodule, attribute), imported on first access
_LAZY: Dict[str, Tuple[str, str]] = {
    "allow": (".core.hub", "allow"),
    "KINDS": (".core.events", "KINDS"),
    "Frame": (".core.events", "Frame"),
    "HostSyncError": (".core.events", "HostSyncError"),
    "SyncEvent": (".core.events", "SyncEvent"),
    "StepCount": (".core.guard", "StepCount"),
    "SyncGuard": (".core.guard", "SyncGuard"),
    "SelfTestError": (".core.selftest", "SelfTestError"),
    "selftest": (".core.selftest", "selftest"),
    "step": (".core.steps", "step"),
    "SyncguardError": (".errors", "SyncguardError"),
    "ResultError": (".results.format", "ResultError"),
    "Run": (".results.run", "Run"),
    "load": (".results.run", "load"),
}


def __getattr__(name: str) -> Any:
    spec = _LAZY.get(name)
    if spec is not None:
        value = getattr(importlib.import_module(spec[0], __name__), spec[1])
        globals()[name] = value  # later lookups skip this function
        return value
    if not name.startswith("__"):
        # ``syncguard.core`` and friends without an explicit ``import syncguard.core``.
        try:
            return importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"{__name__}.{name}":
                raise
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> List[str]:
    return sorted(set(globals()) | set(__all__))


def simulated_device(name: str = "npu", torch_npu: bool = False):  # type: ignore[no-untyped-def]
    """Set up (once) a simulated device ``name`` on the CPU and return its ``torch.device``.
    See :mod:`syncguard.sim`."""
    from .sim import simulated_device as _sd

    return _sd(name, torch_npu=torch_npu)
