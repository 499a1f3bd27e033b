"""Process-global delivery of sync events to the active guards.

One object owns the global state: the stack of active guards, the per-thread "an API call
already reported" depth, the ``allow()`` context and attribution to user code.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import os
import site
import sys
import sysconfig
import threading
from typing import TYPE_CHECKING, Dict, Iterator, List, Optional, Tuple

from .events import Frame, HostSyncError, SyncEvent

if TYPE_CHECKING:  # pragma: no cover
    from .guard import SyncGuard

log = logging.getLogger("syncguard")

_PKG_DIR = os.path.dirname(os.path.abspath(__file__))
# syncguard's own machinery is never "the user's line"; its subjects (sampling, scenarios) are.
_INTERNAL_DIRS = tuple(
    os.path.join(_PKG_DIR, p) for p in ("_hub.py", "intercept.py", "guard.py", "opmodel.py",
                                         "_selftest.py", "sim" + os.sep, "pytest_plugin.py",
                                         "steps.py", "execute" + os.sep)
)

# The standard library (minus the site-packages folders that may live under it).
_STDLIB = os.path.abspath(sysconfig.get_paths()["stdlib"]) + os.sep
_SITE = tuple(sorted({os.path.abspath(p) + os.sep for k, p in sysconfig.get_paths().items()
                      if k in ("purelib", "platlib")} | {os.path.abspath(p) + os.sep
                                                         for p in site.getsitepackages()}))

_allow_reason: contextvars.ContextVar[Optional[str]] = contextvars.ContextVar(
    "syncguard_allow", default=None
)


class _ThreadState(threading.local):
    def __init__(self) -> None:
        # > 0 while an intercepted call that already reported (or syncguard itself) runs.
        self.busy = 0


class Hub:
    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.guards: List[SyncGuard] = []
        self.tls = _ThreadState()
        self._skip_cache: Dict[str, bool] = {}
        self._soft_cache: Dict[str, bool] = {}
        self._skip_prefixes: Tuple[str, ...] = self._compute_skip_prefixes()
        # Device types that count as device-resident besides every non-CPU one.
        self.extra_devices: frozenset[str] = frozenset()

    @staticmethod
    def _compute_skip_prefixes() -> Tuple[str, ...]:
        prefixes: List[str] = list(_INTERNAL_DIRS)
        for mod in ("torch", "torch_npu"):
            m = sys.modules.get(mod)
            f = getattr(m, "__file__", None) if m is not None else None
            if f and not getattr(m, "__syncguard_standin__", False):
                prefixes.append(os.path.dirname(os.path.abspath(f)) + os.sep)
        return tuple(prefixes)

    @property
    def active(self) -> bool:
        return bool(self.guards)

    # -- guard registry ---------------------------------------------------------------
    def push(self, guard: SyncGuard) -> None:
        with self.lock:
            self.guards.append(guard)
            self._refresh()

    def remove(self, guard: SyncGuard) -> None:
        with self.lock:
            if guard in self.guards:
                self.guards.remove(guard)
            self._refresh()

    def _refresh(self) -> None:
        devs: set = set()
        for g in self.guards:
            devs.update(g.devices)
        self.extra_devices = frozenset(devs)
        self._skip_prefixes = self._compute_skip_prefixes()
        self._skip_cache.clear()

    def is_device_type(self, device_type: str) -> bool:
        return (device_type != "cpu" and device_type != "meta") or device_type in self.extra_devices

    # -- attribution ------------------------------------------------------------------
    def _skip(self, filename: str) -> bool:
        s = self._skip_cache.get(filename)
        if s is None:
            a = os.path.abspath(filename) if not filename.startswith("<") else filename
            s = a.startswith(self._skip_prefixes) or filename.startswith("<frozen")
            self._skip_cache[filename] = s
        return s

    def _soft(self, filename: str) -> bool:
        """Frames that are code but rarely the line to blame: the standard library (logging,
        pprint, copy, pickle, threading...) and generated code (``<string>``: a dataclass's
        ``__repr__``). Dropped when a user frame lies further out."""
        s = self._soft_cache.get(filename)
        if s is None:
            if filename.startswith("<"):
                s = filename == "<string>"
            else:
                a = os.path.abspath(filename)
                s = a.startswith(_STDLIB) and not a.startswith(_SITE)
            self._soft_cache[filename] = s
        return s

    def user_stack(self, depth: int = 8, skip: int = 0) -> Tuple[Frame, ...]:
        frames: List[Frame] = []
        soft: List[bool] = []
        f = sys._getframe(1 + skip)
        while f is not None and len(frames) < depth + 8:
            code = f.f_code
            if not self._skip(code.co_filename):
                frames.append(Frame(code.co_filename, f.f_lineno, code.co_name))
                soft.append(self._soft(code.co_filename))
            f = f.f_back  # type: ignore[assignment]
        if not all(soft):  # blame user code; keep the soft frames only when there is none
            frames = [fr for fr, sf in zip(frames, soft) if not sf]
        return tuple(frames[:depth])

    # -- delivery ---------------------------------------------------------------------
    @property
    def raising(self) -> bool:
        """True when some active guard raises on a sync (the call must not run first)."""
        return any(g.on_sync == "raise" for g in self.guards)

    def deliver(self, kind: str, api: str, op: Optional[str], device: Optional[str],
                count: int = 1, source: Optional[str] = None,
                wait_us: Optional[float] = None) -> None:
        guards = list(self.guards)
        if not guards:
            return
        stack = self.user_stack(max(g.stack_depth for g in guards), skip=1)
        top = stack[0] if stack else Frame("<unknown>", 0, "<unknown>")
        thread = threading.current_thread().name
        reason = _allow_reason.get()
        raise_for: Optional[SyncEvent] = None
        for g in guards:
            if not g.accepts(device):
                continue
            allowed_reason = reason or g.site_allowed(stack)
            step, warm = g.current_step()
            ev = SyncEvent(
                kind=kind, api=api, op=op, filename=top.filename, lineno=top.lineno,
                function=top.function, stack=stack[: g.stack_depth], step=step, thread=thread,
                allowed=allowed_reason is not None, reason=allowed_reason, warmup=warm,
                count=count, device=device, source=source, wait_us=wait_us,
            )
            g._record(ev)
            if g.on_sync == "log":
                log.warning("host sync: %s", ev.describe())
            elif g.on_sync == "raise" and not ev.allowed and not warm and raise_for is None:
                raise_for = ev
        if raise_for is not None:
            raise HostSyncError(format_error(raise_for))


def format_error(ev: SyncEvent) -> str:
    op = f" -> {ev.op}" if ev.op else ""
    return (
        f"hidden host sync at {ev.site} in {ev.function}(): {ev.api}{op} [{ev.kind}] "
        f"makes the host wait for the device. If it is intended, wrap it in "
        f'`with syncguard.allow("why"):` or allow the call site with '
        f'allow_sites=["{os.path.basename(ev.filename)}:{ev.lineno}"].'
    )


HUB = Hub()


@contextlib.contextmanager
def allow(reason: str) -> Iterator[None]:
    """Syncs made inside (on this thread) are recorded as allowed, with ``reason``, and are
    not counted in ``SyncGuard.count``. The model case: an engine's per-step token readback."""
    if not reason or not isinstance(reason, str):
        raise ValueError("syncguard.allow() needs a non-empty reason string")
    token = _allow_reason.set(reason)
    try:
        yield
    finally:
        _allow_reason.reset(token)
