"""Measuring a device profile (syncguard calibrate --profile-out): the plumbing on CPU, the
real measurement on hardware (marked), and the modeled-versus-measured comparison."""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

from syncguard.driving import calibration
from syncguard.model.profile import load_profile


def test_measured_profile_loads_and_marks_what_it_measured(tmp_path: Any) -> None:
    import torch

    base = load_profile("h200")
    doc = calibration.measure_profile(torch.device("cpu"), base, small=True)
    path = os.path.join(str(tmp_path), "cal.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(doc, f)
    prof = load_profile(path)
    measured = {k for k, v in doc["params"].items() if v["source"] == "calibrated"}
    assert {"launch_us", "sync_rtt_us", "mem_gbps", "h2d_gbps", "d2h_gbps", "kernel_us",
            "copy_us", "matmul_tflops_16", "matmul_tflops_32", "view_us"} == measured
    assert all(prof.values[k] > 0 for k in measured)
    assert all("measured by syncguard calibrate" in prof.sources[k] for k in measured)
    # what was not measured keeps the base profile's value and source
    assert prof.values["submit_us"] == base.values["submit_us"]
    assert prof.sources["forward_launch_us"] == base.sources["forward_launch_us"]
    assert prof.calibrated is not None and prof.calibrated["torch"] == torch.__version__


def test_calibrate_profile_needs_a_real_device(capsys: pytest.CaptureFixture) -> None:
    from syncguard.cli import EXIT_USAGE, main

    assert main(["calibrate", "--device", "sim", "--profile-out", "x.json"]) == EXIT_USAGE
    assert "--device cuda or npu" in capsys.readouterr().err
    assert not os.path.exists("x.json")


def test_modeled_vs_measured(tmp_path: Any) -> None:
    from syncguard.results.format import StepRecord
    from syncguard.results.writer import ResultWriter

    def write(name: str, pass_: str, field: str, values: Any) -> str:
        path = os.path.join(str(tmp_path), name)
        w = ResultWriter(path, {"timeline": {"profile": "p"}})
        for i, v in enumerate(values):
            w.step(StepRecord(scenario="s", path="legacy", pass_=pass_, step=i, warmup=i == 0,
                              batch_size=1, syncs=0, allowed=0,
                              latency_ms=v if field == "latency_ms" else None,
                              modeled_ms=v if field == "modeled_ms" else None), [])
        w.close(True)
        return path

    model = write("m.jsonl", "counted", "modeled_ms", [9.0, 1.1, 1.1, 1.1])
    real = write("r.jsonl", "timed", "latency_ms", [9.0, 1.0, 1.0, 1.0])
    lines, worst = calibration.modeled_vs_measured(model, real)
    assert worst == pytest.approx(0.1)
    assert "legacy: modeled 1.100 ms, measured 1.000 ms per step (+10.0%)" in "\n".join(lines)


@pytest.mark.cuda
def test_measured_cuda_profile_is_plausible() -> None:
    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    doc = calibration.measure_profile(torch.device("cuda"), load_profile("h200"))
    p = {k: v["value"] for k, v in doc["params"].items()}
    assert 0.5 < p["launch_us"] < 200 and 1 < p["sync_rtt_us"] < 2000
    assert p["mem_gbps"] > 100 and p["matmul_tflops_16"] > 1


@pytest.mark.npu
def test_measured_npu_profile_is_plausible() -> None:
    from syncguard.driving.devices import resolve_target

    try:
        target = resolve_target("npu")
    except Exception as exc:
        pytest.skip(f"needs an Ascend NPU: {exc}")
    doc = calibration.measure_profile(target.device, load_profile("910b"))
    p = {k: v["value"] for k, v in doc["params"].items()}
    assert 0.5 < p["launch_us"] < 500 and p["mem_gbps"] > 50
