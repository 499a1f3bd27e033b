"""Reading a result file: the streamed JSON Lines, the one-document JSON, a folder of either
or of rank files; every line checked against the schema."""

from __future__ import annotations

import io
import json
import os
import re
import warnings
from typing import IO, TYPE_CHECKING, Any, Dict, List, Optional, Tuple

from .._version import __version__
from ..errors import ResultWarning
from ..process import untrusted
from .format import Reads, ResultError, RunResult, StepRecord
from .merge import PART_NAME, PARTS_DIR, check_ranks, merge_processes, merge_ranks, rank_files
from .schema import check_event, check_header, check_note, check_reads, check_step, check_timeline

if TYPE_CHECKING:  # pragma: no cover
    pass


def _version_tuple(v: Any) -> Optional[Tuple[int, ...]]:
    m = re.match(r"(\d+(?:\.\d+)*)", str(v)) if isinstance(v, str) else None
    return tuple(int(x) for x in m.group(1).split(".")[:4]) if m else None


def _warn_if_newer(path: str, header: Dict[str, Any]) -> None:
    """A :class:`ResultWarning` when the file names a newer syncguard than this one."""
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
        doc = untrusted.loads(f.read(), path, "syncguard result")
    except json.JSONDecodeError as exc:
        raise ResultError(f"{path}:{exc.lineno}: not a JSON document: {exc.msg}") from None
    except untrusted.UntrustedError as exc:
        raise ResultError(str(exc)) from None
    header = doc.get("header") if isinstance(doc, dict) else None
    if not isinstance(header, dict):
        raise ResultError(f"{path}: header: missing: not a syncguard result")
    check_header(path, header)
    parts = {}
    for key in ("steps", "events", "notes"):
        parts[key] = doc.get(key)
        if parts[key] is None:
            parts[key] = []
        if not isinstance(parts[key], list):
            raise ResultError(f"{path}: {key}: must be a JSON array")
    steps = [check_step(f"{path}: steps[{i}]", d) for i, d in enumerate(parts["steps"])]
    events = [check_event(f"{path}: events[{i}]", e) for i, e in enumerate(parts["events"])]
    for i, n in enumerate(parts["notes"]):
        if not isinstance(n, dict):
            raise ResultError(f"{path}: notes[{i}]: must be a JSON object")
        check_note(f"{path}: notes[{i}]", n)
    footer = doc.get("footer")
    if footer is not None and not isinstance(footer, dict):
        raise ResultError(f"{path}: footer: must be a JSON object or null")
    timelines = doc.get("timelines") or []
    if not isinstance(timelines, list):
        raise ResultError(f"{path}: timelines: must be a JSON array")
    tls = [check_timeline(t, f"{path}: timelines[{i}]") for i, t in enumerate(timelines)]
    reads = Reads()
    rows = doc.get("reads")
    if rows is not None:  # a read names its site's first event by its index in events
        check_reads(path, "reads", rows, {i: i for i in range(len(events))}, reads)
    return RunResult(header, steps, events, footer, list(parts["notes"]), path, tls, reads)



def _follow_run(res: RunResult) -> Optional[str]:
    ex = res.header.get("exec")
    run = ex.get("follow") if isinstance(ex, dict) else None
    return run if isinstance(run, str) and re.fullmatch(r"[0-9a-f]{12}", run) else None



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
        m = PART_NAME.fullmatch(name)
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
    try:  # a regular file only: a FIFO or device is refused without blocking
        f = untrusted.open_regular(path, "result")
    except untrusted.UntrustedError as exc:
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
            obj = untrusted.loads(line, f"{path}:{i}", "syncguard result line")
        except json.JSONDecodeError:
            torn = i  # torn last line of an interrupted run, unless more lines follow
            continue
        except untrusted.UntrustedError as exc:
            raise ResultError(str(exc)) from None
        if not isinstance(obj, dict):
            raise ResultError(f"{path}:{i}: not a syncguard result line (a JSON object)")
        t = obj.pop("type", None)
        if t == "header":
            if header is not None:  # `>>` appended a second run: never one run counted twice
                raise ResultError(f"{path}:{i}: a second header line: two runs in one file "
                                  f"(appended?); a result file holds one run")
            header = check_header(f"{path}:{i}", {"type": "header", **obj})
        elif t == "step":
            rows = obj.pop("reads", None)
            steps.append(check_step(f"{path}:{i}", _share_strings(obj, strings)))
            if rows is not None:
                check_reads(f"{path}:{i}", "step.reads", rows, refs, reads)
        elif t == "event":
            ev = _shared(check_event(f"{path}:{i}", obj), strings, stacks)
            if "ref" in ev:
                refs.setdefault(ev["ref"], len(events))
            events.append(ev)
        elif t == "reads":
            check_reads(f"{path}:{i}", "reads", obj.get("reads"), refs, reads)
        elif t == "footer":
            footer = {"type": "footer", **obj}
        elif t == "note":
            notes.append(check_note(f"{path}:{i}", {"type": "note", **obj}))
        elif t == "timeline":
            timelines.append(check_timeline(obj, f"{path}:{i}"))
    if header is None:
        raise ResultError(f"{path}: no header line: not a syncguard result")
    return RunResult(header, steps, events, footer, notes, path, timelines, reads)


