"""A stop request that code under test cannot swallow.

Ctrl-C raises ``KeyboardInterrupt`` wherever the main thread happens to be. If that is inside
a ``__del__``, a weakref callback, or code that catches ``BaseException``, the exception is
lost and a long run carries on for minutes. :func:`handling_interrupts` records the signal as
well as raising it, and the runners call :func:`check` at every step boundary, so a run stops
within one step of a Ctrl-C whatever the code it drives does with the exception.
"""

from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from typing import Any, Iterator, Optional

_requested: Optional[int] = None


def requested() -> Optional[int]:
    """The signal number of a stop request not yet acted on, else None."""
    return _requested


def check() -> None:
    """Raise ``KeyboardInterrupt`` if a stop was requested (call at step boundaries)."""
    if _requested is not None:
        raise KeyboardInterrupt


def _on_sigint(signum: int, frame: Any) -> None:
    global _requested
    _requested = signum
    raise KeyboardInterrupt


@contextmanager
def handling_interrupts() -> Iterator[None]:
    """Record SIGINT while the block runs (main thread only; elsewhere a no-op)."""
    global _requested
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, _on_sigint)
    _requested = None
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        _requested = None
