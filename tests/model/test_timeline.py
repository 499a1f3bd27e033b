"""syncguard.model (timeline, recorder, profile): the replay on hand-computed timelines,
profiles, the recorder on the simulated device, and the modeled columns of real scenario runs."""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any, Dict, List, Tuple

import pytest
from _paths import DATA

from syncguard.model import recorder, timeline
from syncguard.model.profile import (
    NUMERIC,
    OPTIONAL,
    PROFILE_DIR,
    SOURCES,
    Profile,
    ProfileError,
    load_profile,
    profile_names,
)
from syncguard.model.recorder import Op


def _profile(**over: float) -> Profile:
    base = load_profile("910b")
    values = dict(base.values)
    values.update(launch_us=10.0, view_us=2.0, submit_us=0.0, sync_rtt_us=20.0)
    values.update(over)
    return dataclasses.replace(base, values=values)


@dataclasses.dataclass
class _Ev:
    filename: str = "sampler.py"
    lineno: int = 215
    api: str = "Tensor.__bool__"
    allowed: bool = False
    kind: str = "scalar_read"


def _ops(kernel_us: float, sync_allowed: bool = False) -> List[Op]:
    return [Op("a", 10.0, kernel_us), Op("b", 10.0, kernel_us),
            Op("_local_scalar_dense", 10.0, 5.0, sync=True,
               events=[_Ev(allowed=sync_allowed)]),
            Op("c", 10.0, kernel_us)]


def test_device_bound_step_one_sync_exact_stall_and_bubble() -> None:
    # host launches at 10, 20, 30, 40 (+10 each); kernels of 100 us queue up behind each other
    # a: 10-110, b: 110-210, read: 210-215; the host waits from 30 to the drain (215) plus the
    # 20 us round trip -> resumes at 235, launches c at 245: c 245-345
    r = timeline.replay(_ops(100.0), _profile())
    (s,) = r.syncs
    assert (s.host_us, s.drain_us, s.resume_us, s.stall_us) == (30.0, 215.0, 235.0, 205.0)
    assert s.bubble_us == 30.0  # device idle 215 -> 245: round trip + the next launch
    assert r.latency_us == 345.0 and r.busy_us == 305.0
    assert r.bubble_us == 40.0  # 10 us before the first kernel + the sync's 30
    assert s.site == "sampler.py:215" and s.hidden
    assert r.spans[3] == ("c", 235.0, 245.0, 245.0, 345.0)
    # without the read the host keeps running ahead: c queues at 40 and runs 215-315
    cost = timeline.model_step(_ops(100.0), _profile())
    assert cost.sync_cost_us == 30.0 and cost.sync_bubble_us == 30.0


def test_host_bound_step_one_sync_exact_stall_and_bubble() -> None:
    # kernels of 5 us finish before the next launch: a 10-15, b 20-25, read 30-35; the host
    # waits 30 -> 35 (drain) + 20 -> 55, c launched at 65: 65-70
    r = timeline.replay(_ops(5.0), _profile())
    (s,) = r.syncs
    assert (s.drain_us, s.resume_us, s.stall_us, s.bubble_us) == (35.0, 55.0, 25.0, 30.0)
    assert r.latency_us == 70.0 and r.busy_us == 20.0 and r.bubble_us == 50.0
    cost = timeline.model_step(_ops(5.0), _profile())
    # without the read c is launched at 40 and ends at 45: the read costs 25 us, the device
    # was mostly idle anyway (its idle grows by 25 only)
    assert cost.sync_cost_us == 25.0 and cost.sync_bubble_us == 25.0


def test_sync_cost_grows_with_queued_work_when_device_bound() -> None:
    # the host stall is the queued work plus the round trip; the step's extra latency is the
    # round trip and the next launch, whatever the queue depth
    deep = timeline.replay(_ops(400.0), _profile()).syncs[0]
    shallow = timeline.replay(_ops(100.0), _profile()).syncs[0]
    assert deep.stall_us - shallow.stall_us == 600.0
    assert timeline.model_step(_ops(400.0), _profile()).sync_cost_us == 30.0


def test_allowed_reads_are_not_counted_as_hidden_cost() -> None:
    cost = timeline.model_step(_ops(100.0, sync_allowed=True), _profile())
    assert cost.replay.syncs[0].allowed is True
    assert cost.sync_cost_us == 0.0 and cost.sync_bubble_us == 0.0


def test_submission_stage_delays_kernels() -> None:
    # a task queue stage of 8 us per kernel: a reaches the stream at 18, b at 28 (queue free)
    r = timeline.replay([Op("a", 10.0, 5.0), Op("b", 10.0, 5.0)], _profile(submit_us=8.0))
    assert [sp[3] for sp in r.spans] == [18.0, 28.0]
    assert r.latency_us == 33.0


def test_views_have_no_kernel() -> None:
    r = timeline.replay([Op("view", 2.0, 0.0), Op("a", 10.0, 5.0)], _profile())
    assert r.spans[0] == ("view", 0.0, 2.0, None, None)
    assert r.spans[1][3] == 12.0


# -- profiles ---------------------------------------------------------------------------------
def test_shipped_profiles_name_a_source_for_every_parameter() -> None:
    assert {"910b", "h200"} <= set(profile_names())
    for name in ("910b", "h200"):
        p = load_profile(name)
        assert set(p.sources) == set(NUMERIC) | set(OPTIONAL) | {"combine"}
        for key, src in p.sources.items():
            kind, _, why = src.partition(": ")
            assert kind in SOURCES and len(why) > 20, (name, key)


def _write(tmp_path: Any, doc: Dict[str, Any]) -> str:
    path = os.path.join(str(tmp_path), "p.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(doc, f)
    return path


def test_profile_errors_name_file_and_field(tmp_path: Any) -> None:
    with open(os.path.join(PROFILE_DIR, "h200.json"), encoding="utf-8") as f:
        good = json.load(f)
    cases: List[Tuple[Any, str]] = []
    bad = json.loads(json.dumps(good))
    del bad["params"]["launch_us"]["why"]
    cases.append((bad, "params.launch_us.why"))
    bad = json.loads(json.dumps(good))
    bad["params"]["mem_gbps"]["source"] = "guess"
    cases.append((bad, "params.mem_gbps.source"))
    bad = json.loads(json.dumps(good))
    bad["params"]["kernel_us"]["value"] = -1
    cases.append((bad, "params.kernel_us.value"))
    bad = json.loads(json.dumps(good))
    del bad["params"]["sync_rtt_us"]
    cases.append((bad, "params.sync_rtt_us: missing"))
    bad = json.loads(json.dumps(good))
    bad["params"]["typo_us"] = dict(good["params"]["copy_us"])
    cases.append((bad, "params.typo_us: unknown"))
    for doc, field in cases:
        path = _write(tmp_path, doc)
        with pytest.raises(ProfileError) as ei:
            load_profile(path)
        assert str(ei.value).startswith(f"{path}: {field}"), str(ei.value)
    with pytest.raises(ProfileError, match="shipped: 910b, h200"):
        load_profile("nope")


# -- on the simulated device ------------------------------------------------------------------
def test_recorder_sees_every_launch_with_shapes_and_the_sync() -> None:
    import torch

    from syncguard import SyncGuard
    from syncguard.sim import kernel as simkernel
    from syncguard.sim import simulated_device

    dev = simulated_device("npu")
    prof = load_profile("h200")
    x = torch.ones(4, 1000, device=dev)
    evs: List[Any] = []
    model = timeline.StepModel(prof)
    with model, SyncGuard(on_event=lambda e: (evs.append(e), model.on_event(e))):
        model.begin()
        y = x * 2.0
        if bool(y.sum() > 0):
            pass
        cost, line = model.end(False)
    assert not simkernel.OP_OBSERVERS and not timeline._ACTIVE  # always removed
    names = [sp[0] for sp in cost.replay.spans]
    assert names[:3] == ["mul.Tensor", "sum", "gt.Scalar"] or "mul" in names[0], names
    assert line["shapes"][0][0] == "float32[4, 1000]"
    (s,) = cost.replay.syncs
    assert s.op == "_local_scalar_dense" and s.hidden and s.api == "Tensor.__bool__"
    assert s.site.endswith(f"test_timeline.py:{_line_of('if bool(y.sum() > 0):')}")
    # mul reads and writes 16 kB: kernel_us + 32000 B / 4300 GB/s
    mul = cost.replay.spans[0]
    assert mul[4] - mul[3] == pytest.approx(2.5 + 32000 / 4.3e6)


def _line_of(text: str) -> int:
    with open(__file__, encoding="utf-8") as f:
        for i, line in enumerate(f, 1):
            if text in line and "_line_of" not in line:
                return i
    raise AssertionError(text)


def _counted(name: str, path: str, steps: int = None, warmup: int = None,  # type: ignore
             profile: str = "910b") -> List[Any]:
    from syncguard.driving import devices, runner, scenario

    sc = scenario.resolve([name])[0]
    if steps is not None:
        sc = sc.with_steps(steps, warmup)
    target = devices.resolve_target("sim")
    return runner.run_pass(sc, path, target, True, profile=load_profile(profile))


def test_legacy_models_slower_where_it_syncs_and_equal_where_it_does_not() -> None:
    for name in ("greedy_mix", "steady"):
        legacy, flag = _counted(name, "legacy"), _counted(name, "flag")
        synced = 0
        for a, b in zip(legacy, flag):
            assert a.modeled_ms is not None and b.modeled_ms is not None
            if a.syncs > 0 and a.labels["branch"] == b.labels["branch"]:
                assert a.modeled_ms > b.modeled_ms, (name, a.step)
                assert a.sync_cost_us > 0 and a.sync_bubble_us > 0
                synced += 1
            elif a.syncs == 0:  # greedy steps: the very same launches, the very same model
                assert a.labels["branch"] == b.labels["branch"] == "greedy"
                assert a.modeled_ms == b.modeled_ms and a.bubble_us == b.bubble_us, a.step
                assert a.sync_cost_us == 0.0
        assert synced > 0
    greedy = [r for r in _counted("greedy_mix", "legacy") if r.labels["branch"] == "greedy"]
    assert greedy and all(r.syncs == 0 for r in greedy)


def test_modeled_columns_are_bit_identical_across_runs() -> None:
    from syncguard.driving import scenario

    names = [os.path.basename(p)[:-5] for p in scenario.builtin_paths()]
    for name in names:
        for path in ("legacy", "flag"):
            runs = [[(r.modeled_ms, r.bubble_us, r.sync_cost_us, r.sync_bubble_us)
                     for r in _counted(name, path, steps=3, warmup=1)] for _ in range(2)]
            assert runs[0] == runs[1], (name, path)
            assert all(v is not None for row in runs[0] for v in row)


def test_forward_ms_adds_modeled_device_time() -> None:
    from syncguard.driving import devices, runner, scenario

    sc = scenario.resolve(["steady"])[0].with_steps(3, 1)
    fwd = dataclasses.replace(sc, forward_ms=20.0)
    target = devices.resolve_target("sim")
    prof = load_profile("910b")
    a = runner.run_pass(sc, "flag", target, True, profile=prof)
    b = runner.run_pass(fwd, "flag", target, True, profile=prof)
    launch_ms = prof.values["forward_launch_us"] / 1000.0
    for x, y in zip(a, b):
        # the forward's 20 ms run after its launch; the sampler's host work overlaps it
        # (its launches queue behind the forward), so less than 20 ms is added
        assert y.modeled_ms >= 20.0 + launch_ms
        assert y.modeled_ms - x.modeled_ms < 20.0
        assert y.bubble_us < x.bubble_us


def test_check_gates_on_modeled_bubble_only_when_asked(capsys: pytest.CaptureFixture) -> None:
    from syncguard.cli import EXIT_OK, EXIT_OVER, EXIT_USAGE, main

    base = ["check", "steady", "--device", "sim", "--steps", "4", "--warmup", "1",
            "--config", os.devnull]
    # legacy's hidden read idles the device: over a 1 us budget, within a huge one
    assert main([*base, "--path", "legacy", "--max-syncs", "100"]) == EXIT_OK
    capsys.readouterr()
    assert main([*base, "--path", "legacy", "--max-syncs", "100",
                 "--max-bubble-us", "1"]) == EXIT_OVER
    out = capsys.readouterr().out
    assert "steady legacy: modeled device idle from hidden syncs" in out and "on 910b" in out
    assert main([*base, "--path", "legacy", "--max-syncs", "100",
                 "--max-bubble-us", "1e9"]) == EXIT_OK
    # flag has no hidden read: no modeled idle from syncs, whatever the profile
    assert main([*base, "--path", "flag", "--max-bubble-us", "0", "--profile", "h200"]) \
        == EXIT_OK
    capsys.readouterr()
    assert main([*base, "--path", "flag", "--max-bubble-us", "-1"]) == EXIT_USAGE
    assert main([*base, "--path", "flag", "--max-bubble-us", "1", "--profile",
                 "nope"]) == EXIT_USAGE
    assert "no such profile" in capsys.readouterr().err


# -- every wait (hand-checked) ----------------------------------------------------------------
def test_explicit_synchronize_waits_for_the_drain() -> None:
    # a 10-110, b 110-210 (launched at 10, 20); torch.npu.synchronize() at 22 (view_us 2)
    # waits for the drain at 210 + the 20 us wake-up: the host resumes at 230; c 240-340
    ops = [Op("a", 10.0, 100.0), Op("b", 10.0, 100.0),
           Op("torch.npu.synchronize", 2.0, 0.0, sync=True, events=[_Ev(api="sync")]),
           Op("c", 10.0, 100.0)]
    r = timeline.replay(ops, _profile())
    (s,) = r.syncs
    assert (s.host_us, s.drain_us, s.resume_us, s.stall_us) == (22.0, 210.0, 230.0, 208.0)
    assert s.bubble_us == 30.0 and r.latency_us == 340.0
    assert r.spans[2] == ("torch.npu.synchronize", 20.0, 230.0, None, None)  # host track


def test_event_wait_waits_only_for_work_before_the_record() -> None:
    # a 10-110; record at 12 (marks 110); b launched at 22: 110-210; Event.synchronize at 24
    # waits for 110 (not 210) + 20 -> resumes at 130, while b still runs: no device idle
    ops = [Op("a", 10.0, 100.0), Op("Event.record", 2.0, 0.0, tag=("record", 1)),
           Op("b", 10.0, 100.0),
           Op("Event.synchronize", 2.0, 0.0, sync=True, events=[_Ev()], tag=("event", 1)),
           Op("c", 10.0, 100.0)]
    r = timeline.replay(ops, _profile())
    (s,) = r.syncs
    assert (s.host_us, s.drain_us, s.resume_us) == (24.0, 110.0, 130.0)
    assert s.bubble_us == 0.0  # c (launched at 140) queues behind b: 210-310
    assert r.spans[4][3:] == (210.0, 310.0) and r.latency_us == 310.0


def test_async_pinned_copy_plus_event_is_not_free() -> None:
    # the standard fix: the D2H copy is queued (non_blocking into pinned memory), an event
    # recorded after it, other work launched, then Event.synchronize: the host waits for the
    # copy to finish on the stream (sample 10-110, copy 110-117), not for the later kernel
    ops = [Op("sample", 10.0, 100.0), Op("_copy_from", 10.0, 7.0),
           Op("Event.record", 2.0, 0.0, tag=("record", 7)), Op("next", 10.0, 100.0),
           Op("Event.synchronize", 2.0, 0.0, sync=True, events=[_Ev()], tag=("event", 7))]
    r = timeline.replay(ops, _profile())
    (s,) = r.syncs
    assert s.drain_us == 117.0 and s.resume_us == 137.0 and s.stall_us == 137.0 - 34.0
    assert r.latency_us == 217.0  # 'next' 117-217 overlaps the wait


def test_recorder_sees_explicit_waits_and_event_records_on_the_sim() -> None:
    import torch

    from syncguard import SyncGuard
    from syncguard.sim import simulated_device

    dev = simulated_device("npu")
    npu = torch.npu  # type: ignore[attr-defined]
    prof = load_profile("h200")
    x = torch.ones(4, 1000, device=dev)
    model = timeline.StepModel(prof)
    with model, SyncGuard(on_event=model.on_event):
        model.begin()
        y = x * 2.0
        host = torch.empty(4, 1000).pin_memory()
        host.copy_(y, non_blocking=True)
        ev = npu.Event()
        ev.record()
        z = y * 3.0
        ev.synchronize()
        npu.synchronize()
        cost, _ = model.end(False)
    names = [sp[0] for sp in cost.replay.spans]
    assert "Event.record" in names and "Event.synchronize" in names
    assert "torch.npu.synchronize" in names
    waits = [s for s in cost.replay.syncs]
    assert [w.op for w in waits] == ["Event.synchronize", "torch.npu.synchronize"]
    copy_end = next(sp[4] for sp in cost.replay.spans if sp[0] == "_copy_from")
    mul2_end = [sp[4] for sp in cost.replay.spans if sp[0].startswith("mul")][1]
    assert waits[0].drain_us == pytest.approx(copy_end)  # the event: up to the copy only
    assert waits[1].drain_us == pytest.approx(mul2_end)  # the device: everything
    assert z is not None


def test_launch_queue_limit_blocks_the_host() -> None:
    # depth 2: kernels of 100 us launched every 10 us; the 3rd launch (host at 30) finds two
    # pending (ending 110 and 210) and blocks until the first ends at 110
    ops = [Op(f"k{i}", 10.0, 100.0) for i in range(4)]
    r = timeline.replay(ops, _profile(queue_depth=2))
    assert [sp[1:3] for sp in r.spans] == [(0.0, 10.0), (10.0, 20.0), (20.0, 110.0),
                                           (110.0, 210.0)]
    assert [sp[3:] for sp in r.spans] == [(10.0, 110.0), (110.0, 210.0), (210.0, 310.0),
                                          (310.0, 410.0)]
    assert r.queue_wait_us == (110.0 - 30.0) + (210.0 - 120.0)
    unbounded = timeline.replay(ops, _profile(queue_depth=0))
    assert unbounded.queue_wait_us == 0.0 and unbounded.spans[3][2] == 40.0
    assert load_profile("h200").values["queue_depth"] == 1024


def test_item_pays_its_copy_once() -> None:
    import torch

    from syncguard import SyncGuard
    from syncguard.sim import simulated_device

    dev = simulated_device("npu")
    prof = load_profile("h200")
    p = prof.values
    x = torch.ones(1, device=dev)
    model = timeline.StepModel(prof)
    with model, SyncGuard(on_event=model.on_event):
        model.begin()
        x.item()
        cost, _ = model.end(False)
    (s,) = cost.replay.syncs
    # launch, then the 4-byte copy on the stream, then the wake-up: the copy counted once
    copy = p["kernel_us"] * 0 + p["copy_us"] + 4 / (p["d2h_gbps"] * 1e3)
    assert s.resume_us == pytest.approx(p["launch_us"] + copy + p["sync_rtt_us"])
    assert s.resume_us == pytest.approx(20.0, abs=0.01)  # 10 + 5 + 5: 10-20 us is typical


def test_sort_passes_and_small_matmul_efficiency() -> None:
    import torch

    from syncguard.sim import simulated_device

    dev = simulated_device("npu")
    prof = load_profile("h200")
    p = prof.values
    rec = recorder.Recorder(prof)
    from syncguard.sim import kernel as simkernel

    simkernel.OP_OBSERVERS.append(rec.on_op)
    try:
        v = torch.ones(1, 32000, device=dev)
        torch.sort(v, dim=-1)
        a = torch.ones(8, 4096, device=dev, dtype=torch.float16)
        w = torch.ones(4096, 4096, device=dev, dtype=torch.float16)
        torch.mm(a, w)
    finally:
        simkernel.OP_OBSERVERS.remove(rec.on_op)
    ops = {o.name: o for o in rec.take()}
    # sort: in 128 kB, out 128 kB values + 256 kB int64 indices, 4 passes over all of it
    assert ops["sort"].dev_us == pytest.approx(
        p["kernel_us"] + 4 * (128000 + 128000 + 256000) / (p["mem_gbps"] * 1e3))
    # mm, M = 8: math at 8 / (8 + 64) of 790 TFLOP/s; memory (33.6 MB) still decides
    flops = 2.0 * 8 * 4096 * 4096
    math_us = flops / (p["matmul_tflops_16"] * (8 / 72) * 1e6)
    mem_us = (8 * 4096 * 2 + 4096 * 4096 * 2 + 8 * 4096 * 2) / (p["mem_gbps"] * 1e3)
    assert ops["mm"].dev_us == pytest.approx(p["kernel_us"] + max(math_us, mem_us))
    assert math_us > flops / (p["matmul_tflops_16"] * 1e6) * 8  # well below peak


# -- the model's outputs, pinned ----------------------------------------------------------------
#: Scenario, path, profile, steps (None: the scenario's), warm-up: the runs whose modeled
#: outputs tests/data/golden/timeline_model.json pins (computed by the recorder before it was
#: made cheap: every later change must give the very same numbers, bit for bit).
_PINNED = [("tiny_vocab", "legacy", "910b", None, None), ("tiny_vocab", "flag", "910b", None, None),
           ("boundary", "legacy", "910b", None, None), ("boundary", "flag", "h200", None, None),
           ("greedy_mix", "legacy", "h200", 8, 1), ("seeded", "flag-recompute", "910b", 8, 1)]


class _Lines:
    """A result writer that keeps the timeline lines (run_pass's ``writer``)."""

    def __init__(self) -> None:
        self.lines: List[Dict[str, Any]] = []

    def step(self, rec: Any, evs: Any) -> None:
        pass

    def timeline(self, line: Dict[str, Any]) -> None:
        self.lines.append(line)


def _model_outputs(name: str, path: str, profile: str, steps: Any, warmup: Any,
                   sites: bool = False) -> Dict[str, Any]:
    """Everything the model gives a counted pass: each step's modeled columns and timeline
    line (op spans and shapes of the traced steps as one digest; sync sites, which name
    absolute paths and sampler lines, only with ``sites``)."""
    import hashlib

    from syncguard.driving import devices, runner, scenario

    sc = scenario.resolve([name])[0]
    if steps is not None:
        sc = sc.with_steps(steps, warmup)
    w = _Lines()
    recs = runner.run_pass(sc, path, devices.resolve_target("sim"), True, writer=w,
                           profile=load_profile(profile))
    out: List[Dict[str, Any]] = []
    trace: List[Any] = []
    for rec, line in zip(recs, w.lines):
        row = {k: v for k, v in line.items()
               if k not in ("scenario", "path", "profile", "spans", "shapes", "syncs")}
        row["syncs"] = [{k: v for k, v in s.items() if sites or k != "site"}
                        for s in line["syncs"]]
        row["record"] = [rec.modeled_ms, rec.bubble_us, rec.sync_cost_us, rec.sync_bubble_us]
        if "spans" in line:
            trace.append([line["step"], line["spans"], line["shapes"]])
        out.append(row)
    digest = hashlib.sha256(json.dumps(trace).encode()).hexdigest()
    return {"steps": out, "traced_steps": [t[0] for t in trace], "trace_sha256": digest}


def test_modeled_outputs_match_the_pinned_golden() -> None:
    """Device time, idle, per-step latency, syncs and the trace's spans and shapes of six
    counted passes (two profiles, paths with and without hidden reads, joins and leaves)
    equal, bit for bit, what the model computed before its recorder was made cheap
    (SYNCGUARD_UPDATE_GOLDEN=1 rewrites the file: only for a change meant to move the
    model's numbers)."""
    got = {"/".join(str(x) for x in run): _model_outputs(*run) for run in _PINNED}
    path = str(DATA / "golden" / "timeline_model.json")
    if os.environ.get("SYNCGUARD_UPDATE_GOLDEN") == "1":  # one line per step: small diffs
        with open(path, "w", encoding="utf-8", newline="\n") as f:
            f.write("{\n" + ",\n".join(
                f'{json.dumps(k)}: {{"traced_steps": {json.dumps(v["traced_steps"])}, '
                f'"trace_sha256": {json.dumps(v["trace_sha256"])}, "steps": [\n'
                + ",\n".join(json.dumps(row) for row in v["steps"]) + "]}"
                for k, v in got.items()) + "\n}\n")
    with open(path, encoding="utf-8") as f:
        want = json.load(f)
    for key in want:
        assert got[key] == want[key], f"{key}: the modeled outputs moved ({path})"
    assert sorted(got) == sorted(want)


def _count_replays(monkeypatch: pytest.MonkeyPatch) -> Dict[str, int]:
    """Count the model's replays (``timeline.model_step`` calls) in ``["n"]``."""
    calls = {"n": 0}
    real = timeline.model_step

    def counting(*a: Any, **k: Any) -> Any:
        calls["n"] += 1
        return real(*a, **k)

    monkeypatch.setattr(timeline, "model_step", counting)
    return calls


def test_a_repeated_step_reuses_its_replay_with_the_same_outputs(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The shipped scenarios small enough for a test (branch switches, joins and leaves,
    greedy steps), a path with hidden reads and one without: the model that reuses the
    previous step's replay for a step with the same ops gives what replaying every step
    gives, sync sites included, and it does reuse (fewer replays)."""
    calls = _count_replays(monkeypatch)
    reused = 0
    for name in ("tiny_vocab", "boundary", "greedy_mix", "min_p", "steady"):
        for path in ("legacy", "flag"):
            outs = []
            for memo in (False, True):
                monkeypatch.setattr(timeline.StepModel, "memo", memo)
                calls["n"] = 0
                outs.append((_model_outputs(name, path, "910b", 8, 1, sites=True), calls["n"]))
            (ref, n_ref), (got, n_got) = outs
            assert got == ref, (name, path)
            assert n_ref == 8 and n_got <= n_ref
            reused += n_ref - n_got
    assert reused > 0


def test_a_kernel_is_costed_by_its_bytes_only_when_memory_decides() -> None:
    """Two kernels with the same bytes and different element counts share a launch record
    when memory bound (910b: the record's time is the bytes' alone), and not when the vector
    units decide (a profile with slow vector units): each time is the model's formula."""
    import torch

    from syncguard.sim import kernel as simkernel
    from syncguard.sim import simulated_device

    dev = simulated_device("npu")
    a = torch.ones(2000, device=dev, dtype=torch.float32)  # 8000 B in, 8000 B out, 2000 elems
    b = torch.ones(1000, device=dev, dtype=torch.float64)  # 8000 B in, 8000 B out, 1000 elems
    for slow_vector in (False, True):
        base = load_profile("910b")
        values = dict(base.values)
        if slow_vector:
            values["vector_tflops"] = 1e-6  # 1 element per us
        prof = dataclasses.replace(base, values=values)
        rec = recorder.Recorder(prof)
        rec.keep_shapes = False
        simkernel.OP_OBSERVERS.append(rec.on_op)
        try:
            torch.neg(a)
            torch.neg(b)
        finally:
            simkernel.OP_OBSERVERS.remove(rec.on_op)
        ka, kb = rec.take()
        p = prof.values
        mem = 16000.0 / (p["mem_gbps"] * 1e3)
        if slow_vector:
            assert rec.bytes_only is False and ka is not kb
            assert ka.dev_us == p["kernel_us"] + 2000.0 / (p["vector_tflops"] * 1e6)
            assert kb.dev_us == p["kernel_us"] + 1000.0 / (p["vector_tflops"] * 1e6)
        else:
            assert rec.bytes_only is True and ka is kb
            assert ka.dev_us == p["kernel_us"] + mem


def test_a_step_with_other_sizes_is_replayed_afresh(monkeypatch: pytest.MonkeyPatch) -> None:
    """Steps of the same ops, on small or larger tensors (a batch that grew), first the
    traced steps (their lines show shapes), then untraced ones: a step on other sizes gets
    its own replay and its own modeled latency; a step the same as the one before reuses
    its replay; a traced line shows its own shapes."""
    import torch

    from syncguard.sim import simulated_device

    dev = simulated_device("npu")
    calls = _count_replays(monkeypatch)
    small = torch.ones(4, 100000, device=dev)
    large = torch.ones(8, 100000, device=dev)
    model = timeline.StepModel(load_profile("910b"))
    results = []
    with model:
        for x in (small, large, large, small, large, large):
            model.begin()
            torch.exp(x * 2.0)
            results.append(model.end(False))
    lat = [c.replay.latency_us for c, _ in results]
    assert lat[1] > lat[0] and lat[4] > lat[3]
    assert lat[:3] == lat[3:] and calls["n"] == 4  # steps 3 and 6 reuse; 4 is new: sizes
    assert results[0][1]["shapes"][0] == ["float32[4, 100000]"]
    assert results[1][1]["shapes"][0] == ["float32[8, 100000]"]
    assert "shapes" not in results[3][1]


def test_same_ops_compares_what_the_replay_reads() -> None:
    base = [Op("a", 10.0, 5.0), Op("r", 10.0, 1.0, sync=True, events=[_Ev()])]
    assert recorder.same_ops(base, [Op("a", 10.0, 5.0),
                                    Op("r", 10.0, 1.0, sync=True, events=[_Ev()])])
    for other in (Op("b", 10.0, 5.0), Op("a", 11.0, 5.0), Op("a", 10.0, 6.0),
                  Op("a", 10.0, 5.0, sync=True, events=[_Ev()]),
                  Op("a", 10.0, 5.0, tag=("record", 1))):
        assert not recorder.same_ops(base, [other, base[1]]), other
    for ev in (_Ev(lineno=1), _Ev(api="Tensor.item"), _Ev(allowed=True)):
        assert not recorder.same_ops(base, [base[0], Op("r", 10.0, 1.0, sync=True,
                                                          events=[ev])]), ev
    assert not recorder.same_ops(base, base[:1])


def test_device_side_waits_are_met_on_the_one_modeled_stream() -> None:
    """Stream.wait_event, Stream.wait_stream and Event.wait: the host does not wait, and on
    the one in-order stream the work they wait for is queued ahead of all later launches:
    the same step with them replays exactly as without them (no wait, same spans)."""
    import torch

    from syncguard import SyncGuard
    from syncguard.sim import simulated_device

    dev = simulated_device("npu")
    npu = torch.npu  # type: ignore[attr-defined]
    prof = load_profile("910b")
    x = torch.ones(4, 1000, device=dev)

    def step(waits: bool) -> Tuple[Any, Dict[str, Any]]:
        model = timeline.StepModel(prof)
        with model, SyncGuard(on_event=model.on_event):
            model.begin()
            y = x * 2.0
            ev = npu.Event()
            ev.record()
            if waits:
                s = npu.Stream()
                s.wait_event(ev)
                s.wait_stream(npu.current_stream())
                ev.wait(s)
                npu.current_stream().wait_event(ev)
            torch.exp(y)
            return model.end(False)

    (a, la), (b, lb) = step(False), step(True)
    assert b.replay.syncs == [] and b.replay.latency_us == a.replay.latency_us
    assert lb["spans"] == la["spans"] and "Event.record" in [sp[0] for sp in lb["spans"]]


def test_a_traced_step_shows_shapes_of_launches_first_seen_untraced() -> None:
    """Launch records are shared between passes (one profile): a matmul and an op with a
    host tensor, first recorded in an untraced step of one pass, still show their input
    shapes in a traced step of the next pass."""
    import torch

    from syncguard.sim import simulated_device

    dev = simulated_device("npu")
    a = torch.ones(3, 40, device=dev)
    w = torch.ones(40, 24, device=dev)
    host = torch.tensor(2.0)

    def ops() -> None:
        torch.mm(a, w)
        torch.add(a, host)

    prof = load_profile("910b")
    first = timeline.StepModel(prof)
    with first:
        for _ in range(timeline.TRACE_STEPS):
            first.begin()
            torch.neg(a)
            first.end(False)
        first.begin()  # untraced: its lines show no shapes
        ops()
        assert "shapes" not in first.end(False)[1]
    second = timeline.StepModel(prof)
    with second:
        second.begin()
        ops()
        _, line = second.end(False)
    assert line["shapes"] == [["float32[3, 40]", "float32[40, 24]"],
                              ["float32[3, 40]", "float32[]"]]


def _workload(dev: Any) -> None:
    """Ops of every kind the recorder keys differently: kernels (one with keyword
    arguments, one with a tuple result), a view, a tensor list, a matmul, a host tensor, a
    copy in each direction and on the device, and a read."""
    import torch

    x = torch.ones(4, 100, device=dev)
    w = torch.ones(100, 8, device=dev)
    y = x * 2.0
    torch.empty_like(y, dtype=torch.float16)
    y.view(-1)
    torch.sort(y, -1)
    torch.cat([y, y])
    torch.mm(x, w)
    y + torch.tensor(2.0)
    torch.ones(3).to(dev)
    torch.empty_like(y).copy_(y)
    y.sum().item()


@pytest.mark.parametrize("slow_vector", [False, True])
def test_the_device_records_what_the_observer_records(slow_vector: bool) -> None:
    """A recorder installed as the device's (what a counted pass does: the device looks up
    the launch records itself) records the same launches, with the same input shapes, as
    the same recorder called for every op as an observer; an op that repeats takes the
    record filed the first time (the same object). With slow vector units the key counts
    the result's elements too."""
    from syncguard import SyncGuard
    from syncguard.sim import kernel as simkernel
    from syncguard.sim import simulated_device

    dev = simulated_device("npu")
    prof = load_profile("910b")
    if slow_vector:
        prof = dataclasses.replace(prof, values={**prof.values, "vector_tflops": 1e-6})

    slow: List[str] = []  # the ops the device handed to record() on the repeat

    def recorded(as_device: bool) -> Tuple[List[Op], List[Any]]:
        rec = recorder.Recorder(prof)
        rec.keep_shapes = True
        record = rec.record

        def counting(op: Any, *a: Any) -> None:
            slow.append(op._schema.name.split("::")[-1])
            record(op, *a)
        if as_device:
            simkernel.RECORDER = rec  # type: ignore[assignment]
        else:
            simkernel.OP_OBSERVERS.append(rec.on_op)
        try:
            with SyncGuard(on_event=rec.on_event):
                _workload(dev)
                rec.take()
                shapes, rec.shapes = rec.shapes, []
                if as_device:
                    rec.record = counting  # type: ignore[method-assign]
                _workload(dev)  # again: the launch records are filed now
        finally:
            simkernel.RECORDER = None
            if rec.on_op in simkernel.OP_OBSERVERS:
                simkernel.OP_OBSERVERS.remove(rec.on_op)
        assert shapes is not None and rec.shapes is not None
        assert len(shapes) == len(rec.shapes)  # one entry per op, in both passes
        return rec.take(), rec.shapes

    (by_device, device_shapes), (by_observer, observer_shapes) = \
        recorded(True), recorded(False)
    assert recorder.Recorder(prof).count_elements is slow_vector
    assert recorder.same_ops(by_device, by_observer)
    assert device_shapes == observer_shapes
    assert len(by_device) == len(recorder.op_shapes(device_shapes))
    # every launch is the shared record but the two syncs (the blocking copy from pageable
    # host memory and the scalar read), which carry their own events
    assert [a.name for a, b in zip(by_device, by_observer) if a is not b] == \
        ["_copy_from", "_local_scalar_dense"]
    assert ["float32[4, 100]", "float32[100, 8]"] in recorder.op_shape_texts(device_shapes)
    assert [recorder.shape_text(s) for s in recorder.op_shapes(device_shapes)] == \
        recorder.op_shape_texts(device_shapes)
    # on the repeat the device looks up every kernel and view itself, the tuple result of
    # sort and the copy on the device too; what comes to record() is what it may not key
    # by bytes: a tensor list, a matmul (by shapes), a host tensor argument, the copy from
    # the host and the read
    assert sorted(slow) == ["_copy_from", "_local_scalar_dense", "add", "cat", "mm"], slow


def test_a_model_inside_another_restores_the_device_recorder() -> None:
    from syncguard.sim import kernel as simkernel
    from syncguard.sim import simulated_device

    simulated_device("npu")
    prof = load_profile("910b")
    outer, inner = timeline.StepModel(prof), timeline.StepModel(prof)
    with outer:
        assert simkernel.RECORDER is outer.rec
        with inner:
            assert simkernel.RECORDER is inner.rec
        assert simkernel.RECORDER is outer.rec
    assert simkernel.RECORDER is None and not timeline._ACTIVE


def test_a_warm_up_step_keeps_no_shapes() -> None:
    """Only the traced steps' lines show input shapes, so a warm-up step does not read
    them; the first step after it does."""
    import torch

    from syncguard.sim import simulated_device

    dev = simulated_device("npu")
    x = torch.ones(4, 100, device=dev)
    model = timeline.StepModel(load_profile("910b"))
    with model:
        model.begin(warmup=True)
        assert not model.rec.keep_shapes
        torch.neg(x)
        assert "shapes" not in model.end(True)[1]
        model.begin()
        assert model.rec.keep_shapes
        torch.neg(x)
        _, line = model.end(False)
    assert line["shapes"] == [["float32[4, 100]"]] and len(line["spans"]) == 1


def test_traced_steps_share_one_object_per_shape() -> None:
    """A traced step keeps its inputs' shapes until it ends; equal shapes are one object
    (the first seen), so later traced steps keep no new objects (a garbage collection of
    them cost the model more than reading them), whichever way the op was recorded."""
    import torch

    from syncguard import SyncGuard
    from syncguard.sim import simulated_device

    dev = simulated_device("npu")
    x = torch.ones(4, 100, device=dev)
    seen = []
    with SyncGuard(), timeline.StepModel(load_profile("910b")) as model:
        for _ in range(2):
            model.begin()
            torch.neg(x)  # the device records it (after the first time)
            torch.cat([x, x])  # record() does (a tensor list)
            torch.empty_like(x).copy_(x)  # a copy on the device
            seen.append([s for s in model.rec.shapes or [] if isinstance(s, torch.Size)])
            model.end(False)
    first, second = seen
    assert len(first) == len(second) >= 5 and all(s == (4, 100) for s in first)
    assert all(a is first[0] for a in first + second)
