"""Calibration: run the catalogue under syncguard and the native ground truth side by side.

Run as a child process (``python -m syncguard.calibration --device cuda --out DIR``): trace
activation cannot be undone. Writes ``calibration.json`` (per case: expected, syncguard, native
per mechanism, disagreements with reasons) and, from the in-kernel cases, a calibrated op sync
model ``opmodel-<backend>.json`` with the torch, runtime and driver versions.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from typing import Any, Dict, List, Optional

MECHANISMS = {"cuda": ["cuda-debug", "cuda-trace"], "npu": ["npu-trace"], "sim": ["sim-backend"]}


def _versions(kind: str) -> Dict[str, Optional[str]]:
    import torch

    v: Dict[str, Optional[str]] = {"torch": torch.__version__, "python": platform.python_version()}
    if kind == "cuda":
        v["cuda_runtime"] = torch.version.cuda
        v["device"] = torch.cuda.get_device_name()
        try:
            import subprocess

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

    from .catalogue import CATCH, ZERO
    from .events import IN_KERNEL
    from .groundtruth import KNOWN_BLIND_SPOTS, native_counter
    from .guard import SyncGuard
    from .runner import resolve_target

    target = resolve_target(kind)
    dev = str(target.device)
    backend = "npu" if kind in ("npu", "sim") else "cuda"
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
    lines.append(f"{len(cal['cases'])} cases, {bad} unexplained disagreements")
    return lines


def main(argv: Optional[List[str]] = None) -> int:
    """Exit 0: every disagreement explained; 1: some unexplained (listed)."""
    ap = argparse.ArgumentParser(prog="python -m syncguard.calibration")
    ap.add_argument("--device", required=True, choices=sorted(MECHANISMS))
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    cal = calibrate(a.device)
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "calibration.json"), "w", encoding="utf-8") as f:
        json.dump(cal, f, indent=1)
    with open(os.path.join(a.out, f"opmodel-{cal['backend']}.json"), "w", encoding="utf-8") as f:
        json.dump(cal["model"], f, indent=1)
    print("\n".join(summary_lines(cal)))
    return 1 if unexplained(cal) else 0


def unexplained(cal: Dict[str, Any]) -> int:
    """Disagreements with the native ground truth that no documented blind spot explains."""
    return sum(1 for r in cal["cases"] for d in r["disagreements"] if not d["known_reason"])


if __name__ == "__main__":
    sys.exit(main())
