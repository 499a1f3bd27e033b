"""Signals: SIGTERM handled like Ctrl-C, stop requests code cannot swallow, and stretches of
work a signal must not cut in half.

- :func:`stop_on_signals` (the CLI wraps every command in it): SIGINT raises
  KeyboardInterrupt and SIGTERM (what ``timeout``, job schedulers and CI send) raises
  :class:`Terminated`, a KeyboardInterrupt, so the ``try``/``finally`` blocks that clean up
  after Ctrl-C (interceptors uninstalled, the result file closed, reports written) run for
  both. Each signal is also recorded: if the exception lands in a ``__del__``, a weakref
  callback or code that catches ``BaseException``, it is lost, so the runners call
  :func:`check` at every step boundary and a run still stops within one step.
- :func:`deferred` holds SIGINT and SIGTERM back while a block runs (closing the result
  file, writing reports) and delivers them when it ends; :func:`critical` (swapping patches on
  ``torch.Tensor``: a guard's entry and exit) also blocks them at the OS level, so not even
  the instructions that set the deferral up can be cut: a KeyboardInterrupt between a
  ``setattr`` and the bookkeeping that records it would leave a patch behind for the rest of
  the process.

- :func:`program_handlers` (``exec`` wraps the user's program in it): a program that sets
  its own SIGINT/SIGTERM handlers (servers do) gets them called, but syncguard's stays in
  place: the first signal is recorded and handed to the program's handler, the run stops at
  the program's next step boundary, and a second signal (or the grace period,
  ``SYNCGUARD_STOP_GRACE_SECONDS``, default 10) stops it at once, reports written.

- :class:`Stop` is the stop sequence of a command that writes results (``run``, ``exec``):
  the interrupt that ended the run is kept, the footer and reports are written under
  :func:`deferred`, a signal that arrives meanwhile becomes the stop, and the command says
  what it kept and exits 130 (128 + the signal for SIGTERM).

Signal handlers can only be set from the main thread; elsewhere all of this is a no-op.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from typing import Any, Dict, Iterator, List, Optional

from .._escape import one_line

_HANDLED = tuple(s for s in (getattr(signal, "SIGINT", None), getattr(signal, "SIGTERM", None))
                 if s is not None)
_SIGTERM = int(getattr(signal, "SIGTERM", 15))

_requested: Optional[int] = None  # a stop signal received inside stop_on_signals()
#: Ctrl-Cs handed to a program with no SIGINT handler of its own as KeyboardInterrupt, as
#: Python does (:func:`program_handlers`): the program may catch one and go on
_interrupts = 0
_unclaimed = False  # the last of them has not been matched with the step it left


class Terminated(KeyboardInterrupt):
    """SIGTERM received: handled as an interrupt; ``exit_code`` is 128 + the signal number."""

    def __init__(self, signum: int = _SIGTERM) -> None:
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


def interrupt_for(signum: int) -> KeyboardInterrupt:
    """The exception a stop by ``signum`` is handled as: :class:`Terminated` for SIGTERM,
    else KeyboardInterrupt."""
    return Terminated(signum) if signum == _SIGTERM else KeyboardInterrupt()


def reason(exc: BaseException) -> str:
    """A stopped run's footer reason: ``"terminated"`` (SIGTERM) or ``"interrupted"``."""
    return "terminated" if isinstance(exc, Terminated) else "interrupted"


def describe(exc: BaseException) -> str:
    """How a stopped run says it stopped: ``"terminated (SIGTERM)"`` or ``"interrupted"``."""
    return "terminated (SIGTERM)" if isinstance(exc, Terminated) else "interrupted"


class Stop:
    """The stop sequence of a run that writes results, in one place for ``run`` and ``exec``:

    1. the run's KeyboardInterrupt (Ctrl-C, or :class:`Terminated`) is kept:
       :meth:`caught`;
    2. what must be whole (the footer, every report) is written inside :meth:`finishing`: a
       second Ctrl-C or a SIGTERM waits until the block ends, and becomes the stop when the
       run had none (:attr:`stopped` says so inside the block too);
    3. :meth:`kept` says what was kept, :attr:`exit_code` is the command's exit code."""

    def __init__(self) -> None:
        self.exc: Optional[KeyboardInterrupt] = None
        self._late: List[int] = []

    def caught(self, exc: KeyboardInterrupt) -> None:
        self.exc = exc

    @property
    def stopped(self) -> bool:
        """Whether the run was stopped, by its interrupt or a signal since then."""
        self._take_late()
        return self.exc is not None

    def _take_late(self) -> None:
        if self.exc is None and self._late:
            self.exc = interrupt_for(self._late[0])

    @contextlib.contextmanager
    def finishing(self) -> Iterator[None]:
        """Write what must be whole: SIGINT and SIGTERM are held while the block runs."""
        with deferred(deliver=False) as late:
            self._late = late
            yield
        self._take_late()  # a signal held by the block is the stop now

    def describe(self) -> str:
        return describe(self.exc) if self.exc is not None else ""

    def reason(self) -> str:
        """The footer's reason (:func:`reason`)."""
        return reason(self.exc) if self.exc is not None else ""

    def kept(self, steps: int, path: str) -> str:
        """``"terminated (SIGTERM): kept 3 finished steps in OUT/result.jsonl"``."""
        return f"{self.describe()}: kept {steps} finished steps in {one_line(path)}"

    @property
    def exit_code(self) -> int:
        """130 (SIGINT), 128 + the signal for SIGTERM."""
        return exit_code(self.exc) if self.exc is not None else 0


def _on_stop_signal(signum: int, frame: Any) -> None:
    global _requested
    _requested = signum
    raise interrupt_for(signum)


def requested() -> Optional[int]:
    """The stop signal received inside :func:`stop_on_signals`, else None."""
    return _requested


def interrupts() -> int:
    """How many Ctrl-Cs reached the program as KeyboardInterrupt (it may have caught them)."""
    return _interrupts


def claim_interrupt() -> bool:
    """Whether a KeyboardInterrupt leaving a step now is a Ctrl-C's (a stop asked by signal),
    not one the program raised itself; a Ctrl-C's is claimed by the first step it leaves."""
    global _unclaimed
    was, _unclaimed = _unclaimed, False
    return was or _requested is not None


def check() -> None:
    """Raise the stop (KeyboardInterrupt or :class:`Terminated`) if one was requested, even
    when its first raise was swallowed; call at step boundaries."""
    if _requested is not None:
        raise interrupt_for(_requested)


@contextlib.contextmanager
def stop_on_signals() -> Iterator[None]:
    """While the block runs, SIGINT raises KeyboardInterrupt and SIGTERM :class:`Terminated`,
    and both are recorded for :func:`check`."""
    global _requested
    if not _main_thread():
        yield
        return
    old = {s: signal.signal(s, _on_stop_signal) for s in _HANDLED}
    _requested = None
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)
        _requested = None


GRACE_ENV, GRACE_DEFAULT_S = "SYNCGUARD_STOP_GRACE_SECONDS", 10.0


def _grace_seconds() -> float:
    try:
        v = float(os.environ.get(GRACE_ENV, "") or GRACE_DEFAULT_S)
    except ValueError:
        v = GRACE_DEFAULT_S
    return v if 0 <= v < 1e9 else GRACE_DEFAULT_S


@contextlib.contextmanager
def program_handlers() -> Iterator[None]:
    """While the block runs a user's program: ``signal.signal``/``signal.getsignal`` for
    SIGINT and SIGTERM record the program's handler instead of replacing syncguard's (see the
    module docstring). Restored when the block ends."""
    global _requested, _interrupts, _unclaimed
    if not _main_thread():
        yield
        return
    real_signal, real_getsignal = signal.signal, signal.getsignal
    theirs: Dict[int, Any] = {}
    timers: List[threading.Timer] = []

    def grace(signum: int) -> None:
        with contextlib.suppress(OSError):
            os.kill(os.getpid(), signum)  # a second signal: stops even a blocked program

    def ours(signum: int, frame: Any) -> None:
        global _requested, _interrupts, _unclaimed
        if _requested is not None:  # the second signal, or the grace period ran out
            raise interrupt_for(_requested)
        handler = theirs.get(signum)
        if signum == signal.SIGINT and handler in (None, signal.default_int_handler):
            # Python's own Ctrl-C: a KeyboardInterrupt the program may catch and go on after
            # (a chat CLI cancels a generation so); its later steps run and count
            _interrupts += 1
            _unclaimed = True
            raise KeyboardInterrupt
        _requested = signum
        if handler is None or handler == signal.SIG_DFL:
            raise interrupt_for(signum)  # no handler of the program's: stop now
        t = threading.Timer(_grace_seconds(), grace, (signum,))
        t.daemon = True
        t.start()
        timers.append(t)
        if callable(handler):  # the program's shutdown path; the next step boundary stops
            handler(signum, frame)

    def their_signal(signum: Any, handler: Any) -> Any:
        if signum in _HANDLED and _main_thread():
            prev = theirs.get(signum, signal.default_int_handler if signum == signal.SIGINT
                              else signal.SIG_DFL)
            real_signal(signum, handler)  # validates it as signal.signal would
            real_signal(signum, ours)
            theirs[signum] = handler
            return prev
        return real_signal(signum, handler)

    def their_getsignal(signum: Any) -> Any:
        if signum in _HANDLED and signum in theirs:
            return theirs[signum]
        return real_getsignal(signum)

    old = {s: real_signal(s, ours) for s in _HANDLED}
    _interrupts, _unclaimed = 0, False
    signal.signal, signal.getsignal = their_signal, their_getsignal  # type: ignore[assignment]
    try:
        yield
    finally:
        signal.signal, signal.getsignal = real_signal, real_getsignal  # type: ignore[assignment]
        for t in timers:
            t.cancel()
        for s, h in old.items():
            real_signal(s, h)


@contextlib.contextmanager
def deferred(deliver: bool = True) -> Iterator[List[int]]:
    """Hold SIGINT and SIGTERM back while the block runs; yields the list of signals received
    so far (a block that acquires something can release it again when one is pending).
    Nestable.

    With ``deliver`` (default) each held signal is delivered once, in arrival order, when the
    block ends, to the handler that was in place before (Ctrl-C raises KeyboardInterrupt as
    usual); without, the caller reads the list and decides."""
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
    if deliver:
        for s in dict.fromkeys(got):
            _deliver(s, old.get(s))


#: POSIX: signals can be blocked at the OS level and a pending one taken without a handler.
_OS_BLOCK = hasattr(signal, "pthread_sigmask") and hasattr(signal, "sigtimedwait")


@contextlib.contextmanager
def critical(deliver: bool = True) -> Iterator[List[int]]:
    """:func:`deferred`, closed at the OS level where the platform allows (POSIX, main
    thread): SIGINT and SIGTERM are blocked with ``pthread_sigmask`` by the first call of the
    block, so no Python handler can run inside it, not even in the instructions that set the
    deferral up or take it down. A signal that arrives meanwhile stays pending in the kernel;
    at the end it is taken (``sigtimedwait``), added to the yielded list and delivered (or,
    without ``deliver``, left to the caller) after the old mask is back. A signal that was
    already being handled when the block began is held by :func:`deferred`'s handlers, or
    raises before the block's first line runs (nothing done yet). Elsewhere: :func:`deferred`.

    Keep the block short and free of child processes: they would inherit the mask."""
    if not (_OS_BLOCK and _main_thread()):
        with deferred(deliver) as got:
            yield got
        return
    old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, ())  # a query: changes nothing
    try:
        signal.pthread_sigmask(signal.SIG_BLOCK, _HANDLED)
        with deferred(deliver=False) as got:
            yield got
    finally:
        # still blocked: take what arrived, then unblock (nothing left to deliver by then)
        while True:
            info = signal.sigtimedwait(_HANDLED, 0)
            if info is None:
                break
            got.append(info.si_signo)
        signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)
    if deliver:
        for s in dict.fromkeys(got):
            _deliver(s, signal.getsignal(s))


def take_pending(got: List[int]) -> List[int]:
    """Inside :func:`critical`: move the signals the OS holds for the block into ``got`` now
    (they are delivered at its end as usual); returns ``got``. Elsewhere: ``got`` as is."""
    if _OS_BLOCK and _main_thread():
        pending = signal.sigpending()
        for s in _HANDLED:
            if s in pending:
                info = signal.sigtimedwait((s,), 0)
                if info is not None:
                    got.append(info.si_signo)
    return got


def _deliver(signum: int, handler: Any) -> None:
    if callable(handler):
        handler(signum, None)
    elif handler == signal.SIG_DFL:
        os.kill(os.getpid(), signum)
