"""A stand-in for ``torch_npu`` on machines without an Ascend NPU.

Installed as ``sys.modules["torch_npu"]`` only when asked (``simulated_device(torch_npu=True)``,
:func:`syncguard.sim.install_torch_npu_standin` or the
:func:`syncguard.sim.torch_npu_standin_installed` context manager), and never over a real
``torch_npu``. ``torch_npu.npu`` is the simulated device's module. Its fused operators are the
ones plug-ins provide (:func:`syncguard.standin.provide`: the case study provides
``npu_top_k_top_p``); any other ``npu_*`` operator imports (libraries import them at load
time) and says, when called, that it is not simulated.
"""

from __future__ import annotations

from typing import Any

import torch

from syncguard.errors import SyncguardError
from syncguard.sim import device as _device
from syncguard.standin import provided

#: Marks this module as syncguard's stand-in (a real torch_npu never has it).
__syncguard_standin__ = True
#: Not a torch_npu release: the local version label says what it is.
__version__ = "0.0.0+syncguard.standin"


class OpNotSimulatedError(SyncguardError, NotImplementedError):
    """A torch_npu fused op the stand-in does not simulate was called."""


def _not_simulated(name: str) -> Any:
    def op(*args: Any, **kwargs: Any) -> Any:
        raise OpNotSimulatedError(
            f"torch_npu.{name} is not simulated by syncguard's stand-in (only the operators "
            f"plug-ins provide are: {', '.join(sorted(provided())) or 'none'}); run this code "
            f"on a 910B, or keep it out of the guarded path on the simulated device")

    op.__name__ = op.__qualname__ = name
    return op


def __getattr__(name: str) -> Any:
    # ``torch_npu.npu`` is the device module, as in the real package.
    if name == "npu":
        dev = _device.current_name()
        if dev is not None:
            return getattr(torch, dev)
    op = provided().get(name)
    if op is not None:  # a plug-in's operator (the case study's npu_top_k_top_p)
        return op
    if name.startswith("npu_") and not name.startswith("npu__"):
        # torch_npu's public fused ops (npu_fusion_attention, npu_rms_norm, ...): libraries
        # import them at load time once torch_npu looks available (transformers does), so the
        # import succeeds and only a call says the op is not simulated.
        return _not_simulated(name)
    raise AttributeError(f"module 'torch_npu' (syncguard stand-in) has no attribute {name!r}")
