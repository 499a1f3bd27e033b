"""The test body's threads: the one that runs the test function and the threads started from
them while it runs. A guarded test counts their reads only: a module- or session-scoped
fixture's background thread, started before the body, reads for no test body."""

from __future__ import annotations

import threading
from typing import Any, Callable, Optional, Set


class BodyThreads:
    """While entered (around the test function's call): ``guard.body_threads`` is the set of
    the body's thread idents, and ``threading.Thread.start`` adds each thread a body thread
    starts (when it begins to run). Restored on exit, whatever happens in between."""

    def __init__(self, guard: Any) -> None:
        self.guard = guard
        self._start: Optional[Callable[[threading.Thread], None]] = None

    def __enter__(self) -> BodyThreads:
        idents: Set[int] = {threading.get_ident()}
        start = self._start = threading.Thread.start

        def start_for_body(thread: threading.Thread) -> None:
            if threading.get_ident() in idents:
                run = thread.run

                def run_for_body() -> None:
                    idents.add(threading.get_ident())
                    run()

                thread.run = run_for_body  # type: ignore[method-assign]
            start(thread)

        threading.Thread.start = start_for_body  # type: ignore[method-assign,assignment]
        self.guard.body_threads = idents
        return self

    def __exit__(self, *exc: Any) -> None:
        self.guard.body_threads = None
        if self._start is not None:
            threading.Thread.start = self._start  # type: ignore[method-assign,assignment]
            self._start = None
