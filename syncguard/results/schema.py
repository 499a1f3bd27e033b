"""The result lines' schema: every field the reports read, checked as the loader reads it,
and the same tables as a JSON Schema (:func:`json_schema`)."""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING, Any, Dict, List, Tuple

from .format import SCHEMA, Reads, ResultError, StepRecord

if TYPE_CHECKING:  # pragma: no cover
    pass


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


def check_event(where: str, obj: Any) -> Dict[str, Any]:
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


def check_reads(where: str, what: str, rows: Any, refs: Dict[int, int], reads: Reads) -> None:
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


def check_step(where: str, obj: Any) -> StepRecord:
    d = _check_fields(where, "step", obj, _STEP_FIELDS)
    return StepRecord.from_dict(d)



def check_header(where: str, header: Any) -> Dict[str, Any]:
    if not isinstance(header, dict):
        raise ResultError(f"{where}: header: must be a JSON object: not a syncguard result")
    if header.get("schema") != SCHEMA:
        raise ResultError(f"{where}: header.schema: {json.dumps(header.get('schema'))[:40]} "
                          f"is not {SCHEMA}")
    return header



def _is_span(x: Any) -> bool:
    return (type(x) is list and len(x) == 5 and _is_str(x[0]) and _is_num(x[1])
            and _is_num(x[2]) and (x[3] is None or _is_num(x[3]))
            and (x[4] is None or _is_num(x[4])))


def check_timeline(obj: Any, where: str) -> Dict[str, Any]:
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


def check_note(where: str, obj: Dict[str, Any]) -> Dict[str, Any]:
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


