"""One lint in several processes, with exactly the findings of one process.

The files are read in import order (:meth:`.project.Project.order`), and what a file's
analysis finds can depend on what the files before it exported (module summaries and classes,
:mod:`.project`). Forked workers each take one file at a time, once the files it imports
(:meth:`.project.Project.deps`) have been read by some worker, together with what every
file read since the worker's last file wrote; each notes, for its file, every summary or class
the analysis looked up (and which file had written what it found) and every one it wrote.

Then this process takes the files in order: a file's result is kept when every lookup it made
found the value the one-process lint has at that point (the same writer, whose result was kept
or was read again here to the same value); what the file wrote becomes that state. Otherwise
(an import the line scan does not see, two modules of one name, a file read before a module it
imports without naming it) the file is read again here, against that state. Either way each
file's findings are those of the one-process lint; only the time differs.

Workers are forked (POSIX but macOS): where ``fork`` is missing, or the tree is small, or a
worker fails, the lint runs (or goes on) in this process.
"""

from __future__ import annotations

import gc
import heapq
import os
import sys
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Set, Tuple, TypeVar, cast

from ..core.opmodel import load_model
from ..devicenames import HARDWARE
from .project import Project

if TYPE_CHECKING:
    from multiprocessing.connection import Connection

#: below this many characters of source in all (about half a CPU second of lint), one process:
#: forking and passing results cost more than they save
MIN_CHARS = 1_500_000

T = TypeVar("T")
#: a looked-up or written key: ("s", module) for a summary, ("c", class key) for a class
Key = Tuple[str, str]
#: what a worker sends back for one file: its number, outcome, lookups (the number of the
#: file whose write it found, -1 for none), writes
Result = Tuple[int, Any, Dict[Key, int], Dict[Key, Any]]


def default_jobs() -> int:
    """The CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))  # type: ignore[attr-defined,unused-ignore]
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def can_fork() -> bool:
    """Workers can be forked here: POSIX, but not macOS (where system libraries a process may
    have loaded are not safe to fork)."""
    import multiprocessing

    return sys.platform != "darwin" and "fork" in multiprocessing.get_all_start_methods()


class _Noted(dict):  # type: ignore[type-arg]
    """Shared project state (summaries or classes) in a worker, as the one-process lint has
    it when it reaches file number :attr:`at`: each key keeps the values files wrote, with the
    writer's number, and shows the one of the last writer before :attr:`at` (or the file's
    own). Notes the keys the file looks up before writing them (with what they held) and the
    keys it writes."""

    def __init__(self, tag: str) -> None:
        super().__init__()
        self.tag = tag
        self.at = 0
        self.history: Dict[str, List[Tuple[int, Any]]] = {}
        self.reads: Optional[Dict[Key, int]] = None
        self.writes: Set[str] = set()

    def put(self, at: int, key: str, value: Any) -> None:
        entries = self.history.setdefault(key, [])
        for n, (i, _) in enumerate(entries):
            if i == at:
                entries[n] = (at, value)
                return
        entries.append((at, value))

    def _value(self, key: str) -> Any:
        best, value = -1, _MISSING
        for i, v in self.history.get(key, ()):
            if best < i <= self.at:
                best, value = i, v
        if self.reads is not None and key not in self.writes:
            self.reads.setdefault((self.tag, key), best)
        return value

    def get(self, key: str, default: Any = None) -> Any:  # type: ignore[override]
        value = self._value(key)
        return default if value is _MISSING else value

    def __getitem__(self, key: str) -> Any:
        value = self._value(key)
        if value is _MISSING:
            raise KeyError(key)
        return value

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self._value(key) is not _MISSING

    def __setitem__(self, key: str, value: Any) -> None:
        self.writes.add(key)
        self.put(self.at, key, value)


_MISSING = object()


def _serve(conn: Connection, ordered: List[str], project: Project,
           lint_one: Callable[[str], Any]) -> None:
    """A worker: (file number, state updates) in, :data:`Result` out, until None."""
    state = {"s": _Noted("s"), "c": _Noted("c")}
    project.summaries = state["s"]  # type: ignore[assignment]
    project.classes = state["c"]  # type: ignore[assignment]
    while True:
        msg = conn.recv()
        if msg is None:
            return
        at, updates = msg
        for i, (tag, key), value in updates:
            state[tag].put(i, key, value)
        reads: Dict[Key, int] = {}
        for d in state.values():
            d.at, d.reads, d.writes = at, reads, set()
        outcome = lint_one(ordered[at])
        writes = {(tag, key): d[key] for tag, d in state.items() for key in d.writes}
        for d in state.values():
            d.reads = None
        conn.send((at, outcome, reads, writes))


def lint_ordered(ordered: List[str], project: Project, deps: Dict[str, List[str]],
                 sizes: Dict[str, int], jobs: int, lint_one: Callable[[str], T]
                 ) -> Tuple[Dict[str, T], Dict[str, int]]:
    """``lint_one`` of every file of ``ordered`` (import order) against ``project``, in up
    to ``jobs`` worker processes; the outcomes by file, and counts of what happened
    (``workers``; ``kept``: worker results kept; ``again``: files read again here)."""
    stats = {"workers": 0, "kept": 0, "again": 0}
    if (jobs < 2 or len(ordered) < 2 * jobs or sum(sizes.values()) < MIN_CHARS
            or not can_fork()):
        return {p: lint_one(p) for p in ordered}, stats
    results = _run_workers(ordered, project, deps, jobs, lint_one, stats)
    outcomes: Dict[str, T] = {}
    state: Dict[str, Dict[str, Any]] = {"s": project.summaries, "c": project.classes}
    writer: Dict[Key, int] = {}  # the file whose write each key holds in the state
    again: Set[int] = set()

    def same(key: Key, seen: int) -> bool:
        """The worker found for ``key`` what the state holds now."""
        have = writer.get(key, -1)
        if have != seen:
            return False
        if have in again:  # read again here: did it write what the worker's copy wrote?
            got = results.get(have)
            return got is not None and key in got[3] and got[3][key] == state[key[0]].get(
                key[1])
        return True

    for i, p in enumerate(ordered):
        got = results.get(i)
        if got is not None and all(same(key, seen) for key, seen in got[2].items()):
            outcomes[p] = got[1]
            for key, value in got[3].items():
                state[key[0]][key[1]] = value
                writer[key] = i
            stats["kept"] += 1
            continue
        before = {tag: dict(d) for tag, d in state.items()}
        outcomes[p] = lint_one(p)
        again.add(i)
        stats["again"] += 1
        for tag, d in state.items():
            old = before[tag]
            for name, value in d.items():
                if name not in old or old[name] is not value:
                    writer[(tag, name)] = i
    return outcomes, stats


def _run_workers(ordered: List[str], project: Project, deps: Dict[str, List[str]], jobs: int,
                 lint_one: Callable[[str], Any], stats: Dict[str, int]) -> Dict[int, Result]:
    """Every file read by forked workers (as far as they got: a worker that fails leaves
    its files to this process)."""
    import multiprocessing
    from multiprocessing.connection import Connection, wait

    n = len(ordered)
    index = {project.abspath(p): i for i, p in enumerate(ordered)}
    waiting = [0] * n  # files each file imports, before it in the order, not read yet
    users: List[List[int]] = [[] for _ in range(n)]
    for i, p in enumerate(ordered):
        for d in set(deps.get(project.abspath(p), ())):
            j = index.get(d)
            if j is not None and j < i:
                waiting[i] += 1
                users[j].append(i)
    ready = [i for i in range(n) if not waiting[i]]
    heapq.heapify(ready)
    ctx = multiprocessing.get_context("fork")
    for stream in (sys.stdout, sys.stderr):  # a worker flushes its copy when it ends
        try:
            stream.flush()
        except (AttributeError, OSError, ValueError):  # pragma: no cover - closed, replaced
            pass
    conns: List[Connection] = []
    procs = []
    for b in HARDWARE:  # read once here, not by each worker
        load_model(b)
    # what exists now is never collected in the workers: a collection there would write to
    # every object this process made, and each page written is copied (fork's copy on write)
    gc.freeze()
    try:
        for _ in range(jobs):
            mine, theirs = ctx.Pipe()
            proc = ctx.Process(target=_serve, args=(theirs, ordered, project, lint_one),
                               daemon=True)
            try:
                proc.start()
            except OSError:  # no more processes: those started do the work
                break
            theirs.close()
            conns.append(mine)
            procs.append(proc)
    finally:
        gc.unfreeze()
    stats["workers"] = len(procs)
    results: Dict[int, Result] = {}
    log: List[Tuple[int, Key, Any]] = []  # every write with its file's number, as they came
    sent = [0] * len(conns)
    busy: Dict[Connection, int] = {}
    idle = list(conns)
    try:
        while len(results) < n and (busy or (idle and ready)):
            while idle and ready:
                c = idle.pop()
                w = conns.index(c)
                c.send((heapq.heappop(ready), log[sent[w]:]))
                sent[w] = len(log)
                busy[c] = 1
            for got in wait(list(busy)):
                c = cast(Connection, got)
                i, outcome, reads, writes = c.recv()
                del busy[c]
                idle.append(c)
                results[i] = (i, outcome, reads, writes)
                log.extend((i, key, value) for key, value in writes.items())
                for u in users[i]:
                    waiting[u] -= 1
                    if not waiting[u]:
                        heapq.heappush(ready, u)
    except (EOFError, OSError):  # a worker died: what came back is kept, the rest done here
        pass
    finally:
        for c in conns:
            try:
                c.send(None)
            except OSError:
                pass
            c.close()
        for proc in procs:
            proc.join(timeout=5)
            if proc.is_alive():  # pragma: no cover - a worker stuck
                proc.terminate()
    return results
