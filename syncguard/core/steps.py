"""Step markers: ``with syncguard.step():`` or ``@syncguard.step`` around one decode step.

A marker does nothing (one global read and a ``None`` test) unless a step recorder is active,
which ``syncguard exec`` installs for the program it runs. Steps are per context: a thread, or
an asyncio task (each task runs in its own copy of the context). Steps open at once on several
threads or tasks are each a step of their own (and each gated); nested and recursive steps in
one context belong to the outermost one, which alone opens and closes a step.

The recorder is any object with ``begin(name)``, called for the outermost step of a context
as it opens, in that context. ``begin`` may return a handle for the step: an object with
``end(name)`` (and optionally ``abort(name)``, for a step Ctrl-C left unfinished, and
``failed(name, exc_name)``, for a step another exception left, which the program may catch),
called on it when the step closes; with no handle (None), the recorder's own ``end`` (and
``abort``, ``failed``) are called. :func:`current` is the handle of the step open in the
calling context: a recorder finds the step a read belongs to without a context variable of
its own. At most one recorder is active per process (:func:`set_recorder`). ``syncguard exec
--step MODULE:QUALNAME`` wraps the named function with the same machinery
(:func:`wrap_step`).

:func:`is_warmup` is the one place that decides which steps are warm-up steps (the guard's
events, the counted, timed and ``exec`` step records all ask it).
"""

from __future__ import annotations

import contextvars
import functools
import inspect
import sys
import threading
from typing import Any, Callable, List, Optional, Protocol, Set, Tuple, TypeVar

from ..process import signals as _signals

F = TypeVar("F", bound=Callable[..., Any])


class StepRecorder(Protocol):
    """Receives step boundaries: ``begin`` is called for the outermost step of a context
    (thread, asyncio task) only, in that context, and returns the step's handle (whose
    ``end`` closes it) or None (the recorder's own ``end`` does)."""

    def begin(self, name: str) -> Any: ...


def is_warmup(step: Optional[int], warmup: int) -> bool:
    """Whether step ``step`` (0-based) is a warm-up step when the first ``warmup`` steps are:
    its syncs are kept but not counted, its latency stays out of the statistics. ``None``
    (outside every step) is never warm-up. ``exec`` numbers steps per step name, so each
    name has its own warm-up steps."""
    return step is not None and step < warmup


_RECORDER: Optional[StepRecorder] = None
_LOCK = threading.Lock()


#: (open levels in this context, the outermost's ``cell``). Per context, not per thread: each
#: asyncio task runs in its own copy, so two tasks interleaving on one thread each open their
#: own outermost step; a new thread starts with none open. The cell is one list every level of
#: an outermost step shares: ``[state, handle, recorder]``, the state being the _GENERATION it
#: was opened in while it is open and _ENDED after, the handle what the recorder's ``begin``
#: returned. The steps counted in a context are open only while their cell holds the current
#: generation (none after the step ended, or under another recorder). Ending the outermost
#: step only writes its cell, instead of setting the variable again (about 3 us a step, cold,
#: on a decode step): a copy of the context made inside the step (a task it started) sees it
#: ended too. Zero levels with an open cell: a context working for that step without one of
#: its own (a thread the step started, :func:`adopt`): its reads are the step's, and a step
#: it opens is its own.
_ENDED = -1
_DEPTH: contextvars.ContextVar[Tuple[int, List[Any]]] = contextvars.ContextVar(
    "syncguard_step_depth", default=(0, [_ENDED, None, None]))
_GENERATION = 0  # bumped by set_recorder: depths counted under another recorder are stale


def set_recorder(recorder: Optional[StepRecorder]) -> Optional[StepRecorder]:
    """Install ``recorder`` (None removes it); returns the previous one."""
    global _RECORDER, _GENERATION
    with _LOCK:
        prev, _RECORDER = _RECORDER, recorder
        _GENERATION += 1
    return prev


def active() -> bool:
    """Whether a step recorder is installed (``syncguard exec`` is running this program)."""
    return _RECORDER is not None


def current() -> Any:
    """The handle of the step open in the calling context (thread, asyncio task): what the
    recorder's ``begin`` returned for it; None when no step is open (or it returned None)."""
    cell = _DEPTH.get()[1]
    return cell[1] if cell[0] == _GENERATION else None


def open_cell() -> Optional[List[Any]]:
    """The cell of the step open in the calling context (for :func:`adopt`), or None."""
    cell = _DEPTH.get()[1]
    return cell if cell[0] == _GENERATION else None


def adopt(cell: List[Any]) -> None:
    """Make the calling context (a new thread) work for the step of ``cell``
    (:func:`open_cell` of the context that started it): its reads are that step's while the
    step is open, and a step it opens is one of its own."""
    _DEPTH.set((0, cell))


def _enter(name: str) -> Optional[List[Any]]:
    """Open a step level: the outermost's cell (given to :func:`_leave`), None for an inner
    level (or with no recorder)."""
    rec = _RECORDER
    if rec is None:
        return None
    n, cell = _DEPTH.get()
    if n and cell[0] == _GENERATION:  # a level inside the step open here
        _DEPTH.set((n + 1, cell))
        return None
    cell = [_GENERATION, None, rec]
    _DEPTH.set((1, cell))
    try:
        cell[1] = rec.begin(name)
    except BaseException:
        cell[0] = _ENDED
        raise
    return cell


def _leave(cell: Optional[List[Any]], name: str, exc: Optional[type] = None) -> None:
    """Close a step level (``cell``: what :func:`_enter` returned for it). The outermost's
    closes the step: its handle's ``end(name)`` (the recorder's without one). One left by
    Ctrl-C (KeyboardInterrupt) did not finish: ``abort(name)`` is called instead of ``end``
    where there is one. One left by another exception ran until it raised:
    ``failed(name, exception class name)`` where there is one, else ``end``."""
    if cell is None:  # an inner level
        n, outer = _DEPTH.get()
        if n > 1 and outer[0] == _GENERATION:
            _DEPTH.set((n - 1, outer))
        return
    cell[0] = _ENDED  # in every copy of the context
    on = cell[1] if cell[1] is not None else cell[2]
    if exc is not None:
        if issubclass(exc, KeyboardInterrupt) and _signals.claim_interrupt():
            abort = getattr(on, "abort", None)  # a Ctrl-C's: the step did not finish
            if abort is not None:
                abort(name)
                return
        else:  # the program's own exception (its own KeyboardInterrupt too)
            failed = getattr(on, "failed", None)
            if failed is not None:
                failed(name, exc.__name__)
                return
    on.end(name)


class _Marker:
    """An active marker (a recorder is installed): opens the outermost step."""

    __slots__ = ("name", "_cell", "_in")

    def __init__(self, name: Optional[str]) -> None:
        self.name = name or "step"
        self._cell: Optional[List[Any]] = None
        self._in = False

    def __enter__(self) -> _Marker:
        if _RECORDER is not None:
            self._cell = _enter(self.name)
            self._in = True
        return self

    def __exit__(self, exc_type: Any, *exc: Any) -> None:
        if self._in:
            cell, self._cell, self._in = self._cell, None, False
            _leave(cell, self.name, exc_type)

    def __call__(self, fn: F) -> F:
        return wrap_step(fn, self.name if self.name != "step" else fn.__qualname__)


class _Idle(_Marker):
    """syncguard is not running: entering and leaving do nothing."""

    __slots__ = ()

    def __enter__(self) -> _Marker:
        return self

    def __exit__(self, *exc: Any) -> None:
        return None


def step(name: Any = None) -> Any:
    """Mark one decode step: ``with syncguard.step():``, ``with syncguard.step("decode"):``,
    ``@syncguard.step`` or ``@syncguard.step("decode")``.

    Costs one global read and a small object when syncguard is not running (well under a
    microsecond; ``benchmarks/bench_exec.py``). ``name`` labels the step in reports (default
    ``"step"``; the function's qualified name for a bare decorator). A decorated function is
    a step whenever syncguard runs, whether or not it ran at decoration time."""
    if callable(name):  # bare @syncguard.step
        return wrap_step(name, getattr(name, "__qualname__", "step"))
    if name is not None:
        _check_name(name)
    if _RECORDER is None:
        return _IDLE if name is None else _Idle(name)
    return _Marker(name)


_IDLE = _Idle(None)

#: the longest step name a result holds (its loader refuses longer strings)
NAME_MAX = 4096
#: the name results give the syncs made outside every step (results.format.OUTSIDE_PATH)
_RESERVED = "(outside steps)"


def _check_name(name: Any) -> None:
    """Refuse, at the ``step()`` call, a name the result could not hold: the run would
    otherwise record it and then refuse its own result."""
    if type(name) is not str:
        raise TypeError(f"syncguard.step(name): name must be a string, got "
                        f"{type(name).__name__}")
    if len(name) > NAME_MAX:
        raise ValueError(f"syncguard.step(name): name must have at most {NAME_MAX} "
                         f"characters, got {len(name)}")
    if name == _RESERVED:
        raise ValueError(f"syncguard.step(name): {_RESERVED!r} is the name reports give the "
                         f"syncs outside every step; choose another")


def wrap_step(fn: F, name: str) -> F:
    """``fn`` wrapped so that each outermost call is one step named ``name`` (a plain call
    when no recorder is active). Keeps ``__wrapped__``, name and docstring. A coroutine
    function's step lasts from the coroutine's first resume to its return, across its
    awaits, in the task that runs it."""
    if inspect.iscoroutinefunction(fn):
        return _wrap_async_step(fn, name)

    @functools.wraps(fn)
    def stepped(*args: Any, **kwargs: Any) -> Any:
        if _RECORDER is None or (_tracing() and _one_graph(name)):
            return fn(*args, **kwargs)
        cell = _enter(name)
        try:
            out = fn(*args, **kwargs)
        except BaseException as exc:
            _leave(cell, name, type(exc))
            raise
        _leave(cell, name)
        return out

    stepped.__syncguard_step__ = name  # type: ignore[attr-defined]
    return stepped  # type: ignore[return-value]


def _wrap_async_step(fn: F, name: str) -> F:
    @functools.wraps(fn)
    async def stepped(*args: Any, **kwargs: Any) -> Any:
        if _RECORDER is None:
            return await fn(*args, **kwargs)
        cell = _enter(name)
        try:
            out = await fn(*args, **kwargs)
        except BaseException as exc:  # CancelledError too: the step ran until then
            _leave(cell, name, type(exc))
            raise
        _leave(cell, name)
        return out

    stepped.__syncguard_step__ = name  # type: ignore[attr-defined]
    return stepped  # type: ignore[return-value]


def wrap_loop(fn: F, name: str) -> F:
    """``fn`` wrapped so that each call begins a step named ``name`` that lasts until the next
    call (``syncguard exec --loop``): before ``fn`` runs, the recorder's
    ``loop_call(name, caller_frame, shape)`` is called, ``shape`` being the first tensor
    argument's shape (None without one), by which a prefill call is told apart. A plain call
    when no recorder is active."""

    @functools.wraps(fn)
    def looped(*args: Any, **kwargs: Any) -> Any:
        if _RECORDER is not None and not (_tracing() and _one_graph(name)):
            _tick(name, sys._getframe(1), args, kwargs)
        return fn(*args, **kwargs)

    looped.__syncguard_step__ = name  # type: ignore[attr-defined]
    looped.__syncguard_loop__ = name  # type: ignore[attr-defined]
    return looped  # type: ignore[return-value]


def _tick(name: str, caller: Any, args: Any, kwargs: Any) -> None:
    tick = getattr(_RECORDER, "loop_call", None)
    if tick is not None:
        tick(name, caller, _first_shape(args, kwargs))


def _never() -> bool:
    return False


#: Whether Dynamo is tracing the calling code: torch.compiler.is_dynamo_compiling once
#: :func:`under_compile` ran (False when code runs; a constant True to Dynamo as it traces).
_tracing: Callable[[], bool] = _never


#: names of the steps whose wrapper Dynamo traced inside a one-graph region (:func:`inlined`)
_INLINED: Set[str] = set()


def _one_graph(name: str) -> bool:
    """Asked by the wrapper of step ``name`` only while Dynamo traces it (inside a compiled
    region): whether that region must stay one graph (``fullgraph=True``,
    ``error_on_graph_break``). Then the wrapper is a plain call in the graph: a step boundary
    cannot run inside it (:func:`inlined` names it). Otherwise the wrapper's own work breaks
    the graph there and runs eagerly, every call. Dynamo calls this once per trace and keeps
    the answer (``assume_constant_result``)."""
    try:
        from torch._dynamo.symbolic_convert import InstructionTranslator

        tx = InstructionTranslator.current_tx()
        one = bool(tx.one_graph or getattr(tx, "error_on_graph_break", False))
    except Exception:  # another torch: a plain call never breaks the program
        one = True
    if one:
        _INLINED.add(name)
    return one


_one_graph._dynamo_marked_constant = True  # type: ignore[attr-defined]


def inlined() -> List[str]:
    """The steps (by name) whose calls inside a ``torch.compile(fullgraph=True)`` region ran
    as plain calls, no step: a boundary cannot run inside a graph."""
    return sorted(_INLINED)


def forget_inlined() -> None:
    """Start :func:`inlined` afresh (a new run in this process)."""
    _INLINED.clear()


def under_compile(tracing: Callable[[], bool]) -> Tuple[List[Any], List[Any]]:
    """Make the step wrappers safe under ``torch.compile``: ``tracing`` is
    ``torch.compiler.is_dynamo_compiling``. Returns the code objects Dynamo must run as
    plain Python, each call, when it meets them as a frame (a wrapper is the function
    ``torch.compile`` was given): the wrappers' own, whose callee (the step function) it still
    compiles; and the boundary work's, with all it calls."""
    global _tracing
    _tracing = tracing
    probe = wrap_step(_never, "probe"), wrap_loop(_never, "probe")
    return [w.__code__ for w in probe], [_enter.__code__, _leave.__code__, _tick.__code__]


def _first_shape(args: Any, kwargs: Any) -> Optional[Tuple[int, ...]]:
    for a in (*args, *kwargs.values()):
        shape = getattr(a, "shape", None)
        if isinstance(shape, tuple) and not isinstance(a, type):
            return tuple(shape)
    return None
