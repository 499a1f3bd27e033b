"""The public guard: count, attribute and gate host reads of device data."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import sys
import threading
import warnings
import weakref
from types import FrameType
from typing import (
    TYPE_CHECKING,
    Any,
    Callable,
    Dict,
    Iterable,
    Iterator,
    List,
    Optional,
    Tuple,
    overload,
)

from ..process import signals as _signals
from .aten import dispatch_net
from .events import Frame, HostSyncError, NoDeviceTensorsWarning, ReadSite, SyncEvent
from .hub import HOST_DEVICES, HUB, format_error
from .intercept import PATCHER
from .sites import allow_reason, group_key
from .steps import is_warmup

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

ON_SYNC = ("count", "log", "raise")


@dataclasses.dataclass(frozen=True)
class StepCount:
    """Syncs seen in one step: ``syncs`` not allowed (counted), ``allowed`` allowed ones."""

    step: int
    warmup: bool
    syncs: int
    allowed: int


class _ExitMethod:
    """The descriptor behind ``SyncGuard.__exit__``. Looked up on a guard, it returns a new
    ``functools.partial`` of the exit bound to it (C code: calling it adds no frame that
    holds it) and notes a weak reference to it with the looking-up frame and instruction. A
    ``with`` statement looks ``__exit__`` up right before it calls ``__enter__`` and drops it
    when the block is left: the entry keeps that weak reference as its ticket."""

    def __init__(self, fn: Callable[..., None]) -> None:
        self.fn = fn
        self.__doc__ = fn.__doc__

    @overload
    def __get__(self, obj: None, owner: Any = None) -> Callable[..., None]: ...
    @overload
    def __get__(self, obj: SyncGuard, owner: Any = None) -> Callable[..., None]: ...

    def __get__(self, obj: Optional[SyncGuard], owner: Any = None) -> Callable[..., None]:
        if obj is None:
            return self.fn
        bound = functools.partial(self.fn, obj)
        f = sys._getframe(1)
        obj._exit_looked_up = (weakref.ref(bound), id(f), f.f_lasti)
        return bound


class SyncGuard:
    """Count every host read of device data made while the guard is active.

    ``on_sync``: ``"count"`` records; ``"log"`` records and logs each sync (logger
    ``syncguard``); ``"raise"`` raises :class:`HostSyncError` at the offending call.
    ``devices``: device types to treat as device-resident besides every non-CPU one (e.g.
    ``("cpu",)`` to exercise the guard on plain CPU tensors). ``allow_sites``: call sites whose
    syncs are allowed (``"file.py:123"``, ``"pkg.mod:function"`` or ``"function"``, matched
    against every frame of the user stack). ``warmup``: the first N steps are warm-up: their
    events are kept (``warmup=True``) but not counted. ``model``: the op sync model
    (``"cuda"``/``"npu"``) for device types without one of their own (CPU via ``devices``).
    ``on_event``: a callable given every event as it is recorded (streaming to disk);
    ``keep_events=False`` then keeps only the counts, so memory stays flat over long runs.
    ``on_read``: optionally, a lean form of ``on_event`` for a guard that is the only one
    and steps nothing itself (``exec``'s): given ``(site, wait_us)`` per read
    (:class:`~syncguard.core.events.ReadSite`, its event being ``site.at(None, wait_us)``)
    instead of an event, whenever the read has no lineage; ``on_event`` gets the rest.
    ``exhaustive=True`` adds a dispatch-level safety net on the entering thread: every ATen op
    is classified, so reads that no Python entry point sees are counted too (a 0-d device
    tensor passed as an int or Scalar: ``torch.arange(n)``, ``x.view(n, -1)``,
    ``add(alpha=n)``). It costs a Python call per op; the simulated device needs none (its
    backend classifies every op on every thread), and must not be used with it: any
    dispatch mode breaks ``torch.tensor(..., device=<simulated>)``.

    Syncs from every Python thread are counted while the guard is active; guards nest (each
    active guard records every event, in-kernel reads by its own ``model``). Entering and
    exiting are atomic (Ctrl-C and SIGTERM are held while the interceptors are swapped, on
    POSIX blocked at the OS level, and two threads cannot both enter one guard); exiting a
    guard that is not active does nothing. The guard heals: one whose ``with`` block was left
    without its exit (a Ctrl-C landing as ``__exit__`` began) is taken down by the next guard's
    entry or exit (:attr:`stale`), and interceptors an earlier patch set left on torch are
    removed by the next install, so torch is restored once no guard is active.

    With ``on_sync="raise"``, a :class:`HostSyncError` the code under guard catches (a
    ``except RuntimeError`` around a sampler) is not lost: the guard keeps it (``raised``) and
    raises it again when it exits.
    """

    def __init__(
        self,
        on_sync: str = "count",
        *,
        devices: Iterable[str] = (),
        allow_sites: Iterable[Tuple[str, str] | str] = (),
        warmup: int = 0,
        model: Optional[str] = None,
        stack_depth: int = 8,
        on_event: Optional[Callable[[SyncEvent], None]] = None,
        keep_events: bool = True,
        exhaustive: bool = False,
        on_read: Optional[Callable[[ReadSite, Optional[float]], None]] = None,
    ) -> None:
        if on_sync not in ON_SYNC:
            raise ValueError(f"on_sync must be one of {ON_SYNC}, not {on_sync!r}")
        if warmup < 0:
            raise ValueError("warmup must be >= 0")
        self.on_sync = on_sync
        self.devices = frozenset(devices)
        self.allow_sites_of: List[Tuple[str, str]] = []
        for s in allow_sites:
            if isinstance(s, str):
                self.allow_sites_of.append((s, f"allowed call site {s}"))
            else:
                self.allow_sites_of.append((s[0], s[1]))
        self.warmup = warmup
        self.model = model
        self.stack_depth = stack_depth
        self.on_event = on_event
        self.on_read = on_read
        self.keep_events = keep_events
        self.exhaustive = exhaustive
        self._net: Any = None
        self.events: List[SyncEvent] = []
        self._count = 0
        self._allowed = 0
        self._step: Optional[int] = None
        self._next_step = 0
        self._active = False
        self._lock = threading.RLock()
        self._thread: Optional[int] = None
        self._raised_mark = 0
        self._seen_mark: Tuple[int, int] = (0, 0)
        #: (event, error) for every HostSyncError this guard raised, caught by the code or not.
        self.raised: List[Tuple[SyncEvent, HostSyncError]] = []
        #: HostSyncErrors raised by guards nested in this one that the code swallowed.
        self.swallowed: List[SyncEvent] = []
        # the with statement's exit callable (weakly), see _take_ticket and stale
        self._exit_looked_up: Optional[Tuple[Any, int, int]] = None
        self._ticket: Optional[Any] = None

    # -- context management --------------------------------------------------------------
    def __enter__(self) -> SyncGuard:
        caller, was_active = sys._getframe(1), self._active
        try:
            with _signals.critical() as pending, self._lock:
                HUB.heal()  # this guard too, if its last block was left without its exit
                if self._active:
                    raise RuntimeError("this SyncGuard is already active")
                self._take_ticket(caller)
                self._thread = threading.get_ident()
                PATCHER.acquire()
                try:
                    HUB.push(self)
                    if self.exhaustive:
                        net = dispatch_net()
                        net.__enter__()
                        self._net = net
                except BaseException:
                    self._undo_enter()
                    raise
                if _signals.take_pending(pending):
                    self._undo_enter()  # Ctrl-C while entering: as never entered; it raises
                else:
                    self._active = True
                    self._raised_mark = len(self.raised)
                    self._seen_mark = HUB.tensors_seen()
        except KeyboardInterrupt:
            # delivered as the entry ended: the caller's ``with`` will not exit it
            if not was_active:
                self._abandon()
            raise
        if not self._active:  # the signal's handler returned without raising: enter again
            return self.__enter__()
        return self

    def _take_ticket(self, caller: FrameType) -> None:
        """Keep a weak reference to the ``__exit__`` a ``with`` statement looked up just
        before calling this entry (same frame, same instruction): while it lives, the with
        block has not been left (see :meth:`stale`)."""
        looked, self._exit_looked_up = self._exit_looked_up, None
        self._ticket = None
        if looked is not None and looked[1] == id(caller) and (
                0 <= caller.f_lasti - looked[2] <= 16):
            self._ticket = looked[0]

    @property
    def stale(self) -> bool:
        """Active, though the ``with`` block that entered it was left without its exit (a
        Ctrl-C at the first instruction of ``__exit__``, or as ``__enter__`` returned): the
        hub takes it down at the next guard's entry or exit. A guard entered by calling
        ``__enter__()`` directly is never stale."""
        t = self._ticket
        return self._active and t is not None and t() is None

    def _abandon(self) -> None:
        """Take down an entry the caller will never exit (idempotent)."""
        with _signals.critical(deliver=False), self._lock:
            if self._active:
                self._active = False
                self._undo_enter()
            elif self in HUB.guards:  # listed but not marked active: cut short while entering
                self._undo_enter()

    def _undo_enter(self) -> None:
        """Take down what entering set up: the dispatch net, the Hub's listing, the patches."""
        try:
            if self._net is not None:
                net, self._net = self._net, None
                if threading.get_ident() == self._thread or self._thread is None:
                    net.__exit__(None, None, None)
                else:  # a stale guard taken down from another thread: its net goes quiet
                    net.inert = True
        finally:
            try:
                HUB.remove(self)
            finally:
                PATCHER.release()

    def _exit(self, exc_type: Any = None, exc: Any = None, tb: Any = None) -> None:
        try:
            with _signals.critical(), self._lock:
                HUB.heal()
                if not self._active:
                    return  # a second exit, or one without an entry: nothing to undo
                if self._net is not None and threading.get_ident() != self._thread:
                    raise RuntimeError(
                        "an exhaustive SyncGuard must be exited on the thread that entered it "
                        "(its dispatch net lives on that thread's mode stack); it is still "
                        "active")
                self._active = False
                self._undo_enter()
        except KeyboardInterrupt:
            # raised before the exit took effect (the signal came as it began): finish it
            if self._active and (self._net is None or threading.get_ident() == self._thread):
                self._abandon()
            raise
        self._after_exit(exc)

    #: ``__exit__`` (``exc_type, exc, tb``): each lookup on a guard is a new callable, which a
    #: ``with`` statement holds until it exits (the guard's ticket, see :attr:`stale`).
    __exit__ = _ExitMethod(_exit)

    def _after_exit(self, exc: Any) -> None:
        # A HostSyncError leaving the block (ours, or a nested guard's re-raise) is a failure
        # already on its way: nothing was lost.
        lost = [] if isinstance(exc, HostSyncError) else self.raised[self._raised_mark:]
        if lost:
            with HUB.lock:
                for g in HUB.guards:  # outer guards (the pytest plugin's) learn of it too
                    g.swallowed.extend(ev for ev, _ in lost)
            if exc is None:
                ev = lost[0][0]
                raise HostSyncError(
                    f"{len(lost)} HostSyncError(s) raised inside the guard were caught by the "
                    f"code under it (first: {format_error(ev)})") from lost[0][1]
        self._warn_if_blind()

    def _warn_if_blind(self) -> None:
        cpu, dev = HUB.tensors_seen()
        cpu0, dev0 = self._seen_mark
        if (self.events or dev > dev0 or cpu == cpu0 or "cpu" in self.devices
                or HUB.warned_no_device):
            return
        HUB.warned_no_device = True
        warnings.warn(
            'syncguard: the guard saw no device tensors; on CPU use devices=("cpu",) or the '
            "simulated device", NoDeviceTensorsWarning, stacklevel=4)

    def _raised_error(self, ev: SyncEvent, err: HostSyncError) -> None:
        self.raised.append((ev, err))

    @property
    def active(self) -> bool:
        return self._active

    # -- steps ---------------------------------------------------------------------------
    @contextlib.contextmanager
    def step(self, index: Optional[int] = None) -> Iterator[int]:
        """Mark one decode step; events inside carry its index (0, 1, ... unless given)."""
        i = self._next_step if index is None else index
        prev = self._step
        self._step = i
        try:
            yield i
        finally:
            self._step = prev
            self._next_step = i + 1

    def current_step(self) -> Tuple[Optional[int], bool]:
        s = self._step
        return s, is_warmup(s, self.warmup)

    # -- recording (called by the hub) ------------------------------------------------------
    def accepts(self, device: Optional[str]) -> bool:
        return device is None or device not in HOST_DEVICES or device in self.devices

    def site_allowed(self, stack: Tuple[Frame, ...]) -> Optional[str]:
        return allow_reason(self.allow_sites_of, stack)

    def _record(self, ev: SyncEvent) -> None:
        if not ev.warmup:
            if ev.allowed:
                self._allowed += ev.count
            else:
                self._count += ev.count
        if self.keep_events:
            self.events.append(ev)
        if self.on_event is not None:
            self.on_event(ev)

    def _read(self, site: ReadSite, wait_us: Optional[float]) -> None:
        """A read outside this guard's steps (it has none) at ``site``, given to
        ``on_read``: counted as :meth:`_record` counts its event."""
        if site.allowed:
            self._allowed += site.count
        else:
            self._count += site.count
        if self.keep_events:
            self.events.append(site.at(None, wait_us))
        assert self.on_read is not None
        self.on_read(site, wait_us)

    # -- results -------------------------------------------------------------------------
    @property
    def count(self) -> int:
        """Host syncs observed that were not allowed, outside warm-up steps."""
        return self._count

    @property
    def allowed_count(self) -> int:
        """Host syncs observed and allowed (``allow()`` or an allowed call site)."""
        return self._allowed

    @property
    def counted_events(self) -> List[SyncEvent]:
        return [e for e in self.events if not e.allowed and not e.warmup]

    def per_step(self) -> List[StepCount]:
        """One row per step that had events or was entered, in step order."""
        rows: Dict[int, List[int]] = {i: [0, 0] for i in range(self._next_step)}
        for e in self.events:
            if e.step is None:
                continue
            r = rows.setdefault(e.step, [0, 0])
            r[1 if e.allowed else 0] += e.count
        return [StepCount(s, is_warmup(s, self.warmup), v[0], v[1])
                for s, v in sorted(rows.items())]

    def step_table(self) -> pd.DataFrame:
        """DataFrame: step (int), warmup (bool), syncs (hidden host syncs, count),
        allowed (allowed host syncs, count)."""
        import pandas as pd

        return pd.DataFrame([dataclasses.asdict(r) for r in self.per_step()],
                            columns=["step", "warmup", "syncs", "allowed"])

    def sites(self, include_allowed: bool = False) -> List[Dict[str, Any]]:
        """Counted syncs grouped by call site: site, function, api, op, kind, count, steps,
        and ``stack``: the site's own frame as a dict, so a report names its function as every
        other does (the qualified name, ``Sampler.sample``:
        :func:`syncguard.core.sites.function_name`); the events of one site may have different
        callers, so none is kept."""
        groups: Dict[Tuple[str, int, str, str, str], Dict[str, Any]] = {}
        for e in self.events:
            if e.warmup or (e.allowed and not include_allowed):
                continue
            key = group_key(e.filename, e.lineno, e.api, e.op, e.kind)
            g = groups.setdefault(key, {
                "site": e.site, "filename": e.filename, "lineno": e.lineno,
                "function": e.function, "api": e.api, "op": e.op, "kind": e.kind,
                "count": 0, "steps": [], "allowed": e.allowed,
                "stack": [dataclasses.asdict(f) for f in e.stack[:1]],
            })
            g["count"] += e.count
            if e.step is not None and e.step not in g["steps"]:
                g["steps"].append(e.step)
        return sorted(groups.values(), key=lambda g: (-g["count"], g["filename"], g["lineno"]))

    def reset(self) -> None:
        self.events.clear()
        self.raised.clear()
        self.swallowed.clear()
        self._raised_mark = 0
        self._next_step = 0
        self._count = self._allowed = 0

    def __repr__(self) -> str:
        return (f"SyncGuard(on_sync={self.on_sync!r}, count={self.count}, "
                f"allowed={self.allowed_count}, events={len(self.events)})")
