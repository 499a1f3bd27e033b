"""The result format: versioned JSON Lines, streamed while a run goes on.

A result file (``result.jsonl``) is one JSON object per line:

- ``{"type": "header", "schema": 1, ...}``: versions (syncguard, torch, torch_npu, Python),
  device, host, git commit, creation time, the command line, and for each scenario its file,
  SHA-256 and full text; ``machine`` (runs since the round-level statistics): CPU model and
  count, load average, torch threads and a reference loop's time, which decide whether two
  results' absolute host times compare (:mod:`syncguard.results.machine`).
- ``{"type": "step", ...}``: one finished step of one scenario and path (:class:`StepRecord`).
- ``{"type": "event", ...}``: one host sync (:class:`syncguard.SyncEvent` fields plus
  ``scenario``, ``path`` and ``pass``).
  Syncs an ``exec`` run made outside every step are events too, written at the end with
  ``path`` = :data:`OUTSIDE_PATH`, ``step`` null and no step record; ``after_step`` is the
  index of the step begun last before each (null before the first). Results written before
  this kept only a ``note`` (total and ``file:line`` list): :func:`outside_sites` reads both.
- A site's events past the writer's ``events_per_site`` (``exec`` writes 16 per site unless
  ``--all-events``) are counted instead: a step line's ``reads`` lists them, and a
  ``{"type": "reads", "reads": [...]}`` line those outside every step, each read as ``[ref,
  step, count, wait_us, warmup]``, ``ref`` the ``ref`` field of the site's events written
  above it, ``step`` the ``after_step`` of a read outside steps. :meth:`RunResult.iter_events`
  gives every sync, counted or written.
- ``{"type": "timeline", ...}``: the modeled device timeline of one counted step on the
  simulated device (:mod:`syncguard.model.timeline`).
- ``{"type": "footer", "complete": true, ...}``: written only when the run finished.

Each line is flushed as it is written, so an interrupted run (Ctrl-C, SIGTERM, even SIGKILL)
keeps every finished step and :func:`load` reads a partial file (a torn last line is ignored);
the file is fsync'ed when closed and about once a second while steps go on, not per step
(:class:`ResultWriter`).

A result file is untrusted input: :func:`load` checks the type of every field the reports use
and raises :class:`ResultError` (one line naming the file, the line and the field) for anything
else; a file written by a newer syncguard gives a :class:`ResultWarning`.
"""

from __future__ import annotations

import array
import copy
import dataclasses
import getpass
import hashlib
import io
import json
import math
import operator
import os
import platform
import re
import socket
import subprocess
import sys
import time
import warnings
from json.encoder import c_make_encoder as _c_make_encoder  # type: ignore[attr-defined]
from typing import (
    IO,
    TYPE_CHECKING,
    Any,
    Dict,
    Iterable,
    Iterator,
    List,
    Optional,
    Sequence,
    Set,
    Tuple,
)

from .._paths import PKG_DIR
from ..core.events import Read, SyncEvent
from ..errors import ResultWarning, SyncguardError
from . import fit

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

SCHEMA = 1
#: ``path`` of the events an ``exec`` run made outside every step
OUTSIDE_PATH = "(outside steps)"
#: ``pass`` of the timed pass's step records (no interceptors: no syncs are seen)
TIMED_PASS = "timed"


class ResultError(SyncguardError, ValueError):
    """A result file that cannot be read."""


#: step records with ``__slots__`` where dataclasses make them (Python 3.10+): a loaded run
#: holds one per step, about 190 bytes each instead of about 280 with a ``__dict__``
_SLOTTED = sys.version_info >= (3, 10)


@dataclasses.dataclass(frozen=True, **({"slots": True} if _SLOTTED else {}))
class StepRecord:
    """One decode step of one scenario on one path.

    ``pass_`` is ``"counted"`` (under the guard) or ``"timed"`` (no interceptors). ``syncs``
    hidden host syncs and ``allowed`` allowed ones (counted pass; 0 on the timed pass).
    ``latency_ms``: host wall time from the start of the step to its token readback
    (milliseconds; consecutive readbacks minus syncguard's own result writing).
    ``device_ms``: device time of the step from device events (real devices only, else None).
    ``tokens``: the sampled ids.
    ``sync_wait_us``: time the host spent inside this step's hidden syncs (microseconds,
    counted pass; 0.0 without hidden syncs; None on the timed pass).
    ``labels``: free-form per-step facts the subject reports (the case study's
    ``{"branch": "fused", "eligible": true}``; an ``exec`` loop's ``{"phase": "prefill"}``);
    None when it reports none. Results written before labels held them carry ``branch`` and
    ``eligible`` as fields of their own: :meth:`from_dict` moves them into ``labels``.
    ``rank``: the distributed rank that wrote the step (None outside torchrun).

    ``pass_`` is ``"exec"`` for ``syncguard exec``: the program ran once, under the guard, so
    the record is both counted and timed; ``scenario`` is then the program and ``path`` the
    step's name.
    ``round``: the timed pass's round (it repeats the scenario, paths interleaved step by
    step; None on the counted pass). ``modeled_ms``/``bubble_us``: the step's modeled latency
    (ms) and device idle time (us) from the device timeline model (simulated device, counted
    pass; None elsewhere; the profile is named in the header's ``timeline``);
    ``sync_cost_us``/``sync_bubble_us``: what the step's hidden syncs cost in that model (the
    modeled latency and device idle minus a replay without them, us).
    """

    scenario: str
    path: str
    pass_: str
    step: int
    warmup: bool
    batch_size: int
    syncs: int
    allowed: int
    latency_ms: Optional[float]
    device_ms: Optional[float] = None
    tokens: Optional[List[int]] = None
    sync_wait_us: Optional[float] = None
    labels: Optional[Dict[str, Any]] = None
    rank: Optional[int] = None
    round: Optional[int] = None
    modeled_ms: Optional[float] = None
    bubble_us: Optional[float] = None
    sync_cost_us: Optional[float] = None
    sync_bubble_us: Optional[float] = None

    def to_dict(self) -> Dict[str, Any]:
        # field by field (dataclasses.asdict deep-copies, tens of microseconds per step
        # record under exec); the containers are copied, as asdict would
        d = dict(zip(_STEP_NAMES, _step_values(self)))  # the fields, in their order
        if d["tokens"] is not None:
            d["tokens"] = list(d["tokens"])
        if d["labels"] is not None:
            d["labels"] = copy.deepcopy(d["labels"])
        d["pass"] = d.pop("pass_")
        return d

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> StepRecord:
        """A record from its dict (:meth:`to_dict`, or a result line). An older result's
        ``branch`` and ``eligible`` fields become labels (where ``labels`` lacks them; an
        empty ``branch`` or a null ``eligible`` is no label)."""
        d = dict(d)
        d["pass_"] = d.pop("pass")
        old = {k: d[k] for k in _OLD_LABELS if d.get(k) not in (None, "")}
        if old:
            d["labels"] = {**old, **(d.get("labels") or {})}
        names = _FIELD_NAMES
        return cls(**{k: v for k, v in d.items() if k in names})

    @classmethod
    def from_events(cls, scenario: str, path: str, pass_: str, step: int, warmup_steps: int,
                    events: Sequence[SyncEvent], latency_ms: Optional[float],
                    **fields: Any) -> StepRecord:
        """The record of one finished step from the sync events it made: the one builder of
        the counted (:mod:`syncguard.driving.runner`), timed (:mod:`syncguard.driving.timing`) and
        ``exec`` (:mod:`syncguard.execute.session`) records. ``warmup`` is decided by
        :func:`syncguard.core.steps.is_warmup` (the first ``warmup_steps`` steps are warm-up);
        ``syncs``/``allowed`` are the events' counts; ``sync_wait_us`` the host's time inside
        the hidden ones (None on the timed pass, which has no interceptors). ``fields``: the
        rest (``batch_size``, ``device_ms``, ``tokens``, labels, ``round``, the modeled
        timeline's fields...); ``batch_size`` defaults to 0."""
        from ..core.steps import is_warmup

        syncs, allowed, wait = step_counts(events)
        d = {**_STEP_DEFAULTS, "batch_size": 0, **fields}
        if len(d) != len(_STEP_DEFAULTS):  # a key beyond the fields
            raise TypeError(f"StepRecord has no field "
                            f"{sorted(d.keys() - _STEP_DEFAULTS.keys())[0]}")
        d.update(scenario=scenario, path=path, pass_=pass_, step=step,
                 warmup=is_warmup(step, warmup_steps), syncs=syncs, allowed=allowed,
                 latency_ms=latency_ms, sync_wait_us=None if pass_ == TIMED_PASS else wait)
        # the fields set as the frozen __init__ would, without its object.__setattr__ per
        # field (exec builds one record per step, on the program's clock)
        new = object.__new__(cls)
        if _SLOTTED:
            for put, v in zip(_STEP_SETTERS, d.values()):
                put(new, v)
        else:
            new.__dict__.update(d)
        return new


def read_counts(reads: Iterable[Tuple[Any, Optional[float], Any]]) -> Tuple[int, int, float]:
    """A step's ``(syncs, allowed, sync_wait_us)`` from its reads (each ``(site, wait_us,
    lineage)``, the site a :class:`~syncguard.core.events.ReadSite` or an event): the hidden
    and allowed reads' counts and the host's time inside the hidden ones (us)."""
    syncs = allowed = 0
    wait = 0.0
    for site, w, _ in reads:
        if site.allowed:
            allowed += site.count
        else:
            syncs += site.count
            wait += w or 0.0
    return syncs, allowed, wait


def step_counts(events: Sequence[SyncEvent]) -> Tuple[int, int, float]:
    """:func:`read_counts` of a step's events."""
    return read_counts((e, e.wait_us, None) for e in events)


#: step fields of results written before the subject's labels held them: moved into labels
_OLD_LABELS = ("branch", "eligible")
#: distinct call stacks a writer keeps encoded (then it starts afresh)
_STACKS_KEPT = 4096
_FIELD_NAMES = frozenset(f.name for f in dataclasses.fields(StepRecord))
#: every field in order, with its default (None for the fields :meth:`from_events` sets)
_STEP_DEFAULTS: Dict[str, Any] = {
    f.name: None if f.default is dataclasses.MISSING else f.default
    for f in dataclasses.fields(StepRecord)}
_STEP_NAMES = tuple(_STEP_DEFAULTS)
#: the fields' keys in a result line (``pass_`` is written ``pass``)
_STEP_KEYS = tuple("pass" if n == "pass_" else n for n in _STEP_NAMES)
#: a record's field values, in order, in one call
_step_values = operator.attrgetter(*_STEP_NAMES)
#: each slot's setter, in field order (slotted records: what the frozen __init__ sets)
_STEP_SETTERS = ([vars(StepRecord)[n].__set__ for n in _STEP_NAMES] if _SLOTTED else [])

STEP_COLUMNS = {
    "scenario": "scenario name",
    "path": "the subject (sampling path) that ran the step",
    "pass": "counted (under the guard) or timed (no interceptors)",
    "step": "decode step index (0-based, warm-up steps included)",
    "warmup": "True for warm-up steps (not counted, not in latency stats)",
    "batch_size": "requests in the batch at this step",
    "syncs": "hidden host syncs in the step (count)",
    "allowed": "allowed host syncs in the step (count; the token readback)",
    "latency_ms": "host time of the step up to its token readback, syncguard's own writing "
                  "excluded (ms)",
    "device_ms": "device time of the step from device events (ms; real devices only)",
    "sync_wait_us": "host time spent inside this step's hidden syncs (us, counted pass)",
    "rank": "distributed rank that wrote the step (empty outside torchrun)",
    "labels": "the subject's free-form per-step labels, as a JSON object, keys sorted (the "
              "case study's branch taken and host flag: {\"branch\": \"fused\", "
              "\"eligible\": true}; an exec loop's phase); empty when none",
    "round": "round of the timed pass (paths interleaved step by step; empty when counted)",
    "modeled_ms": "modeled step latency on the header's device profile (ms; simulated "
                  "device, counted pass)",
    "bubble_us": "modeled device idle time in the step (us; same)",
    "sync_cost_us": "modeled latency of the step's hidden syncs: modeled latency minus a "
                    "replay without them (us; same)",
    "sync_bubble_us": "modeled device idle caused by the step's hidden syncs (us; same)",
}

#: ``events_df`` columns from each event's ``lineage`` (``--lineage`` runs only): key -> column
LINEAGE_COLUMNS = {"verdict": "lineage_verdict", "roots": "lineage_roots", "ops": "lineage_ops",
                   "uploads": "lineage_uploads", "digest": "lineage_digest"}

EVENT_COLUMNS = {
    "scenario": "scenario name", "path": "the subject (sampling path)", "pass": "counted",
    "step": "decode step index", "kind": "sync kind (scalar_read, d2h_copy, ...)",
    "api": "Python-level entry (Tensor.__bool__, ...)", "op": "ATen op where known",
    "site": "file:line of the user code", "function": "function of that line",
    "count": "host syncs this event stands for", "allowed": "allowed (True) or hidden",
    "reason": "why it was allowed", "thread": "Python thread name",
    "wait_us": "time the host spent in the intercepted call (us; the sync's cost on hardware)",
    "after_step": "a sync outside every step (exec): the index of the step begun last before "
                  "it (empty for syncs inside a step)",
}


def _git(cwd: str, *args: str) -> Optional[str]:
    try:
        out = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def _git_commit(cwd: str) -> Optional[str]:
    return _git(cwd, "rev-parse", "HEAD") or None


def _git_dirty(cwd: str) -> Optional[bool]:
    """True when tracked files other than reports/ (outputs, possibly this run's own) differ
    from the commit (None outside a git checkout)."""
    top = _git(cwd, "rev-parse", "--show-toplevel")
    if top is None:
        return None
    out = _git(top, "status", "--porcelain", "--untracked-files=no", "--", ".",
               ":(exclude)reports")
    return None if out is None else bool(out)


def environment(device: str, device_name: str) -> Dict[str, Any]:
    """Versions and machine facts for a result header."""
    import torch

    from .._version import __version__

    here = PKG_DIR
    from ..standin import is_standin

    tnpu = sys.modules.get("torch_npu")
    tnpu_v = None
    if tnpu is not None and not is_standin(tnpu):
        tnpu_v = getattr(tnpu, "__version__", "unknown")
    try:
        user = getpass.getuser()
    except Exception:
        user = None
    return {
        "syncguard": __version__, "torch": torch.__version__, "torch_npu": tnpu_v,
        "python": platform.python_version(), "platform": platform.platform(),
        "machine": platform.machine(), "processor": platform.processor() or None,
        "cpu_count": os.cpu_count(), "host": socket.gethostname(), "user": user,
        "device": device, "device_name": device_name,
        "git_commit": _git_commit(here),
        "git_dirty": _git_dirty(here) if _git_commit(here) else None,
    }


def scenario_record(path: str, text: str) -> Dict[str, str]:
    return {"file": path, "sha256": hashlib.sha256(text.encode()).hexdigest(), "text": text}


class ResultWriter:
    """Streams a result file: every line is flushed as written (a finished step's lines
    together), so a killed process (SIGKILL, the OOM killer, a crash) leaves every finished
    step in the file: flushed bytes are the operating system's, not the process's.

    ``fsync`` (which also survives the machine going down, at the cost of a disk round trip:
    milliseconds, more on a loaded machine) is not paid per step: the file is fsync'ed when it
    is closed (the end of a run, and the stop sequence of Ctrl-C and SIGTERM, which closes
    it), on :meth:`sync`, and after a step when the last fsync is :attr:`SYNC_INTERVAL_S` or
    more ago. The writer keeps nothing of what it wrote."""

    #: the longest a finished step stays written but not fsync'ed while steps go on (s)
    SYNC_INTERVAL_S = 1.0
    #: the clock of :attr:`SYNC_INTERVAL_S` (seconds)
    clock = staticmethod(time.monotonic)

    def __init__(self, path: str, header: Dict[str, Any],
                 stream: Optional[IO[str]] = None,
                 events_per_site: Optional[int] = None) -> None:
        self.path = path
        #: how many of a site's events are written whole (None: all of them); the later ones
        #: are counted on their step's line (``reads``), so a long run's file and its loaded
        #: result grow by a few bytes per step, not by an event line
        self.events_per_site = events_per_site
        # site of an event -> [its ref, events of it written whole]
        self._refs: Dict[Tuple[Any, ...], List[int]] = {}
        #: the first write error (a full disk, a file-size limit): writing stopped there,
        #: every line before it kept; the caller reports it (:meth:`raise_error`)
        self.error: Optional[OSError] = None
        if stream is None:
            from ..core.atomic import claim

            # never through a symlink at path; locked while this writer has it open, so a
            # second run writing the same file is refused instead of interleaving its lines
            stream = os.fdopen(claim(path, force=True), "w", encoding="utf-8")
        self._f: Optional[IO[str]] = stream
        # each line goes to the file descriptor in one write (no text layer, nothing held in
        # a buffer between steps); a stream without one (a StringIO) is written and flushed
        self._fd: Optional[int] = _fileno(stream)
        # (scenario, path, pass, rank) -> the start of its step lines, encoded once
        # and of its event lines
        self._step_heads: Dict[Tuple[str, str, str, Optional[int]],
                               Tuple[str, Dict[str, Any]]] = {}
        # each distinct call stack encoded once: most of an event line, the same every step
        self._stacks: Dict[Tuple[Any, ...], str] = {}
        # the lineage trees written (by tree_id): each one once per file
        self._trees: Set[str] = set()
        self._write({"type": "header", "schema": SCHEMA, "created": time.time(), **header})
        self._synced = self.clock()

    #: one encoder for every line (``json.dumps`` with options builds one per call)
    _encoder = json.JSONEncoder(separators=(",", ":"), default=str, allow_nan=False)
    #: the same encoding, called straight (``JSONEncoder.encode`` sets up its C encoder again
    #: on each call; a step writes two lines): no circular check, the writer's lines are trees
    _encode_c = (None if _c_make_encoder is None else _c_make_encoder(
        None, str, json.encoder.encode_basestring_ascii, None, ":", ",", False, False, False))

    def _encode(self, obj: Any) -> str:
        if self._encode_c is not None:
            return "".join(self._encode_c(obj, 0))
        return self._encoder.encode(obj)

    def _line(self, obj: Dict[str, Any]) -> str:
        # never NaN or Infinity: not JSON, and the file is read back for the reports
        try:
            return self._encode(obj) + "\n"
        except ValueError:
            from ..core.untrusted import finite_json

            return self._encode(finite_json(obj)) + "\n"

    def _event_line(self, head: Dict[str, Any], ev: SyncEvent) -> str:
        """``head`` and ``ev``'s fields as one line, its ``stack`` last."""
        stack = self._stacks.get(ev.stack)
        if stack is None:
            if len(self._stacks) >= _STACKS_KEPT:
                self._stacks.clear()
            stack = self._stacks[ev.stack] = self._encode([fit.frame(f) for f in ev.stack])
        d = fit.event({**head, **ev.__dict__})  # the fields, in their order; as load reads
        del d["stack"]
        lin = d.get("lineage")
        if lin is None:  # off by default: results without lineage as they were
            d.pop("lineage", None)
        elif "tree" in lin and isinstance(lin.get("tree_id"), str):
            # each distinct lineage tree written once: the events after name it (tree_id)
            if lin["tree_id"] in self._trees:
                d["lineage"] = {k: v for k, v in lin.items() if k != "tree"}
            else:
                if len(self._trees) >= _STACKS_KEPT:
                    self._trees.clear()
                self._trees.add(lin["tree_id"])
        return f'{self._line(d)[:-2]},"stack":{stack}}}\n'

    def _write(self, obj: Dict[str, Any]) -> None:
        assert self._f is not None, "result writer is closed"
        self._put(self._line(obj))

    def _put(self, text: str) -> None:
        """Write and flush ``text`` (whole lines), unless writing has already failed."""
        assert self._f is not None, "result writer is closed"
        if self.error is not None:
            return
        try:
            fd = self._fd
            if fd is None:
                self._f.write(text)
                self._f.flush()
                return
            data = text.encode("utf-8")
            n = os.write(fd, data)
            while n < len(data):  # a short write (a signal, a nearly full disk): the rest
                data = data[n:]
                n = os.write(fd, data)
        except OSError as exc:  # never raised into the program being recorded
            self._failed(exc)

    def _failed(self, exc: OSError) -> None:
        """Stop writing at the first error: a line half written stays a torn last line,
        which :func:`load` ignores, so every line before it still reads."""
        self.error = exc

    def raise_error(self) -> None:
        """Raise the first write error as one :class:`~syncguard.core.atomic.OutputError`
        line naming the file (nothing when every line was written)."""
        if self.error is not None:
            from ..core.atomic import write_error

            raise write_error(self.path, self.error)

    def sync(self) -> None:
        """fsync the file now (what was written survives the machine going down too); an
        error is kept as a write error (:meth:`raise_error`), never raised here."""
        self._synced = self.clock()
        if self._f is None or self.error is not None:
            return
        try:
            self._f.flush()
            os.fsync(self._f.fileno())
        except OSError as exc:
            self._failed(exc)

    def _read(self, head: Dict[str, Any], ev: SyncEvent, at: Optional[int],
              lines: List[str], reads: List[str],
              prefix: Optional[Tuple[Any, ...]] = None) -> None:
        """``ev`` as a whole event line (into ``lines``) while its site has had fewer than
        :attr:`events_per_site` of them, else as a read of that site (into ``reads``:
        ``[ref, at, count, wait_us, warmup]``, ``at`` the step, or ``after_step`` outside
        steps). An event with its lineage is always written whole: each carries its own.
        ``prefix``: ``head``'s scenario, path, pass and rank, when the caller has them."""
        if self.events_per_site is None or ev.lineage is not None:
            lines.append(self._event_line(head, ev))
            return
        if prefix is None:
            prefix = (head["scenario"], head["path"], head["pass"], head.get("rank"))
        key = prefix + _site_of(ev)
        ref = self._refs.get(key)
        if ref is None:
            ref = self._refs[key] = [len(self._refs), 0]
        if ref[1] < self.events_per_site:
            ref[1] += 1
            lines.append(self._event_line({**head, "ref": ref[0]}, ev))
        else:  # as JSON text: a step line's reads are written with it, as they come
            w = ev.wait_us
            reads.append(f'[{ref[0]:d},{"null" if at is None else int(at)},{int(ev.count)},'
                         f'{_ns(w, _US)},{"true" if ev.warmup else "false"}]')

    def step(self, rec: StepRecord, events: List[SyncEvent]) -> None:
        """One finished step with its events: the events first, so a step line always has
        its events above it; written and flushed together."""
        assert self._f is not None, "result writer is closed"
        extra = {} if rec.rank is None else {"rank": rec.rank}
        head = {"type": "event", "scenario": rec.scenario, "path": rec.path,
                "pass": rec.pass_, **extra}
        lines: List[str] = []
        reads: List[str] = []
        for ev in events:
            self._read(head, ev, ev.step, lines, reads)
        # the fields that hold a value (a missing optional field reads as null): an exec
        # step leaves nine of them empty, and each step line is encoded on the program's clock
        d: Dict[str, Any] = {"type": "step"}
        for k, v in zip(_STEP_KEYS, _step_values(rec)):
            if v is not None or k == "latency_ms":
                d[k] = v
        text = self._line(d)
        if reads:
            text = text[:-2] + ',"reads":[' + ",".join(reads) + "]}\n"
        lines.append(text)
        self._put_step("".join(lines))

    def exec_reads(self, scenario: str, path: str, pass_: str, step: int, warmup: bool,
                   syncs: int, allowed: int, latency_ms: float, device_ms: Optional[float],
                   wait_us: float, labels: Optional[Dict[str, Any]], rank: Optional[int],
                   reads: Sequence[Read]) -> None:
        """:meth:`exec_step` of the events the step's ``reads`` stand for."""
        self.exec_step(scenario, path, pass_, step, warmup, syncs, allowed, latency_ms,
                       device_ms, wait_us, labels, rank,
                       [site.at(step, w, warmup, lin) for site, w, lin in reads])

    def exec_step(self, scenario: str, path: str, pass_: str, step: int, warmup: bool,
                  syncs: int, allowed: int, latency_ms: float, device_ms: Optional[float],
                  wait_us: float, labels: Optional[Dict[str, Any]], rank: Optional[int],
                  events: Sequence[SyncEvent]) -> None:
        """One finished ``exec`` step, as :meth:`step` writes the record
        ``StepRecord.from_events`` makes of these values (``batch_size`` 0, no tokens, round
        or modeled fields) but formatted straight into its line: this runs once per step on
        the program's clock. Times are written to the nanosecond (``latency_ms`` and
        ``device_ms`` with 6 decimals, ``wait_us`` and each read's wait with 3), the
        resolution of the clock that took them."""
        assert self._f is not None, "result writer is closed"
        lines: List[str] = []
        reads: List[str] = []
        key = (scenario, path, pass_, rank)
        heads = self._step_heads.get(key)
        if heads is None:
            heads = self._step_heads[key] = (self._line(
                {"type": "step", "scenario": fit.text(scenario), "path": fit.text(path),
                 "pass": fit.text(pass_)})[:-2],
                {"type": "event", "scenario": scenario, "path": path, "pass": pass_,
                 **({} if rank is None else {"rank": rank})})
        for ev in events:
            self._read(heads[1], ev, step, lines, reads, key)
        # built in one piece: this runs after the model's work has left it uncached, where
        # every extra step of building costs the program's step several times its own
        # instructions (benchmarks/bench_exec_paired.py)
        dev = "" if device_ms is None else ',"device_ms":' + _ns(device_ms, _MS)
        lab = "" if labels is None else ',"labels":' + self._line(labels)[:-1]
        rk = "" if rank is None else f',"rank":{rank:d}'
        rd = ',"reads":[' + ",".join(reads) + "]" if reads else ""
        lines.append(
            f'{heads[0]},"step":{step:d},"warmup":{"true" if warmup else "false"},'
            f'"batch_size":0,"syncs":{syncs:d},"allowed":{allowed:d},'
            f'"latency_ms":{_ns(latency_ms, _MS)}{dev},"sync_wait_us":{_ns(wait_us, _US)}'
            f'{lab}{rk}{rd}}}\n')
        self._put_step("".join(lines))

    def _put_step(self, text: str) -> None:
        """A finished step's lines, written together; fsync'ed when the last fsync is
        :attr:`SYNC_INTERVAL_S` or more ago."""
        self._put(text)
        if self.error is None and self.clock() - self._synced >= self.SYNC_INTERVAL_S:
            self.sync()

    def events(self, scenario: str, path: str, pass_: str, events: List[SyncEvent],
               rank: Optional[int] = None,
               after: Optional[List[Optional[int]]] = None) -> None:
        """Events that belong to no step record (``exec``: syncs outside every step, each
        with ``after_step``, the step begun last before it, from ``after``); those of a site
        past :attr:`events_per_site` on one ``reads`` line."""
        extra: Dict[str, Any] = {} if rank is None else {"rank": rank}
        lines: List[str] = []
        reads: List[str] = []
        for i, ev in enumerate(events):
            at = None if after is None else after[i]
            if after is not None:
                extra["after_step"] = at
            self._read({"type": "event", "scenario": scenario, "path": path, "pass": pass_,
                        **extra}, ev, at, lines, reads)
        if reads:
            lines.append('{"type":"reads","reads":[' + ",".join(reads) + "]}\n")
        self._put("".join(lines))

    def timeline(self, fields: Dict[str, Any]) -> None:
        """The modeled device timeline of one step (:mod:`syncguard.model.timeline`)."""
        self._write({"type": "timeline", **fields})

    def note(self, **fields: Any) -> None:
        self._write({"type": "note", **fields})

    def close(self, complete: bool, **fields: Any) -> None:
        if self._f is None:
            return
        self._write({"type": "footer", "complete": complete, "finished": time.time(), **fields})
        self.sync()  # an error: kept as the write error
        try:
            self._f.close()
        except OSError as exc:
            if self.error is None:
                self._failed(exc)
        self._f = None


#: what tells one site's events apart in a result file, besides scenario, path, pass and rank
_site_of = operator.attrgetter("kind", "api", "op", "filename", "lineno", "function", "stack",
                               "thread", "allowed", "reason", "device", "source")


def _fileno(stream: Any) -> Optional[int]:
    """The file descriptor under ``stream``, when it has one (None for a StringIO)."""
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):
        return None
    return fd if isinstance(fd, int) else None


#: times in milliseconds and in microseconds, each to the nanosecond
_MS, _US = "%.6f", "%.3f"


def _ns(v: Optional[float], fmt: str) -> str:
    """A time as a JSON number in format ``fmt`` (:data:`_MS`, :data:`_US`); ``null`` for
    None, NaN or an infinity, which JSON cannot hold."""
    if v is None or not math.isfinite(v):
        return "null"
    return fmt % v


class Reads:
    """The syncs a result file counted on its step (and ``reads``) lines instead of writing
    each as an event: per read, the index in :attr:`RunResult.events` of its site's first
    event, its step (``after_step`` outside steps; -1 for none), count, wait (NaN for none)
    and warm-up flag. Columns of machine numbers: a read costs about 25 bytes loaded."""

    __slots__ = ("event", "at", "count", "wait", "warmup")

    def __init__(self) -> None:
        self.event = array.array("q")
        self.at = array.array("q")
        self.count = array.array("q")
        self.wait = array.array("d")
        self.warmup = array.array("b")

    def __len__(self) -> int:
        return len(self.event)

    def add(self, event: int, at: Optional[int], count: int, wait: Optional[float],
            warmup: bool) -> None:
        self.event.append(event)
        self.at.append(-1 if at is None else at)
        self.count.append(count)
        self.wait.append(math.nan if wait is None else wait)
        self.warmup.append(1 if warmup else 0)

    def extend(self, other: Reads, offset: int) -> None:
        """``other``'s reads, their events ``offset`` further on (results merged)."""
        self.event.extend(i + offset for i in other.event)
        self.at.extend(other.at)
        self.count.extend(other.count)
        self.wait.extend(other.wait)
        self.warmup.extend(other.warmup)

    def rows(self) -> Iterator[List[Any]]:
        """The reads as a document writes them, one at a time: ``[event, at, count,
        wait_us, warmup]``."""
        return ([e, None if a < 0 else a, c, None if w != w else w, bool(u)]
                for e, a, c, w, u in zip(self.event, self.at, self.count, self.wait,
                                         self.warmup))


@dataclasses.dataclass
class RunResult:
    """A loaded result: header, steps and events in file order."""

    header: Dict[str, Any]
    steps: List[StepRecord]
    events: List[Dict[str, Any]]
    footer: Optional[Dict[str, Any]]
    notes: List[Dict[str, Any]] = dataclasses.field(default_factory=list)
    source: str = ""
    #: modeled device timeline per counted step (simulated device; syncguard.model.timeline)
    timelines: List[Dict[str, Any]] = dataclasses.field(default_factory=list)
    #: the syncs written as counts, not as event lines (a site past the writer's
    #: ``events_per_site``): ``events`` is then a sample, :meth:`iter_events` every sync
    reads: Reads = dataclasses.field(default_factory=lambda: Reads())

    def iter_events(self) -> Iterator[Dict[str, Any]]:
        """Every sync event of the run: :attr:`events`, then one event per read counted on a
        step line (:attr:`reads`), made as it is asked for: its site's first event with its
        own step (or ``after_step``), count, wait and warm-up. The counts and sites of every
        report come from here; the event tables (``events.csv``, the trace) show
        :attr:`events`."""
        events = self.events
        yield from events
        r = self.reads
        for i in range(len(r)):
            d = dict(events[r.event[i]])
            d.pop("ref", None)
            at: Optional[int] = r.at[i] if r.at[i] >= 0 else None
            if d.get("step") is None:
                d["after_step"] = at
            else:
                d["step"] = at
            w = r.wait[i]
            d["count"], d["wait_us"], d["warmup"] = r.count[i], (None if w != w else w), bool(
                r.warmup[i])
            yield d

    @property
    def sampled(self) -> bool:
        """Whether :attr:`events` is a sample: some syncs were written as counts only."""
        return len(self.reads) > 0

    @property
    def complete(self) -> bool:
        return bool(self.footer and self.footer.get("complete"))

    @property
    def scenarios(self) -> List[str]:
        return list(dict.fromkeys(s.scenario for s in self.steps))

    @property
    def paths(self) -> List[str]:
        return list(dict.fromkeys(s.path for s in self.steps))

    def steps_df(self) -> pd.DataFrame:
        """One row per step record; columns and units in :data:`STEP_COLUMNS`."""
        import pandas as pd

        # column by column, each list freed once it is a column: a long run's steps are not
        # made into a dict each
        df = pd.DataFrame(index=pd.RangeIndex(len(self.steps)))
        for col in STEP_COLUMNS:
            attr = "pass_" if col == "pass" else col
            values = [getattr(r, attr) for r in self.steps]
            if col == "labels":
                values = [None if v is None else json.dumps(v, sort_keys=True, default=str)
                          for v in values]
            df[col] = pd.Series(values, index=df.index, dtype=None if values else object)
        return df

    def events_df(self) -> pd.DataFrame:
        """One row per sync event; columns in :data:`EVENT_COLUMNS` (plus ``lineno`` and
        ``filename``)."""
        import pandas as pd

        rows = []
        for e in self.events:
            rows.append({**{k: e.get(k) for k in EVENT_COLUMNS if k != "site"},
                         "site": f"{e.get('filename')}:{e.get('lineno')}",
                         "filename": e.get("filename"), "lineno": e.get("lineno")})
        df = pd.DataFrame(rows, columns=[*EVENT_COLUMNS, "filename", "lineno"])
        for col in ("step", "after_step"):  # integers with gaps: not floats ("3.0")
            df[col] = df[col].astype("Int64")
        if any(isinstance(e.get("lineage"), dict) for e in self.events):  # --lineage runs only
            for key, col in LINEAGE_COLUMNS.items():
                df[col] = [str(e["lineage"].get(key, "")) if isinstance(e.get("lineage"), dict)
                           else "" for e in self.events]
        return df

    def write_json(self, f: IO[str]) -> None:
        """Write the whole result as one JSON document to ``f``, one step or event per line,
        without building the document in memory (a 10k-step run stays flat)."""
        from ..core.untrusted import finite_json

        plain = json.JSONEncoder(default=str, separators=(",", ":"), allow_nan=False)

        class _Enc:  # NaN/Infinity become null: result.json stays JSON
            @staticmethod
            def encode(o: Any) -> str:
                try:
                    return plain.encode(o)
                except ValueError:
                    return plain.encode(finite_json(o))

        enc = _Enc()

        def seq(items: Iterable[Any]) -> None:
            first = True
            for it in items:
                f.write("\n " if first else ",\n ")
                f.write(enc.encode(it))
                first = False
            f.write("\n]" if not first else "]")

        f.write('{"header": ' + enc.encode(self.header) + ',\n"steps": [')
        seq(s.to_dict() for s in self.steps)
        f.write(',\n"events": [')
        seq({k: v for k, v in e.items() if k != "ref"} for e in self.events)
        if len(self.reads):  # [event index, at, count, wait_us, warmup]
            f.write(',\n"reads": [')
            seq(self.reads.rows())
        f.write(',\n"notes": [')
        seq(self.notes)
        f.write(',\n"timelines": [')
        seq(self.timelines)
        f.write(',\n"footer": ' + enc.encode(self.footer) + "}")

    def to_json(self) -> str:
        """The whole result as one JSON document (same content as the JSON Lines file)."""
        buf = io.StringIO()
        self.write_json(buf)
        return buf.getvalue()


# -- loading: every field the reports read is checked -----------------------------------------
_MISSING = object()
_INT_MAX = 2 ** 53  # beyond this a count or index is no longer exact in pandas/JSON tools


def _is_int(v: Any) -> bool:
    return type(v) is int and 0 <= v <= _INT_MAX


def _is_num(v: Any) -> bool:
    t = type(v)
    return (t is float and math.isfinite(v) and abs(v) <= 1e300) or (
        t is int and abs(v) <= _INT_MAX)


def _is_str(v: Any) -> bool:
    return type(v) is str and len(v) <= 4096


def _is_ints(v: Any) -> bool:
    # C-level passes over a step's tokens: a 60k-step result loads without a Python loop each
    return type(v) is list and (not v or (set(map(type, v)) == {int} and min(v) >= 0
                                          and max(v) <= _INT_MAX))


_CHECKS = {
    "int": (_is_int, "an integer >= 0"),
    "num": (_is_num, "a finite number"),
    "str": (_is_str, "a string (at most 4096 characters)"),
    "bool": (lambda v: type(v) is bool, "true or false"),
    "ints": (_is_ints, "a list of integers >= 0"),
    "list": (lambda v: type(v) is list, "a list"),
    "dict": (lambda v: type(v) is dict, "a JSON object"),
    # a file name: a string a path can be (no NUL byte, which no file name holds)
    "path": (lambda v: _is_str(v) and "\x00" not in v,
             "a file name (a string of at most 4096 characters, no NUL byte)"),
}

#: field -> (check, required, None allowed)
_STEP_FIELDS: Dict[str, Tuple[str, bool, bool]] = {
    "scenario": ("str", True, False), "path": ("str", True, False),
    "pass": ("str", True, False), "step": ("int", True, False),
    "warmup": ("bool", True, False), "batch_size": ("int", True, False),
    "syncs": ("int", True, False),
    "allowed": ("int", True, False), "latency_ms": ("num", True, True),
    "device_ms": ("num", False, True),
    # results written before labels held them (moved into labels when read)
    "branch": ("str", False, False), "eligible": ("bool", False, True),
    "tokens": ("ints", False, True), "sync_wait_us": ("num", False, True),
    "labels": ("dict", False, True), "rank": ("int", False, True),
    "round": ("int", False, True), "modeled_ms": ("num", False, True),
    "bubble_us": ("num", False, True), "sync_cost_us": ("num", False, True),
    "sync_bubble_us": ("num", False, True), "reads": ("list", False, False),
}
#: every field a reader of an event meets, as :class:`~syncguard.core.events.SyncEvent` has it:
#: the fields it requires are required here (a crafted line without ``thread`` or ``lineno``
#: is refused by the loader, never met later as a KeyError or a TypeError); the optional ones
#: missing are given their :class:`SyncEvent` default (:data:`_EVENT_DEFAULTS`)
_EVENT_FIELDS: Dict[str, Tuple[str, bool, bool]] = {
    "scenario": ("str", True, False), "path": ("str", True, False),
    "pass": ("str", False, True), "kind": ("str", True, False), "api": ("str", True, False),
    "op": ("str", False, True), "filename": ("path", True, False),
    "lineno": ("int", True, False), "function": ("str", True, False),
    "stack": ("list", False, False), "step": ("int", False, True),
    "thread": ("str", False, False), "allowed": ("bool", False, False),
    "reason": ("str", False, True), "warmup": ("bool", False, False),
    "count": ("int", False, False), "device": ("str", False, True),
    "source": ("str", False, True), "wait_us": ("num", False, True),
    "rank": ("int", False, True), "after_step": ("int", False, True),
    "lineage": ("dict", False, True), "ref": ("int", False, False),
}
#: the optional event fields a reader may rely on, with the value a missing one stands for
_EVENT_DEFAULTS: Dict[str, Any] = {
    "pass": None, "op": None, "stack": [], "step": None, "thread": "", "allowed": False,
    "reason": None,
    "warmup": False, "count": 1, "device": None, "source": None, "wait_us": None,
}
#: a modeled timeline line (:mod:`syncguard.model.timeline`) and each of its syncs
_TIMELINE_FIELDS: Dict[str, Tuple[str, bool, bool]] = {
    "scenario": ("str", True, False), "path": ("str", True, False),
    "step": ("int", True, False), "warmup": ("bool", False, True),
    "latency_us": ("num", True, False), "busy_us": ("num", True, False),
    "bubble_us": ("num", True, False), "hidden_cost_us": ("num", False, True),
    "syncs": ("list", False, False), "spans": ("list", False, False),
    "shapes": ("list", False, True),
}
_TIMELINE_SYNC_FIELDS: Dict[str, Tuple[str, bool, bool]] = {
    "host_us": ("num", True, False), "drain_us": ("num", True, False),
    "resume_us": ("num", True, False), "stall_us": ("num", False, True),
    "bubble_us": ("num", False, True), "index": ("int", False, True),
    "op": ("str", False, True), "site": ("str", False, True), "api": ("str", False, True),
    "allowed": ("bool", False, True),
}


_JSON_TYPES: Dict[str, Dict[str, Any]] = {
    "int": {"type": "integer", "minimum": 0, "maximum": _INT_MAX},
    "num": {"type": "number", "minimum": -1e300, "maximum": 1e300},
    "str": {"type": "string", "maxLength": 4096},
    "path": {"type": "string", "maxLength": 4096, "pattern": "^[^\\u0000]*$"},
    "bool": {"type": "boolean"},
    "ints": {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": _INT_MAX}},
    "list": {"type": "array"},
    "dict": {"type": "object"},
}


def _json_object(fields: Dict[str, Tuple[str, bool, bool]], **extra: Any) -> Dict[str, Any]:
    props: Dict[str, Any] = {}
    for key, (check, _, nullable) in fields.items():
        t = dict(_JSON_TYPES[check])
        props[key] = {"anyOf": [t, {"type": "null"}]} if nullable else t
    return {"type": "object", "properties": props,
            "required": sorted(k for k, (_, req, _) in fields.items() if req), **extra}


def json_schema() -> Dict[str, Any]:
    """The result line schema the loader enforces, as a JSON Schema (draft 7) of one line of
    ``result.jsonl``: built from the loader's own field tables, so the two never differ
    (``syncguard/results/schemas/result-line-1.json`` is this, written out; a test keeps it
    so). Other tools may validate results with it."""
    return {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "$id": "https://github.com/syncguard/syncguard/result-line-1.json",
        "title": f"syncguard result line (schema {SCHEMA})",
        "oneOf": [
            {"type": "object", "required": ["type", "schema"],
             "properties": {"type": {"enum": ["header"]}, "schema": {"enum": [SCHEMA]}}},
            _json_object(_STEP_FIELDS, allOf=[{"properties": {"type": {"enum": ["step"]}},
                                               "required": ["type"]}]),
            _json_object(_EVENT_FIELDS, allOf=[{"properties": {"type": {"enum": ["event"]}},
                                                "required": ["type"]}]),
            _json_object(_TIMELINE_FIELDS, allOf=[{"properties": {
                "type": {"enum": ["timeline"]},
                "syncs": {"type": "array", "items": _json_object(_TIMELINE_SYNC_FIELDS)}},
                "required": ["type"]}]),
            {"type": "object", "required": ["type", "reads"],
             "properties": {"type": {"enum": ["reads"]}, "reads": {"type": "array"}}},
            {"type": "object", "required": ["type"],
             "properties": {"type": {"enum": ["note", "footer"]}}},
        ],
    }


def _compile(fields: Dict[str, Tuple[str, bool, bool]]) -> List[Tuple[str, Any, bool, bool]]:
    return [(k, _CHECKS[c][0], req, null) for k, (c, req, null) in fields.items()]


_COMPILED: Dict[int, List[Tuple[str, Any, bool, bool]]] = {}


def _check_fields(where: str, what: str, obj: Any,
                  fields: Dict[str, Tuple[str, bool, bool]]) -> Dict[str, Any]:
    if not isinstance(obj, dict):
        raise ResultError(f"{where}: {what} must be a JSON object, got {type(obj).__name__}")
    spec = _COMPILED.get(id(fields))
    if spec is None:
        spec = _COMPILED[id(fields)] = _compile(fields)
    get = obj.get
    for key, ok, required, nullable in spec:
        v = get(key, _MISSING)
        if v is _MISSING:
            if required:
                raise ResultError(f"{where}: {what}.{key}: missing")
        elif not ok(v) and not (v is None and nullable):
            want = _CHECKS[fields[key][0]][1]
            shown = json.dumps(v)[:60] if not isinstance(v, float) else repr(v)
            raise ResultError(f"{where}: {what}.{key}: must be {want}"
                              f"{' or null' if nullable else ''}, got {shown}")
    return obj


_FRAME_KEYS = {"filename", "lineno", "function"}


def _event(where: str, obj: Any) -> Dict[str, Any]:
    """An event line checked like :func:`_check_fields`, and its ``stack`` frame by frame
    (each ``{"filename": str, "lineno": int, "function": str}`` and an optional
    ``"qualname": str``, as ``SyncEvent`` reads it)."""
    ev = _check_fields(where, "event", obj, _EVENT_FIELDS)
    for key, default in _EVENT_DEFAULTS.items():
        if key not in ev:
            ev[key] = list(default) if isinstance(default, list) else default
    for i, fr in enumerate(ev.get("stack") or ()):
        if not (type(fr) is dict and set(fr) - {"qualname"} == _FRAME_KEYS
                and _CHECKS["path"][0](fr["filename"]) and _is_int(fr["lineno"])
                and _is_str(fr["function"]) and _is_str(fr.get("qualname", ""))):
            raise ResultError(f"{where}: event.stack[{i}]: must be an object with filename "
                              f"(a string), lineno (an integer >= 0), function (a string) "
                              f"and optionally qualname (a string)")
    return ev


def _reads(where: str, what: str, rows: Any, refs: Dict[int, int], reads: Reads) -> None:
    """Check the reads ``rows`` (``[ref, at, count, wait_us, warmup]`` each) and add them to
    ``reads``; ``refs`` maps a ref to its site's first event (index in the events)."""
    if type(rows) is not list:
        raise ResultError(f"{where}: {what}: must be a list")
    for i, row in enumerate(rows):
        if not (type(row) is list and len(row) == 5 and _is_int(row[0])
                and (row[1] is None or _is_int(row[1])) and _is_int(row[2])
                and (row[3] is None or _is_num(row[3])) and type(row[4]) is bool):
            raise ResultError(f"{where}: {what}[{i}]: must be [ref, step, count, wait_us, "
                              f"warmup] (an integer >= 0, an integer >= 0 or null, an "
                              f"integer >= 0, a number or null, true or false)")
        event = refs.get(row[0])
        if event is None:
            raise ResultError(f"{where}: {what}[{i}]: ref {row[0]} names no event written "
                              f"above it")
        reads.add(event, row[1], row[2], row[3], row[4])


def _step(where: str, obj: Any) -> StepRecord:
    d = _check_fields(where, "step", obj, _STEP_FIELDS)
    return StepRecord.from_dict(d)


def _check_header(where: str, header: Any) -> Dict[str, Any]:
    if not isinstance(header, dict):
        raise ResultError(f"{where}: header: must be a JSON object: not a syncguard result")
    if header.get("schema") != SCHEMA:
        raise ResultError(f"{where}: header.schema: {json.dumps(header.get('schema'))[:40]} "
                          f"is not {SCHEMA}")
    return header


def _version_tuple(v: Any) -> Optional[Tuple[int, ...]]:
    m = re.match(r"(\d+(?:\.\d+)*)", str(v)) if isinstance(v, str) else None
    return tuple(int(x) for x in m.group(1).split(".")[:4]) if m else None


def _warn_if_newer(path: str, header: Dict[str, Any]) -> None:
    """A :class:`ResultWarning` when the file names a newer syncguard than this one."""
    from .._version import __version__

    env = header.get("env")
    theirs = header.get("syncguard") or (env.get("syncguard") if isinstance(env, dict) else None)
    a, b = _version_tuple(theirs), _version_tuple(__version__)
    if a is None or b is None:
        return
    n = max(len(a), len(b))
    if a + (0,) * (n - len(a)) > b + (0,) * (n - len(b)):
        warnings.warn(ResultWarning(
            f"{path}: written by syncguard {str(theirs)[:40]}, newer than this one "
            f"({__version__}); fields it added are ignored: upgrade syncguard to read it "
            f"fully"), stacklevel=3)


def _load_document(path: str, f: IO[str]) -> RunResult:
    """A ``result.json`` document (:meth:`RunResult.write_json`)."""
    try:
        doc = json.load(f)
    except json.JSONDecodeError as exc:
        raise ResultError(f"{path}:{exc.lineno}: not a JSON document: {exc.msg}") from None
    header = doc.get("header") if isinstance(doc, dict) else None
    if not isinstance(header, dict):
        raise ResultError(f"{path}: header: missing: not a syncguard result")
    _check_header(path, header)
    parts = {}
    for key in ("steps", "events", "notes"):
        parts[key] = doc.get(key)
        if parts[key] is None:
            parts[key] = []
        if not isinstance(parts[key], list):
            raise ResultError(f"{path}: {key}: must be a JSON array")
    steps = [_step(f"{path}: steps[{i}]", d) for i, d in enumerate(parts["steps"])]
    events = [_event(f"{path}: events[{i}]", e) for i, e in enumerate(parts["events"])]
    for i, n in enumerate(parts["notes"]):
        if not isinstance(n, dict):
            raise ResultError(f"{path}: notes[{i}]: must be a JSON object")
        _note(f"{path}: notes[{i}]", n)
    footer = doc.get("footer")
    if footer is not None and not isinstance(footer, dict):
        raise ResultError(f"{path}: footer: must be a JSON object or null")
    timelines = doc.get("timelines") or []
    if not isinstance(timelines, list):
        raise ResultError(f"{path}: timelines: must be a JSON array")
    tls = [_timeline(t, f"{path}: timelines[{i}]") for i, t in enumerate(timelines)]
    reads = Reads()
    rows = doc.get("reads")
    if rows is not None:  # a read names its site's first event by its index in events
        _reads(path, "reads", rows, {i: i for i in range(len(events))}, reads)
    return RunResult(header, steps, events, footer, list(parts["notes"]), path, tls, reads)


_RANK_NAME = re.compile(r"result\.rank(.*)\.jsonl", re.DOTALL)
_CANONICAL_RANK = re.compile(r"0|[1-9][0-9]{0,5}", re.ASCII)


def rank_name(rank: int) -> str:
    """The one file name of rank ``rank``'s result: ``result.rank<N>.jsonl``, N in ASCII
    digits without leading zeros."""
    return f"result.rank{rank}.jsonl"


def rank_files(folder: str) -> List[Tuple[int, str]]:
    """``(rank, path)`` of the per-rank results ``result.rank<N>.jsonl`` in ``folder``, by
    rank. Raises :class:`ResultError` naming the file for a name that is not the canonical
    one of its rank (``result.rank00.jsonl``, non-ASCII digits: they would merge as one rank,
    counted twice)."""
    out = []
    for name in sorted(os.listdir(folder)):
        m = _RANK_NAME.fullmatch(name)
        if m is None:
            continue
        if not _CANONICAL_RANK.fullmatch(m.group(1)):
            from .._escape import terminal

            raise ResultError(f"{os.path.join(folder, terminal(name))}: not a rank file name "
                              f"syncguard writes (result.rank<N>.jsonl, N in ASCII digits "
                              f"without leading zeros): rename or remove it")
        out.append((int(m.group(1)), os.path.join(folder, name)))
    return sorted(out)


def check_ranks(folder: str, parts: List[Tuple[int, RunResult]]) -> None:
    """Refuse (:class:`ResultError` naming the files) per-rank results that are not one run:
    a world size that differs between them or from the ranks found, or different programs
    (stale files of an earlier run left in ``folder``)."""
    def where(rank: int) -> str:
        return os.path.join(folder, rank_name(rank))

    def exec_field(res: RunResult, key: str) -> Any:
        ex = res.header.get("exec")
        return ex.get(key) if isinstance(ex, dict) else None

    first_rank, first = parts[0]
    for rank, res in parts[1:]:
        for key, what in (("world_size", "world size"), ("program", "program")):
            a, b = exec_field(first, key), exec_field(res, key)
            if a != b:
                raise ResultError(f"{where(rank)}: {what} {str(b)[:80]!r} differs from "
                                  f"{where(first_rank)} ({str(a)[:80]!r}): rank files of two "
                                  f"runs in one folder; remove the stale ones or rerun with "
                                  f"--force")
    world = exec_field(first, "world_size")
    try:
        n = int(world) if world is not None else None
    except (TypeError, ValueError):
        n = None
    ranks = [r for r, _ in parts]
    if n is not None and ranks != list(range(n)):
        extra = [r for r in ranks if r >= n]
        if extra:
            raise ResultError(f"{where(extra[0])}: rank {extra[0]} in a world of {n} (the "
                              f"world size the rank files record): a stale file of an "
                              f"earlier run; remove it or rerun with --force")
        missing = sorted(set(range(n)) - set(ranks))
        raise ResultError(f"{folder}: rank {missing[0]} of a world of {n} has no "
                          f"{rank_name(missing[0])}")


class _Merged:
    """Results merged into one, each added result's scenarios named ``<name> [<tag>]`` (a row
    per rank or process in every table), ``fields`` set on its steps, events and timelines
    and ``note_fields`` on its notes; a result added with no tag keeps its own names."""

    def __init__(self) -> None:
        self.steps: List[StepRecord] = []
        self.events: List[Dict[str, Any]] = []
        self.notes: List[Dict[str, Any]] = []
        self.timelines: List[Dict[str, Any]] = []
        self.reads = Reads()

    def add(self, res: RunResult, tag: Optional[str] = None,
            fields: Optional[Dict[str, Any]] = None,
            note_fields: Optional[Dict[str, Any]] = None) -> None:
        self.reads.extend(res.reads, len(self.events))  # reads name events by their index
        if tag is None:
            self.steps += res.steps
            self.events += res.events
            self.notes += res.notes
            self.timelines += res.timelines
            return
        more, note_more = fields or {}, note_fields or {}
        self.steps += [dataclasses.replace(s, scenario=f"{s.scenario} [{tag}]", **more)
                       for s in res.steps]
        self.events += [{**e, "scenario": f"{e.get('scenario')} [{tag}]", **more}
                        for e in res.events]
        self.notes += [{**n, **note_more} for n in res.notes]
        self.timelines += [{**t, "scenario": f"{t.get('scenario')} [{tag}]", **more}
                           for t in res.timelines]

    def result(self, header: Dict[str, Any], footer: Optional[Dict[str, Any]],
               source: str) -> RunResult:
        return RunResult(header, self.steps, self.events, footer, self.notes, source,
                         self.timelines, self.reads)


def merge_ranks(parts: List[Tuple[int, RunResult]], source: str) -> RunResult:
    """One result from per-rank results: each rank's scenarios become ``<name> [rank N]``
    (so every table gets a row per rank), steps and events keep their ``rank``."""
    merged = _Merged()
    for rank, res in parts:
        merged.add(res, f"rank {rank}", {"rank": rank}, {"rank": rank})
    header = dict(parts[0][1].header)
    header["ranks"] = [r for r, _ in parts]
    complete = all(res.complete for _, res in parts)
    return merged.result(header, {"type": "footer", "complete": complete}, source)


#: the folder, beside a followed run's ``result.jsonl``, of its processes' parts
#: (syncguard.execute.follow.PARTS)
PARTS_DIR = "processes"
_PART_NAME = re.compile(r"([0-9a-f]{12})-([1-9][0-9]{0,9})\.jsonl", re.ASCII)


#: multiprocessing's own names (``Process-1``, ``SpawnProcess-2:1``): a label says the target
_DEFAULT_PROCESS_NAME = re.compile(r"[A-Za-z]*Process-[0-9]+(:[0-9]+)*")


def process_label(info: Dict[str, Any]) -> str:
    """How reports name a followed process: its target function (with the process's name
    when the program gave it one), else its script, and its pid: ``decode_worker pid 4242``,
    ``VllmWorker-0: WorkerProc.worker_main pid 4243``."""
    from .._escape import one_line

    target, name = info.get("target"), info.get("name")
    if target and name and not _DEFAULT_PROCESS_NAME.fullmatch(str(name)):
        who = f"{str(name)[:40]}: {str(target)[:80]}"  # VllmWorker-0: WorkerProc.worker_main
    else:
        who = str(target or name or "process")[:80]
    return one_line(f"{who} pid {info.get('pid')}")


def process_parts(folder: str, run: str) -> List[Tuple[Dict[str, Any], RunResult]]:
    """The parts of followed run ``run`` in ``folder/processes`` (its processes' own results,
    :mod:`syncguard.execute.follow`), by pid: ``(process info, result)``. Files of other runs
    are not this run's and are left alone; a part of this run that is not a result, or that
    names another run or pid, is an error naming the file."""
    where = os.path.join(folder, PARTS_DIR)
    try:
        names = sorted(os.listdir(where))
    except (FileNotFoundError, NotADirectoryError):
        return []
    out = []
    for name in names:
        m = _PART_NAME.fullmatch(name)
        if m is None or m.group(1) != run:
            continue
        res = load(os.path.join(where, name))
        info = res.header.get("process")
        if (not isinstance(info, dict) or info.get("run") != run
                or info.get("pid") != int(m.group(2))):
            raise ResultError(f"{os.path.join(where, name)}: header.process: not the part of "
                              f"process {m.group(2)} of run {run}")
        out.append((info, res))
    return sorted(out, key=lambda p: int(p[0]["pid"]))


def merge_processes(root: RunResult, parts: List[Tuple[Dict[str, Any], RunResult]]
                    ) -> RunResult:
    """One result from a followed run's root and its processes' parts: each part's scenarios
    become ``<name> [<process label>]`` (a row per process in every table), its steps and
    events keep their own. Complete when every process's part is; ``header["processes"]``
    says, per process, its label, pid, whether it ended whole and why not, its steps, and
    whether it used the device."""
    merged = _Merged()
    merged.add(root)
    procs = []
    for info, res in parts:
        tag = process_label(info)
        merged.add(res, tag, note_fields={"process": tag})
        footer = res.footer or {}
        procs.append({"label": tag, "pid": info.get("pid"), "ppid": info.get("ppid"),
                      "complete": bool(res.complete), "reason": footer.get("reason"),
                      "steps": len(res.steps), "device_used": footer.get("device_used"),
                      "source": res.source})
    header = dict(root.header)
    header["processes"] = procs
    end = dict(root.footer) if root.footer else None
    if end is not None and not all(p["complete"] for p in procs):
        end["complete"] = False
    return merged.result(header, end, root.source)


def _follow_run(res: RunResult) -> Optional[str]:
    ex = res.header.get("exec")
    run = ex.get("follow") if isinstance(ex, dict) else None
    return run if isinstance(run, str) and re.fullmatch(r"[0-9a-f]{12}", run) else None


def _is_span(x: Any) -> bool:
    return (type(x) is list and len(x) == 5 and _is_str(x[0]) and _is_num(x[1])
            and _is_num(x[2]) and (x[3] is None or _is_num(x[3]))
            and (x[4] is None or _is_num(x[4])))


def _timeline(obj: Any, where: str) -> Dict[str, Any]:
    """A timeline line, every field its readers use checked (:data:`_TIMELINE_FIELDS`)."""
    _check_fields(where, "timeline", obj, _TIMELINE_FIELDS)
    for i, m in enumerate(obj.get("syncs") or ()):
        _check_fields(where, f"timeline.syncs[{i}]", m, _TIMELINE_SYNC_FIELDS)
    spans = obj.get("spans") or ()
    if not all(_is_span(x) for x in spans):
        raise ResultError(f"{where}: timeline.spans: each span is [name, host_start, "
                          f"host_end, dev_start, dev_end] (a string, two numbers, two "
                          f"numbers or nulls)")
    return obj


#: a lines note (``syncguard exec --record-lines``): file -> line numbers
_LINES_NOTE = "lines"


def _note(where: str, obj: Dict[str, Any]) -> Dict[str, Any]:
    """A note line; a lines note (``kind: "lines"``) has ``executed`` and ``candidates`` as
    objects mapping a file name to a list of line numbers."""
    if obj.get("kind") == _LINES_NOTE:
        for key in ("executed", "candidates"):
            v = obj.get(key)
            if v is None:
                continue
            if type(v) is not dict or not all(
                    _CHECKS["path"][0](f) and _is_ints(lines) for f, lines in v.items()):
                raise ResultError(f"{where}: note.{key}: must be an object mapping file names "
                                  f"(no NUL byte) to lists of line numbers")
    return obj


def load(path: str) -> RunResult:
    """Read a result: the streamed ``result.jsonl`` (complete or interrupted, line by line),
    the ``result.json`` document written from it, or a folder holding either, or one
    ``result.rank<N>.jsonl`` per rank (merged: :func:`merge_ranks`). Raises
    :class:`ResultError` (one line naming the file and field) for anything that is not a
    syncguard result; warns (:class:`ResultWarning`) when a newer syncguard wrote it."""
    if os.path.isdir(path):
        ranks = rank_files(path)
        if ranks:
            for name in ("result.jsonl", "result.json"):
                if os.path.lexists(os.path.join(path, name)):
                    raise ResultError(f"{os.path.join(path, name)}: beside rank files "
                                      f"({os.path.basename(ranks[0][1])}...): two runs in one "
                                      f"folder; load one file, or remove the stale one")
            parts = [(r, load(p)) for r, p in ranks]
            check_ranks(path, parts)
            return merge_ranks(parts, path)
        for name in ("result.jsonl", "result.json"):
            if os.path.isfile(os.path.join(path, name)):
                return load(os.path.join(path, name))
        raise ResultError(f"{path}: no result.jsonl, result.json or result.rank<N>.jsonl in "
                          f"this folder")
    from ..core.untrusted import UntrustedError, open_regular

    try:  # a regular file only: a FIFO or device is refused without blocking
        f = open_regular(path, "result")
    except UntrustedError as exc:
        raise ResultError(str(exc)) from None
    with f:
        start = f.read(4)
        if start[:2] in (b"\xff\xfe", b"\xfe\xff") or (len(start) >= 2 and (
                start[0] == 0 or start[1] == 0)):
            raise ResultError(f"{path}: UTF-16 or binary data: not a syncguard result "
                              f"(result files are UTF-8 JSON)")
        f.seek(0)
        text = io.TextIOWrapper(f, encoding="utf-8-sig")
        try:
            if text.read(len(_DOC_START)) == _DOC_START:
                text.seek(0)
                res = _load_document(path, text)
            else:
                text.seek(0)
                res = _load_lines(path, text)
        except UnicodeDecodeError as exc:
            raise ResultError(f"{path}: not UTF-8 text (byte 0x{exc.object[exc.start]:02x}): "
                              f"not a syncguard result") from None
        except RecursionError:
            raise ResultError(f"{path}: JSON nested too deeply: not a syncguard result"
                              ) from None
        except MemoryError:
            raise ResultError(f"{path}: too large to load") from None
    _warn_if_newer(path, res.header)
    run = _follow_run(res)
    if run is not None and "processes" not in res.header:  # its processes' parts beside it
        res = merge_processes(res, process_parts(os.path.dirname(os.path.abspath(path)), run))
    return res


_DOC_START = '{"header": '


def _share_strings(obj: Dict[str, Any], strings: Dict[str, str]) -> Dict[str, Any]:
    """``obj`` with its string values replaced by one shared copy per distinct string: a run's
    lines repeat the same scenario, path, file names, functions, kinds and APIs, and a result
    of 200,000 events would otherwise hold a copy of each per line."""
    for k, v in obj.items():
        if type(v) is str:
            obj[k] = strings.setdefault(v, v)
    return obj


def _shared(event: Dict[str, Any], strings: Dict[str, str],
            stacks: Dict[Tuple[Any, ...], List[Dict[str, Any]]]) -> Dict[str, Any]:
    """``event`` with its strings shared (:func:`_share_strings`) and its stack one shared
    list per distinct stack. (A loaded result is read, never changed.)"""
    _share_strings(event, strings)
    stack = event.get("stack")
    if stack:
        key = tuple(tuple(fr.items()) for fr in stack)
        same = stacks.get(key)
        if same is None:
            for fr in stack:
                _share_strings(fr, strings)
            same = stacks[key] = stack
        event["stack"] = same
    return event


def _load_lines(path: str, f: IO[str]) -> RunResult:
    header: Optional[Dict[str, Any]] = None
    steps: List[StepRecord] = []
    events: List[Dict[str, Any]] = []
    notes: List[Dict[str, Any]] = []
    timelines: List[Dict[str, Any]] = []
    strings: Dict[str, str] = {}
    stacks: Dict[Tuple[Any, ...], List[Dict[str, Any]]] = {}
    footer = None
    reads = Reads()
    refs: Dict[int, int] = {}  # a site's ref -> its first event's index in events
    torn: Optional[int] = None  # a line that did not parse: fine only if it is the last one
    for i, line in enumerate(f, 1):
        if not line.strip():
            continue
        if torn is not None:
            raise ResultError(f"{path}:{torn}: not a JSON line")
        try:
            obj = json.loads(line)
        except json.JSONDecodeError:
            torn = i  # torn last line of an interrupted run, unless more lines follow
            continue
        if not isinstance(obj, dict):
            raise ResultError(f"{path}:{i}: not a syncguard result line (a JSON object)")
        t = obj.pop("type", None)
        if t == "header":
            if header is not None:  # `>>` appended a second run: never one run counted twice
                raise ResultError(f"{path}:{i}: a second header line: two runs in one file "
                                  f"(appended?); a result file holds one run")
            header = _check_header(f"{path}:{i}", {"type": "header", **obj})
        elif t == "step":
            rows = obj.pop("reads", None)
            steps.append(_step(f"{path}:{i}", _share_strings(obj, strings)))
            if rows is not None:
                _reads(f"{path}:{i}", "step.reads", rows, refs, reads)
        elif t == "event":
            ev = _shared(_event(f"{path}:{i}", obj), strings, stacks)
            if "ref" in ev:
                refs.setdefault(ev["ref"], len(events))
            events.append(ev)
        elif t == "reads":
            _reads(f"{path}:{i}", "reads", obj.get("reads"), refs, reads)
        elif t == "footer":
            footer = {"type": "footer", **obj}
        elif t == "note":
            notes.append(_note(f"{path}:{i}", {"type": "note", **obj}))
        elif t == "timeline":
            timelines.append(_timeline(obj, f"{path}:{i}"))
    if header is None:
        raise ResultError(f"{path}: no header line: not a syncguard result")
    return RunResult(header, steps, events, footer, notes, path, timelines, reads)


def outside_sites(result: RunResult) -> List[Dict[str, Any]]:
    """The hidden syncs an ``exec`` run made outside every step, one dict per site and scenario
    (``scenario``, ``filename``, ``lineno``, ``function``, ``kind``, ``api``, ``op``,
    ``count``), most syncs first. A result from before these were events gives its note's
    ``file:line`` list, with ``count`` None (only the total was kept)."""
    out: Dict[Tuple[Any, ...], Dict[str, Any]] = {}
    for e in result.iter_events():
        # an outside sync has no step; an event of a step someone named "(outside steps)"
        # has one and is that step's
        if e.get("path") != OUTSIDE_PATH or e.get("step") is not None or e.get("allowed"):
            continue
        key = (e.get("scenario"), e.get("filename"), e.get("lineno"), e.get("function"),
               e.get("kind"), e.get("api"), e.get("op"))
        row = out.setdefault(key, dict(zip(("scenario", "filename", "lineno", "function",
                                             "kind", "api", "op"), key), count=0))
        row["count"] += int(e.get("count") or 1)
    if out:
        return sorted(out.values(), key=lambda r: -r["count"])
    old: List[Dict[str, Any]] = []
    for n in result.notes:
        if n.get("outside_steps") is None or not isinstance(n.get("sites"), list):
            continue
        for site in n["sites"]:
            if isinstance(site, str):
                f, _, line = site.rpartition(":")
                old.append({"scenario": None, "filename": f, "lineno": int(line) if
                            line.isdigit() else None, "function": None, "kind": None,
                            "api": None, "op": None, "count": None})
    return old
