"""How a sync site reads, in every report: the one owner of site naming.

``run``, ``exec``, ``check``, the CI formats and the pytest plugin all name a site through
here, so the same site reads the same everywhere: its file as :func:`shown_path` gives it, the
line, the function, and for a site inside a helper (a stop-condition callable, a library's
small function) the first frame outside the helper's file that called it
(:func:`caller_of`): ``stopping.py:14 in __call__, called from generate.py:25 in
decode_loop``. A site's identity for baselines and the CI formats is here too:
:func:`display_path` (a file as CI annotations name it: relative to the repository, ``/``
separators), :func:`key_path` and :func:`site_key` (a key that survives lines moving).
"""

from __future__ import annotations

import io
import os
import re
import sys
import sysconfig
import tokenize
from typing import Any, Iterable, List, Optional, Protocol, Tuple

from .._paths import PKG_DIR

# imported here, not where used: a read's first site reaches source_lines, and an import
# there, interrupted by a signal handler that reads too, re-enters a partly made module
from ..process.untrusted import UntrustedError, open_regular


class SiteOf(Protocol):
    """What a site key reads of a sync event (:class:`syncguard.core.events.SyncEvent`, which
    names its sites with this module: so this module names no event type)."""

    @property
    def filename(self) -> str: ...
    @property
    def lineno(self) -> int: ...
    @property
    def function(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def api(self) -> str: ...
    @property
    def op(self) -> Optional[str]: ...

_PKG_DIR = PKG_DIR + os.sep


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
    then its callers; :class:`~syncguard.core.events.Frame` objects or their dicts) outside the
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


def grows_with_steps(after_steps: int, steps: int) -> bool:
    """Whether a site that synced after (or in) ``after_steps`` distinct steps of a run of
    ``steps`` steps is a per-step site: at least 2 steps, and at least half of them. The one
    decision, for the reports' ``per_step`` column and for the gate, which gates a per-step
    site outside every step like one inside a step (:meth:`syncguard.gate.verdicts.Budget.
    outside_verdicts`)."""
    return steps >= 2 and after_steps >= max(2, (steps + 1) // 2)


def group_key(filename: Any, lineno: Any, api: Any, op: Any, kind: Any
              ) -> Tuple[str, int, str, str, str]:
    """What makes syncs one site in every table: the same file and line, Python entry point
    (``api``), ATen op and kind. The guard's :meth:`~syncguard.core.guard.SyncGuard.sites`
    and the reports' site table (:func:`syncguard.results.analysis.sites`) group by it; the
    gate's baseline identity is :func:`site_key` (line-number free, for moved lines)."""
    return (str(filename or ""), int(lineno or 0), str(api or ""), str(op or ""),
            str(kind or ""))


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


# ---------------------------------------------------------------------------- site keys
# A site's identity for baselines: the path part and the key (the line's text, not its number).
def display_path(filename: str, root: Optional[str] = None) -> str:
    """``filename`` relative to ``root`` (default: the current directory) with ``/``
    separators when it lies under ``root``; otherwise the normalised absolute path."""
    if filename.startswith("<"):
        return filename
    root = os.path.abspath(root if root is not None else os.getcwd())
    path = os.path.abspath(filename)
    try:
        rel = os.path.relpath(path, root)
    except ValueError:  # another drive (Windows)
        return path.replace(os.sep, "/")
    if rel == os.pardir or rel.startswith(os.pardir + os.sep):
        return path.replace(os.sep, "/")
    return rel.replace(os.sep, "/")


def key_path(filename: str, root: Optional[str] = None) -> str:
    """The path part of a :func:`site_key`: relative to ``root`` (default the current
    directory) when under it; else relative to the longest ``sys.path`` entry holding it (an
    installed package: ``sglang_ascend_sampling/sampler.py`` wherever site-packages is); else
    relative to the directory above its top package (``__init__.py`` files); else absolute.
    Always with ``/`` separators."""
    shown = display_path(filename, root)
    if filename.startswith("<") or not os.path.isabs(shown.replace("/", os.sep)):
        return shown
    path = os.path.abspath(filename)
    best = ""
    for entry in sys.path:
        if not entry:
            continue
        e = os.path.abspath(entry)
        if path.startswith(e.rstrip(os.sep) + os.sep) and len(e) > len(best):
            best = e
    if best:
        return os.path.relpath(path, best).replace(os.sep, "/")
    # Not on sys.path as such (an editable install's import hook): from the top package.
    top = os.path.dirname(path)
    while os.path.isfile(os.path.join(top, "__init__.py")):
        top = os.path.dirname(top)
    if top != os.path.dirname(path):
        return os.path.relpath(path, top).replace(os.sep, "/")
    return shown


def norm_line(line: str) -> str:
    """A source line as site keys hold it: its trailing ``# comment`` dropped (editing a
    comment does not make a new site), whitespace collapsed."""
    return " ".join(strip_comment(line).split())


def strip_comment(line: str) -> str:
    """``line`` without its trailing ``# comment`` (a ``#`` inside a string stays). A line that
    does not tokenize on its own (inside a multi-line string) is returned whole."""
    if "#" not in line:
        return line
    try:
        for tok in tokenize.generate_tokens(io.StringIO(line.strip() + "\n").readline):
            if tok.type == tokenize.COMMENT:
                return line.strip()[:tok.start[1]]
            if tok.type == tokenize.ERRORTOKEN and tok.string in ("'", '"'):
                return line  # an unterminated string: not ours to cut
    except (tokenize.TokenError, SyntaxError, IndentationError):
        pass  # an open bracket at the end of the line: comments seen so far were handled
    return line


def _function_start(lines: List[str], lineno: int, function: str) -> int:
    """1-based line where the ``def`` of ``function`` enclosing ``lineno`` starts (1 for module
    level, comprehensions, lambdas and anything not found)."""
    if function.startswith("<"):
        return 1
    pat = re.compile(r"\s*(async\s+)?def\s+" + re.escape(function) + r"\b")
    for i in range(min(lineno, len(lines)) - 1, -1, -1):
        if pat.match(lines[i]):
            return i + 1
    return 1


def site_key(ev: SiteOf, root: Optional[str] = None) -> str:
    """A call-site identity that survives lines moving.

    Made of: the file path (:func:`key_path`: relative to ``root``, default the current
    directory, normally the repository root; for a file outside it, relative to its
    ``sys.path`` entry, so an installed package gives the same key on every machine), the
    function, the sync's ``kind``, ``api`` and
    ``op``, the source text of the line (its comment dropped, whitespace collapsed, read with
    :mod:`linecache`) and
    an occurrence index ``#n``: how many identical lines (same text) come before it in the same
    function (in the file for module-level code, lambdas and comprehensions). The line number
    is not part of it, so inserting or deleting lines above a site keeps its key; editing the
    line itself, renaming the function or moving it to another file makes a new site. Without
    source (``<string>``, a deleted file) the line number is used instead of the text.
    """
    path = key_path(ev.filename, root)
    lines = source_lines(ev.filename)
    if 1 <= ev.lineno <= len(lines):
        text = norm_line(lines[ev.lineno - 1])
        start = _function_start(lines, ev.lineno, ev.function)
        occ = sum(1 for i in range(start - 1, ev.lineno - 1) if norm_line(lines[i]) == text)
        where = f"{text} #{occ}"
    else:
        where = f"line {ev.lineno}"
    return f"{path}::{ev.function}::{ev.kind}::{ev.api}::{ev.op or '-'}::{where}"


#: a source file larger than this is not read for its lines (the key uses the line number)
MAX_SOURCE_BYTES = 8 << 20
#: the files whose lines a key may quote: Python sources only, so a crafted result's
#: ``filename`` (``/etc/shadow``) never copies another file's lines into a baseline
_SOURCE_SUFFIXES = (".py", ".pyw")
_SOURCES: dict = {}  # filename -> ((mtime_ns, size), lines)


def source_lines(filename: Any) -> List[str]:
    """The lines of the Python source ``filename`` (a path from a frame, or from a result file,
    which is untrusted): read through the one loader of untrusted files (a FIFO, device or
    folder is refused without blocking, at most :data:`MAX_SOURCE_BYTES`), decoded as Python
    decodes it; ``[]`` for anything else (``<string>``, a NUL byte, a file that is not
    ``*.py``, missing, too large). Re-read when the file changed (mtime or size)."""
    if (not isinstance(filename, str) or not filename or filename.startswith("<")
            or "\x00" in filename or not filename.endswith(_SOURCE_SUFFIXES)):
        return []
    try:
        with open_regular(filename, "Python source") as f:
            st = os.fstat(f.fileno())
            stamp = (st.st_mtime_ns, st.st_size)
            hit = _SOURCES.get(filename)
            if hit is not None and hit[0] == stamp:
                return list(hit[1])
            if st.st_size > MAX_SOURCE_BYTES:
                return []
            raw = f.read(MAX_SOURCE_BYTES + 1)
    except (UntrustedError, OSError, ValueError):
        return []
    if len(raw) > MAX_SOURCE_BYTES:
        return []
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(raw).readline)
    except SyntaxError:
        encoding = "utf-8"
    try:
        text = raw.decode(encoding, "replace")
    except LookupError:
        text = raw.decode("utf-8", "replace")
    lines = io.StringIO(text, newline=None).readlines()  # as linecache splits them
    if len(_SOURCES) > 4096:  # bounded: a result may name many files
        _SOURCES.clear()
    _SOURCES[filename] = (stamp, lines)
    return list(lines)


def _site_matches(pattern: str, frame: Any) -> bool:
    """``file.py:123`` (path suffix and line), ``pkg.module:function``, or ``function``."""
    if ":" in pattern:
        left, right = pattern.rsplit(":", 1)
        if right.isdigit():
            fn = frame.filename.replace("\\", "/")
            return frame.lineno == int(right) and (
                fn == left or fn.endswith("/" + left.lstrip("/"))
            )
        mod_path = left.replace(".", "/")
        fn = frame.filename.replace("\\", "/")
        stem = fn[:-3] if fn.endswith(".py") else fn
        return frame.function == right and (stem == mod_path or stem.endswith("/" + mod_path))
    return frame.function == pattern


def allow_reason(sites: Iterable[Tuple[str, str]], stack: Iterable[Any]) -> Optional[str]:
    """The reason of the first of ``sites`` (``(pattern, reason)``: an allow-list, as
    ``--allow``, ``[tool.syncguard] allow`` and the guard take it) that one frame of ``stack``
    (each with ``filename``, ``lineno``, ``function``) matches; None when none does."""
    frames = tuple(stack)
    return next((r for p, r in sites for fr in frames if _site_matches(p, fr)), None)

