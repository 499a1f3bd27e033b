"""Reading files syncguard did not write (scenarios, configs, baselines, profiles, results).

One loader for all of them, so every reader gets the same guarantees, each said in one line
naming the file (:class:`UntrustedError`; callers re-raise it as their own error class):

- only a regular file (or ``/dev/null``, read as empty) is read: a FIFO, device, socket or
  folder is refused without blocking (opened with ``O_NONBLOCK``, then checked with
  ``fstat``);
- size bounded before reading (``max_bytes``);
- UTF-8 only (a BOM is dropped); UTF-16/32 and binary data are named as such;
- TOML: a file the reader cannot parse, or nested deeper than it can follow, is named as
  such (:func:`parse_toml`);
- JSON: nesting depth bounded before parsing (:data:`MAX_DEPTH`), ``NaN``/``Infinity`` and
  numbers that overflow to infinity refused.

:func:`finite_json` is the writing side: what syncguard writes as JSON never holds ``NaN`` or
``Infinity`` (not JSON; other tools reject the file).

Torch-free and dependency-free.
"""

from __future__ import annotations

import json
import math
import os
import re
import stat
import sys
from typing import IO, Any, Dict, Optional

from ..errors import SyncguardError

#: Deepest nesting of arrays and objects accepted in a JSON file syncguard reads.
MAX_DEPTH = 64

_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_NOT_BRACKETS = re.compile(r"[^\[\]{}]+")
_PAIRS = re.compile(r"\[\]|\{\}")


class UntrustedError(SyncguardError, ValueError):
    """A file that cannot be read as the kind asked for; the message names the file.
    ``strerror`` is the system's reason when the file could not be opened at all."""

    def __init__(self, msg: str, strerror: Optional[str] = None) -> None:
        super().__init__(msg)
        self.strerror = strerror


def _is_devnull(st: os.stat_result) -> bool:
    """``/dev/null`` (an empty file, as ``--config /dev/null`` means)."""
    try:
        null = os.stat(os.devnull)
    except OSError:  # pragma: no cover
        return False
    return stat.S_ISCHR(st.st_mode) and st.st_rdev == null.st_rdev


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


def open_regular(path: str, what: str = "file") -> IO[bytes]:
    """``path`` opened for reading in binary, refused (:class:`UntrustedError`) unless it is a
    regular file; never blocks on a FIFO."""
    try:
        fd = os.open(path, os.O_RDONLY | _NONBLOCK)
    except OSError as exc:
        raise UntrustedError(f"{path}: cannot read the {what}: {exc.strerror}",
                             exc.strerror) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) and not _is_devnull(st):
            raise UntrustedError(f"{path}: is {_kind(st.st_mode)}, not a {what} file")
        if _NONBLOCK:
            import fcntl

            fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~_NONBLOCK)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_bytes(path: str, what: str, max_bytes: int) -> bytes:
    """At most ``max_bytes`` of a regular file (:func:`open_regular`), refused when larger."""
    with open_regular(path, what) as f:
        raw = f.read(max_bytes + 1)
    if len(raw) > max_bytes:
        raise UntrustedError(f"{path}: larger than {_size(max_bytes)}: not a {what} file "
                             f"(the limit is {_size(max_bytes)})")
    return raw


def _size(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n >> 10} KiB"


def decode(raw: bytes, path: str, what: str) -> str:
    """``raw`` as UTF-8 text (a leading BOM dropped); UTF-16/32 and binary data named."""
    if raw[:4] in (b"\xff\xfe\x00\x00", b"\x00\x00\xfe\xff"):
        raise UntrustedError(f"{path}: UTF-32 text: save the {what} as UTF-8")
    if raw[:2] in (b"\xff\xfe", b"\xfe\xff") or (len(raw) >= 2 and 0 in raw[:2]):
        raise UntrustedError(f"{path}: UTF-16 or binary data: save the {what} as UTF-8")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise UntrustedError(f"{path}: not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset "
                             f"{exc.start}): save the {what} as UTF-8") from None


def read_text(path: str, what: str, max_bytes: int) -> str:
    """A regular file of at most ``max_bytes``, as UTF-8 text."""
    return decode(read_bytes(path, what, max_bytes), path, what)


def parse_toml(text: str, path: str) -> Dict[str, Any]:
    """TOML ``text`` of the file at ``path``: not TOML, or arrays and tables nested deeper than
    the reader can follow, is one :class:`UntrustedError` naming the file."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UntrustedError(f"{path}: not valid TOML: {exc}") from None
    except RecursionError:
        raise UntrustedError(f"{path}: arrays or tables nested too deeply for the TOML reader"
                             ) from None


def json_depth(text: str) -> int:
    """The deepest nesting of arrays and objects in JSON ``text`` (strings skipped); past
    :data:`MAX_DEPTH`, or for text that is not JSON, a bound of it. Each pass (C code) takes
    away the innermost pairs."""
    rest = _NOT_BRACKETS.sub("", _STRINGS.sub("", text))
    depth = 0
    while rest and depth <= MAX_DEPTH:
        inner = _PAIRS.sub("", rest)
        if inner == rest:  # unbalanced: not JSON; what is left opens at most this deep
            return depth + rest.count("[") + rest.count("{")
        rest, depth = inner, depth + 1
    return depth + len(rest)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _finite_float(s: str) -> float:
    v = float(s)
    if not math.isfinite(v):
        raise ValueError(f"{s[:40]} overflows a double")
    return v


#: made once: ``json.loads`` with options makes a decoder per call (a result file: per line)
_DECODER = json.JSONDecoder(parse_constant=_no_constant, parse_float=_finite_float)


def parse_json(text: str, path: str, what: str) -> Any:
    """JSON ``text`` of the ``what`` at ``path``: :func:`loads`, text that is not JSON named
    as such."""
    try:
        return loads(text, path, what)
    except json.JSONDecodeError as exc:
        raise UntrustedError(f"{path}:{exc.lineno}: not valid JSON: {exc.msg}") from None


def loads(text: str, where: str, what: str) -> Any:
    """JSON ``text`` (the ``what`` at ``where``): nesting at most :data:`MAX_DEPTH`, no
    ``NaN``/``Infinity``, no number that overflows a double, each refused as one
    :class:`UntrustedError` naming ``where``. Text that is not JSON raises
    ``json.JSONDecodeError`` (a streamed file's torn last line is its reader's to judge)."""
    if text.count("[") + text.count("{") > MAX_DEPTH and json_depth(text) > MAX_DEPTH:
        raise UntrustedError(f"{where}: nested deeper than {MAX_DEPTH} levels: not a {what}")
    try:
        return _DECODER.decode(text)
    except json.JSONDecodeError:
        raise
    except ValueError as exc:
        raise UntrustedError(f"{where}: not valid JSON: {exc}") from None
    except RecursionError:  # pragma: no cover - bounded by the depth check
        raise UntrustedError(f"{where}: nested too deeply: not a {what}") from None


def load_json(path: str, what: str, max_bytes: int) -> Any:
    """A JSON file syncguard did not write: :func:`read_text` then :func:`parse_json`."""
    return parse_json(read_text(path, what, max_bytes), path, what)


def finite_json(obj: Any) -> Any:
    """``obj`` with every non-finite float (NaN, +-Infinity) replaced by None, for writing."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: finite_json(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite_json(v) for v in obj]
    return obj


def dumps(obj: Any, **kw: Any) -> str:
    """``json.dumps`` that never writes ``NaN`` or ``Infinity`` (they become null)."""
    try:
        return json.dumps(obj, allow_nan=False, **kw)
    except ValueError:
        return json.dumps(finite_json(obj), allow_nan=False, **kw)
