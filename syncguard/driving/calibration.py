"""Calibration: run the catalogue under syncguard and the native ground truth side by side.

Run as a child process (``python -m syncguard.driving.calibration --device cuda --out DIR``): trace
activation cannot be undone. Writes ``calibration.json`` (per case: expected, syncguard, native
per mechanism, disagreements with reasons) and, from the in-kernel cases, a calibrated op sync
model ``opmodel-<backend>.json`` with the torch, runtime and driver versions.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import subprocess
import sys
from typing import Any, Dict, List, Optional, Tuple

from ..core.events import IN_KERNEL
from ..core.opmodel import _DIR, parse_model
from ..devicenames import HARDWARE
from ..errors import EXIT_INTERNAL, EXIT_OK, EXIT_OVER, UsageError
from ..model.groundtruth import KNOWN_BLIND_SPOTS, native_counter
from ..model.profile import ProfileError, load_profile, parse_profile
from ..process.atomic import write_file, write_text
from ..results.loader import load
from .devices import DeviceError, prepare_process, resolve_target

MECHANISMS = {"cuda": ["cuda-debug", "cuda-trace"], "npu": ["npu-trace"], "sim": ["sim-backend"]}


def _versions(kind: str) -> Dict[str, Optional[str]]:
    import torch

    v: Dict[str, Optional[str]] = {"torch": torch.__version__, "python": platform.python_version()}
    if kind == "cuda":
        v["cuda_runtime"] = torch.version.cuda
        v["device"] = torch.cuda.get_device_name()
        try:
            v["driver"] = subprocess.run(
                ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                capture_output=True, text=True, timeout=20).stdout.strip() or None
        except Exception:
            v["driver"] = None
    elif kind == "npu":
        tn = sys.modules.get("torch_npu")
        v["torch_npu"] = getattr(tn, "__version__", None)
        v["device"] = str(torch.npu.get_device_name())  # type: ignore[attr-defined]
        home = os.environ.get("ASCEND_TOOLKIT_HOME")
        v["cann_home"] = home
        v["cann"] = _cann_version(home)
    else:
        v["device"] = "simulated npu (syncguard)"
    return v


def _cann_version(home: Optional[str]) -> Optional[str]:
    """CANN's version from the toolkit's install info (best effort; None when not found)."""
    if not home:
        return None
    for name in ("ascend_toolkit_install.info", "version.cfg"):
        for folder in (home, os.path.join(home, "latest")):
            try:
                with open(os.path.join(folder, name), encoding="utf-8") as f:
                    for line in f:
                        key, _, value = line.strip().partition("=")
                        if key in ("version", "toolkit_installed_version",
                                   "runtime_running_version") and value:
                            return value.strip("[]\"' ").split(":")[0] or None
            except OSError:
                continue
    return None


def calibrate(kind: str) -> Dict[str, Any]:
    """Run every catalogue case on ``kind`` (cuda, npu or sim)."""
    import torch

    from ..core.catalogue import CATCH, ZERO  # torch: after the child's device is prepared
    from ..core.guard import SyncGuard
    target = resolve_target(kind)
    dev = str(target.device)
    backend = "cuda" if kind == "cuda" else "npu"  # sim models the npu
    mechs = MECHANISMS[kind]
    rows: List[Dict[str, Any]] = []
    for case in CATCH + ZERO:
        row: Dict[str, Any] = {"case": case.name, "line": case.line,
                               "expected": case.expected(backend), "native": {}}
        for mech in mechs:
            counter = native_counter(mech)
            with SyncGuard(exhaustive=target.exhaustive) as g:
                with counter:
                    try:
                        case.fn(dev)
                    except Exception as exc:  # a case that cannot run here is reported
                        row["error"] = f"{type(exc).__name__}: {exc}"
            row["syncguard"] = g.count + g.allowed_count
            row["syncguard_visible"] = sum(e.count for e in g.events if e.kind != IN_KERNEL)
            row["syncguard_sites"] = sorted({e.site for e in g.events})
            row["native"][mech] = counter.count
            row["native_sites_" + mech] = sorted(set(counter.sites))
        row["disagreements"] = [
            {"mechanism": m, "syncguard": row["syncguard"], "native": n,
             "known_reason": KNOWN_BLIND_SPOTS.get((m, case.name))}
            for m, n in row["native"].items() if n != row["syncguard"]
        ]
        rows.append(row)
    # In-kernel reads per op = what the best native mechanism saw minus what is visible.
    best = mechs[-1]
    model_entries = []
    for row in rows:
        if row["case"] == "torch.multinomial":
            reads = row["native"][best] - _setup_syncs(row)
            model_entries.append({
                "op": "aten::multinomial", "reads": max(reads, 0),
                "when": "no_replacement_or_one_sample", "evidence": "calibrated",
                "where": f"syncguard calibrate --device {kind}: native {best} count minus "
                         f"visible host reads of the case"})
    del torch
    return {"schema": 1, "kind": kind, "backend": backend, "mechanisms": mechs,
            "versions": _versions(kind), "cases": rows,
            "model": {"schema": 1, "backend": backend, "entries": model_entries,
                      "versions": _versions(kind)}}


def _setup_syncs(row: Dict[str, Any]) -> int:
    """The visible (non in-kernel) syncs of a case: its setup copies."""
    return int(row["syncguard_visible"])


def summary_lines(cal: Dict[str, Any]) -> List[str]:
    lines = [f"calibration on {cal['kind']} ({cal['versions'].get('device')}), torch "
             f"{cal['versions'].get('torch')}: mechanisms {', '.join(cal['mechanisms'])}"]
    bad = 0
    for r in cal["cases"]:
        for d in r["disagreements"]:
            why = d["known_reason"] or "UNEXPLAINED"
            if not d["known_reason"]:
                bad += 1
            lines.append(f"  {r['case']}: syncguard {d['syncguard']} vs {d['mechanism']} "
                         f"{d['native']} ({why})")
        if "error" in r:
            lines.append(f"  {r['case']}: could not run: {r['error']}")
    lines.extend(question_lines(cal))
    lines.append(f"{len(cal['cases'])} cases, {bad} unexplained disagreements")
    return lines


def question_lines(cal: Dict[str, Any]) -> List[str]:
    """One line per catalogue case whose count was decided from source, not measured
    (:data:`syncguard.core.catalogue.QUESTIONS`): what the op model says and what this device's
    native mechanisms saw. A disagreement is also listed above as unexplained (and fails the
    check): correct the model's entry."""
    from ..core.catalogue import QUESTIONS  # torch: as calibrate

    rows = {r["case"]: r for r in cal["cases"]}
    out = []
    for name in QUESTIONS:
        r = rows.get(name)
        if r is None:
            continue
        setup = r["syncguard"] - r["expected"]
        native = ", ".join(f"{m} {n}" for m, n in r["native"].items())
        verdict = ("confirmed" if all(n == r["syncguard"] for n in r["native"].values())
                   else "CORRECT THE MODEL")
        out.append(f"  question {name}: {cal['backend']} model {r['expected']} "
                   f"(+{setup} setup) = syncguard {r['syncguard']}; native {native}: {verdict}")
    return out


def main(argv: Optional[List[str]] = None) -> int:
    """Exit 0: every disagreement explained; 1: some unexplained (listed)."""
    ap = argparse.ArgumentParser(prog="python -m syncguard.driving.calibration")
    ap.add_argument("--device", choices=sorted(MECHANISMS))
    ap.add_argument("--out")
    ap.add_argument("--modeled-vs-measured", nargs=2, metavar=("MODEL", "MEASURED"),
                    help="compare a simulated run's modeled step latency with a device run's "
                    "measured one (result files) and exit")
    a = ap.parse_args(argv)
    if a.modeled_vs_measured:
        lines, _ = modeled_vs_measured(*a.modeled_vs_measured)
        print("\n".join(lines))
        return 0
    if not a.device or not a.out:
        ap.error("--device and --out are required")

    prepare_process(a.device)  # a broken torch_npu must not crash `import torch`
    try:
        cal = calibrate(a.device)
    except DeviceError as exc:
        print(f"syncguard: error: {exc}", file=sys.stderr)
        return 2

    # the one writer: atomic, never through a link, a full disk one line
    write_text(os.path.join(a.out, "calibration.json"), json.dumps(cal, indent=1))
    write_text(os.path.join(a.out, f"opmodel-{cal['backend']}.json"),
               json.dumps(cal["model"], indent=1))
    print("\n".join(summary_lines(cal)))
    return 1 if unexplained(cal) else 0


def unexplained(cal: Dict[str, Any]) -> int:
    """Disagreements with the native ground truth that no documented blind spot explains."""
    return sum(1 for r in cal["cases"] for d in r["disagreements"] if not d["known_reason"])


@dataclasses.dataclass
class CalibrateOptions:
    """``syncguard calibrate``'s options: the device, the report folder (None:
    ``reports/calibration-<device>``), the op model to write, and the measured profile (its
    file, its base profile, and whether only the profile is measured)."""

    device: str = "sim"
    out: Optional[str] = None
    write_model: Optional[str] = None
    profile_out: Optional[str] = None
    profile_base: Optional[str] = None
    profile_only: bool = False


def run_calibration(opts: CalibrateOptions) -> int:
    """Calibrate ``opts.device`` in a child process (and measure its profile); the exit code
    of ``calibrate``: 1 when some disagreement is unexplained (then no model is written)."""
    from .runner import target as resolve_command_target  # torch: the device's

    target = resolve_command_target(opts.device)  # one clear line (exit 2) when it is missing
    if opts.profile_out is not None or opts.profile_only:
        if opts.profile_out is None:
            raise UsageError("--profile-only: needs --profile-out FILE")
        if target.kind not in HARDWARE:
            raise UsageError("--profile-out: measures a real device: --device cuda or npu")
        _write_profile(opts.profile_out, opts.profile_base
                       or ("h200" if opts.device == "cuda" else "910b"), target)
        if opts.profile_only:
            return EXIT_OK
    out = opts.out or os.path.join("reports", f"calibration-{opts.device}")
    proc = subprocess.run([sys.executable, "-m", "syncguard.driving.calibration", "--device",
                           opts.device, "--out", out], text=True)
    if proc.returncode not in (0, 1):
        return EXIT_INTERNAL
    with open(os.path.join(out, "calibration.json"), encoding="utf-8") as f:
        cal = json.load(f)
    if proc.returncode == 1:
        print("syncguard calibrate: unexplained disagreements with the native ground truth "
              f"(listed above; details in {os.path.join(out, 'calibration.json')})"
              + ("; the op model was not written" if opts.write_model else ""),
              file=sys.stderr)
        return EXIT_OVER
    if opts.write_model:
        _write_model(cal, opts.write_model)
    return EXIT_OK


def _write_model(cal: Dict[str, Any], path: str) -> None:
    """The installed op model of ``cal``'s backend with the calibrated entries merged in,
    written to ``path``."""
    installed = os.path.join(_DIR, f"{cal['backend']}.json")
    with open(installed, encoding="utf-8") as f:
        current = json.load(f)
    calibrated = {e["op"]: e for e in cal["model"]["entries"]}
    current["entries"] = [calibrated.pop(e["op"], e) if e.get("when") ==
                          calibrated.get(e["op"], {}).get("when") else e
                          for e in current["entries"]] + list(calibrated.values())
    current["versions"] = cal["versions"]
    parse_model(current, path)
    write_file(path, json.dumps(current, indent=2) + "\n", "--write-model ", parents=True)


def _write_profile(path: str, base_name: str, target: Any) -> None:
    try:
        base = load_profile(base_name)
    except ProfileError as exc:
        raise UsageError(str(exc)) from None
    doc = measure_profile(target.device, base)
    parse_profile(doc, path)  # what is written must load
    write_file(path, json.dumps(doc, indent=1) + "\n", "--profile-out ")


if __name__ == "__main__":
    sys.exit(main())


# -- device profile parameters (syncguard.model.timeline) ------------------------------------
class _Clock:
    """Device time from device events (CUDA, NPU), host wall time elsewhere (CPU: the unit
    tests of the plumbing)."""

    def __init__(self, device: Any) -> None:
        import torch

        self.mod = {"cuda": torch.cuda, "npu": getattr(torch, "npu", None)}.get(device.type)

    def sync(self) -> None:
        if self.mod is not None:
            self.mod.synchronize()

    def device_us(self, fn: Any, n: int, busy: Any = None) -> float:
        """Mean device time of ``fn()`` over ``n`` calls (us). ``busy`` is launched first so
        the calls queue behind it and run back to back (tiny kernels would otherwise be
        launch-bound)."""
        import time

        self.sync()
        if self.mod is None:
            t0 = time.perf_counter()
            for _ in range(n):
                fn()
            return (time.perf_counter() - t0) * 1e6 / n
        a, b = self.mod.Event(enable_timing=True), self.mod.Event(enable_timing=True)
        if busy is not None:
            busy()
        a.record()
        for _ in range(n):
            fn()
        b.record()
        b.synchronize()
        return float(a.elapsed_time(b)) * 1000.0 / n


def _median(xs: List[float]) -> float:
    s = sorted(xs)
    return s[len(s) // 2]


def measure_profile(device: Any, base: Any, small: bool = False) -> Dict[str, Any]:
    """Measure a device profile's parameters on ``device`` (a torch.device) and return a
    profile document (``syncguard.model.timeline`` format): launch cost, view cost, tiny-kernel
    time, sync round trip, device copy bandwidth, host link bandwidth both ways, small-copy
    time and matmul rates; the rest is kept from ``base`` (a Profile) with its source.
    ``small`` uses tiny sizes (for tests on CPU)."""
    import time

    import torch

    from ..core.intercept import suppressed  # torch: as calibrate

    clock = _Clock(device)
    mb = 1 if small else 256
    mm = 256 if small else 4096
    n = 20 if small else 200
    versions = _versions(device.type if device.type in HARDWARE else "sim")
    versions["measured_on"] = str(device)
    measured: Dict[str, Tuple[float, str]] = {}
    with suppressed():  # syncguard's own reads are never counted
        x = torch.zeros(1, device=device)
        big = torch.randn(mm, mm, device=device)

        def busy() -> None:  # a few ms of device work for launches to queue behind
            for _ in range(3 if not small else 1):
                big @ big

        for _ in range(3):  # warm up allocator, kernels, launch paths
            x.add_(1)
            busy()
        clock.sync()
        hosts = []
        for _ in range(5):
            clock.sync()
            t0 = time.perf_counter()
            for _ in range(n):
                x.add_(1)
            hosts.append((time.perf_counter() - t0) * 1e6 / n)
        measured["launch_us"] = (_median(hosts), f"host time per x.add_(1) on a 1-element "
                                 f"tensor, median of 5 x {n} launches")
        t0 = time.perf_counter()
        for _ in range(n * 10):
            x.view(-1)
        measured["view_us"] = ((time.perf_counter() - t0) * 1e6 / (n * 10),
                               "host time per x.view(-1)")
        measured["kernel_us"] = (clock.device_us(lambda: x.add_(1), n, busy),
                                 "device time per tiny kernel queued behind a busy stream "
                                 "(device events)")
        rtts = []
        for _ in range(n):
            clock.sync()
            t0 = time.perf_counter()
            x.item()
            rtts.append((time.perf_counter() - t0) * 1e6)
        measured["sync_rtt_us"] = (_median(rtts), "host time of x.item() on an idle device, "
                                   f"median of {n}")
        elems = mb * 1024 * 1024 // 4
        a = torch.empty(elems, device=device)
        b = torch.empty(elems, device=device)
        t = clock.device_us(lambda: b.copy_(a), 5)
        measured["mem_gbps"] = (2 * elems * 4 / t / 1e3, f"device-to-device copy of {mb} MiB "
                                "(read + write counted)")
        try:
            host = torch.empty(elems).pin_memory()
        except (RuntimeError, NotImplementedError):
            host = torch.empty(elems)
        t = clock.device_us(lambda: a.copy_(host, non_blocking=True), 5)
        measured["h2d_gbps"] = (elems * 4 / t / 1e3, f"pinned host-to-device copy of {mb} MiB")
        t = clock.device_us(lambda: host.copy_(a, non_blocking=True), 5)
        measured["d2h_gbps"] = (elems * 4 / t / 1e3, f"device-to-pinned-host copy of {mb} MiB")
        tiny = host[:1]
        measured["copy_us"] = (clock.device_us(lambda: x.copy_(tiny, non_blocking=True), n,
                                               busy),
                               "device time per 4-byte pinned host-to-device copy, queued")
        for key, dtype in (("matmul_tflops_16", torch.bfloat16),
                           ("matmul_tflops_32", torch.float32)):
            m = big.to(dtype)
            t = clock.device_us(lambda m=m: m @ m, 5)  # type: ignore[misc]
            measured[key] = (2.0 * mm ** 3 / t / 1e6, f"{mm}^3 {str(dtype)[6:]} matmul")
        clock.sync()
    params: Dict[str, Any] = {}
    for key in base.sources:
        src, _, why = base.sources[key].partition(": ")
        value: Any = base.combine if key == "combine" else base.values[key]
        params[key] = {"value": value, "source": src, "why": why}
    for key, (value, how) in measured.items():
        params[key] = {"value": round(float(value), 4), "source": "calibrated",
                       "why": f"measured by syncguard calibrate: {how}; torch "
                              f"{versions.get('torch')} on {versions.get('device')}"}
    return {"name": f"calibrated-{device.type}", "device": str(versions.get("device")),
            "stack": base.stack, "calibrated": versions,
            "note": f"Measured on {versions.get('device')}; parameters not measured keep "
                    f"the {base.name} profile's value and source.",
            "params": params}


def modeled_vs_measured(model_path: str, measured_path: str) -> Tuple[List[str], float]:
    """Per path: the median modeled step latency of a simulated run (counted pass) against
    the median measured step latency of a device run (timed pass), and the worst relative
    error over the paths (NaN when nothing to compare)."""
    import math

    model, real = load(model_path), load(measured_path)
    lines = [f"modeled ({model_path}, profile "
             f"{(model.header.get('timeline') or {}).get('profile')}) vs measured "
             f"({measured_path})"]
    worst = math.nan
    for path in real.paths:
        mod = [float(s.modeled_ms) for s in model.steps if s.path == path and not s.warmup
               and s.pass_ == "counted" and s.modeled_ms is not None]
        mea = [float(s.latency_ms) for s in real.steps if s.path == path and not s.warmup
               and s.pass_ == "timed" and s.latency_ms is not None]
        if not mod or not mea:
            lines.append(f"  {path}: nothing to compare")
            continue
        m, r = _median(mod), _median(mea)
        err = (m - r) / r
        worst = abs(err) if math.isnan(worst) else max(worst, abs(err))
        lines.append(f"  {path}: modeled {m:.3f} ms, measured {r:.3f} ms per step "
                     f"({err:+.1%})")
    lines.append("worst error " + ("n/a" if math.isnan(worst) else f"{worst:.1%}")
                 + " (aim: within 15%)")
    return lines, worst
