"""Writing report files safely: atomically, and never through a symbolic link.

:func:`atomic_open` writes to a new temporary file in the target's folder and renames it over
the target only once everything is written and flushed, so a reader (or an interrupted run)
sees the old file or the new one, never a 0-byte or half-written one. The rename replaces a
symbolic link at the target itself: nothing is ever written where a link points. Only a
regular file (or a link) is ever replaced: a character device (``/dev/null``, a terminal) or a
FIFO at the path is written as a stream, never swapped for a file, and a folder, socket or
block device is refused (:class:`OutputError`). :func:`check_output` says so before any work.

:func:`claim` opens the file a run streams (``result.jsonl``) for that run alone, never
through a link.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from typing import IO, Any, Iterator, Optional, Sequence

from .._paths import LATEST, keep_runs, point_latest, prune_reports
from ..console import wrote
from ..errors import SyncguardError, UsageError
from .fds import high

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)


class OutputError(SyncguardError, ValueError):
    """An output path syncguard will not write (a folder, socket, block device, a FIFO nobody
    reads, a parent that is not a folder); the message names the path and why."""


def output_kind(path: str) -> str:
    """What writing ``path`` does: ``"new"`` (nothing there), ``"file"`` (a regular file or a
    symbolic link: replaced atomically) or ``"stream"`` (a character device or FIFO: written
    in place). Raises :class:`OutputError` for anything else."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        parent = os.path.dirname(os.path.abspath(path))
        while not os.path.lexists(parent):
            parent = os.path.dirname(parent)
        if not os.path.isdir(parent):
            raise OutputError(f"{path}: {parent} is not a folder") from None
        return "new"
    except NotADirectoryError:
        raise OutputError(f"{path}: a parent of it is not a folder") from None
    except OSError as exc:
        raise OutputError(f"{path}: {exc.strerror}") from None
    mode = st.st_mode
    if stat.S_ISREG(mode) or stat.S_ISLNK(mode):
        return "file"
    if stat.S_ISCHR(mode) or stat.S_ISFIFO(mode):
        return "stream"
    what = ("a folder" if stat.S_ISDIR(mode) else "a socket" if stat.S_ISSOCK(mode)
            else "a block device" if stat.S_ISBLK(mode) else "not a regular file")
    raise OutputError(f"{path}: is {what}; syncguard writes regular files, character devices "
                      f"and FIFOs only")


def _open_stream_target(path: str) -> int:
    """A character device or FIFO opened for writing in place (no create, no truncate, no
    link followed). A FIFO is opened without blocking: with no reader that fails at once
    (:class:`OutputError`) instead of hanging."""
    try:
        fd = os.open(path, os.O_WRONLY | _NOFOLLOW | _NONBLOCK)
    except OSError as exc:
        if exc.errno == errno.ENXIO:
            raise OutputError(f"{path}: a FIFO with no reader") from None
        raise OutputError(f"{path}: cannot write: {exc.strerror}") from None
    st = os.fstat(fd)
    if not (stat.S_ISCHR(st.st_mode) or stat.S_ISFIFO(st.st_mode)):  # swapped meanwhile
        os.close(fd)
        raise OutputError(f"{path}: changed while it was opened")
    if _NONBLOCK:
        import fcntl

        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~_NONBLOCK)
    return fd


def check_output(path: str) -> str:
    """Raise :class:`OutputError` when ``path`` cannot be written as an output (see
    :func:`output_kind`); call before any work. A FIFO must have a reader now. Returns the
    kind."""
    kind = output_kind(path)
    if kind == "stream":
        os.close(_open_stream_target(path))
    return kind


def _create_new(path: str) -> int:
    # O_EXCL (+ O_NOFOLLOW) never opens an existing file or link; 0o666 lets the umask decide
    # the mode as for any ordinary file (mkstemp would make reports 0600)
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o666)


@contextlib.contextmanager
def atomic_open(path: str, *, encoding: str = "utf-8",
                newline: Optional[str] = None) -> Iterator[IO[str]]:
    """A text file to write ``path`` with: a temporary file next to it, renamed over ``path``
    when the block ends without an exception (also on KeyboardInterrupt it is removed and
    ``path`` left as it was). The parent folder is created if needed. A character device or
    FIFO at ``path`` is written in place instead (see :func:`output_kind`)."""
    if output_kind(path) == "stream":
        try:
            with os.fdopen(_open_stream_target(path), "w", encoding=encoding,
                           newline=newline) as s:
                yield s
        except BrokenPipeError:  # the reader went away: the caller's own exit code (141)
            raise
        except OSError as exc:
            raise write_error(path, exc) from None
        return
    parent = os.path.dirname(os.path.abspath(path))
    try:
        os.makedirs(parent, exist_ok=True)
    except OSError as exc:
        raise write_error(path, exc) from None
    base = os.path.basename(path)
    while True:
        tmp = os.path.join(parent, f".{base}.{secrets.token_hex(4)}.tmp")
        try:
            fd = _create_new(tmp)
            break
        except FileExistsError:  # pragma: no cover - 32 random bits collided
            continue
        except OSError as exc:
            raise write_error(path, exc) from None
    done = False
    try:
        with os.fdopen(fd, "w", encoding=encoding, newline=newline) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        done = True
    except OSError as exc:
        # a full disk (ENOSPC), a file-size limit (EFBIG), a folder now at the path: one
        # line naming the file (exit 2), the old file left as it was, the temp file removed
        raise write_error(path, exc) from None
    finally:
        if not done:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def write_error(path: str, exc: OSError) -> OutputError:
    """The one-line :class:`OutputError` for an ``OSError`` met writing ``path``."""
    why = exc.strerror or type(exc).__name__
    if exc.errno == errno.EFBIG:
        why = "file too large (a file-size limit of this process or file system)"
    return OutputError(f"{path}: cannot write: {why}")


def write_text(path: str, text: str, *, newline: Optional[str] = None) -> str:
    """Write ``text`` to ``path`` atomically (see :func:`atomic_open`); returns ``path``."""
    with atomic_open(path, newline=newline) as f:
        f.write(text)
    return path


def write_file(path: str, text: str, flag: str = "", newline: Optional[str] = None,
               parents: bool = False) -> None:
    """Write ``text`` to ``path`` atomically (with its missing ``parents``), then the ``Wrote``
    line; an ``OSError`` is one :class:`UsageError` naming the option (``flag``)."""
    try:
        if parents:
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        write_text(path, text, newline=newline)
    except OSError as exc:
        raise UsageError(f"{flag}{path}: cannot write: {exc.strerror}") from None
    wrote(path)


def claim(path: str, force: bool) -> int:
    """Open the streamed file ``path`` (a run's ``result.jsonl``) for this run alone and return
    its descriptor, which holds an exclusive lock for as long as it (or a ``dup`` of it) is
    open: a second run writing the same file gets :class:`OutputError` at once instead of
    interleaving its lines with this run's. Without ``force`` the file must not exist (created
    with ``O_EXCL``: no exists-check to race); with ``force`` it is emptied only once the lock
    is held (no ``O_TRUNC`` at open, which would empty the file of a run still writing it). A
    link at ``path`` is never followed."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    if force and output_kind(path) == "stream":
        raise OutputError(f"{path}: is a device or FIFO, not a regular file")
    flags = os.O_WRONLY | os.O_CREAT | _NOFOLLOW | _NONBLOCK | (0 if force else os.O_EXCL)
    try:
        fd = os.open(path, flags, 0o666)
    except FileExistsError:
        raise OutputError(f"{path} exists; pass --force to overwrite or choose another "
                          f"--out") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # O_NOFOLLOW met a link: replaced, never followed
            os.unlink(path)
            return claim(path, force)
        raise write_error(path, exc) from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OutputError(f"{path}: not a regular file")
        try:
            import fcntl
        except ImportError:  # pragma: no cover - Windows: no lock, O_EXCL still guards
            pass
        else:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise OutputError(f"{path}: another syncguard run is writing this file now; "
                                  f"wait for it or choose another --out") from None
            except OSError:  # a file system without locks (some NFS): O_EXCL still guards
                pass
            fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~_NONBLOCK)
        os.ftruncate(fd, 0)
        return high(fd)  # out of the way of a program that closes and reopens descriptors
    except BaseException:
        os.close(fd)
        raise


def stream_of(fd: int, encoding: str = "utf-8") -> IO[str]:
    """A text stream writing to a copy of ``fd`` (from :func:`claim`): closing it keeps the
    claim's lock, which lasts until ``fd`` itself is closed."""
    f: IO[Any] = os.fdopen(high(os.dup(fd)), "w", encoding=encoding)
    return f


def output_path(path: Optional[str], force: bool = True, flag: str = "-o") -> None:
    """Refuse (:class:`UsageError`) an output path that cannot be written (a folder, socket,
    FIFO without a reader...) or, without ``force``, a regular file already there; call
    before any work. A device or FIFO is written as a stream, so it needs no ``force``."""
    if path is None or path == "-":
        return
    try:
        kind = check_output(path)
    except OutputError as exc:
        raise UsageError(f"{flag}: {exc}") from None
    if kind == "file" and not force:
        raise UsageError(f"{flag} {path}: exists; pass --force to overwrite it")


def prepare_out(out: str, files: Sequence[str], force: bool) -> str:
    """Make the report folder ``out``; refuse (UsageError) when it is a file, or when one of
    ``files`` is already there and ``force`` is not set."""
    if os.path.exists(out) and not os.path.isdir(out):
        raise UsageError(f"--out: {out} exists and is not a folder")
    # lexists: a symbolic link (even a dangling one) is a clash too; --force replaces the link
    clash = [f for f in files if os.path.lexists(os.path.join(out, f))]
    for f in clash:  # a folder, device or FIFO named like a report: refused even with --force
        try:
            kind = output_kind(os.path.join(out, f))
        except OutputError as exc:
            raise UsageError(f"--out: {exc}") from None
        if kind != "file":
            raise UsageError(f"--out: {os.path.join(out, f)}: is a device or FIFO, not a "
                             f"regular file")
    if clash and not force:
        raise UsageError(f"{os.path.join(out, clash[0])} exists; pass --force to overwrite "
                         f"or choose another --out")
    try:
        os.makedirs(out, exist_ok=True)
        probe = os.path.join(out, f".syncguard-probe-{os.getpid()}")
        os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        os.unlink(probe)
    except OSError as exc:  # /proc/x, a read-only mount: said now, not after the run
        raise UsageError(f"--out: {out}: cannot write there: {exc.strerror}") from None
    return out


def report_folder(out: Optional[str], default: str, files: Sequence[str], force: bool,
                  latest: str = LATEST) -> str:
    """The report folder: ``out`` (:func:`prepare_out`), else ``default`` with ``latest``
    beside it pointing at it and, with ``SYNCGUARD_KEEP_RUNS=N``, the newest N kept
    (:mod:`syncguard._paths`)."""
    if out is not None:
        return prepare_out(out, files, force)
    keep = keep_runs()  # a bad value fails before any folder is made
    out = prepare_out(default, files, force)
    point_latest(out, latest)
    prune_reports(out, keep)
    return out
