"""Writing report files safely: atomically, and never through a symbolic link.

:func:`atomic_open` writes to a new temporary file in the target's folder and renames it over
the target only once everything is written and flushed, so a reader (or an interrupted run)
sees the old file or the new one, never a 0-byte or half-written one. The rename replaces a
symbolic link at the target itself: nothing is ever written where a link points.

:func:`open_stream` opens a file that is written as it goes (``result.jsonl``): a link at the
path is removed first and the file opened with ``O_NOFOLLOW``.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from typing import IO, Iterator, Optional

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


def _create_new(path: str) -> int:
    # O_EXCL (+ O_NOFOLLOW) never opens an existing file or link; 0o666 lets the umask decide
    # the mode as for any ordinary file (mkstemp would make reports 0600)
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o666)


@contextlib.contextmanager
def atomic_open(path: str, *, encoding: str = "utf-8",
                newline: Optional[str] = None) -> Iterator[IO[str]]:
    """A text file to write ``path`` with: a temporary file next to it, renamed over ``path``
    when the block ends without an exception (also on KeyboardInterrupt it is removed and
    ``path`` left as it was). The parent folder is created if needed."""
    parent = os.path.dirname(os.path.abspath(path))
    os.makedirs(parent, exist_ok=True)
    base = os.path.basename(path)
    while True:
        tmp = os.path.join(parent, f".{base}.{secrets.token_hex(4)}.tmp")
        try:
            fd = _create_new(tmp)
            break
        except FileExistsError:  # pragma: no cover - 32 random bits collided
            continue
    done = False
    try:
        with os.fdopen(fd, "w", encoding=encoding, newline=newline) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        done = True
    finally:
        if not done:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def write_text(path: str, text: str, *, newline: Optional[str] = None) -> str:
    """Write ``text`` to ``path`` atomically (see :func:`atomic_open`); returns ``path``."""
    with atomic_open(path, newline=newline) as f:
        f.write(text)
    return path


def open_stream(path: str, *, encoding: str = "utf-8") -> IO[str]:
    """Open ``path`` for writing line by line, truncating it, without following a link: a
    symbolic link at ``path`` is removed and a regular file created in its place."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    if os.path.islink(path):
        os.unlink(path)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | _NOFOLLOW, 0o666)
    return os.fdopen(fd, "w", encoding=encoding)
