"""The step recorder of ``syncguard exec``: one guard over the whole program, one result
record per finished step, streamed to the result file as it finishes."""

from __future__ import annotations

import dataclasses
import os
import sys
import threading
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..core import _signals
from ..core.events import SyncEvent
from ..core.guard import SyncGuard
from ..gate.verdicts import Tally
from ..results.format import OUTSIDE_PATH, ResultWriter, StepRecord

#: ``pass`` of exec step records: the program ran once, under the guard, so each record is
#: both the counted and the timed pass (host latency includes the interceptors' cost).
EXEC_PASS = "exec"
#: the step name when the program marks no step: the whole program is one step
PROGRAM_STEP = "program"
#: ``labels["phase"]`` of a loop's first step when its input shape differs from the next
#: call's (the whole prompt, then one token per call)
PREFILL = "prefill"


@dataclasses.dataclass
class _LoopStep:
    """The open step of a ``--loop`` function: begun by its last call, open until the next
    call, or until the call that drove the loop (``driver``, the first frame outside torch and
    syncguard above the call) returns."""

    name: str
    index: int
    t0: float
    dev: Any
    driver: Any  # a frame
    thread: int
    shape: Any
    first: bool  # the first call of this drive of the loop
    events: List[SyncEvent] = dataclasses.field(default_factory=list)
    t_end: Optional[float] = None  # set when the driver was seen to have returned


@dataclasses.dataclass
class StepTotals:
    """Hidden syncs per step name (warm-up excluded), counted per site and step for the gate
    (:class:`~syncguard.gate.verdicts.Tally`: counts and a bounded sample of events, not every
    event, so a long run's memory stays flat; the events are in the result file)."""

    name: str
    steps: int = 0
    syncs: int = 0
    tally: Tally = dataclasses.field(default_factory=Tally)


class ExecSession:
    """Owns the guard, the step counters and the result writer of one ``exec`` run.

    ``begin``/``end`` are called by :mod:`syncguard.core.steps` for each outermost step of a
    thread, on that thread: steps open at once on several threads are steps of their own, each
    holding the syncs made on its thread (a thread with no step of its own, a step's helper,
    syncs into the one step open, if only one is; else outside). Steps are numbered per step
    name from 0 (in the order they begin); the first ``warmup`` steps of each name are kept
    but not counted. Syncs outside every step are counted apart (:attr:`outside`) and written
    to the result at the next step's record (:meth:`write_outside`); when the program has no
    step at all, the whole run becomes one step named ``program``.

    Nothing here grows with the steps: each step's events are written with its record and
    kept only as counts (:class:`StepTotals`). ``ExecSession.keep_events = True`` (set before
    a session is made) keeps every counted event as well (``StepTotals.tally.events``,
    ``outside.events``).
    """

    #: keep every counted event in memory too (the tallies' ``events``), not only counts
    keep_events = False

    def __init__(self, program: str, writer: ResultWriter, target: Any, warmup: int = 0,
                 allow_sites: Sequence[Tuple[str, str]] = (), rank: Optional[int] = None,
                 devices: Sequence[str] = ()) -> None:
        from ..driving.decode import DeviceTimer

        self.program, self.writer, self.target = program, writer, target
        self.warmup, self.rank = warmup, rank
        self._lock = threading.RLock()
        self.pid = os.getpid()  # the process that started the run: the only one to record
        self._next: Dict[str, int] = {}
        # per thread (ident): the open step (name, index, start, device timer) and its events
        self._open: Dict[int, Tuple[str, int, float, Any]] = {}
        self._buf: Dict[int, List[SyncEvent]] = {}
        self._pending: Optional[Tuple[str, int, List[SyncEvent], float, Any,
                                      Optional[Dict[str, str]]]] = None
        self._loop: Optional[_LoopStep] = None
        #: the hidden syncs made outside every step, per site
        self.outside = Tally(keep_events=self.keep_events)
        #: outside events not written yet, each with the index of the step begun last before
        #: it (written at the next step's record; kept whole while no step has begun: they
        #: are the ``program`` step's if none ever does)
        self._unwritten: List[Tuple[SyncEvent, Optional[int]]] = []
        self._last: Optional[int] = None
        self.totals: Dict[str, StepTotals] = {}
        self._timer = DeviceTimer(target)
        self._t_start = 0.0
        self.guard = SyncGuard(warmup=0, on_event=self._on_event, keep_events=False,
                               allow_sites=allow_sites, exhaustive=target.exhaustive,
                               devices=devices)

    # -- lifetime ------------------------------------------------------------------------
    def __enter__(self) -> ExecSession:
        self.guard.__enter__()
        self._t_start = time.perf_counter()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.guard.__exit__(None, None, None)

    # -- events and steps ------------------------------------------------------------------
    def _on_event(self, ev: SyncEvent) -> None:
        with self._lock:
            buf = self._buf.get(threading.get_ident())
            if buf is None and len(self._buf) == 1:  # a helper thread of the one open step
                buf = next(iter(self._buf.values()))
            if buf is not None:
                buf.append(ev)
            elif self._loop is not None and self._loop_live():
                self._loop.events.append(dataclasses.replace(ev, step=self._loop.index))
            else:
                self._keep_outside(ev)

    def _loop_live(self) -> bool:
        """Whether the open loop step still runs: False once the call that drove the loop
        is seen (from its own thread) to have returned; the step then ends here."""
        lp = self._loop
        if lp is None or lp.t_end is not None:
            return False
        if lp.thread != threading.get_ident():
            return True  # another thread's sync: the driver's stack is not this one's
        f: Any = sys._getframe(1)
        while f is not None:
            if f is lp.driver:
                return True
            f = f.f_back
        lp.t_end = time.perf_counter()
        return False

    def loop_call(self, name: str, caller: Any, shape: Any) -> None:
        """A call of a ``--loop`` function (:func:`syncguard.core.steps.wrap_loop`): ends the
        open loop step, begins step ``name``. ``caller``: the frame that made the call."""
        if os.getpid() != self.pid:
            return
        _signals.check()
        driver = _driver(caller)
        with self._lock:
            lp = self._loop
            same = (lp is not None and lp.driver is driver and self._loop_live())
            if lp is not None:
                self._end_loop(shape if same else None)
            i = self._next.get(name, 0)
            self._next[name] = i + 1
            self._last = i
            self._loop = _LoopStep(name, i, time.perf_counter(), self._timer.start(), driver,
                                   threading.get_ident(), shape, first=not same)

    def _end_loop(self, next_shape: Any = None) -> None:
        """Record the open loop step. Its first step of a drive is labelled prefill when the
        next call of the same drive (``next_shape``) has a different input shape."""
        lp, self._loop = self._loop, None
        if lp is None:
            return
        labels = None
        if lp.first and next_shape is not None and lp.shape is not None and (
                lp.shape != next_shape):
            labels = {"phase": PREFILL}
        self._close(lp.name, lp.index, lp.t0, lp.dev, lp.events, labels, lp.t_end)

    def _close(self, name: str, i: int, t0: float, dev: Any, evs: List[SyncEvent],
               labels: Optional[Dict[str, str]], t_end: Optional[float] = None) -> None:
        self._timer.stop(dev)
        latency_ms = ((t_end or time.perf_counter()) - t0) * 1e3
        self._flush()
        if dev is None:
            self._record(name, i, self.warmup, evs, latency_ms, None, labels)
        else:
            # Device time needs the step's end event complete. Waiting for it now would
            # stall the program's host-device overlap every step; so the record is
            # written one step late, when the event has (almost surely) completed.
            self._pending = (name, i, evs, latency_ms, dev, labels)

    def begin(self, name: str) -> None:
        if os.getpid() != self.pid:  # a forked child: the result file is the parent's
            return
        _signals.check()  # a Ctrl-C/SIGTERM the program swallowed still stops it here
        tid = threading.get_ident()
        with self._lock:
            if self._loop is not None and not self._loop_live():
                self._end_loop()  # the loop's driver returned: its last step is over
            i = self._next.get(name, 0)
            self._next[name] = i + 1
            self._last = i
            self._buf[tid] = []
            self._open[tid] = (name, i, time.perf_counter(), self._timer.start())

    def failed(self, name: str, exc: str) -> None:
        """The step raised ``exc`` (a class name): recorded with the syncs it made until then,
        labelled ``{"raised": exc}``."""
        self.end(name, raised=exc)

    def end(self, name: str, raised: Optional[str] = None) -> None:
        if os.getpid() != self.pid:
            return
        tid = threading.get_ident()
        with self._lock:
            if tid not in self._open:
                return
            name, i, t0, dev = self._open.pop(tid)
            evs = [dataclasses.replace(e, step=i) for e in self._buf.pop(tid)]
            self._close(name, i, t0, dev, evs, None if raised is None else {"raised": raised})

    def _flush(self) -> None:
        """Write the step held back for its device time (waits for its end event)."""
        if self._pending is not None:
            name, i, evs, latency_ms, dev, labels = self._pending
            self._pending = None
            self._record(name, i, self.warmup, evs, latency_ms, self._timer.elapsed(dev),
                         labels)

    def abort(self, name: str) -> None:
        """The step was left by Ctrl-C: not a finished step, nothing is recorded for it."""
        tid = threading.get_ident()
        with self._lock:
            if tid in self._open:
                self._timer.stop(self._open.pop(tid)[3])
                self._buf.pop(tid, None)

    def _record(self, name: str, i: int, warmup_steps: int, evs: List[SyncEvent],
                latency_ms: Optional[float], device_ms: Optional[float],
                labels: Optional[Dict[str, str]] = None) -> None:
        """Write step ``i`` of ``name``: a warm-up step when it is one of the first
        ``warmup_steps`` of its name (its events then marked warm-up: the guard counts every
        step of an ``exec`` run, since steps are numbered per name)."""
        rec = StepRecord.from_events(self.program, name, EXEC_PASS, i, warmup_steps, evs,
                                     latency_ms, device_ms=device_ms, rank=self.rank,
                                     labels=labels)
        tot = self.totals.get(name)
        if tot is None:
            tot = self.totals[name] = StepTotals(name, tally=Tally(
                keep_events=self.keep_events))
        tot.steps += 1
        if rec.warmup:
            evs = [dataclasses.replace(e, warmup=True) for e in evs]
        else:
            tot.syncs += rec.syncs
            tot.tally.extend(evs)  # the hidden ones, counted
        self.write_outside()  # made before this step ended: above its lines in the file
        self.writer.step(rec, evs)

    def _keep_outside(self, ev: SyncEvent) -> None:
        self.outside.add(ev)
        self._unwritten.append((ev, self._last))

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
            # the program ended inside steps (any thread): not finished steps
            self._open.clear()
            self._buf.clear()
            if self._loop is not None:
                if complete:  # the loop's last step: it ends with the program at the latest
                    self._end_loop()
                else:  # Ctrl-C: not a finished step
                    self._timer.stop(self._loop.dev)
                    self._loop = None
            self._flush()
            if not self._next and complete:
                evs = [dataclasses.replace(e, step=0) for e, _ in self._unwritten]
                self.outside, self._unwritten = Tally(keep_events=self.keep_events), []
                self._next[PROGRAM_STEP] = 1
                self._record(PROGRAM_STEP, 0, 0, evs,  # the whole program: never warm-up
                             (time.perf_counter() - self._t_start) * 1e3, None)

    def step_names(self) -> List[str]:
        return list(self._next)


def _driver(frame: Any) -> Any:
    """The first frame from ``frame`` outwards that is neither torch's nor syncguard's: the
    code that drives a loop (``nn.Module.__call__`` between it and ``forward`` skipped)."""
    from ..core._hub import HUB

    f = frame
    while f is not None and HUB._skip(f.f_code.co_filename):
        f = f.f_back
    return f if f is not None else frame
