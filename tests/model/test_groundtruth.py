"""Cross-checks against native ground truth: the CPU side (simulated backend, comparison
logic) always; the CUDA and NPU sides only on hardware (marked, skipped elsewhere)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from _paths import ROOT

from syncguard.driving.scenario import parse
from syncguard.model.groundtruth import KNOWN_BLIND_SPOTS, compare, native_counter

# Absolute, so the tests pass whatever directory pytest runs from.
DEVICE_CHECK = ROOT / "scripts" / "device_check.sh"
DEVICE_CHECK_910B = DEVICE_CHECK.with_name("device_check_910b.sh")

TINY = """
name = "cc"
vocab_size = 2048
steps = 6
warmup = 1
seed = 1
[[requests]]
id = "a"
count = 3
top_k = 20
temperature = 0.8
[[events]]
step = 2
join = [{ id = "wide", top_k = 1025 }]
[[events]]
step = 4
finish = ["wide"]
"""


@pytest.mark.parametrize("path", ["legacy", "flag", "flag-recompute"])
def test_run_crosscheck_on_simulated_backend_agrees_every_step(path: str) -> None:
    from syncguard.driving.crosscheck import crosscheck_pass
    from syncguard.driving.devices import resolve_target

    res = crosscheck_pass(parse(TINY), path, resolve_target("sim"), "sim-backend")
    assert res["total"] == 6 and res["disagreements"] == []
    # the native side really counted: the token readback every step, plus legacy's check
    per_step = 2 if path == "legacy" else 1
    assert [s["native"] for s in res["steps"]] == [per_step] * 6


def test_compare_lists_every_disagreement_with_known_reasons() -> None:
    ours = {"device.synchronize()": 1, "x.tolist()": 1, "t.item()": 1}
    native = {"device.synchronize()": 0, "x.tolist()": 1, "t.item()": 2}
    out = compare("cuda-debug", ours, native)
    assert [(d.key, d.syncguard, d.native) for d in out] == [
        ("device.synchronize()", 1, 0), ("t.item()", 1, 2)]
    assert out[0].known_reason == KNOWN_BLIND_SPOTS[("cuda-debug", "device.synchronize()")]
    assert out[1].known_reason is None  # unexplained: a real error to report


def test_sim_backend_counter_counts_reads_inside_suppressed_python_calls() -> None:
    from syncguard import SyncGuard, simulated_device

    d = simulated_device("npu", torch_npu=True)
    x = torch.arange(4, device=d)
    counter = native_counter("sim-backend")
    with SyncGuard() as g, counter:
        2 in x  # noqa: B015  one Python-level sync; the backend sees its _local_scalar_dense
        x.tolist()
    assert (g.count, counter.count) == (2, 2)


def test_unknown_mechanism() -> None:
    with pytest.raises(ValueError, match="unknown native counter"):
        native_counter("tpu")


def test_calibrate_cli_on_sim_writes_model_and_report(tmp_path: object) -> None:
    out = str(tmp_path)
    proc = subprocess.run([sys.executable, "-m", "syncguard", "calibrate", "--device", "sim",
                           "--out", out], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert "0 unexplained disagreements" in proc.stdout
    with open(f"{out}/calibration.json") as f:
        cal = json.load(f)
    assert cal["backend"] == "npu" and len(cal["cases"]) > 50
    with open(f"{out}/opmodel-npu.json") as f:
        model = json.load(f)
    (entry,) = model["entries"]
    assert entry["op"] == "aten::multinomial" and entry["evidence"] == "calibrated"
    assert entry["reads"] == 0  # the npu model: the opapi multinomial makes no host read


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_calibrate_on_cuda_has_no_unexplained_disagreement(tmp_path: object) -> None:
    proc = subprocess.run([sys.executable, "-m", "syncguard.driving.calibration", "--device",
                           "cuda", "--out", str(tmp_path)], capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert "0 unexplained disagreements" in proc.stdout, proc.stdout


def _has_npu() -> bool:
    # the real torch_npu, not syncguard's stand-in (which another test module may have put
    # in sys.modules while setting up the simulated device)
    try:
        import torch_npu  # type: ignore[import-not-found]
    except Exception:
        return False
    if getattr(torch_npu, "__syncguard_standin__", False):
        return False
    return bool(torch.npu.is_available())  # type: ignore[attr-defined]


@pytest.mark.npu
@pytest.mark.skipif(not _has_npu(), reason="needs an Ascend NPU with torch_npu")
def test_calibrate_on_npu_has_no_unexplained_disagreement(tmp_path: object) -> None:
    proc = subprocess.run([sys.executable, "-m", "syncguard.driving.calibration", "--device", "npu",
                           "--out", str(tmp_path)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert "0 unexplained disagreements" in proc.stdout, proc.stdout


@pytest.mark.parametrize("script", [DEVICE_CHECK, DEVICE_CHECK_910B], ids=["cuda", "910b"])
def test_device_check_script_is_valid_and_names_real_entry_points(script: Path) -> None:
    import importlib.util
    import re

    text = script.read_text(encoding="utf-8")
    assert subprocess.run(["bash", "-n", str(script)]).returncode == 0
    mods = set(re.findall(r"python -m ([\w.]+)", text))
    assert {"syncguard", "syncguard.driving.calibration", "pytest"} <= mods
    for m in mods:
        assert importlib.util.find_spec(m) is not None, m


@pytest.mark.parametrize("script", [DEVICE_CHECK, DEVICE_CHECK_910B], ids=["cuda", "910b"])
def test_device_check_script_fails_loudly(script: Path) -> None:
    # a crash before "| tee" must not be swallowed, and only real CLI options are used
    import re

    text = script.read_text(encoding="utf-8")
    assert re.search(r"^set -[a-z]*o pipefail", text, re.M)
    assert ("torch.cuda.is_available()" if script == DEVICE_CHECK else
            "torch.npu.is_available()") in DEVICE_CHECK.read_text(encoding="utf-8")
    assert sum(int(t) for t in re.findall(r"timeout (\d+) ", text)) <= 480
    from syncguard.cli import _parser

    run_opts = {o for a in _parser()._subparsers._group_actions[0].choices["run"]._actions
                for o in a.option_strings}
    used = set(re.findall(r"(--[a-z-]+)", text.split("syncguard run", 1)[1].split("\n\n")[0]))
    assert used - {"--device", "--paths"} <= run_opts | {"--paths"}, used - run_opts


# ------------------------------------------------------- native counters, with fake runtimes
class _Registry:
    def __init__(self, two_args: bool) -> None:
        self.callbacks: list = []
        self.two_args = two_args

    def register(self, cb: object, *name: str) -> None:
        if self.two_args and len(name) != 1:
            raise TypeError("register_callback(cb, cb_name) takes 2 arguments")
        if not self.two_args and name:
            raise TypeError("takes 1 argument")
        self.callbacks.append(cb)

    def fire(self, *args: object) -> None:
        for cb in self.callbacks:
            cb(*args)


def _fake_npu(monkeypatch: pytest.MonkeyPatch, with_sync_callbacks: bool) -> dict:
    """A torch_npu whose trace API has the current signatures: ``_activate_npu_trace(mode)``
    and ``register_callback_for_npu_*_synchronization(cb, cb_name)``."""
    import types

    from syncguard.model.groundtruth import TraceCounter

    regs = {w: _Registry(two_args=True) for w in ("stream", "device", "event")}
    trace = types.ModuleType("torch_npu.utils._npu_trace")
    if with_sync_callbacks:
        for w, r in regs.items():
            setattr(trace, f"register_callback_for_npu_{w}_synchronization", r.register)
    activated: list = []

    def activate(mode: int) -> None:
        activated.append(mode)

    tn = types.ModuleType("torch_npu")
    tn._C = types.SimpleNamespace(_activate_npu_trace=activate)  # type: ignore[attr-defined]
    utils = types.ModuleType("torch_npu.utils")
    utils._npu_trace = trace  # type: ignore[attr-defined]
    tn.utils = utils  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "torch_npu", tn)
    monkeypatch.setitem(sys.modules, "torch_npu.utils", utils)
    monkeypatch.setitem(sys.modules, "torch_npu.utils._npu_trace", trace)
    monkeypatch.setattr(TraceCounter, "_registered", {})
    return {"regs": regs, "activated": activated}


def test_npu_trace_counter_registers_with_the_torch_npu_signatures(
        monkeypatch: pytest.MonkeyPatch) -> None:
    fake = _fake_npu(monkeypatch, with_sync_callbacks=True)
    counter = native_counter("npu-trace")
    with counter:
        fake["regs"]["stream"].fire(7)
        fake["regs"]["event"].fire(3)
        fake["regs"]["device"].fire()
    fake["regs"]["stream"].fire(7)  # after exit: not counted
    assert fake["activated"] == [0]
    assert counter.count == 3
    assert all(s.endswith(".py:" + s.rsplit(":", 1)[1]) for s in counter.sites)
    assert counter.sites[0].startswith(__file__.rsplit(".", 1)[0])  # this file, the caller


def test_npu_trace_counter_without_sync_callbacks_refuses(
        monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_npu(monkeypatch, with_sync_callbacks=False)
    with pytest.raises(RuntimeError, match="no synchronization callbacks"):
        with native_counter("npu-trace"):
            pass


def test_cuda_trace_counter_imports_the_trace_module_itself(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # ``import torch`` does not import torch.cuda._gpu_trace; the counter must, and it must
    # count each stream/device/event synchronisation the trace fires
    import importlib

    from syncguard.model.groundtruth import TraceCounter

    gt = importlib.import_module("torch.cuda._gpu_trace")
    monkeypatch.setattr(TraceCounter, "_registered", {})
    monkeypatch.setattr(torch._C, "_activate_gpu_trace", lambda: None)
    regs = {
        "stream": gt.StreamSynchronizationCallbacks,
        "device": gt.DeviceSynchronizationCallbacks,
        "event": gt.EventSynchronizationCallbacks,
    }
    before = {w: list(r.callback_list) for w, r in regs.items()}
    try:
        counter = native_counter("cuda-trace")
        with counter:
            regs["stream"].fire_callbacks(1)
            regs["device"].fire_callbacks()
            regs["event"].fire_callbacks(2)
        assert counter.count == 3
    finally:
        for w, r in regs.items():
            r.callback_list[:] = before[w]


def test_crosscheck_compares_sites_and_fails_on_disagreement(
        monkeypatch: pytest.MonkeyPatch, tmp_path: object) -> None:
    from syncguard.driving import crosscheck
    from syncguard.driving.devices import resolve_target
    from syncguard.model import groundtruth

    sc = parse(TINY)
    ok = crosscheck.crosscheck_pass(sc, "legacy", resolve_target("sim"), "sim-backend")
    step = ok["steps"][3]
    assert step["sites_agree"] and step["syncguard_sites"] == step["native_sites"]
    assert sum(step["native_sites"].values()) == 2
    assert any("sampler.py" in s for s in step["native_sites"])

    class Blind(groundtruth.NativeCounter):
        name = "blind"

    monkeypatch.setattr(groundtruth, "native_counter", lambda kind: Blind())
    bad = crosscheck.crosscheck_pass(sc, "legacy", resolve_target("sim"), "sim-backend")
    assert len(bad["disagreements"]) == 6
    doc = {"mechanism": "blind", "passes": [bad]}
    lines = crosscheck.summary_lines(doc)
    assert "0/6 steps DISAGREE" in lines[1]
    assert "sampler.py" in lines[2] and "native 0 at -" in lines[2]


def test_run_crosscheck_exit_code_follows_agreement(tmp_path: object) -> None:
    from pathlib import Path

    tmp = Path(str(tmp_path))
    (tmp / "cc.toml").write_text(TINY, encoding="utf-8")
    proc = subprocess.run([sys.executable, "-m", "syncguard", "run", str(tmp / "cc.toml"),
                           "--device", "sim", "--out", str(tmp / "out"), "--no-timed",
                           "--crosscheck"], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads((tmp / "out" / "crosscheck.json").read_text(encoding="utf-8"))
    assert all(p["disagreements"] == [] for p in doc["passes"])
    assert len(doc["passes"]) == 3


def test_calibration_exit_code_counts_only_unexplained(monkeypatch: pytest.MonkeyPatch,
                                                       tmp_path: object) -> None:
    from syncguard.driving import calibration

    def fake(kind: str) -> dict:
        return {"kind": kind, "backend": "npu", "mechanisms": ["m"], "versions": {},
                "model": {"entries": []},
                "cases": [{"case": "a", "disagreements": [
                    {"mechanism": "m", "syncguard": 1, "native": 0, "known_reason": "doc"}]}]}

    monkeypatch.setattr(calibration, "calibrate", fake)
    assert calibration.main(["--device", "sim", "--out", str(tmp_path)]) == 0

    def fake_bad(kind: str) -> dict:
        cal = fake(kind)
        cal["cases"][0]["disagreements"][0]["known_reason"] = None
        return cal

    monkeypatch.setattr(calibration, "calibrate", fake_bad)
    assert calibration.main(["--device", "sim", "--out", str(tmp_path)]) == 1


def test_cuda_debug_mode_counter_blames_the_user_line_not_the_warning_frame(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # set_sync_debug_mode("warn") warns from the innermost Python frame (often a wrapper, such
    # as syncguard's own interceptor); the counter takes the user's line from the live stack,
    # past the warnings machinery
    import warnings

    modes: list = []
    monkeypatch.setattr(torch.cuda, "get_sync_debug_mode", lambda: 0)
    monkeypatch.setattr(torch.cuda, "set_sync_debug_mode", modes.append)

    counter = native_counter("cuda-debug")
    with warnings.catch_warnings(record=True) as forwarded, counter:
        warnings.warn("called a synchronizing CUDA operation", stacklevel=1)  # line A
        line_a = sys._getframe().f_lineno - 1
        warnings.warn("something else", DeprecationWarning, stacklevel=1)  # not counted
        torch.arange(3).sum()  # no warning
        warnings.warn("called a synchronizing CUDA operation", stacklevel=1)
    assert modes == ["warn", 0]
    assert counter.count == 2
    assert [str(w.message) for w in forwarded] == ["something else"]
    assert counter.sites[0].endswith(f"test_groundtruth.py:{line_a}")
