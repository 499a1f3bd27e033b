"""SIGTERM handled like Ctrl-C, and stretches of work that a signal must not cut in half.

:func:`terminate_as_interrupt` turns SIGTERM (what ``timeout``, job schedulers and CI send)
into :class:`Terminated`, a KeyboardInterrupt, so the ``try``/``finally`` blocks that clean up
after Ctrl-C (interceptors uninstalled, the result file closed, reports written) run for it
too. :func:`deferred` holds SIGINT and SIGTERM back while a block runs (closing a file,
removing interceptors, writing reports) and delivers them when it ends.

Signal handlers can only be set from the main thread; elsewhere both are no-ops.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from typing import Any, Dict, Iterator, List

_HANDLED = tuple(s for s in (getattr(signal, "SIGINT", None), getattr(signal, "SIGTERM", None))
                 if s is not None)


class Terminated(KeyboardInterrupt):
    """SIGTERM received: handled as an interrupt; ``exit_code`` is 128 + the signal number."""

    def __init__(self, signum: int = int(getattr(signal, "SIGTERM", 15))) -> None:
        super().__init__(f"terminated by signal {signum}")
        self.signum = signum

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


def exit_code(exc: BaseException) -> int:
    """128 + the signal number for :class:`Terminated`, else 130 (SIGINT)."""
    return exc.exit_code if isinstance(exc, Terminated) else 130


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def _raise_terminated(signum: int, frame: Any) -> None:
    raise Terminated(signum)


@contextlib.contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """While the block runs, SIGTERM raises :class:`Terminated` (a KeyboardInterrupt)."""
    sig = getattr(signal, "SIGTERM", None)
    if sig is None or not _main_thread():
        yield
        return
    old = signal.signal(sig, _raise_terminated)
    try:
        yield
    finally:
        signal.signal(sig, old)


@contextlib.contextmanager
def deferred(deliver: bool = True) -> Iterator[List[int]]:
    """Hold SIGINT and SIGTERM back while the block runs; yields the list of signals received.

    With ``deliver`` (default) the first held signal is delivered when the block ends, to the
    handler that was in place before (Ctrl-C raises KeyboardInterrupt as usual); without, the
    caller reads the list and decides."""
    got: List[int] = []
    if not _main_thread():
        yield got
        return

    def hold(signum: int, frame: Any) -> None:
        got.append(signum)

    old: Dict[int, Any] = {}
    try:
        for s in _HANDLED:
            old[s] = signal.signal(s, hold)
        yield got
    finally:
        for s, h in old.items():
            signal.signal(s, h)
    if deliver and got:
        _deliver(got[0], old.get(got[0]))


def _deliver(signum: int, handler: Any) -> None:
    if callable(handler):
        handler(signum, None)
    elif handler == signal.SIG_DFL:
        os.kill(os.getpid(), signum)
