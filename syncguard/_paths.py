"""Where syncguard's own files are (the package root, for telling its frames from the user's),
and where ``run`` and ``exec`` write their reports by default (one folder, ``reports/``, with
a ``latest`` link to the most recently started run)."""

from __future__ import annotations

import os
from typing import Optional

#: the ``syncguard`` package folder (no trailing separator)
PKG_DIR = os.path.dirname(os.path.abspath(__file__))


def pkg_path(*parts: str) -> str:
    """A path inside the package: ``pkg_path("core", "hub.py")``."""
    return os.path.join(PKG_DIR, *parts)


# -- where ``run`` and ``exec`` put their reports -------------------------------------------
#: The folder ``run`` and ``exec`` write their report folders under when ``--out`` is not
#: given, relative to the working directory; ``SYNCGUARD_REPORTS_DIR`` names another.
REPORTS_DIR, REPORTS_ENV = "reports", "SYNCGUARD_REPORTS_DIR"
#: The stable name, in that folder, of the most recently started run's folder: a relative
#: symbolic link (``reports/latest -> 20250101-120000-sim``).
LATEST = "latest"


def reports_dir() -> str:
    """The folder of the default report folders (:data:`REPORTS_DIR`, or the environment's
    :data:`REPORTS_ENV`)."""
    return os.environ.get(REPORTS_ENV, "").strip() or REPORTS_DIR


def new_report_dir(kind: str, stamp: Optional[str] = None) -> str:
    """A report folder under :func:`reports_dir` no run has used: ``<time>-<kind>`` (``stamp``
    instead of the time where given), ``-2``, ``-3``... added when two runs start within the
    same second."""
    import time

    base = os.path.join(reports_dir(), f"{stamp or time.strftime('%Y%m%d-%H%M%S')}-{kind}")
    out, n = base, 1
    while os.path.lexists(out) or os.path.basename(out) == LATEST:
        n += 1
        out = f"{base}-{n}"
    return out


def point_latest(folder: str) -> Optional[str]:
    """Point ``latest`` beside ``folder`` at it: a relative symbolic link, replaced atomically
    (a run reading it never sees it missing). Returns the link, or None where there is none:
    a file or folder of the user's named ``latest`` (never replaced), or no symbolic links
    (then the folders' names, which sort by time, say which is the latest)."""
    parent = os.path.dirname(os.path.abspath(folder))
    link = os.path.join(parent, LATEST)
    if os.path.lexists(link) and not os.path.islink(link):
        return None
    tmp = os.path.join(parent, f".{LATEST}-{os.getpid()}")
    try:
        if os.path.lexists(tmp):
            os.unlink(tmp)
        os.symlink(os.path.basename(os.path.abspath(folder)), tmp)
        os.replace(tmp, link)
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        return None
    return link
