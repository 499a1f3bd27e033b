"""Where syncguard's own files are: the package root, for telling its frames from the user's."""

from __future__ import annotations

import os

#: the ``syncguard`` package folder (no trailing separator)
PKG_DIR = os.path.dirname(os.path.abspath(__file__))


def pkg_path(*parts: str) -> str:
    """A path inside the package: ``pkg_path("core", "hub.py")``."""
    return os.path.join(PKG_DIR, *parts)
