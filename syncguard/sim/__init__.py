"""A simulated accelerator ("npu") on CPU-only machines.

``simulated_device()`` turns PyTorch's PrivateUse1 backend into a device named ``npu`` whose
tensors keep their values in CPU tensors and whose every ATen op passes through one Python
kernel. That kernel calls :func:`syncguard.core.aten.backend_op_hook` before each op, so
syncguard sees host reads of device data (``.item()``, ``bool()``, ``.tolist()``, ``.cpu()``,
``nonzero``...) from every thread, exactly where a real NPU would have to synchronise.

Setup is process-global and permanent (PrivateUse1 can be set up once per process), needs
torch >= 2.7 (``MIN_TORCH_VERSION``; torch 2.7 and 2.8 take the wrapper-subclass route of
:mod:`syncguard.sim.wrapper_backend`), and is refused when the real ``torch_npu`` is imported
(it owns "npu" then).

Public API:

* :func:`simulated_device` - set up (idempotent) and return ``torch.device("npu:0")``.
* :func:`is_simulated` - whether a tensor lives on the simulated device.
* :func:`host_value` - the CPU tensor behind a simulated tensor (alias, never reported).
* :func:`is_pinned_host` - whether a CPU tensor is in (simulated) pinned memory; after setup
  ``tensor.is_pinned()`` answers the same and ``tensor.pin_memory()`` works.
* :func:`install_torch_npu_standin` / :func:`uninstall_torch_npu_standin` /
  :func:`torch_npu_standin_installed` - a ``torch_npu`` stand-in with
  the fused operators plug-ins provide (:func:`syncguard.standin.provide`; the module itself
  is :mod:`syncguard.sim.torch_npu_standin`).
* :class:`SimulatedDeviceError`.
"""

from __future__ import annotations

import contextlib
import sys
import types
from typing import Iterator

import torch

from syncguard.core.intercept import suppressed
from syncguard.sim import device as _device_module
from syncguard.sim import torch_npu_standin
from syncguard.sim.device import (
    MIN_TORCH_VERSION,
    current_name,
)
from syncguard.sim.device import setup as _setup
from syncguard.sim.kernel import SimTensor, SimulatedDeviceError, host_value, is_simulated
from syncguard.sim.pinned import is_pinned_host
from syncguard.standin import is_standin

if _device_module.WRAPPER_ROUTE:  # torch < 2.9: the wrapper-subclass route registers itself
    import syncguard.sim.wrapper_backend  # noqa: F401

__all__ = [
    "MIN_TORCH_VERSION",
    "SimTensor",
    "SimulatedDeviceError",
    "current_name",
    "host_value",
    "install_torch_npu_standin",
    "is_pinned_host",
    "is_simulated",
    "kernel_reads",
    "simulated_device",
    "torch_npu_standin",
    "torch_npu_standin_installed",
    "uninstall_torch_npu_standin",
]


@contextlib.contextmanager
def kernel_reads() -> Iterator[None]:
    """Inside, host reads on this thread are a stand-in kernel's own, which the real kernel
    does not make (a fused operator checking its arguments' values to warn): not the
    program's, never reported to a guard."""
    with suppressed():
        yield


def simulated_device(name: str = "npu", torch_npu: bool = False) -> torch.device:
    """Set up the simulated device ``name`` (once per process) and return ``name:0``.

    A second call returns the same device; a call with another name raises. Raises
    :class:`SimulatedDeviceError` when torch is older than 2.7, when the real ``torch_npu`` is
    imported, or when another backend already owns PrivateUse1. ``torch_npu=True`` also
    installs the ``torch_npu`` stand-in (refused over a module named torch_npu that is not it).
    """
    dev = _setup(name)
    if torch_npu:
        install_torch_npu_standin()
    return dev


def install_torch_npu_standin() -> types.ModuleType:
    """Make ``import torch_npu`` give syncguard's stand-in; returns it (idempotent).

    Raises :class:`SimulatedDeviceError` if a module named ``torch_npu`` that is not the
    stand-in is already imported: a real torch_npu is never replaced.
    """
    mod = sys.modules.get("torch_npu")
    if mod is not None:
        if is_standin(mod):
            return mod
        raise SimulatedDeviceError(
            f"a module named torch_npu is already imported ({getattr(mod, '__file__', mod)!r}) "
            f"and it is not syncguard's stand-in; refusing to replace it"
        )
    sys.modules["torch_npu"] = torch_npu_standin
    return torch_npu_standin


def uninstall_torch_npu_standin() -> bool:
    """Remove the stand-in from ``sys.modules``; returns whether it was installed.

    A ``torch_npu`` that is not the stand-in is left alone.
    """
    mod = sys.modules.get("torch_npu")
    if mod is not None and is_standin(mod):
        del sys.modules["torch_npu"]
        return True
    return False


@contextlib.contextmanager
def torch_npu_standin_installed() -> Iterator[types.ModuleType]:
    """``with torch_npu_standin_installed() as torch_npu:`` installs the stand-in for a block.

    (Not called ``torch_npu_standin``: that name is the stand-in module,
    ``syncguard.sim.torch_npu_standin``.)

    It is removed afterwards only if this block installed it.
    """
    installed_here = "torch_npu" not in sys.modules
    mod = install_torch_npu_standin()
    try:
        yield mod
    finally:
        if installed_here:
            uninstall_torch_npu_standin()
