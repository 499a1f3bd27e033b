"""The simulated device's backend: its route and its setup.

Two routes, chosen by torch version: on torch >= 2.9 the one described here; on torch 2.7
and 2.8 (no ``torch._C._acc``) device tensors are ``__torch_dispatch__`` wrapper subclasses
that feed the same kernel (:mod:`syncguard.sim.wrapper_backend`, whose docstring lists what
differs).
``SYNCGUARD_SIM_BACKEND=wrapper`` forces that route on a newer torch (for testing it).

How it works (torch >= 2.9, ``torch.utils.backend_registration``):

* ``_setup_privateuseone_for_python_backend(rename=name, backend_module=npu_module)`` renames
  the PrivateUse1 backend, so ``torch.device("npu")`` parses and dispatches to PrivateUse1, and
  registers :mod:`syncguard.sim.npu_module` as ``torch.npu``.
* Device tensors and the one kernel every op runs through: :mod:`syncguard.sim.kernel`;
  simulated pinned host memory: :mod:`syncguard.sim.pinned`.

Known differences from a real device: autograd is not supported; ``torch.Generator`` of the
device cannot be made (random ops use CPU generators, and ``torch.npu.manual_seed`` seeds the
CPU default generator); ``untyped_storage()`` of a device tensor is an empty placeholder (no
bytes), while a storage moved to the device (``torch.load(map_location="npu")``,
``storage.to``) is host bytes that say they are on it (:mod:`syncguard.sim.storage`); the
conjugate/negative view bits of complex views live on the CPU values, so ``is_conj()`` of a
device tensor is False while values are right; ``aten::view.dtype`` must be called as
``tensor.view(dtype)``; dense strided tensors only.
"""

from __future__ import annotations

import importlib
import os
import re
import sys
import threading
from typing import Any, List, Optional, Tuple

import torch

from syncguard.core import classify as _classify

from ..standin import is_standin
from . import compiler, kernel, npu_module, storage
from .kernel import SimTensor, SimulatedDeviceError

#: The oldest torch the simulated device was verified on (2.7.1, by the wrapper route of
#: syncguard.sim.wrapper_backend; torch >= 2.9 uses ``_setup_privateuseone_for_python_backend``).
#: See reports/sim-old-torch.md.
MIN_TORCH_VERSION: Tuple[int, int] = (2, 7)


def _use_wrapper_route() -> bool:
    forced = os.environ.get("SYNCGUARD_SIM_BACKEND", "")
    if forced == "wrapper":
        return True
    return not hasattr(torch._C, "_acc")


#: Whether this process uses the wrapper-subclass route (torch < 2.9); fixed at import.
WRAPPER_ROUTE: bool = _use_wrapper_route()
#: The wrapper route's module (:mod:`syncguard.sim.wrapper_backend`), which registers itself
#: here when :mod:`syncguard.sim` imports it on that route; None on the backend route. This
#: module never imports it: the route depends on the device, not the other way round.
_route: Any = None


class _SimState:
    def __init__(self) -> None:
        self.name: Optional[str] = None
        self.device: Optional[torch.device] = None
        self.libs: List[Any] = []
        self.lock = threading.RLock()


_STATE = _SimState()


def _torch_version() -> Tuple[int, int]:
    m = re.match(r"(\d+)\.(\d+)", torch.__version__)
    if m is None:
        return (0, 0)
    return (int(m.group(1)), int(m.group(2)))


def _real_torch_npu() -> Optional[Any]:
    mod = sys.modules.get("torch_npu")
    return None if mod is None or is_standin(mod) else mod


#: Private torch APIs both routes use at setup (dotted from ``torch``).
_COMMON_PRIVATE = ("_C._get_privateuse1_backend_name",
                   "_C._dispatch_get_registrations_for_dispatch_key")
#: ... and those of the torch >= 2.9 route.
_ACC_PRIVATE = ("_C._acc.create_empty_tensor",
                "utils.backend_registration._setup_privateuseone_for_python_backend")


def _lacks(dotted: str) -> bool:
    obj: Any = torch
    for part in dotted.split("."):
        if part == "backend_registration" and obj is torch.utils:
            try:
                importlib.import_module("torch.utils.backend_registration")
            except ImportError:
                return True
        obj = getattr(obj, part, None)
        if obj is None:
            return True
    return False


def _private_api_lacking(acc_route: bool) -> Optional[str]:
    """The private torch API setup needs and this torch lacks (a future torch may rename it),
    else None."""
    for dotted in _COMMON_PRIVATE + (_ACC_PRIVATE if acc_route else ()):
        if _lacks(dotted):
            return f"torch.{dotted}"
    return None


def _refusal(name: str, backend_name: str, owned: Optional[str]) -> Optional[str]:
    """Why the simulated device cannot be set up as ``name`` (None if it can).

    No side effects. ``backend_name`` is PrivateUse1's name (``"privateuseone"`` until renamed)
    and ``owned`` the name syncguard.sim already set up in this process (None if none), passed
    in so that tests can ask about a fresh process after the real setup. Also reads
    ``torch.__version__`` and ``sys.modules["torch_npu"]``.
    """
    if _torch_version() < MIN_TORCH_VERSION:
        return (
            f"the simulated device needs torch >= {MIN_TORCH_VERSION[0]}.{MIN_TORCH_VERSION[1]} "
            f"(the oldest verified); installed: torch {torch.__version__}"
        )
    lacking = (_route.available() if WRAPPER_ROUTE else None) or _private_api_lacking(
        not WRAPPER_ROUTE)
    if lacking is not None:
        return (
            f"the simulated device cannot be set up on torch {torch.__version__}: "
            f"it lacks {lacking}"
        )
    if not isinstance(name, str) or not re.fullmatch(r"[a-z][a-z0-9_]*", name):
        return f"invalid device name {name!r}: use a lowercase identifier"
    if owned is not None:
        if name != owned:
            return (
                f"the simulated device is already set up as {owned!r} in this process; "
                f"PrivateUse1 can be renamed only once, so it cannot also be {name!r}"
            )
        return None
    real = _real_torch_npu()
    if real is not None:
        return (
            f"the real torch_npu is imported ({getattr(real, '__file__', real)!r}): it owns the "
            f"'npu' device (PrivateUse1), so syncguard.sim cannot simulate {name!r} in this "
            f"process; use the real NPU, or run with torch_npu unloaded (syncguard --device sim "
            f"keeps it unloaded; elsewhere set TORCH_DEVICE_BACKEND_AUTOLOAD=0 before "
            f"importing torch, and do not import torch_npu)"
        )
    if backend_name != "privateuseone":
        return (
            f"PrivateUse1 was already renamed to {backend_name!r} by another backend in this "
            f"process; only one PrivateUse1 backend can exist, so syncguard.sim cannot set up "
            f"{name!r}"
        )
    existing = getattr(torch, name, None)
    if existing is not None and not getattr(existing, "__syncguard_sim__", False):
        return (
            f"torch.{name} already exists ({existing!r}); cannot register the simulated "
            f"device module under that name"
        )
    current = getattr(torch._C, "_get_privateuse1_backend_name", lambda: backend_name)()
    if name != current:
        try:
            torch.device(name)
        except RuntimeError:
            pass
        else:
            return f"{name!r} is a built-in torch device type; choose another name"
    return None


def _check_can_setup(name: str = "npu") -> None:
    """Raise :class:`SimulatedDeviceError` if the simulated device cannot be set up as ``name``
    in this process now. No side effects; passes when syncguard.sim already owns ``name``."""
    get_name = getattr(torch._C, "_get_privateuse1_backend_name", None)
    why = _refusal(name, get_name() if get_name is not None else "privateuseone", _STATE.name)
    if why is not None:
        raise SimulatedDeviceError(why)


def setup(name: str = "npu") -> torch.device:
    """Set up (once per process) the simulated device ``name``; return ``torch.device(name, 0)``."""
    with _STATE.lock:
        if _STATE.name is not None and _STATE.device is not None:
            _check_can_setup(name)  # raises for a different name
            return _STATE.device
        _check_can_setup(name)
        npu_module._DEVICE_NAME = name
        kernel._NAME = name
        if WRAPPER_ROUTE:
            _route.setup(name, npu_module)
        else:
            from torch.utils import backend_registration as br

            br._setup_privateuseone_for_python_backend(rename=name, backend_module=npu_module)
        kernel.register(_STATE.libs)
        if WRAPPER_ROUTE:
            _route.register_kernels(_STATE.libs)
        else:
            storage.install(name)
        compiler.install(name, SimTensor)
        _classify.register_backend(name, SimTensor, "npu")
        _STATE.name = name
        _STATE.device = torch.device(name, 0)
        return _STATE.device


def current_name() -> Optional[str]:
    """The simulated device's name once set up, else None."""
    return _STATE.name
