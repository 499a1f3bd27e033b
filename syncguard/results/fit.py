"""Values as the result loader's schema accepts them, for the writer.

Whatever the program's frames and names hold, the writer writes what :func:`syncguard.results.
loader.load` reads back (``_EVENT_FIELDS``, ``_STEP_FIELDS``): a frame with no line number (a
signal handler's interrupted frame, code without line information) gets line 0, a line of its
own kind that no source line has; a name, path or thread name longer than the loader's 4,096
characters is cut with a mark (:data:`CUT`); a NUL byte in a file name, which no file name
holds, is written as ``\\0``. Called once per event written whole and per distinct stack or
step name, never per read.
"""

from __future__ import annotations

from typing import Any, Dict

#: the longest string a result line holds (the loader's limit)
MAX = 4096
#: what ends a string that was cut to :data:`MAX` characters
CUT = "...[cut]"
#: line 0: the frame had no line number (``f_lineno`` None)
NO_LINE = 0
_INT_MAX = 2**53  # the loader's largest integer (a JSON reader's exact range)

#: an event line's string fields (names, paths, the thread)
_TEXT = ("scenario", "path", "pass", "kind", "api", "op", "filename", "function", "thread",
         "reason", "device", "source")


def text(v: Any) -> Any:
    """``v``, a string cut to :data:`MAX` characters (ending in :data:`CUT`) if longer; a
    value that is not a string unchanged."""
    if type(v) is str and len(v) > MAX:
        return v[:MAX - len(CUT)] + CUT
    return v


def line(v: Any) -> int:
    """A line number as the loader reads one: an integer from 0; :data:`NO_LINE` for none."""
    if type(v) is int and 0 <= v <= _INT_MAX:
        return v
    return NO_LINE


def _path(v: Any) -> Any:
    v = text(v)
    return v.replace("\x00", "\\0") if type(v) is str else v


def frame(f: Any) -> Dict[str, Any]:
    """A stack frame's fields as a result line holds them."""
    return {"filename": _path(f.filename), "lineno": line(f.lineno),
            "function": text(f.function), "qualname": text(f.qualname)}


def event(d: Dict[str, Any]) -> Dict[str, Any]:
    """An event line's fields (``d``, changed in place and returned) as the loader reads
    them."""
    for k in _TEXT:
        v = d.get(k)
        if type(v) is str and len(v) > MAX:
            d[k] = text(v)
    for k in ("filename", "function"):  # required strings: "?" for a frame without one
        if type(d.get(k)) is not str:
            d[k] = "?"
    if "\x00" in d["filename"]:
        d["filename"] = _path(d["filename"])
    if "lineno" in d:
        d["lineno"] = line(d["lineno"])
    return d
