"""The step recorder of ``syncguard exec``: one guard over the whole program, one result
record per finished step, streamed to the result file as it finishes."""

from __future__ import annotations

import contextvars
import dataclasses
import itertools
import os
import sys
import threading
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..core import steps as _steps
from ..core.events import Read, ReadSite, SyncEvent, site_key
from ..core.guard import SyncGuard
from ..core.hub import HUB
from ..core.steps import is_warmup
from ..driving.decode import DeviceTimer
from ..gate.verdicts import Tally
from ..process import signals as _signals
from ..results.format import OUTSIDE_PATH, ExecStep, StepKey, read_counts
from ..results.writer import ResultWriter

_new = tuple.__new__

#: ``pass`` of exec step records: the program ran once, under the guard, so each record is
#: both the counted and the timed pass (host latency includes the interceptors' cost).
EXEC_PASS = "exec"
#: the clock a step asks for and the open step a read asks for, bound once (a module
#: attribute's lookup per step is one more cold dictionary after the model's work)
_clock = time.perf_counter
_current = _steps.current
#: this process's id, kept up to date in a forked child (os.getpid is a system call, and
#: ``begin``/``end`` ask it on every step)
_PID = os.getpid()
#: read sites a session keeps by their events' (then it starts afresh)
_SITES = 4096


def _forked_child() -> None:
    global _PID
    _PID = os.getpid()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forked_child)


#: the step name when the program marks no step: the whole program is one step
PROGRAM_STEP = "program"
#: ``labels["phase"]`` of a loop's first step when its input shape differs from the next
#: call's (the whole prompt, then one token per call)
PREFILL = "prefill"


@dataclasses.dataclass(eq=False)
class _Step:
    """What every open step has: its session, name and index, its start (host clock and the
    device timer's event) and the thread that began it."""

    session: Any
    name: str
    index: int
    t0: float
    dev: Any
    thread: int


class _Open:
    """The open step of a ``syncguard.step()`` block or a ``--step`` call: the handle
    :meth:`ExecSession.begin` gives :mod:`syncguard.core.steps`, which keeps it for the
    context (thread, asyncio task) that began it (:func:`~syncguard.core.steps.current`) and
    closes it (``end``, ``failed``, ``abort``). Its session, name and index, its start (host
    clock and the device timer's event), its reads (:data:`~syncguard.core.events.Read`) and
    whether it has ended. A slotted class, not a dataclass: one is made per step, on the
    program's clock (the dataclass's ``__init__`` ran half again as many bytecodes)."""

    __slots__ = ("session", "name", "index", "t0", "dev", "reads", "closed")

    def __init__(self, session: Any, name: str, index: int, t0: float, dev: Any) -> None:
        self.session, self.name, self.index = session, name, index
        self.t0, self.dev = t0, dev
        self.reads: List[Read] = []
        self.closed = False

    def end(self, name: str) -> None:
        self.session._end(self, None)

    def failed(self, name: str, exc: str) -> None:
        """The step raised ``exc`` (a class name): recorded with the syncs it made until
        then, labelled ``{"raised": exc}``."""
        self.session._end(self, exc)

    def abort(self, name: str) -> None:
        """The step was left by Ctrl-C: not a finished step, nothing is recorded for it."""
        self.session._abort(self)


@dataclasses.dataclass(eq=False)
class _LoopStep(_Step):
    """The open step of a ``--loop`` function in the context (thread, asyncio task) that
    called it: begun by its last call, open until the next call in the same context, or until
    the loop that drives it is over.

    The driver is the innermost frame live across two consecutive calls (``stack`` holds
    this call's user frames, innermost first, for the next call to compare with): helpers
    that make one call each and return (a prefill helper, ``decode_step``) are not it. Until
    a second call names it (the first call of a drive), the step keeps every read until the
    next call; a drive of one call ends when its caller returns. Once the driver is known, a
    read made while it runs a line after the loop that makes the calls (``loop_end``) is
    outside every step, as is every read after it returned."""

    shape: Any
    first: bool  # the first call of this drive of the loop
    stack: List[Any]  # frames, innermost first
    driver: Any = None  # a frame; None until a second call of the drive names it
    loop_end: Optional[int] = None  # the driver's last line of the loop making the calls
    at: int = -1  # the driver's instruction at the call that began this step
    reads: List[Read] = dataclasses.field(default_factory=list)
    #: per read of a first call's step: how many of ``stack``'s innermost frames had
    #: returned when it was read (a drive of one call keeps those of its caller only)
    depths: List[int] = dataclasses.field(default_factory=list)
    t_end: Optional[float] = None  # set when the loop was seen to be over
    closed: bool = False


#: the ``--loop`` step open in this context (thread, or asyncio task); a ``--step`` or
#: ``syncguard.step()`` step's is :func:`syncguard.core.steps.current`
_LOOP: contextvars.ContextVar[Optional[_LoopStep]] = contextvars.ContextVar(
    "syncguard_exec_loop", default=None)


class StepTotals:
    """Hidden syncs per step name (warm-up excluded), counted per site and step for the gate
    (:attr:`tally`, a :class:`~syncguard.gate.verdicts.Tally`: counts and a bounded sample of
    events, not every event, so a long run's memory stays flat; the events are in the result
    file).

    A finished step's events are counted in batches of :attr:`BATCH`: on a decode step the
    program's own work (the model) leaves the tally's code and data out of the caches, so
    counting each step's reads as it ends costs the step several times what counting them
    a batch at a time does (``benchmarks/bench_exec_paired.py`` measures such changes).
    :attr:`tally` counts what is held first."""

    #: reads held before they are counted (about this many at most: flat memory)
    BATCH = 128

    __slots__ = ("name", "key", "steps", "syncs", "_tally", "_held", "_n")
    #: the name's step lines' key (set by the session that counts it)
    key: StepKey

    def __init__(self, name: str, keep_events: bool = False) -> None:
        self.name = name
        self.steps = 0
        self.syncs = 0
        self._tally = Tally(keep_events=keep_events)
        self._held: List[Tuple[int, List[Read]]] = []
        self._n = 0  # reads held

    def count(self, step: int, reads: List[Read]) -> None:
        """Count the events of step ``step``'s ``reads`` (the tally keeps the allowed ones
        apart): now, or with the next batch."""
        self._held.append((step, reads))
        self._n += len(reads)
        if self._n >= self.BATCH:
            self._count_held()

    def _count_held(self) -> None:
        add = self._tally.add
        for step, reads in self._held:
            for site, w, lin in reads:
                add(site.at(step, w, False, lin))
        self._held.clear()
        self._n = 0

    @property
    def tally(self) -> Tally:
        """Every event counted so far, per site and step."""
        if self._held:
            self._count_held()
        return self._tally


class ExecSession:
    """Owns the guard, the step counters and the result writer of one ``exec`` run.

    ``begin`` is called by :mod:`syncguard.core.steps` for each outermost step of a context,
    in that context: a thread, or an asyncio task (each runs in its own copy of the context);
    it returns the step's handle (an ``_Open``), which steps keeps for the context and
    closes. A read belongs to the step open in its own context: steps open at once on
    several threads or tasks are steps of their own, each holding its own reads; a read in a
    context with no open step (another thread, another task) is outside every step. A task
    or a thread started with a copy of a step's context (``asyncio.gather`` inside the step,
    ``asyncio.to_thread``) works for that step. Steps are numbered per step name from 0 (in
    the order they begin); the first ``warmup`` steps of each name are kept but not counted.
    Syncs outside every step are kept apart (:attr:`outside`); when the program has no step
    at all, the whole run becomes one step named ``program``.

    Nothing here grows with the steps: each step's events are written with its record and
    kept only as counts (:class:`StepTotals`); syncs outside every step are counted per site
    (:attr:`outside`) and written at the next step's record (:meth:`write_outside`).
    ``keep_events = True`` (before the run) keeps every counted event as well
    (``StepTotals.tally.events``, ``outside.events``).
    """

    #: keep every counted event in memory too (the tallies' ``events``), not only counts
    keep_events = False
    #: with no step and no read at all, record the whole program as one empty step (a
    #: followed child's part records nothing then: it saw nothing)
    record_empty = True

    def __init__(self, program: str, writer: ResultWriter, target: Any, warmup: int = 0,
                 allow_sites: Sequence[Tuple[str, str]] = (), rank: Optional[int] = None,
                 devices: Sequence[str] = ()) -> None:
        self.program, self.writer, self.target = program, writer, target
        self.warmup, self.rank = warmup, rank
        self._lock = threading.RLock()
        self.pid = _PID  # the process that started the run: the only one to record
        #: per step name, the count of its steps' indexes (``next()`` of a count is one step
        #: under the GIL: ``begin`` takes no lock)
        self._next: Dict[str, Any] = {}
        # every step open now, in any context: closed at the end of the run
        self._steps: Dict[int, _Open] = {}
        self._loops: Dict[int, _LoopStep] = {}
        self._pending: Optional[Tuple[str, int, List[Read], float, Any,
                                      Optional[Dict[str, str]]]] = None
        #: the hidden syncs made outside every step, per site
        self.outside = Tally(keep_events=self.keep_events)
        #: the same, each counted at the step begun last before it (``after_step``): which
        #: of their sites sync once per step or more (the gate's no-false-pass rule)
        self.outside_after = Tally()
        #: outside events not written yet, each with the index of the step begun last before
        #: it (written at the next step's record; kept whole while no step has begun: they
        #: are the ``program`` step's if none ever does)
        self._unwritten: List[Tuple[SyncEvent, Optional[int]]] = []
        self._last: Optional[int] = None
        self.totals: Dict[str, StepTotals] = {}
        self._timer = DeviceTimer(target)
        self._t_start = 0.0
        #: steps that Ctrl-C cut and the program went on (it caught the KeyboardInterrupt):
        #: not recorded, so the run is not complete
        self.aborted = 0
        #: a read's site by its event's (reads that come as events: with lineage)
        self._sites: Dict[Tuple[Any, ...], ReadSite] = {}
        self.guard = SyncGuard(warmup=0, on_event=self._on_event, on_read=self._on_read,
                               keep_events=False, allow_sites=allow_sites,
                               exhaustive=target.exhaustive, devices=devices)
        self.guard.context_step = self.context_step  # type: ignore[attr-defined]

    def context_step(self) -> Optional[int]:
        """The index of the step open in the calling context, None outside every step
        (what lineage asks, :func:`syncguard.core.lineage._step`: this guard never opens a
        step of its own)."""
        st: Any = _current()
        if not self._mine(st):
            st = _LOOP.get()
            if not self._mine(st):
                return None
        return int(st.index)

    # -- lifetime ------------------------------------------------------------------------
    def __enter__(self) -> ExecSession:
        self.guard.__enter__()
        self._start = threading.Thread.start
        session, start = self, self._start

        def start_in_step(thread: threading.Thread) -> None:
            # A thread started inside a step (or a loop step) works for it, as a task or an
            # asyncio.to_thread call made there does (they copy the context): its reads count
            # in that step while it is open. Any other thread has steps of its own, or none.
            cell, lp = _steps.open_cell(), _LOOP.get()
            mine = cell is not None and session._mine(cell[1])
            if mine or session._mine(lp):
                run = thread.run

                def run_in_step() -> None:
                    if mine:
                        assert cell is not None
                        _steps.adopt(cell)
                    _LOOP.set(lp)
                    run()

                thread.run = run_in_step  # type: ignore[method-assign]
            start(thread)

        threading.Thread.start = start_in_step  # type: ignore[method-assign,assignment]
        self._t_start = time.perf_counter()
        return self

    def __exit__(self, *exc: Any) -> None:
        threading.Thread.start = self._start  # type: ignore[method-assign]
        self.guard.__exit__(None, None, None)

    # -- events and steps ------------------------------------------------------------------
    def _mine(self, st: Any) -> bool:
        return st is not None and st.session is self and not st.closed

    def _on_read(self, site: ReadSite, wait_us: Optional[float]) -> None:
        """A read at ``site`` (the guard's lean form): kept by the step open in its context
        (thread, asyncio task), else by :meth:`_elsewhere`."""
        st = _current()
        if self._mine(st):
            assert st is not None
            st.reads.append((site, wait_us, None))
            return
        self._elsewhere(site, wait_us, None, None)

    def _on_event(self, ev: SyncEvent) -> None:
        """A read the guard gives as an event (one with lineage): kept as :meth:`_on_read`
        keeps a read, at its event's site."""
        site = self._site(ev)
        st = _current()
        if self._mine(st):
            assert st is not None
            st.reads.append((site, ev.wait_us, ev.lineage))
            return
        self._elsewhere(site, ev.wait_us, ev.lineage, ev)

    def _site(self, ev: SyncEvent) -> ReadSite:
        """The site of ``ev`` (one per distinct site and count; bounded)."""
        key = (site_key(ev), ev.count)
        site = self._sites.get(key)
        if site is None:
            if len(self._sites) >= _SITES:
                self._sites.clear()
            site = self._sites[key] = ReadSite(ev.evolve(step=None, wait_us=None,
                                                         warmup=False, lineage=None))
        return site

    def _elsewhere(self, site: ReadSite, wait_us: Optional[float],
                   lineage: Optional[Dict[str, Any]], ev: Optional[SyncEvent]) -> None:
        """A read in no ``--step`` step of its context: in the context's loop step while
        that lasts, else outside every step (``ev``: its event, when it came as one)."""
        lp = _LOOP.get()
        with self._lock:
            if lp is not None and self._mine(lp):
                where = self._loop_where(lp)
                if where is not None:
                    lp.reads.append((site, wait_us, lineage))
                    if lp.driver is None:
                        lp.depths.append(where)
                    return
                self._last_of(lp)
            if ev is None:
                ev = site.at(None, wait_us, False, lineage)
            self._keep_outside(ev, self._last if lp is None or lp.session is not self
                               else lp.index)

    def _keep_outside(self, ev: SyncEvent, after: Optional[int]) -> None:
        self.outside.add(ev)
        if after is not None:
            self.outside_after.add(ev.evolve(step=after))
        self._unwritten.append((ev, after))

    def _last_of(self, lp: _LoopStep) -> None:
        if lp.t_end is None:
            lp.t_end = time.perf_counter()

    def _loop_where(self, lp: _LoopStep) -> Optional[int]:
        """Whether a read made now, in ``lp``'s context, belongs to loop step ``lp``: None
        when the loop is over (its driver returned, or runs a line after the loop). For the
        first call's step (no driver yet): how many of its stack's innermost frames have
        returned (0: the caller still runs)."""
        if lp.t_end is not None:
            return None
        if lp.thread != threading.get_ident():
            return 0  # a thread working in a copy of the loop's context: on its behalf
        f: Any = sys._getframe(2)
        if lp.driver is None:
            live = set()
            while f is not None:
                live.add(id(f))
                f = f.f_back
            for i, fr in enumerate(lp.stack):
                if id(fr) in live:
                    return i
            return len(lp.stack)  # nothing of the first call's stack runs any more
        while f is not None and f is not lp.driver:  # the driver is outwards, if it runs
            f = f.f_back
        if f is None:
            return None
        if (lp.loop_end is not None and lp.driver.f_lasti != lp.at
                and lp.driver.f_lineno > lp.loop_end):
            return None  # the loop is over: the driver runs its next lines (still at the
            # call that began the step, as a read inside it is, it is in the loop)
        return 0

    def loop_call(self, name: str, caller: Any, shape: Any) -> None:
        """A call of a ``--loop`` function (:func:`syncguard.core.steps.wrap_loop`): ends the
        open loop step of this context, begins step ``name``. ``caller``: the frame that made
        the call."""
        if _PID != self.pid:
            return
        _signals.check()
        stack = _user_stack(caller)
        lp = _LOOP.get()
        with self._lock:
            driver = None
            if self._mine(lp):
                assert lp is not None
                if lp.driver is not None and lp.t_end is None:
                    if stack and stack[0] is lp.driver:
                        # the drive goes on from the driver itself (a loop's every call after
                        # its first): it is the innermost common frame (one of lp.stack's)
                        driver = lp.driver
                    elif any(f is lp.driver for f in stack):  # the drive goes on
                        driver = _innermost_common(stack, lp.stack) or lp.driver
                elif lp.driver is None:
                    driver = _innermost_common(stack, lp.stack)
                same = driver is not None
                self._end_loop(lp, shape if same else None, keep_all=same)
            i = self._last = self._index(name)
            new = _LoopStep(self, name, i, time.perf_counter(), self._timer.start(),
                            threading.get_ident(), shape, first=driver is None, stack=stack,
                            driver=driver, loop_end=_loop_end(driver),
                            at=-1 if driver is None else driver.f_lasti)
            self._loops[id(new)] = new
            _LOOP.set(new)

    def _end_loop(self, lp: _LoopStep, next_shape: Any = None, keep_all: bool = True) -> None:
        """Record loop step ``lp``. The first step of a drive is labelled prefill when the
        next call of the same drive (``next_shape``) has a different input shape. A drive of
        one call (``keep_all=False``, no driver) keeps the reads made while its caller ran;
        the later ones are outside every step."""
        lp.closed = True
        self._loops.pop(id(lp), None)
        reads = lp.reads
        if lp.driver is None and not keep_all and any(lp.depths):
            reads = [r for r, d in zip(lp.reads, lp.depths) if d == 0]
            for (site, w, lin), d in zip(lp.reads, lp.depths):
                if d:
                    self._keep_outside(site.at(None, w, False, lin), lp.index)
        labels = None
        if lp.first and next_shape is not None and lp.shape is not None and (
                lp.shape != next_shape):
            labels = {"phase": PREFILL}
        lp.stack, lp.driver = [], None  # no frame outlives its step
        self._close(lp.name, lp.index, lp.t0, lp.dev, reads, labels, lp.t_end)

    def _close(self, name: str, i: int, t0: float, dev: Any, reads: List[Read],
               labels: Optional[Dict[str, str]], t_end: Optional[float] = None) -> None:
        latency_ms = ((t_end or _clock()) - t0) * 1e3
        self._timer.stop(dev)
        self._flush()
        if dev is None:
            self._record(name, i, self.warmup, reads, latency_ms, None, labels)
        else:
            # Device time needs the step's end event complete. Waiting for it now would
            # stall the program's host-device overlap every step; so the record is
            # written one step late, when the event has (almost surely) completed.
            self._pending = (name, i, reads, latency_ms, dev, labels)

    def _index(self, name: str) -> int:
        """The next step's index of ``name`` (numbered per name from 0)."""
        count = self._next.get(name)
        if count is None:
            count = self._next.setdefault(name, itertools.count())
        return next(count)

    def begin(self, name: str) -> Optional[_Open]:
        """Open step ``name`` in the calling context: its handle, for
        :mod:`syncguard.core.steps` to keep and close (None in a forked child)."""
        if _PID != self.pid:  # a forked child: the result file is the parent's
            return None
        _signals.check()  # a Ctrl-C/SIGTERM the program swallowed still stops it here
        if self._loops:  # a loop step is open somewhere: this context's loop may be over
            lp = _LOOP.get()
            if lp is not None and self._mine(lp):
                with self._lock:
                    if self._loop_where(lp) is None:
                        self._end_loop(lp)
        # no lock: each of these is one step under the GIL, and the step is this context's
        i = self._last = self._index(name)
        st = _Open(self, name, i, _clock(), self._timer.start())
        self._steps[id(st)] = st
        return st

    def end(self, name: str) -> None:
        """A step :meth:`begin` gave no handle for (a forked child's): nothing to record."""

    def _end(self, st: _Open, raised: Optional[str]) -> None:
        """Close step ``st`` (``raised``: the class name of the exception that left it) and
        record it."""
        if _PID != self.pid or st.closed:
            return
        lock = self._lock
        lock.acquire()  # not ``with``: its protocol costs a step about 1.5 us more, cold
        try:
            st.closed = True
            del self._steps[id(st)]
            self._close(st.name, st.index, st.t0, st.dev, st.reads,
                        None if raised is None else {"raised": raised})
        finally:
            lock.release()

    def _flush(self) -> None:
        """Write the step held back for its device time (waits for its end event)."""
        if self._pending is not None:
            name, i, reads, latency_ms, dev, labels = self._pending
            self._pending = None
            self._record(name, i, self.warmup, reads, latency_ms, self._timer.elapsed(dev),
                         labels)

    def _abort(self, st: _Open) -> None:
        """Step ``st`` was left by Ctrl-C: not a finished step, nothing is recorded for it."""
        if _PID != self.pid or st.closed:
            return
        with self._lock:
            st.closed = True
            self._steps.pop(id(st), None)
            self._timer.stop(st.dev)
            self.aborted += 1

    def _record(self, name: str, i: int, warmup_steps: int, reads: List[Read],
                latency_ms: float, device_ms: Optional[float],
                labels: Optional[Dict[str, str]] = None) -> None:
        """Write step ``i`` of ``name``: a warm-up step when it is one of the first
        ``warmup_steps`` of its name (its events then marked warm-up: the guard counts every
        step of an ``exec`` run, since steps are numbered per name). The step goes to the
        writer as an :class:`ExecStep` with its ``reads`` (a tuple: once per step, on the
        program's clock); the record is made where the line is written."""
        warm = is_warmup(i, warmup_steps)
        syncs, allowed, wait = read_counts(reads)
        tot = self.totals.get(name)
        if tot is None:
            tot = self.totals[name] = StepTotals(name, self.keep_events)
            tot.key = StepKey(self.program, name, EXEC_PASS, self.rank)
        tot.steps += 1
        if reads and not warm:
            tot.syncs += syncs
            tot.count(i, reads)
        self.write_outside()  # made before this step ended: above its lines in the file
        # tuple.__new__: the record without NamedTuple's own __new__ (a Python frame a step)
        self.writer.exec_reads(_new(ExecStep, (tot.key, i, warm, syncs, allowed, latency_ms,
                                               device_ms, wait, labels)), reads)

    def write_outside(self) -> None:
        """Write the outside events not written yet (path ``OUTSIDE_PATH``, each with
        ``after_step``)."""
        if self._unwritten:
            evs, self._unwritten = self._unwritten, []
            self.writer.events(self.program, OUTSIDE_PATH, EXEC_PASS, [e for e, _ in evs],
                               self.rank, [a for _, a in evs])

    def finish(self, complete: bool = True) -> None:
        """After the program: with no step at all, the whole program is step 0 of
        ``program`` (its syncs were all outside steps until now), unless it did not finish
        (``complete=False``: Ctrl-C). Call with the guard off."""
        with self._lock:
            # the program ended inside steps (any context): not finished steps
            for st in list(self._steps.values()):
                st.closed = True
                self._timer.stop(st.dev)
            self._steps.clear()
            for lp in sorted(self._loops.values(), key=lambda lp: lp.t0):
                if complete:  # the loop's last step: it ends with the program at the latest
                    self._end_loop(lp, keep_all=False)
                else:  # Ctrl-C: not a finished step
                    lp.closed, lp.stack, lp.driver = True, [], None
                    self._timer.stop(lp.dev)
            self._loops.clear()
            self._flush()
            if not self._next and complete and (self.record_empty or self._unwritten):
                reads = [(self._site(e), e.wait_us, e.lineage) for e, _ in self._unwritten]
                self.outside, self._unwritten = Tally(keep_events=self.keep_events), []
                self.outside_after = Tally()
                self._next[PROGRAM_STEP] = itertools.count(1)
                self._record(PROGRAM_STEP, 0, 0, reads,  # the whole program: never warm-up
                             (time.perf_counter() - self._t_start) * 1e3, None)

    def step_names(self) -> List[str]:
        return list(self._next)

    def restart(self, writer: Any) -> None:
        """In a forked child of the program (syncguard.execute.follow): a run of its own,
        written by ``writer``. The steps open at the fork were the parent's: closed, never
        recorded here; counts start afresh. Call in the child, before anything else runs."""
        _forked_child()
        self.writer, self.pid = writer, _PID
        self._lock = threading.RLock()  # another thread may have held it at the fork
        for st in self._steps.values():
            st.closed = True
        for lp in self._loops.values():
            lp.closed, lp.stack, lp.driver = True, [], None
        self._steps, self._loops, self._pending = {}, {}, None
        self._next, self.totals, self._sites = {}, {}, {}
        self.outside = Tally(keep_events=self.keep_events)
        self.outside_after = Tally()
        self._unwritten, self._last, self.aborted = [], None, 0
        self._t_start = time.perf_counter()


#: code flags of generator frames: suspended between the calls they make, so never a driver
#: (the loop is their consumer's: a streaming ``for token in stream():``)
_GENERATOR_FLAGS = 0x20 | 0x200  # CO_GENERATOR | CO_ASYNC_GENERATOR


def _user_stack(frame: Any) -> List[Any]:
    """The frames from ``frame`` outwards that may drive a loop: neither torch's nor
    syncguard's (``nn.Module.__call__`` between a driver and ``forward`` is not it), nor a
    generator's; innermost first. The walk ends where the program's frames end
    (``HUB.walk_end``): the frames outside are exec's launcher (its runner, runpy's), never a
    driver."""
    out = []
    f = frame
    end = HUB.walk_end
    while f is not None and f is not end:
        code = f.f_code
        if not HUB.skip(code.co_filename) and not code.co_flags & _GENERATOR_FLAGS:
            out.append(f)
        f = f.f_back
    return out


def _innermost_common(stack: List[Any], prev: List[Any]) -> Any:
    """The innermost frame of ``stack`` that is also in ``prev`` (the previous call's, whose
    frames it holds, so no frame seen there can have been freed and its id reused)."""
    ids = {id(f) for f in prev}
    return next((f for f in stack if id(f) in ids), None)


_LOOP_ENDS: Dict[Tuple[int, int], Tuple[Any, Optional[int]]] = {}


def _loop_end(driver: Any) -> Optional[int]:
    """The last line of the innermost ``for``/``while`` loop of ``driver``'s function around
    the line it runs now (the call that drives the loop); None outside a loop, or when the
    source cannot be read. Kept per code object and instruction (the instruction gives the
    line, which is worked out only the first time: asked on every call of a loop)."""
    if driver is None:
        return None
    code = driver.f_code
    key = (id(code), driver.f_lasti)  # by id: hashing a code object hashes its bytecode
    hit = _LOOP_ENDS.get(key)
    if hit is not None and hit[0] is code:  # the code is held: its id is its own
        return hit[1]
    if len(_LOOP_ENDS) > 4096:  # bounded: one entry per driving call site
        _LOOP_ENDS.clear()
    end = _find_loop_end(code.co_filename, code.co_firstlineno, driver.f_lineno, code.co_name)
    _LOOP_ENDS[key] = (code, end)
    return end


def _find_loop_end(filename: str, first: int, line: int, name: str) -> Optional[int]:
    import ast
    import linecache

    text = "".join(linecache.getlines(filename))
    if not text:
        return None
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    scopes = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
    loops = (ast.For, ast.AsyncFor, ast.While)
    best: Optional[ast.AST] = None

    def within(node: ast.AST) -> bool:
        end = getattr(node, "end_lineno", None)
        return end is not None and node.lineno <= line <= end  # type: ignore[attr-defined]

    def visit(node: ast.AST, in_scope: bool) -> None:
        nonlocal best
        for child in ast.iter_child_nodes(node):
            if not hasattr(child, "lineno") or not within(child):
                continue
            if isinstance(child, scopes):
                # the driver's own function (a decorated one starts at its first decorator)
                starts = {child.lineno, *(d.lineno for d in getattr(child, "decorator_list",
                                                                    ()))}
                mine = first in starts and getattr(child, "name", "<lambda>") == name
                if mine:
                    best = None
                visit(child, mine)
                continue
            if in_scope and isinstance(child, loops):
                best = child
            visit(child, in_scope)

    visit(tree, name == "<module>")
    return getattr(best, "end_lineno", None)
