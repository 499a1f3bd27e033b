"""How a sync site reads, in every report: the one owner of site naming.

``run``, ``exec``, ``check``, the CI formats and the pytest plugin all name a site through
here, so the same site reads the same everywhere: its file as :func:`shown_path` gives it, the
line, the function, and for a site inside a helper (a stop-condition callable, a library's
small function) the first frame outside the helper's file that called it
(:func:`caller_of`): ``stopping.py:14 in __call__, called from generate.py:25 in
decode_loop``.
"""

from __future__ import annotations

import os
import sysconfig
from typing import Any, Iterable, Optional, Tuple

_PKG_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def shown_path(filename: Any, base: Optional[str] = None) -> str:
    """``filename`` as every report shows it: relative to ``base`` (default: the current
    directory) when inside it; a file inside ``site-packages`` from there on; else as is
    (absolute). ``?`` when missing."""
    if filename is None or (isinstance(filename, float) and filename != filename):
        return "?"
    f = str(filename)
    if os.path.isabs(f):
        root = os.path.abspath(base or os.getcwd())
        try:
            if os.path.commonpath([root, f]) == root:
                return os.path.relpath(f, root)
        except ValueError:  # different drives
            pass
        marker = "site-packages" + os.sep
        if marker in f:
            return f.split(marker, 1)[1]
    return f


def shown_site(site: Any, base: Optional[str] = None) -> str:
    """A ``file:line`` text (as results record it) with its file as :func:`shown_path` gives
    it; a text without a line number is taken as a file name."""
    text = "" if site is None else str(site)
    file, sep, line = text.rpartition(":")
    if not sep or not line.isdigit():
        return shown_path(site, base)
    return f"{shown_path(file, base)}:{line}"


def _frame(fr: Any) -> Tuple[str, int, str]:
    """``(file, line, name)`` of a stack frame (object or dict), the qualified name where one
    was recorded."""
    if isinstance(fr, dict):
        return (str(fr.get("filename")), int(fr.get("lineno") or 0),
                str(fr.get("qualname") or fr.get("function") or "?"))
    return (str(fr.filename), int(fr.lineno),
            str(getattr(fr, "qualname", "") or fr.function))


def function_name(function: Any, stack: Optional[Iterable[Any]] = None) -> str:
    """The site's function as reports name it: its qualified name from the innermost frame
    of ``stack`` when recorded (``StopOnToken.__call__``), else ``function``."""
    for fr in stack or ():
        try:
            _, _, name = _frame(fr)
        except (TypeError, ValueError, AttributeError):
            break
        return name if name.rpartition(".")[2] == str(function) else str(function)
    return str(function)


#: the test runners that call a test function: never "the caller" of a site in a test
_RUNNERS = tuple(os.sep + p + os.sep for p in ("_pytest", "pluggy", "unittest"))
_STDLIB = os.path.abspath(sysconfig.get_paths()["stdlib"]) + os.sep


def _harness(filename: str) -> bool:
    """Code that drives the code under test, never "the caller": syncguard's own (runner,
    subjects, scenarios; the subjects it drives, the case study's included, live outside
    it), a test runner, the standard library (runpy, threading)."""
    if filename.startswith("<"):
        return True
    a = os.path.abspath(filename)
    if a.startswith(_PKG_DIR):
        return True
    return any(r in a for r in _RUNNERS) or (a.startswith(_STDLIB)
                                             and "site-packages" not in a)


def caller_of(filename: Any, stack: Optional[Iterable[Any]]) -> Optional[Tuple[str, int, str]]:
    """``(file, line, function)`` of the first frame of ``stack`` (innermost first: the site,
    then its callers; :class:`~syncguard.events.Frame` objects or their dicts) outside the
    site's file ``filename``: the code that called the helper the sync is in. None when the
    whole stack is that file, or the next file is syncguard's own driving code."""
    for fr in stack or ():
        try:
            f, line, fn = _frame(fr)
        except (TypeError, ValueError, AttributeError):
            return None
        if f == str(filename):
            continue
        return None if _harness(f) else (f, line, fn)
    return None


def frame_text(filename: Any, lineno: Any, function: Any = None,
               base: Optional[str] = None) -> str:
    """``generate.py:25 in decode_loop`` (``generate.py:25`` without a function)."""
    text = f"{shown_path(filename, base)}:{lineno}"
    return f"{text} in {function}" if function else text


def caller_text(filename: Any, stack: Optional[Iterable[Any]],
                base: Optional[str] = None) -> str:
    """:func:`frame_text` of :func:`caller_of` (``""`` when there is none)."""
    c = caller_of(filename, stack)
    return "" if c is None else frame_text(*c, base=base)


def site_text(filename: Any, lineno: Any, function: Any = None, caller: str = "",
              base: Optional[str] = None) -> str:
    """A site in one phrase: ``stopping.py:14 in __call__, called from generate.py:25 in
    decode_loop`` (``caller`` from :func:`caller_text`; left out when empty)."""
    text = frame_text(filename, lineno, function, base)
    return f"{text}, called from {caller}" if caller else text
