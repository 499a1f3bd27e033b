"""The data a guard collects: one :class:`SyncEvent` per host read of device data."""

from __future__ import annotations

import dataclasses
import operator
from typing import Any, Dict, Iterable, Optional, Tuple

from .._words import steps_phrase
from ..errors import EXIT_INTERNAL, EXIT_OVER, SyncguardError
from .sites import caller_text, function_name, site_text

#: A Python read of one scalar (``bool``/``item``/``int``/``float``/``__index__``/``__format__``).
SCALAR_READ = "scalar_read"
#: A device-to-host copy (``tolist``, ``cpu()``, ``to("cpu")``, ``numpy``, printing).
D2H_COPY = "d2h_copy"
#: An op whose output shape or Python result depends on device data (nonzero family, equal...).
DATA_DEPENDENT = "data_dependent"
#: A host-to-device copy the host waits for (blocking, or non-blocking from pageable memory).
H2D_COPY = "h2d_copy"
#: ``synchronize()`` on the device module, a stream or an event.
EXPLICIT_SYNC = "explicit_sync"
#: A read done inside a C++ kernel, counted from the backend's op sync model.
IN_KERNEL = "in_kernel"

KINDS: Tuple[str, ...] = (SCALAR_READ, D2H_COPY, DATA_DEPENDENT, H2D_COPY, EXPLICIT_SYNC, IN_KERNEL)


class SelfTestError(SyncguardError, RuntimeError):
    """The guard failed to see a planted sync: its counts cannot be trusted."""

    exit_code = EXIT_INTERNAL


class HostSyncError(SyncguardError, RuntimeError):
    """Raised by ``SyncGuard(on_sync="raise")`` at the call that would make the host wait.

    A ``RuntimeError`` on purpose: PyTorch's own sync check (``set_sync_debug_mode("error")``
    on CUDA and NPU) raises ``RuntimeError`` at the same calls, so code and tests written for
    it treat syncguard's error the same way. The price is that code catching ``RuntimeError``
    (SGLang's old sampler around ``torch.multinomial``) swallows it; the guard therefore keeps
    every error it raised and raises again at exit when the code swallowed one.
    """

    exit_code = EXIT_OVER


class NoDeviceTensorsWarning(UserWarning):
    """A guard over code that touched only CPU tensors, without ``devices=("cpu",)``: it
    counts nothing, and says so once per process."""


@dataclasses.dataclass(frozen=True)
class Frame:
    """One frame of user code: where a sync was made. ``qualname``: the function's qualified
    name where it differs from ``function`` (``StopOnToken.__call__``; Python 3.11+, else
    empty), for reports; ``function`` stays the plain name that site keys use."""

    filename: str
    lineno: int
    function: str
    qualname: str = ""

    def __str__(self) -> str:
        return f"{self.filename}:{self.lineno} in {self.function}"

    def __hash__(self) -> int:
        # worked out once: a call site's Frame is one shared object (the hub keeps it), and
        # each read hashes its stack of them where sites are counted and written
        h: Optional[int] = self.__dict__.get("_hash")
        if h is None:
            h = hash((self.filename, self.lineno, self.function, self.qualname))
            object.__setattr__(self, "_hash", h)
        return h


class Stack(Tuple[Frame, ...]):
    """A user stack as the hub reports it: :class:`Frame` objects, innermost first, a tuple
    whose hash is worked out once (a tuple asks each frame again on every hash, and a read's
    stack is hashed wherever its site is counted or written, on the program's clock). Equal,
    and hashing equal, to the plain tuple of the same frames."""

    _hash: int

    def __new__(cls, frames: Iterable[Frame]) -> Stack:
        new = super().__new__(cls, frames)
        new._hash = tuple.__hash__(new)
        return new

    def __hash__(self) -> int:
        return self._hash

    def __reduce__(self) -> Any:  # pickled and copied as the plain tuple it equals
        return (tuple, (tuple(self),))


@dataclasses.dataclass(frozen=True)
class SyncEvent:
    """One host read of device data.

    ``kind`` is one of :data:`KINDS`; ``api`` the Python-level entry (``Tensor.__bool__``,
    ``torch.nonzero``...); ``op`` the ATen op where one is known (``aten::_local_scalar_dense``);
    ``filename``/``lineno``/``function`` the innermost frame outside syncguard and torch;
    ``stack`` a short user stack, innermost first; ``step`` the index of the guard's step
    (``None`` outside steps); ``warmup`` whether that step is a warm-up step; ``count`` how many
    host reads this event stands for (an in-kernel model entry may say 2); ``allowed`` and
    ``reason`` say whether ``allow()`` or an allowed call site covered it. ``wait_us``: how
    long the intercepted call kept the host (microseconds): on a real device, what this sync
    cost; None when the call was not timed (raise mode, backend-level reports).
    ``lineage``: where the value read came from and the verdict on removing the read (a flat
    dict of strings and ints, :func:`syncguard.core.lineage.summarize`); None unless lineage
    tracking was asked for (``--lineage``), and then left out of :meth:`to_dict`.
    """

    kind: str
    api: str
    op: Optional[str]
    filename: str
    lineno: int
    function: str
    stack: Tuple[Frame, ...]
    step: Optional[int]
    thread: str
    allowed: bool = False
    reason: Optional[str] = None
    warmup: bool = False
    count: int = 1
    device: Optional[str] = None
    source: Optional[str] = None
    wait_us: Optional[float] = None
    lineage: Optional[Dict[str, Any]] = None

    @classmethod
    def make(cls, *, kind: str, api: str, op: Optional[str], filename: str, lineno: int,
             function: str, stack: Tuple[Frame, ...], step: Optional[int], thread: str,
             allowed: bool, reason: Optional[str], warmup: bool, count: int,
             device: Optional[str], source: Optional[str], wait_us: Optional[float],
             lineage: Optional[Dict[str, Any]]) -> SyncEvent:
        """An event from every field by name, as ``SyncEvent(...)`` makes it but without the
        frozen ``__init__``'s one ``object.__setattr__`` per field: the hub makes one per
        read, on the program's clock."""
        new = object.__new__(cls)
        object.__setattr__(new, "__dict__", {
            "kind": kind, "api": api, "op": op, "filename": filename, "lineno": lineno,
            "function": function, "stack": stack, "step": step, "thread": thread,
            "allowed": allowed, "reason": reason, "warmup": warmup, "count": count,
            "device": device, "source": source, "wait_us": wait_us, "lineage": lineage})
        return new

    def evolve(self, **changes: Any) -> SyncEvent:
        """A copy with ``changes`` (fields by name), as ``dataclasses.replace`` makes it but
        without running ``__init__`` again: ``exec`` copies each event once per step, on the
        program's clock."""
        if not changes.keys() <= _FIELD_SET:
            raise TypeError(f"SyncEvent has no field {sorted(changes.keys() - _FIELD_SET)[0]}")
        new = object.__new__(SyncEvent)
        new.__dict__.update(self.__dict__, **changes)
        return new

    @property
    def site(self) -> str:
        """``file:line`` of the user code that made the sync."""
        return f"{self.filename}:{self.lineno}"

    def to_dict(self) -> Dict[str, Any]:
        # field by field: dataclasses.asdict deep-copies every value, which cost exec tens
        # of microseconds per event (its fields are strings, numbers and the frames)
        d = {k: getattr(self, k) for k in _EVENT_FIELDS}
        d["stack"] = [{"filename": f.filename, "lineno": f.lineno, "function": f.function,
                       "qualname": f.qualname} for f in self.stack]
        if d["lineage"] is None:  # off by default: results without lineage stay as they were
            del d["lineage"]
        return d

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> SyncEvent:
        d = dict(d)
        fields = {f.name for f in dataclasses.fields(Frame)}
        d["stack"] = tuple(Frame(**{k: v for k, v in f.items() if k in fields})
                           for f in d.get("stack", ()))
        fields = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in fields})

    def describe(self, root: Optional[str] = None) -> str:
        """:func:`site_line` of this event, with its kind: ``sampler.py:212 in sample:
        Tensor.__bool__ (aten::is_nonzero) [scalar_read] x1, step 3``."""
        steps = () if self.step is None else (self.step,)
        return site_line(self.filename, self.lineno, function_name(self.function, self.stack),
                         self.api, self.op,
                         self.count, steps, kind=self.kind, root=root,
                         caller=caller_text(self.filename, self.stack, root))


_EVENT_FIELDS = tuple(f.name for f in dataclasses.fields(SyncEvent))
_FIELD_SET = frozenset(_EVENT_FIELDS)
#: the fields that tell one site's events apart (all but the step, count, wait, warm-up flag
#: and lineage), and an event's values of them in one call
SITE_FIELDS = ("kind", "api", "op", "filename", "lineno", "function", "stack", "thread",
               "allowed", "reason", "device", "source")
site_key = operator.attrgetter(*SITE_FIELDS)


class ReadSite:
    """Where reads come from, as far as their events differ only by step, wait, warm-up flag
    and lineage: a :class:`SyncEvent` with none of those (:attr:`event`, step None). The hub
    resolves a read's site once per stack and call and hands ``exec`` the site and the read's
    wait, not a new event per read (one event object and its 17-entry dictionary per read,
    on the program's clock); :meth:`at` is the event a read at this site stands for.

    A site is its own identity (hashed by it): two sites of equal content are two sites."""

    __slots__ = ("event", "count", "allowed")

    def __init__(self, event: SyncEvent) -> None:
        self.event, self.count, self.allowed = event, event.count, event.allowed

    def at(self, step: Optional[int], wait_us: Optional[float], warmup: bool = False,
           lineage: Optional[Dict[str, Any]] = None) -> SyncEvent:
        """The event of a read at this site in step ``step`` (None: outside steps)."""
        return self.event.evolve(step=step, wait_us=wait_us, warmup=warmup, lineage=lineage)


#: a read as ``exec`` keeps it until its step is written: its site, wait (us) and lineage
Read = Tuple[ReadSite, Optional[float], Optional[Dict[str, Any]]]


def site_line(filename: str, lineno: int, function: str, api: str, op: Optional[str] = None,
              count: int = 1, steps: Iterable[Optional[int]] = (), *,
              kind: Optional[str] = None, root: Optional[str] = None, caller: str = "") -> str:
    """The one text form of a sync site, used by every gate line: ``file:line in function,
    called from file:line in function: API (op) [kind] xcount, steps 2-4``. The site as
    :func:`syncguard.core.sites.site_text` names it (the file relative to ``root``, default the
    current directory, when under it; ``caller`` from :func:`syncguard.core.sites.caller_text`,
    left out when empty); ``(op)`` only where known, ``[kind]`` only when given; steps as
    ranges (``step 3`` for one), left out when there are none."""
    text = f"{site_text(filename, lineno, function, caller, root)}: {api}"
    text += f" ({op})" if op else ""
    text += f" [{kind}]" if kind else ""
    text += f" x{count}"
    where = steps_phrase(steps)
    return f"{text}, {where}" if where else text
