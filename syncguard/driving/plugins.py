"""Plug-ins found by name: the entry points of a group (``syncguard.subjects``,
``syncguard.scenarios``), the one place syncguard reads them.

Every installed distribution's entry points of the group, from its metadata. syncguard's own
(the case study it ships) come from its source checkout's ``pyproject.toml`` when syncguard is
imported from one (``PYTHONPATH=checkout``, or an editable install made before the checkout's
entry points changed), else from its installed metadata: a checkout works without
reinstalling, and stale metadata never names a module that moved. Nothing is imported here.
"""

from __future__ import annotations

import functools
import os
import sys
from typing import Any, Dict, List, Optional, Tuple

from .._paths import PKG_DIR

#: syncguard's own distribution name (its metadata is replaced by a checkout's pyproject.toml)
DIST = "syncguard"


def _checkout_pyproject() -> str:
    """The ``pyproject.toml`` beside the ``syncguard`` package folder (a source checkout)."""
    pkg = PKG_DIR
    return os.path.join(os.path.dirname(pkg), "pyproject.toml")


@functools.cache
def _checkout_groups() -> Optional[Dict[str, Dict[str, str]]]:
    """``[project.entry-points]`` of the checkout syncguard runs from, or None (an installed
    wheel, or a pyproject.toml that is not syncguard's or cannot be read)."""
    path = _checkout_pyproject()
    if not os.path.isfile(path):
        return None
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    try:
        with open(path, "rb") as f:
            project = tomllib.load(f).get("project")
    except (OSError, ValueError):
        return None
    if not isinstance(project, dict) or project.get("name") != DIST:
        return None
    groups = project.get("entry-points")
    if not isinstance(groups, dict):
        return {}
    return {g: {str(k): str(v) for k, v in eps.items()}
            for g, eps in groups.items() if isinstance(eps, dict)}


@functools.cache
def _installed() -> Tuple[Tuple[str, str, str, str], ...]:
    """``(distribution, group, name, value)`` of every installed distribution's entry points
    in syncguard's groups; a distribution whose metadata cannot be read is skipped."""
    from importlib.metadata import distributions

    out: List[Tuple[str, str, str, str]] = []
    for dist in distributions():
        try:
            name = str(dist.metadata["Name"] or "")
            eps: Any = dist.entry_points
            out += [(name, ep.group, ep.name, ep.value) for ep in eps
                    if ep.group.startswith("syncguard.")]
        except Exception:  # a broken distribution's metadata must not stop the others
            continue
    return tuple(out)


def _normal(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


def group(name: str) -> Dict[str, str]:
    """Entry points of group ``name``: entry-point name -> value (``module:object``, or for
    ``syncguard.scenarios`` a dotted package folder). syncguard's own first (the checkout's
    when it runs from one), then other distributions'; the first of a name wins."""
    own = _checkout_groups()
    out: Dict[str, str] = dict(own.get(name, {})) if own is not None else {}
    # syncguard's installed metadata before other distributions' (a stable sort)
    for dist, grp, ep, value in sorted(_installed(), key=lambda t: _normal(t[0]) != DIST):
        if grp != name or (own is not None and _normal(dist) == DIST):
            continue
        out.setdefault(ep, value)
    return out


