"""Results merged into one: per-rank results of a distributed run, and a followed run's
root with its processes' parts."""

from __future__ import annotations

import dataclasses
import os
import re
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Tuple

from .._escape import one_line, terminal
from .format import Reads, ResultError, RunResult, StepRecord

if TYPE_CHECKING:  # pragma: no cover
    pass


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
PART_NAME = re.compile(r"([0-9a-f]{12})-([1-9][0-9]{0,9})\.jsonl", re.ASCII)


#: multiprocessing's own names (``Process-1``, ``SpawnProcess-2:1``): a label says the target
_DEFAULT_PROCESS_NAME = re.compile(r"[A-Za-z]*Process-[0-9]+(:[0-9]+)*")


def process_label(info: Dict[str, Any]) -> str:
    """How reports name a followed process: its target function (with the process's name
    when the program gave it one), else its script, and its pid: ``decode_worker pid 4242``,
    ``VllmWorker-0: WorkerProc.worker_main pid 4243``."""
    target, name = info.get("target"), info.get("name")
    if target and name and not _DEFAULT_PROCESS_NAME.fullmatch(str(name)):
        who = f"{str(name)[:40]}: {str(target)[:80]}"  # VllmWorker-0: WorkerProc.worker_main
    else:
        who = str(target or name or "process")[:80]
    return one_line(f"{who} pid {info.get('pid')}")



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


