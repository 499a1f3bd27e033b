"""Defer Ctrl-C (and a Python SIGTERM handler) while process-global state is swapped.

A KeyboardInterrupt is raised between any two bytecodes; landing between a ``setattr`` on
``torch.Tensor`` and the bookkeeping that records it would leave a patch behind for the rest
of the process. Inside :func:`deferred`, SIGINT (and SIGTERM, when a Python handler is set) are
recorded instead of handled, and handled by their original handler on the way out.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
from typing import Any, Dict, Iterator, List

_DEFERRABLE = tuple(s for s in (signal.SIGINT, getattr(signal, "SIGTERM", None)) if s is not None)


@contextlib.contextmanager
def deferred() -> Iterator[List[int]]:
    """Run the block with SIGINT/SIGTERM deferred (main thread only: elsewhere Python delivers
    no signal to the running code, so nothing needs deferring). Nestable. Yields the list of
    signals received so far: a block that acquires something can release it again when a
    signal is pending, since the handler's KeyboardInterrupt comes as the block ends."""
    pending: List[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield pending
        return
    saved: Dict[int, Any] = {}

    def record(signum: int, frame: Any) -> None:
        pending.append(signum)

    try:
        for s in _DEFERRABLE:
            h = signal.getsignal(s)
            if callable(h):  # a Python-level handler (default_int_handler included)
                saved[s] = h
                signal.signal(s, record)
    except (ValueError, OSError):  # pragma: no cover - an embedding that forbids it
        pass
    try:
        yield pending
    finally:
        for s, h in saved.items():
            signal.signal(s, h)
        for s in dict.fromkeys(pending):  # each deferred signal once, in arrival order
            h = saved.get(s)
            if callable(h):
                h(s, sys._getframe(0))
