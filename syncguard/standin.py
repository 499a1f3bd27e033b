"""The ``torch_npu`` stand-in's public face, torch-free (the bottom of the package: the
simulated device, device resolution and the result header all ask it).

- :func:`is_standin`: tells syncguard's stand-in from the real package. The stand-in carries
  ``__syncguard_standin__ = True``; the real torch_npu's module ``__getattr__`` raises
  AttributeError for unknown names (``_init/core/_exports.py``), so the marker is reliable.
- :func:`provide`: how a plug-in gives the stand-in a fused operator of the real package
  (the case study provides ``npu_top_k_top_p`` this way), so code that calls
  ``torch_npu.<op>`` runs unchanged on the simulated npu.
"""

from __future__ import annotations

import types
from typing import Any, Callable, Dict, Mapping

MARK = "__syncguard_standin__"

_PROVIDED: Dict[str, Callable[..., Any]] = {}
#: a read-only view of it (the stand-in looks an operator up on every attribute access)
_VIEW: Mapping[str, Callable[..., Any]] = types.MappingProxyType(_PROVIDED)


def is_standin(module: object) -> bool:
    """True when ``module`` is syncguard's simulated ``torch_npu`` stand-in."""
    return getattr(module, MARK, False) is True


def provide(name: str, op: Callable[..., Any]) -> None:
    """Give the stand-in ``torch_npu.<name>`` (an ``npu_*`` fused operator of the real
    package, implemented with torch ops that read nothing on the host). The last provider of
    a name wins; the real ``torch_npu`` is never touched."""
    if not (isinstance(name, str) and name.startswith("npu_") and len(name) > 4
            and name.isidentifier()):
        raise ValueError(f"provide({name!r}): a torch_npu fused operator's name starts "
                         f"with 'npu_'")
    if not callable(op):
        raise TypeError(f"provide({name!r}, ...): the operator must be callable")
    _PROVIDED[name] = op


def provided() -> Mapping[str, Callable[..., Any]]:
    """The operators plug-ins provide, by name (a read-only view)."""
    return _VIEW
