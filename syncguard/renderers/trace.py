"""``trace.json``: a run as a Chrome trace-event file (opens in https://ui.perfetto.dev and
chrome://tracing).

One process per (scenario, path), named ``"<scenario> / <path>"``, with these threads
(tracks), so that slices on one track never overlap (Perfetto's JSON importer needs perfect
nesting):

- ``host thread``: one ``step N`` slice per step, and inside it one slice per launched op
  (for the first :data:`syncguard.model.timeline.TRACE_STEPS` measured steps);
- ``device stream``: one slice per kernel;
- ``syncs``: one slice per host read, from the read to the device drain, named by its site
  as every report names it (:func:`syncguard.core.sites.shown_site`; ``args``: the recorded
  site, API, hidden or allowed, modeled host stall and device bubble in us).

On the simulated device everything comes from the modeled timeline (``otherData.source``
says so and names the profile): steps are laid end to end, each starting from the idle
pipeline the previous step's token readback left. On a real device without a profiler trace
the host track holds the counted pass's steps end to end by their measured latency and each
sync is a slice of its measured wait at the start of its step: its position inside the step
is not known (``otherData.source`` says so). Where :func:`syncguard.driving.timing.profiled_pass`
left a torch.profiler trace next to the result (``profiler/<scenario>.<path>.json``: real
devices and the CPU), its events are merged in, their processes renumbered and named after
the scenario and path.
"""

from __future__ import annotations

import json
import os
from typing import IO, TYPE_CHECKING, Any, Dict, Iterator, List, Tuple

from .._paths import profiler_file
from ..core.sites import shown_site
from ..process.untrusted import UntrustedError, load_json
from ..results.format import GUARDED_PASSES

if TYPE_CHECKING:  # pragma: no cover
    from ..results.format import RunResult

HOST, DEVICE, SYNCS = 1, 2, 3


def _meta(pid: int, tid: int, what: str, name: str) -> Dict[str, Any]:
    return {"name": what, "ph": "M", "pid": pid, "tid": tid, "args": {"name": name}}


def _slice(name: str, cat: str, pid: int, tid: int, ts: float, dur: float,
           args: Dict[str, Any]) -> Dict[str, Any]:
    return {"name": name, "cat": cat, "ph": "X", "pid": pid, "tid": tid,
            "ts": ts, "dur": max(dur, 0.0), "args": args}


#: the passes whose steps ran under the guard: a run's counted pass, an ``exec`` program



def _groups(result: RunResult) -> List[Tuple[str, str]]:
    seen: Dict[Tuple[str, str], None] = {}
    for s in result.steps:
        if s.pass_ in GUARDED_PASSES:
            seen.setdefault((s.scenario, s.path), None)
    return list(seen)


def _modeled(result: RunResult, pid: int, scenario: str, path: str,
             profile: str) -> Iterator[Dict[str, Any]]:
    off = 0.0
    for t in result.timelines:
        if t.get("scenario") != scenario or t.get("path") != path:
            continue
        lat = float(t["latency_us"])
        step = int(t["step"])
        yield _slice(f"step {step}", "step", pid, HOST, off, lat,
                     {"warmup": bool(t.get("warmup")), "modeled_us": lat,
                      "device_idle_us": t.get("bubble_us"),
                      "hidden_sync_cost_us": t.get("hidden_cost_us")})
        shapes = t.get("shapes") or []
        for i, (name, h0, h1, d0, d1) in enumerate(t.get("spans") or []):
            args = {"inputs": shapes[i]} if i < len(shapes) else {}
            if h1 > h0:
                yield _slice(name, "launch", pid, HOST, off + h0, h1 - h0, args)
            if d0 is not None and d1 is not None:
                yield _slice(name, "kernel", pid, DEVICE, off + d0, d1 - d0, args)
        for s in t.get("syncs") or []:
            hidden = s.get("allowed") is False
            kind = "hidden sync" if hidden else (
                "allowed sync" if s.get("allowed") else "sync")
            # the host's wait, on the host track inside its op's slice (explicit waits too;
            # only in steps whose op slices were kept)
            wait = float(s["resume_us"]) - float(s["host_us"])
            if wait > 0 and t.get("spans"):
                yield _slice(f"wait: {s.get('op')}", "wait", pid, HOST,
                             off + float(s["host_us"]), wait,
                             {"site": s.get("site"), "api": s.get("api"),
                              "host_stall_us": s.get("stall_us")})
            yield _slice(f"{kind}: {shown_site(s.get('site'))}", "sync", pid, SYNCS,
                         off + float(s["host_us"]),
                         max(0.0, float(s["drain_us"]) - float(s["host_us"])),
                         {"site": s.get("site"), "api": s.get("api"), "op": s.get("op"),
                          "hidden": hidden, "step": step,
                          "host_stall_us": s.get("stall_us"),
                          "device_bubble_us": s.get("bubble_us"),
                          "profile": profile})
        off += lat


def _measured(result: RunResult, pid: int, scenario: str, path: str) -> Iterator[Dict[str, Any]]:
    events: Dict[int, List[Dict[str, Any]]] = {}
    for e in result.events:
        if (e.get("scenario") == scenario and e.get("path") == path
                and e.get("pass") in GUARDED_PASSES):
            events.setdefault(int(e.get("step") or 0), []).append(e)
    off = 0.0
    for s in result.steps:
        if s.scenario != scenario or s.path != path or s.pass_ not in GUARDED_PASSES:
            continue
        dur = float(s.latency_ms or 0.0) * 1000.0
        yield _slice(f"step {s.step}", "step", pid, HOST, off, dur,
                     {"warmup": s.warmup, "latency_ms": s.latency_ms,
                      "device_ms": s.device_ms, "hidden_syncs": s.syncs})
        at = off
        for e in events.get(s.step, []):
            wait = float(e.get("wait_us") or 0.0)
            hidden = not e.get("allowed")
            site = f"{e.get('filename')}:{e.get('lineno')}"
            yield _slice(f"{'hidden' if hidden else 'allowed'} sync: {shown_site(site)}",
                         "sync", pid, SYNCS, at, wait,
                         {"site": site, "api": e.get("api"), "hidden": hidden,
                          "step": s.step, "wait_us": e.get("wait_us"),
                          "position": "unknown within the step (no profiler trace)"})
            at += wait
        off += dur


def _profiler(file: str, first_pid: int, label: str) -> List[Dict[str, Any]]:
    """A torch.profiler Chrome trace's events with its processes renumbered from
    ``first_pid`` (so they cannot collide with ours or another path's) and named after
    ``label``; [] when the file cannot be read."""
    try:  # a FIFO or device left there is refused without blocking; size and depth bounded
        doc = load_json(file, "torch.profiler trace", 512 << 20)
    except UntrustedError:
        return []
    raw = doc.get("traceEvents") if isinstance(doc, dict) else doc
    if not isinstance(raw, list):
        return []
    pids: Dict[Any, int] = {}
    out: List[Dict[str, Any]] = []
    for e in raw:
        if not isinstance(e, dict) or "ph" not in e:
            continue
        e = dict(e)
        e["pid"] = pids.setdefault(e.get("pid"), first_pid + len(pids))
        if e["ph"] == "M" and e.get("name") == "process_name":
            e["args"] = {"name": f"{label}: torch.profiler "
                                 f"{(e.get('args') or {}).get('name', '')}".rstrip()}
        out.append(e)
    for orig, pid in pids.items():
        if not any(e["pid"] == pid and e.get("name") == "process_name" for e in out):
            out.append(_meta(pid, 0, "process_name", f"{label}: torch.profiler {orig}"))
    return out


def _profile(result: RunResult) -> Tuple[str, bool]:
    """The header's device profile, and whether the trace is the modeled timeline."""
    tl = result.header.get("timeline")
    profile = str(tl.get("profile")) if isinstance(tl, dict) else ""
    return profile, bool(profile) and bool(result.timelines)


def _events(result: RunResult, profiled: List[str]) -> Iterator[Dict[str, Any]]:
    """The trace events, one at a time (a long run's trace is written as they come, never
    held whole); the profiler traces merged in are added to ``profiled``."""
    profile, modeled = _profile(result)
    for i, (scenario, path) in enumerate(_groups(result)):
        pid = i + 1
        yield _meta(pid, 0, "process_name", f"{scenario} / {path}")
        yield _meta(pid, HOST, "thread_name", "host thread")
        yield _meta(pid, DEVICE, "thread_name",
                    f"device stream (modeled, {profile})" if modeled else "device stream")
        yield _meta(pid, SYNCS, "thread_name", "syncs (host read -> device drain)")
        yield from (_modeled(result, pid, scenario, path, profile) if modeled
                    else _measured(result, pid, scenario, path))
        if result.source and not modeled:
            file = profiler_file(os.path.dirname(os.path.abspath(result.source)), scenario,
                                 path)
            if os.path.isfile(file):
                got = _profiler(file, 1000 * (i + 1), f"{scenario} / {path}")
                if got:
                    profiled.append(os.path.relpath(file, os.path.dirname(
                        os.path.abspath(result.source))))
                    yield from got


def _other(result: RunResult, profiled: List[str]) -> Dict[str, Any]:
    """``otherData``: where the trace's times come from."""
    profile, modeled = _profile(result)
    source = (f"modeled timeline on device profile {profile} (syncguard.model.timeline): derived "
              f"from the recorded op stream, not measured" if modeled else
              "measured step latencies of the counted pass, laid end to end; sync positions "
              "within a step are not known")
    if profiled:
        source += ("; plus torch.profiler traces of a few steps per path (a separate pass "
                   "after the timed one), their processes named '<scenario> / <path>: "
                   "torch.profiler ...': " + ", ".join(profiled))
    if result.sampled and not modeled:
        source += ("; the syncs drawn are the events the result holds (the first of each "
                   "site; exec --all-events holds every one), each step's hidden_syncs its "
                   "full count")
    return {"source": source, "profile": profile or None, "profiler_traces": profiled,
            "syncguard": result.header.get("env", {}).get("syncguard")}


def build(result: RunResult) -> Dict[str, Any]:
    """The trace as a JSON-ready dict (``traceEvents``, ``displayTimeUnit``, ``otherData``)."""
    profiled: List[str] = []
    events = list(_events(result, profiled))
    return {"traceEvents": events, "displayTimeUnit": "ms",
            "otherData": _other(result, profiled)}


def render(result: RunResult, **_: Any) -> str:
    """``trace.json`` text (see :func:`build`)."""
    return json.dumps(build(result), separators=(",", ":")) + "\n"


def write(result: RunResult, f: IO[str]) -> None:
    """``trace.json`` written to ``f`` event by event: the same document as :func:`render`,
    without holding a long run's events at once."""
    enc = json.JSONEncoder(separators=(",", ":"))
    profiled: List[str] = []
    f.write('{"traceEvents":[')
    for i, e in enumerate(_events(result, profiled)):
        if i:
            f.write(",")
        f.write(enc.encode(e))
    f.write('],"displayTimeUnit":"ms","otherData":' + enc.encode(_other(result, profiled))
            + "}\n")
