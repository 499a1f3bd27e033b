"""Where syncguard's own files are (the package root, for telling its frames from the user's),
and where ``run`` and ``exec`` write their reports by default (one folder, ``reports/``, with
a ``latest`` link to the most recently started run) and a run's profiler traces in them."""

from __future__ import annotations

import os
from typing import List, Optional

from .errors import UsageError

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
#: symbolic link (``reports/latest -> 20250101-120000-sim``); ``exec``'s own
#: (``reports/latest-exec -> 20250101-120500-exec-cpu``), so an ``exec`` never moves ``run``'s.
LATEST, LATEST_EXEC = "latest", "latest-exec"
#: Keep only this many of the default report folders of a kind (``run``'s, ``exec``'s), the
#: newest, when set: ``SYNCGUARD_KEEP_RUNS=5`` (unset or 0: keep every one).
KEEP_ENV = "SYNCGUARD_KEEP_RUNS"
#: the names :func:`new_report_dir` gives (``<time>-<kind>[-n]``): the only folders pruned
_RUN_NAME = r"(\d{8}-\d{6})-(exec-)?[A-Za-z0-9_]+(?:-(\d+))?"


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
    while os.path.lexists(out) or os.path.basename(out) in (LATEST, LATEST_EXEC):
        n += 1
        out = f"{base}-{n}"
    return out


def point_latest(folder: str, name: str = LATEST) -> Optional[str]:
    """Point ``name`` (``latest``; ``exec``: ``latest-exec``) beside ``folder`` at it: a
    relative symbolic link, replaced atomically (a run reading it never sees it missing).
    Returns the link, or None where there is none: a file or folder of the user's of that name
    (never replaced), or no symbolic links (then the folders' names, which sort by time, say
    which is the latest)."""
    parent = os.path.dirname(os.path.abspath(folder))
    link = os.path.join(parent, name)
    if os.path.lexists(link) and not os.path.islink(link):
        return None
    tmp = os.path.join(parent, f".{name}-{os.getpid()}")
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


def keep_runs() -> int:
    """:data:`KEEP_ENV` as a number of folders (0: keep every one)."""
    raw = os.environ.get(KEEP_ENV, "").strip()
    if not raw:
        return 0
    if not raw.isdigit():
        raise UsageError(f"{KEEP_ENV}: a number of report folders to keep (0: all), got "
                         f"{raw[:40]!r}")
    return int(raw)


def prune_reports(folder: str, keep: int) -> List[str]:
    """With ``keep`` > 0, remove the oldest default report folders beside ``folder`` of its
    kind (``run``'s, or ``exec``'s) beyond the newest ``keep``, ``folder`` among them; only
    folders named as :func:`new_report_dir` names them and holding a result are removed (a
    folder of the user's never is). Returns the removed folders."""
    import re
    import shutil

    if keep <= 0:
        return []
    parent = os.path.dirname(os.path.abspath(folder))
    mine = re.fullmatch(_RUN_NAME, os.path.basename(os.path.abspath(folder)))
    if mine is None:
        return []
    runs = []
    for name in os.listdir(parent):
        m = re.fullmatch(_RUN_NAME, name)
        path = os.path.join(parent, name)
        if m is None or bool(m.group(2)) != bool(mine.group(2)) or os.path.islink(path) \
                or not os.path.isdir(path):
            continue
        if name != mine.group(0) and not any(f.startswith("result.") for f in os.listdir(path)):
            continue  # not a report (the new one has no result yet)
        runs.append(((m.group(1), int(m.group(3) or 1)), path))
    runs.sort()
    removed = []
    for _, path in runs[:max(0, len(runs) - keep)]:
        if os.path.abspath(path) == os.path.abspath(folder):
            continue
        shutil.rmtree(path, ignore_errors=True)
        removed.append(path)
    return removed


def profiler_file(out_dir: str, scenario: str, path: str) -> str:
    """Where :func:`syncguard.driving.timing.profiled_pass` writes a path's trace:
    ``profiler/<scenario>.<path>.json`` next to the result."""
    return os.path.join(out_dir, "profiler", f"{scenario}.{path}.json")
