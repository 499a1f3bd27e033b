"""The result writer: streams a run's lines to its file as the run goes on."""

from __future__ import annotations

import json
import math
import os
import time
from json.encoder import c_make_encoder as _c_make_encoder  # type: ignore[attr-defined]
from typing import IO, TYPE_CHECKING, Any, Dict, List, Optional, Sequence, Set, Tuple

from ..core.events import Read, SyncEvent, site_key
from ..process.atomic import claim, write_error
from ..process.untrusted import finite_json
from . import fit
from .format import SCHEMA, ExecStep, StepRecord

#: distinct call stacks a writer keeps encoded (then it starts afresh)
_STACKS_KEPT = 4096

if TYPE_CHECKING:  # pragma: no cover
    pass


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
            # never through a symlink at path; locked while this writer has it open, so a
            # second run writing the same file is refused instead of interleaving its lines
            stream = os.fdopen(claim(path, force=True), "w", encoding="utf-8")
        self._f: Optional[IO[str]] = stream
        # each line goes to the file descriptor in one write (no text layer, nothing held in
        # a buffer between steps); a stream without one (a StringIO) is written and flushed
        self._fd: Optional[int] = _fileno(stream)
        # (scenario, path, pass, rank) -> the start of its event lines
        self._event_heads: Dict[Tuple[str, str, str, Optional[int]], Dict[str, Any]] = {}
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
        which the loader ignores, so every line before it still reads."""
        self.error = exc

    def raise_error(self) -> None:
        """Raise the first write error as one :class:`~syncguard.process.atomic.OutputError`
        line naming the file (nothing when every line was written)."""
        if self.error is not None:
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
        key = prefix + site_key(ev)
        ref = self._refs.get(key)
        if ref is None:
            ref = self._refs[key] = [len(self._refs), 0]
        if ref[1] < self.events_per_site:
            ref[1] += 1
            lines.append(self._event_line({**head, "ref": ref[0]}, ev))
        else:  # as JSON text: a step line's reads are written with it, as they come
            w = ev.wait_us
            reads.append(f'[{ref[0]:d},{"null" if at is None else int(at)},{int(ev.count)},'
                         f'{_us(w)},{"true" if ev.warmup else "false"}]')

    def step(self, rec: StepRecord, events: Sequence[SyncEvent]) -> None:
        """One finished step with its events: the events first, so a step line always has
        its events above it; written and flushed together."""
        assert self._f is not None, "result writer is closed"
        key = (rec.scenario, rec.path, rec.pass_, rec.rank)
        head = self._event_heads.get(key)
        if head is None:
            head = self._event_heads[key] = {
                "type": "event", "scenario": rec.scenario, "path": rec.path,
                "pass": rec.pass_, **({} if rec.rank is None else {"rank": rec.rank})}
        lines: List[str] = []
        reads: List[str] = []
        for ev in events:
            self._read(head, ev, ev.step, lines, reads, key)
        # the fields that hold a value (a missing optional field reads as null: an exec
        # step leaves nine of them empty)
        d: Dict[str, Any] = {"type": "step", **rec.line_fields()}
        for k in ("scenario", "path", "pass"):
            d[k] = fit.text(d[k])
        text = self._line(d)
        if reads:
            text = text[:-2] + ',"reads":[' + ",".join(reads) + "]}\n"
        lines.append(text)
        self._put_step("".join(lines))

    def exec_reads(self, st: ExecStep, reads: Sequence[Read]) -> None:
        """:meth:`exec_step` of the events the step's ``reads`` stand for."""
        self.exec_step(st, [site.at(st.step, w, st.warmup, lin) for site, w, lin in reads])

    def exec_step(self, st: ExecStep, events: Sequence[SyncEvent]) -> None:
        """One finished ``exec`` step: :meth:`step` of its record (``batch_size`` 0, no
        tokens, round or modeled fields)."""
        self.step(st.record(), events)

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


def _fileno(stream: Any) -> Optional[int]:
    """The file descriptor under ``stream``, when it has one (None for a StringIO)."""
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):
        return None
    return fd if isinstance(fd, int) else None


def _us(v: Optional[float]) -> str:
    """A time in microseconds as a JSON number, to the nanosecond; ``null`` for None, NaN or
    an infinity, which JSON cannot hold."""
    return "null" if v is None or not math.isfinite(v) else f"{v:.3f}"
