"""The result format: versioned JSON Lines, streamed while a run goes on.

A result file (``result.jsonl``) is one JSON object per line:

- ``{"type": "header", "schema": 1, ...}``: versions (syncguard, torch, torch_npu, Python),
  device, host, git commit, creation time, the command line, and for each scenario its file,
  SHA-256 and full text.
- ``{"type": "step", ...}``: one finished step of one scenario and path (:class:`StepRecord`).
- ``{"type": "event", ...}``: one host sync (:class:`syncguard.SyncEvent` fields plus
  ``scenario``, ``path`` and ``pass``).
- ``{"type": "timeline", ...}``: the modeled device timeline of one counted step on the
  simulated device (:mod:`syncguard.timeline`).
- ``{"type": "footer", "complete": true, ...}``: written only when the run finished.

Each line is flushed as it is written, so an interrupted run keeps every finished step and
:func:`load` reads a partial file (a torn last line is ignored).
"""

from __future__ import annotations

import dataclasses
import getpass
import hashlib
import io
import json
import os
import platform
import socket
import subprocess
import sys
import time
from typing import IO, TYPE_CHECKING, Any, Dict, Iterable, List, Optional

from .events import SyncEvent

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

SCHEMA = 1


class ResultError(ValueError):
    """A result file that cannot be read."""


@dataclasses.dataclass(frozen=True)
class StepRecord:
    """One decode step of one scenario on one path.

    ``pass_`` is ``"counted"`` (under the guard) or ``"timed"`` (no interceptors). ``syncs``
    hidden host syncs and ``allowed`` allowed ones (counted pass; 0 on the timed pass).
    ``latency_ms``: host wall time from the start of the step to its token readback
    (milliseconds; consecutive readbacks minus syncguard's own result writing).
    ``device_ms``: device time of the step from device events (real devices only, else None).
    ``branch``: ``greedy``/``simple``/``fused``/``generic``. ``eligible``: the host flag
    ``npu_top_k_top_p_eligible`` at this step. ``tokens``: the sampled ids.
    ``sync_wait_us``: time the host spent inside this step's hidden syncs (microseconds,
    counted pass; 0.0 without hidden syncs; None on the timed pass).
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
    branch: str
    syncs: int
    allowed: int
    latency_ms: Optional[float]
    device_ms: Optional[float] = None
    eligible: Optional[bool] = None
    tokens: Optional[List[int]] = None
    sync_wait_us: Optional[float] = None
    round: Optional[int] = None
    modeled_ms: Optional[float] = None
    bubble_us: Optional[float] = None
    sync_cost_us: Optional[float] = None
    sync_bubble_us: Optional[float] = None

    def to_dict(self) -> Dict[str, Any]:
        d = dataclasses.asdict(self)
        d["pass"] = d.pop("pass_")
        return d

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> StepRecord:
        d = dict(d)
        d["pass_"] = d.pop("pass")
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})


STEP_COLUMNS = {
    "scenario": "scenario name",
    "path": "sampling path (legacy, flag, flag-recompute)",
    "pass": "counted (under the guard) or timed (no interceptors)",
    "step": "decode step index (0-based, warm-up steps included)",
    "warmup": "True for warm-up steps (not counted, not in latency stats)",
    "batch_size": "requests in the batch at this step",
    "branch": "sampler branch taken: greedy, simple, fused, generic",
    "syncs": "hidden host syncs in the step (count)",
    "allowed": "allowed host syncs in the step (count; the token readback)",
    "latency_ms": "host time of the step up to its token readback, syncguard's own writing "
                  "excluded (ms)",
    "device_ms": "device time of the step from device events (ms; real devices only)",
    "eligible": "host flag npu_top_k_top_p_eligible at this step",
    "sync_wait_us": "host time spent inside this step's hidden syncs (us, counted pass)",
    "round": "round of the timed pass (paths interleaved step by step; empty when counted)",
    "modeled_ms": "modeled step latency on the header's device profile (ms; simulated "
                  "device, counted pass)",
    "bubble_us": "modeled device idle time in the step (us; same)",
    "sync_cost_us": "modeled latency of the step's hidden syncs: modeled latency minus a "
                    "replay without them (us; same)",
    "sync_bubble_us": "modeled device idle caused by the step's hidden syncs (us; same)",
}

EVENT_COLUMNS = {
    "scenario": "scenario name", "path": "sampling path", "pass": "counted",
    "step": "decode step index", "kind": "sync kind (scalar_read, d2h_copy, ...)",
    "api": "Python-level entry (Tensor.__bool__, ...)", "op": "ATen op where known",
    "site": "file:line of the user code", "function": "function of that line",
    "count": "host syncs this event stands for", "allowed": "allowed (True) or hidden",
    "reason": "why it was allowed", "thread": "Python thread name",
    "wait_us": "time the host spent in the intercepted call (us; the sync's cost on hardware)",
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

    from . import __version__

    here = os.path.dirname(os.path.abspath(__file__))
    tnpu = sys.modules.get("torch_npu")
    tnpu_v = None
    if tnpu is not None and not getattr(tnpu, "__syncguard_standin__", False):
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
    """Streams a result file: every line is flushed (and fsync'ed for steps) as written."""

    def __init__(self, path: str, header: Dict[str, Any]) -> None:
        self.path = path
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        self._f: Optional[IO[str]] = open(path, "w", encoding="utf-8")
        self._write({"type": "header", "schema": SCHEMA, "created": time.time(), **header})

    def _write(self, obj: Dict[str, Any]) -> None:
        assert self._f is not None, "result writer is closed"
        self._f.write(json.dumps(obj, separators=(",", ":"), default=str) + "\n")
        self._f.flush()

    def step(self, rec: StepRecord, events: List[SyncEvent]) -> None:
        """One finished step with its events: the events first, so a step line always has
        its events above it."""
        for ev in events:
            self._write({"type": "event", "scenario": rec.scenario, "path": rec.path,
                         "pass": rec.pass_, **ev.to_dict()})
        self._write({"type": "step", **rec.to_dict()})
        assert self._f is not None
        os.fsync(self._f.fileno())

    def timeline(self, fields: Dict[str, Any]) -> None:
        """The modeled device timeline of one step (:mod:`syncguard.timeline`)."""
        self._write({"type": "timeline", **fields})

    def note(self, **fields: Any) -> None:
        self._write({"type": "note", **fields})

    def close(self, complete: bool, **fields: Any) -> None:
        if self._f is None:
            return
        self._write({"type": "footer", "complete": complete, "finished": time.time(), **fields})
        self._f.close()
        self._f = None


@dataclasses.dataclass
class RunResult:
    """A loaded result: header, steps and events in file order."""

    header: Dict[str, Any]
    steps: List[StepRecord]
    events: List[Dict[str, Any]]
    footer: Optional[Dict[str, Any]]
    notes: List[Dict[str, Any]] = dataclasses.field(default_factory=list)
    source: str = ""
    #: modeled device timeline per counted step (simulated device; syncguard.timeline)
    timelines: List[Dict[str, Any]] = dataclasses.field(default_factory=list)

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

        cols = list(STEP_COLUMNS)
        return pd.DataFrame([{k: r.to_dict()[k] for k in cols} for r in self.steps],
                            columns=cols)

    def events_df(self) -> pd.DataFrame:
        """One row per sync event; columns in :data:`EVENT_COLUMNS` (plus ``lineno`` and
        ``filename``)."""
        import pandas as pd

        rows = []
        for e in self.events:
            rows.append({**{k: e.get(k) for k in EVENT_COLUMNS if k != "site"},
                         "site": f"{e.get('filename')}:{e.get('lineno')}",
                         "filename": e.get("filename"), "lineno": e.get("lineno")})
        return pd.DataFrame(rows, columns=[*EVENT_COLUMNS, "filename", "lineno"])

    def write_json(self, f: IO[str]) -> None:
        """Write the whole result as one JSON document to ``f``, one step or event per line,
        without building the document in memory (a 10k-step run stays flat)."""
        enc = json.JSONEncoder(default=str, separators=(",", ":"))

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
        seq(self.events)
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


def _load_document(path: str, f: IO[str]) -> RunResult:
    """A ``result.json`` document (:meth:`RunResult.write_json`)."""
    try:
        doc = json.load(f)
    except json.JSONDecodeError as exc:
        raise ResultError(f"{path}:{exc.lineno}: not a JSON document: {exc.msg}") from None
    header = doc.get("header") if isinstance(doc, dict) else None
    if not isinstance(header, dict):
        raise ResultError(f"{path}: header: missing: not a syncguard result")
    if header.get("schema") != SCHEMA:
        raise ResultError(f"{path}: header.schema {header.get('schema')!r} is not {SCHEMA}")
    steps: List[StepRecord] = []
    for i, d in enumerate(doc.get("steps") or []):
        try:
            steps.append(StepRecord.from_dict(d))
        except (KeyError, TypeError, AttributeError) as exc:
            raise ResultError(f"{path}: steps[{i}]: missing or bad field: {exc}") from None
    events = doc.get("events") or []
    if not all(isinstance(e, dict) for e in events):
        raise ResultError(f"{path}: events: every event must be a JSON object")
    tls = [_timeline(t, f"{path}: timelines[{i}]") for i, t in
           enumerate(doc.get("timelines") or [])]
    return RunResult(header, steps, events, doc.get("footer"), list(doc.get("notes") or []),
                     path, tls)


def _timeline(obj: Any, where: str) -> Dict[str, Any]:
    """A timeline line, checked enough that every reader can rely on its fields."""
    if not isinstance(obj, dict):
        raise ResultError(f"{where}: timeline: must be a JSON object")
    for key in ("scenario", "path"):
        if not isinstance(obj.get(key), str):
            raise ResultError(f"{where}: timeline.{key}: missing or not a string")
    if not isinstance(obj.get("step"), int):
        raise ResultError(f"{where}: timeline.step: missing or not an integer")
    for key in ("latency_us", "busy_us", "bubble_us"):
        if not isinstance(obj.get(key), (int, float)):
            raise ResultError(f"{where}: timeline.{key}: missing or not a number")
    syncs = obj.get("syncs", [])
    if not isinstance(syncs, list) or not all(
            isinstance(m, dict) and isinstance(m.get("host_us"), (int, float))
            and isinstance(m.get("drain_us"), (int, float)) for m in syncs):
        raise ResultError(f"{where}: timeline.syncs: each sync needs numeric host_us and "
                          f"drain_us")
    spans = obj.get("spans", [])
    if not isinstance(spans, list) or not all(isinstance(x, list) and len(x) == 5
                                              for x in spans):
        raise ResultError(f"{where}: timeline.spans: each span is [name, host_start, "
                          f"host_end, dev_start, dev_end]")
    return obj


def load(path: str) -> RunResult:
    """Read a result: the streamed ``result.jsonl`` (complete or interrupted, line by line) or
    the ``result.json`` document written from it. Raises :class:`ResultError`."""
    try:
        f = open(path, encoding="utf-8")
    except OSError as exc:
        raise ResultError(f"{path}: cannot read: {exc.strerror}") from None
    with f:
        if f.read(len(_DOC_START)) == _DOC_START:
            f.seek(0)
            return _load_document(path, f)
        f.seek(0)
        return _load_lines(path, f)


_DOC_START = '{"header": '


def _load_lines(path: str, f: IO[str]) -> RunResult:
    header: Optional[Dict[str, Any]] = None
    steps: List[StepRecord] = []
    events: List[Dict[str, Any]] = []
    notes: List[Dict[str, Any]] = []
    timelines: List[Dict[str, Any]] = []
    footer = None
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
            if obj.get("schema") != SCHEMA:
                raise ResultError(f"{path}: schema {obj.get('schema')!r} is not {SCHEMA}")
            header = {"type": "header", **obj}
        elif t == "step":
            try:
                steps.append(StepRecord.from_dict(obj))
            except (KeyError, TypeError) as exc:
                raise ResultError(f"{path}:{i}: step line is missing or has a bad field: "
                                  f"{exc}") from None
        elif t == "event":
            events.append(obj)
        elif t == "footer":
            footer = {"type": "footer", **obj}
        elif t == "note":
            notes.append({"type": "note", **obj})
        elif t == "timeline":
            timelines.append(_timeline(obj, f"{path}:{i}"))
    if header is None:
        raise ResultError(f"{path}: no header line: not a syncguard result")
    return RunResult(header, steps, events, footer, notes, path, timelines)
