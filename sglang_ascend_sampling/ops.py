"""Finding the ``torch_npu`` namespace that holds the fused ``npu_top_k_top_p`` operator.

The sampling code never imports ``torch_npu`` itself; it asks :func:`resolve_torch_npu`, which
returns the real ``torch_npu`` when it is installed, the simulated stand-in
(``syncguard.sim.torch_npu_standin``) when that has been installed as ``sys.modules["torch_npu"]``,
and ``None`` otherwise. Tests pass their own namespace instead. The subjects
(:mod:`sglang_ascend_sampling.subject`) ask :func:`fused_ops_for` with the device of the logits:
syncguard passes no ``torch_npu`` around.
"""

from __future__ import annotations

import sys
from types import ModuleType
from typing import Any, Optional

# the case study's fused operator, provided to syncguard's torch_npu stand-in
from sglang_ascend_sampling import npu_op as _npu_op  # noqa: F401
from syncguard.standin import is_standin as marked_standin

#: Module name of syncguard's stand-in for ``torch_npu`` (written elsewhere in the package).
STANDIN_MODULE = "syncguard.sim.torch_npu_standin"


class _Resolve:
    """Sentinel type: "look the ``torch_npu`` namespace up with :func:`resolve_torch_npu`"."""

    _instance: Optional[_Resolve] = None

    def __new__(cls) -> _Resolve:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "RESOLVE"


#: Default value of every ``torch_npu=`` argument: resolve at call time.
RESOLVE: Any = _Resolve()


def is_standin(module: object) -> bool:
    """True when ``module`` is syncguard's simulated ``torch_npu`` stand-in (its marker, or a
    module of syncguard's own, as tests build them)."""
    name = getattr(module, "__name__", "")
    return marked_standin(module) or (isinstance(name, str) and name.startswith("syncguard."))


def resolve_torch_npu() -> Optional[ModuleType]:
    """The ``torch_npu`` namespace the sampler should use, or ``None``.

    1. an already imported ``torch_npu`` that is not the stand-in (the real one);
    2. the real ``torch_npu`` if it loads (:func:`syncguard.driving.devices.npu_state`, which tries
       once per process and never raises);
    3. ``sys.modules.get("torch_npu")``: the stand-in when it has been installed there;
    4. ``None``.

    Step 2 runs only when nothing is in ``sys.modules["torch_npu"]`` (an installed stand-in
    occupies that name), so resolving never loads the real ``torch_npu`` over the simulated
    device. The import attempt is made once per process.
    """
    loaded = sys.modules.get("torch_npu")
    if loaded is not None and not is_standin(loaded):
        return loaded
    if loaded is None:
        from syncguard.driving.devices import npu_state

        real = npu_state().module
        if real is not None:
            return real
    return sys.modules.get("torch_npu")


def has_fused_top_k_top_p(torch_npu: object) -> bool:
    """True when ``torch_npu`` provides ``npu_top_k_top_p`` (``hasattr``, as upstream checks)."""
    return hasattr(torch_npu, "npu_top_k_top_p")


def fused_ops_for(device: Any) -> Any:
    """The namespace holding ``npu_top_k_top_p`` for logits on ``device``: the real
    ``torch_npu`` when it is loaded and the logits are on the NPU (syncguard loads it before it
    hands out an NPU device), else syncguard's stand-in (the simulated npu, CUDA, CPU), so the
    fused branch, and legacy's device check in front of it, exist on every device."""
    if getattr(device, "type", None) == "npu":
        loaded = sys.modules.get("torch_npu")
        if loaded is not None and not is_standin(loaded):
            return loaded
    import syncguard.sim.torch_npu_standin as standin

    return standin
