"""How syncguard's ``torch_npu`` stand-in is told from the real package (torch-free, the bottom
of the package: the simulated device, device resolution and the result header all ask it).

The stand-in carries ``__syncguard_standin__ = True``; the real torch_npu's module
``__getattr__`` raises AttributeError for unknown names (``_init/core/_exports.py``), so the
marker is reliable.
"""

from __future__ import annotations

MARK = "__syncguard_standin__"


def is_standin(module: object) -> bool:
    """True when ``module`` is syncguard's simulated ``torch_npu`` stand-in."""
    return getattr(module, MARK, False) is True
