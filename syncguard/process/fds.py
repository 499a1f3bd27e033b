"""syncguard's own descriptors in the program's process, kept apart from the program's.

A program under ``exec`` may close every descriptor it did not open (``os.closerange(3,
1024)``, as daemons and some launchers do) and then open files that take the freed numbers.
So each descriptor syncguard keeps there (the pipe to the drain, the drain's status pipe, the
claimed result file) is moved by :func:`high` to a high, close-on-exec number, out of the way
of the lowest-free numbers new files get, and :class:`Own` remembers what it is: before
syncguard writes to it, reads it or closes it, :meth:`Own.ok` says whether it is still the
same file. A descriptor the program closed or reused is given up, never written.
"""

from __future__ import annotations

import functools
import os
from typing import Any, Callable, Optional, Tuple

#: how far below the soft limit of open files :func:`high` puts a descriptor: above the
#: numbers a program's own files get, within the limit
_BELOW_LIMIT = 64
#: the highest limit :func:`high` goes by: the kernel's descriptor table grows to the highest
#: number in use (8 bytes a slot), so a limit of a million does not cost the program 8 MB
_HIGHEST = 1 << 16


def high(fd: int) -> int:
    """``fd`` moved to a close-on-exec descriptor near the top of the open-file limit (the
    original closed); ``fd`` itself where that cannot be done."""
    try:
        import fcntl
        import resource

        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        if soft == resource.RLIM_INFINITY or soft > _HIGHEST:
            soft = _HIGHEST
        floor = max(3, int(soft) - _BELOW_LIMIT)
        if fd >= floor:
            return fd
        new = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, floor)
    except (ImportError, OSError, ValueError, AttributeError):
        return fd
    os.close(fd)
    return new


try:
    import fcntl as _fcntl
except ImportError:  # pragma: no cover - Windows
    _GETPIPE_SZ: Optional[int] = None
else:
    _GETPIPE_SZ = (getattr(_fcntl, "F_GETPIPE_SZ", 1032) if os.uname().sysname == "Linux"
                   else None)


def _identity(fd: int) -> Optional[Tuple[int, int]]:
    try:
        st = os.fstat(fd)
    except (OSError, ValueError):
        return None
    return st.st_dev, st.st_ino


def _pipe_size(fd: int) -> Optional[int]:
    """The size of pipe ``fd`` (Linux; None for another file, a closed one, or elsewhere)."""
    if _GETPIPE_SZ is None:
        return None
    try:
        return int(_fcntl.fcntl(fd, _GETPIPE_SZ))
    except OSError:
        return None


class Own:
    """What descriptor ``fd`` is now (the file it opens), to tell later whether it still is.

    For a check made before each write, ``probe() == expected`` while ``fd`` is the same
    (``probe`` may raise ``OSError`` for a closed one): for a pipe on Linux its size, one
    ``fcntl`` called straight from C (syncguard sets its pipe's size; a file, a socket or a
    closed descriptor has none), else the device and inode."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._id = _identity(fd)
        size = _pipe_size(fd)
        self.probe: Callable[[], Any]
        self.expected: Any
        if size is not None:
            self.probe, self.expected = functools.partial(_fcntl.fcntl, fd, _GETPIPE_SZ), size
        else:
            self.probe, self.expected = functools.partial(_identity, fd), self._id

    def ok(self) -> bool:
        """Whether ``fd`` is still the file it was (:attr:`probe`)."""
        if self._id is None:
            return False
        try:
            return bool(self.probe() == self.expected)
        except OSError:
            return False

    def same(self) -> bool:
        """Whether ``fd`` is still the file it was (device and inode)."""
        return self._id is not None and _identity(self.fd) == self._id

    def close(self) -> None:
        """Close ``fd`` if it is still the file it was (a reused number is the program's)."""
        if self.same():
            try:
                os.close(self.fd)
            except OSError:
                pass
        self._id = None
