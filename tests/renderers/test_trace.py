"""syncguard.renderers.trace: trace.json loads, has the required fields, one track per stream,
slices that nest, and sync markers at the right sites."""

from __future__ import annotations

import dataclasses
import json
import os
from collections import defaultdict
from typing import Any, Dict, List, Tuple

import pytest

from syncguard.driving import runner, scenario
from syncguard.renderers import trace
from syncguard.results import format as results
from syncguard.results import loader

SAMPLER = os.path.join("sglang_ascend_sampling", "sampler.py")


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> results.RunResult:
    out = tmp_path_factory.mktemp("trace") / "result.jsonl"
    opts = runner.RunOptions(device="sim", paths=["legacy", "flag"], steps=4, warmup=1,
                             timed=False)
    runner.run(runner.prepare(scenario.resolve(["steady"]), opts), opts, str(out))
    return loader.load(str(out))


def _check_common(doc: Dict[str, Any]) -> Dict[Tuple[int, int], str]:
    assert set(doc) >= {"traceEvents", "displayTimeUnit"}
    names: Dict[Tuple[int, int], str] = {}
    for e in doc["traceEvents"]:
        assert {"name", "ph", "pid", "tid"} <= set(e), e
        if e["ph"] == "M" and e["name"] == "thread_name":
            assert (e["pid"], e["tid"]) not in names, "one name per track"
            names[(e["pid"], e["tid"])] = e["args"]["name"]
        elif e["ph"] == "X":
            assert isinstance(e["ts"], (int, float)) and isinstance(e["dur"], (int, float))
            assert e["dur"] >= 0 and isinstance(e["args"], dict)
            assert (e["pid"], e["tid"]) in names, "slice on an unnamed track"
    # Perfetto needs slices on one track to nest perfectly: no partial overlap
    by_track: Dict[Tuple[int, int], List[Tuple[float, float]]] = defaultdict(list)
    for e in doc["traceEvents"]:
        if e["ph"] == "X":
            by_track[(e["pid"], e["tid"])].append((e["ts"], e["ts"] + e["dur"]))
    for track, spans in by_track.items():
        stack: List[float] = []
        for a, b in sorted(spans, key=lambda s: (s[0], -s[1])):
            while stack and stack[-1] <= a + 1e-9:
                stack.pop()
            assert not stack or b <= stack[-1] + 1e-9, (track, a, b, stack[-1])
            stack.append(b)
    return names


def test_modeled_trace_tracks_and_sync_markers(run: results.RunResult) -> None:
    doc = json.loads(trace.render(run))
    names = _check_common(doc)
    procs = {e["pid"]: e["args"]["name"] for e in doc["traceEvents"]
             if e["ph"] == "M" and e["name"] == "process_name"}
    assert sorted(procs.values()) == ["steady / flag", "steady / legacy"]
    for pid in procs:  # host, device and syncs: one track each
        assert sorted(n for (p, _), n in names.items() if p == pid) == [
            "device stream (modeled, 910b)", "host thread", "syncs (host read -> device drain)"]
    assert "modeled" in doc["otherData"]["source"] and doc["otherData"]["profile"] == "910b"
    syncs = [e for e in doc["traceEvents"] if e.get("cat") == "sync"]
    by_path: Dict[str, List[Dict[str, Any]]] = defaultdict(list)
    for e in syncs:
        by_path[procs[e["pid"]].split(" / ")[1]].append(e)
    legacy_hidden = [e for e in by_path["legacy"] if e["args"]["hidden"]]
    # one hidden read per step (warm-up included) at the sampler's guard
    assert sorted(e["args"]["step"] for e in legacy_hidden) == [0, 1, 2, 3]
    sites = {e["args"]["site"] for e in legacy_hidden}
    guard_sites = {f"{e['filename']}:{e['lineno']}" for e in run.events
                   if e["path"] == "legacy" and not e["allowed"]}
    assert sites == guard_sites and len(sites) == 1 and SAMPLER in sites.pop()
    assert all(e["args"]["host_stall_us"] > 0 and e["args"]["device_bubble_us"] > 0
               for e in legacy_hidden)
    assert not [e for e in by_path["flag"] if e["args"]["hidden"]]
    # the token readback, allowed, on both paths, every step
    for path in ("legacy", "flag"):
        allowed = [e for e in by_path[path] if not e["args"]["hidden"]]
        assert sorted(e["args"]["step"] for e in allowed) == [0, 1, 2, 3]
        assert all("decode.py" in e["args"]["site"] for e in allowed)
    # each marker spans the host read to the device drain of the modeled timeline
    tl = next(t for t in run.timelines if t["path"] == "legacy" and t["step"] == 1)
    mark = next(s for s in tl["syncs"] if s["allowed"] is False)
    ev = next(e for e in legacy_hidden if e["args"]["step"] == 1)
    assert ev["dur"] == pytest.approx(mark["drain_us"] - mark["host_us"])
    # kernels on the device track, launches on the host track
    kernels = [e for e in doc["traceEvents"] if e.get("cat") == "kernel"]
    assert kernels and all(names[(e["pid"], e["tid"])].startswith("device stream")
                           for e in kernels)


def test_measured_trace_without_a_timeline(run: results.RunResult) -> None:
    plain = dataclasses.replace(run, timelines=[], header={
        k: v for k, v in run.header.items() if k != "timeline"})
    doc = json.loads(trace.render(plain))
    _check_common(doc)
    assert "measured" in doc["otherData"]["source"] and doc["otherData"]["profile"] is None
    syncs = [e for e in doc["traceEvents"] if e.get("cat") == "sync"]
    hidden = [e for e in syncs if e["args"]["hidden"]]
    assert len(hidden) == 4 and all(SAMPLER in e["args"]["site"] for e in hidden)
    assert all("unknown" in e["args"]["position"] for e in syncs)


def test_profile_none_runs_without_a_model(tmp_path: Any) -> None:
    out = tmp_path / "result.jsonl"
    opts = runner.RunOptions(device="sim", paths=["legacy"], steps=2, warmup=0, timed=False,
                             profile="none")
    runner.run(runner.prepare(scenario.resolve(["steady"]), opts), opts, str(out))
    res = loader.load(str(out))
    assert "timeline" not in res.header and not res.timelines
    assert all(s.modeled_ms is None for s in res.steps)
    assert "measured" in trace.build(res)["otherData"]["source"]


def test_a_broken_timeline_line_is_one_clear_error(run: results.RunResult,
                                                  tmp_path: Any) -> None:
    src = run.source
    lines = open(src, encoding="utf-8").read().splitlines()
    i = next(k for k, ln in enumerate(lines) if '"type":"timeline"' in ln)
    doc = json.loads(lines[i])
    del doc["latency_us"]
    lines[i] = json.dumps(doc)
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(results.ResultError, match=rf"bad\.jsonl:{i + 1}: timeline\.latency_us"):
        loader.load(str(bad))
    # the whole-document form too
    good = loader.load(src)
    text = good.to_json().replace('"latency_us"', '"latency_usX"', 1)
    docf = tmp_path / "bad.json"
    docf.write_text(text, encoding="utf-8")
    with pytest.raises(results.ResultError, match=r"timelines\[0\]: timeline\.latency_us"):
        loader.load(str(docf))


def test_cpu_run_merges_a_torch_profiler_trace(tmp_path: Any) -> None:
    # real devices (and the CPU target, which tests the plumbing) get a short profiled pass
    # after the timed one; trace.json merges it, renumbered, next to the measured tracks
    out = tmp_path / "result.jsonl"
    opts = runner.RunOptions(device="cpu", paths=["legacy", "flag"], steps=4, warmup=1,
                             repeat=1)
    runner.run(runner.prepare(scenario.resolve(["steady"]), opts), opts, str(out))
    res = loader.load(str(out))
    for path in ("legacy", "flag"):
        assert (tmp_path / "profiler" / f"steady.{path}.json").is_file()
    doc = json.loads(trace.render(res))
    assert doc["otherData"]["profiler_traces"] == [
        os.path.join("profiler", "steady.legacy.json"),
        os.path.join("profiler", "steady.flag.json")]
    procs = {e["pid"]: e["args"]["name"] for e in doc["traceEvents"]
             if e["ph"] == "M" and e["name"] == "process_name"}
    ours = {p for p, n in procs.items() if "torch.profiler" not in n}
    theirs = {p: n for p, n in procs.items() if "torch.profiler" in n}
    assert sorted(procs[p] for p in ours) == ["steady / flag", "steady / legacy"]
    assert theirs and all(p >= 1000 for p in theirs) and not set(theirs) & ours
    assert any(n.startswith("steady / legacy: torch.profiler") for n in theirs.values())
    steps = [e for e in doc["traceEvents"] if e.get("ph") == "X" and e["pid"] in theirs
             and e.get("name") == "step 2"]
    assert len(steps) == 2  # the record_function of a profiled step, once per path


def test_each_wait_is_on_the_host_track_inside_its_op(run: results.RunResult) -> None:
    doc = json.loads(trace.render(run))
    names = _check_common(doc)
    waits = [e for e in doc["traceEvents"] if e.get("cat") == "wait"]
    launches = [e for e in doc["traceEvents"] if e.get("cat") == "launch"]
    assert waits and all(names[(e["pid"], e["tid"])] == "host thread" for e in waits)
    for w in waits:  # nested in the op's launch slice that waited (Perfetto needs nesting)
        assert any(a["pid"] == w["pid"] and a["ts"] <= w["ts"] + 1e-6
                   and w["ts"] + w["dur"] <= a["ts"] + a["dur"] + 1e-6 for a in launches), w
    assert {w["name"] for w in waits} >= {"wait: _local_scalar_dense"}
