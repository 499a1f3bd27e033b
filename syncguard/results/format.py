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
keeps every finished step and :func:`~syncguard.results.loader.load` reads a partial file (a
torn last line is ignored); the file is fsync'ed when closed and about once a second while
steps go on, not per step (:class:`~syncguard.results.writer.ResultWriter`).

A result file is untrusted input: :func:`~syncguard.results.loader.load` reads each line under
the JSON policy of every file a user hands in (:mod:`syncguard.process.untrusted`), checks the
type of every field the reports use (:mod:`syncguard.results.schema`) and raises
:class:`ResultError` (one line naming the file, the line and the field) for anything else; a
file written by a newer syncguard gives a :class:`ResultWarning`.
"""

from __future__ import annotations

import array
import copy
import dataclasses
import functools
import io
import json
import math
import operator
import sys
from typing import (
    IO,
    TYPE_CHECKING,
    Any,
    Dict,
    Iterable,
    Iterator,
    List,
    NamedTuple,
    Optional,
    Sequence,
    Tuple,
)

from ..core.events import SyncEvent
from ..core.steps import is_warmup
from ..errors import SyncguardError
from ..process.untrusted import dumps

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

SCHEMA = 1
#: ``path`` of the events an ``exec`` run made outside every step
OUTSIDE_PATH = "(outside steps)"
#: ``pass`` of the timed pass's step records (no interceptors: no syncs are seen)
TIMED_PASS = "timed"
#: the passes whose steps ran under the guard: a scenario's counted pass, and ``exec``'s
#: steps (counted and timed at once)
GUARDED_PASSES = ("counted", "exec")


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

    def line_fields(self) -> Dict[str, Any]:
        """The fields that hold a value, keyed as a result line has them (``pass``), and
        ``latency_ms`` (a missing optional field reads as null)."""
        return {k: v for k, v in zip(_STEP_KEYS, _step_values(self))
                if v is not None or k == "latency_ms"}

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
        the counted (:mod:`syncguard.driving.runner`) and timed
        (:mod:`syncguard.driving.timing`) records (``exec``'s: :meth:`ExecStep.record`).
        ``warmup`` is decided by :func:`syncguard.core.steps.is_warmup` (the first
        ``warmup_steps`` steps are warm-up); ``syncs``/``allowed`` are the events' counts;
        ``sync_wait_us`` the host's time inside the hidden ones (None on the timed pass, which
        has no interceptors). ``fields``: the rest (``batch_size``, ``device_ms``, ``tokens``,
        labels, ``round``, the modeled timeline's fields...); ``batch_size`` defaults to 0."""
        syncs, allowed, wait = read_counts((e, e.wait_us, None) for e in events)
        return cls(scenario=scenario, path=path, pass_=pass_, step=step,
                   warmup=is_warmup(step, warmup_steps), syncs=syncs, allowed=allowed,
                   latency_ms=latency_ms, sync_wait_us=None if pass_ == TIMED_PASS else wait,
                   **{"batch_size": 0, **fields})


class StepKey(NamedTuple):
    """Whose steps: the scenario (``exec``: the program), path (the step's name), pass and
    rank of a run's step lines (made once per name)."""

    scenario: str
    path: str
    pass_: str
    rank: Optional[int] = None


class ExecStep(NamedTuple):
    """One finished ``exec`` step as the session hands it to the writer: the fields of the
    :class:`StepRecord` that ``StepRecord.from_events`` would make of its events (made once
    per step on the program's clock, by position: a tuple costs less than a record, and a
    call by keyword more than the step's other work here)."""

    key: StepKey
    step: int
    warmup: bool
    syncs: int
    allowed: int
    latency_ms: float
    device_ms: Optional[float] = None
    wait_us: float = 0.0
    labels: Optional[Dict[str, Any]] = None

    def record(self) -> StepRecord:
        k = self.key
        return StepRecord(
            scenario=k.scenario, path=k.path, pass_=k.pass_, step=self.step,
            warmup=self.warmup, batch_size=0, syncs=self.syncs, allowed=self.allowed,
            latency_ms=self.latency_ms, device_ms=self.device_ms, sync_wait_us=self.wait_us,
            labels=self.labels, rank=k.rank)


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


#: step fields of results written before the subject's labels held them: moved into labels
_OLD_LABELS = ("branch", "eligible")
_STEP_NAMES = tuple(f.name for f in dataclasses.fields(StepRecord))
_FIELD_NAMES = frozenset(_STEP_NAMES)
#: the fields' keys in a result line (``pass_`` is written ``pass``)
_STEP_KEYS = tuple("pass" if n == "pass_" else n for n in _STEP_NAMES)
#: a record's field values, in order, in one call
_step_values = operator.attrgetter(*_STEP_NAMES)

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

    def has_guarded_steps(self) -> bool:
        """Whether any step ran under the guard (else no ``trace.json`` is written)."""
        return any(s.pass_ in GUARDED_PASSES for s in self.steps)

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
        enc = functools.partial(dumps, default=str, separators=(",", ":"))  # NaN: null

        def seq(items: Iterable[Any]) -> None:
            first = True
            for it in items:
                f.write("\n " if first else ",\n ")
                f.write(enc(it))
                first = False
            f.write("\n]" if not first else "]")

        f.write('{"header": ' + enc(self.header) + ',\n"steps": [')
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
        f.write(',\n"footer": ' + enc(self.footer) + "}")

    def to_json(self) -> str:
        """The whole result as one JSON document (same content as the JSON Lines file)."""
        buf = io.StringIO()
        self.write_json(buf)
        return buf.getvalue()



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

