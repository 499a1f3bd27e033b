"""Run the catalogue of sync and no-sync cases under the native ground truth (CUDA: sync debug
mode and trace callbacks; NPU: trace callbacks; sim: the simulated backend's own op count) in a
child process, report every disagreement, and write the calibrated op sync model.

Exit 0 when every disagreement is a documented blind spot, 1 when some are unexplained (then
``--write-model`` writes nothing: a model is only calibrated from an agreeing run)."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from typing import Any

from ..console import wrote
from ..core.opmodel import _DIR, parse_model
from ..devicenames import CALIBRATE_DEVICES, HARDWARE
from ..driving.calibration import measure_profile
from ..errors import EXIT_INTERNAL, EXIT_OK, EXIT_OVER, UsageError
from ..model.profile import ProfileError, load_profile, parse_profile
from ..process.atomic import write_text


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--device", default="sim", choices=CALIBRATE_DEVICES,
                   help="backend to calibrate (default: sim, the simulated npu)")
    p.add_argument("--out", default=None, help="folder (default reports/calibration-<device>)")
    p.add_argument("--write-model", default=None, metavar="FILE",
                   help="also write the op model with the calibrated entries merged in to FILE "
                   "(e.g. syncguard/core/opmodels/<backend>.json of a source checkout, to commit); "
                   "the installed package is never written")
    p.add_argument("--profile-out", default=None, metavar="FILE",
                   help="also measure the modeled timeline's device parameters (launch cost, "
                   "sync round trip, copy bandwidth, kernel time, matmul rates) and write a "
                   "calibrated profile to FILE (use it with run --profile FILE); cuda or npu")
    p.add_argument("--profile-base", default=None, metavar="NAME|FILE",
                   help="profile whose values fill what is not measured (default: h200 on "
                   "cuda, 910b on npu)")
    p.add_argument("--profile-only", action="store_true",
                   help="with --profile-out: measure the profile only, skip the catalogue")


def main(args: argparse.Namespace) -> int:
    from ..driving.runner import target as resolve_target  # torch: the device's

    target = resolve_target(args.device)  # one clear line (exit 2) when the device is missing
    if args.profile_out is not None or args.profile_only:
        if args.profile_out is None:
            raise UsageError("--profile-only: needs --profile-out FILE")
        if target.kind not in HARDWARE:
            raise UsageError("--profile-out: measures a real device: --device cuda or npu")
        _write_profile(args, target)
        if args.profile_only:
            return EXIT_OK
    out = args.out or os.path.join("reports", f"calibration-{args.device}")
    proc = subprocess.run([sys.executable, "-m", "syncguard.driving.calibration", "--device",
                           args.device, "--out", out], text=True)
    if proc.returncode not in (0, 1):
        return EXIT_INTERNAL
    with open(os.path.join(out, "calibration.json"), encoding="utf-8") as f:
        cal = json.load(f)
    if proc.returncode == 1:
        print("syncguard calibrate: unexplained disagreements with the native ground truth "
              f"(listed above; details in {os.path.join(out, 'calibration.json')})"
              + ("; the op model was not written" if args.write_model else ""),
              file=sys.stderr)
        return EXIT_OVER
    if args.write_model:
        installed = os.path.join(_DIR, f"{cal['backend']}.json")
        with open(installed, encoding="utf-8") as f:
            current = json.load(f)
        calibrated = {e["op"]: e for e in cal["model"]["entries"]}
        current["entries"] = [calibrated.pop(e["op"], e) if e.get("when") ==
                              calibrated.get(e["op"], {}).get("when") else e
                              for e in current["entries"]] + list(calibrated.values())
        current["versions"] = cal["versions"]
        path = args.write_model
        parse_model(current, path)
        parent = os.path.dirname(os.path.abspath(path))

        try:
            os.makedirs(parent, exist_ok=True)
            write_text(path, json.dumps(current, indent=2) + "\n")
        except OSError as exc:
            raise UsageError(f"--write-model {path}: cannot write: {exc.strerror}") from None
        wrote(path)
    return EXIT_OK


def _write_profile(args: argparse.Namespace, target: Any) -> None:

    try:
        base = load_profile(args.profile_base or ("h200" if args.device == "cuda" else "910b"))
    except ProfileError as exc:
        raise UsageError(str(exc)) from None
    doc = measure_profile(target.device, base)
    parse_profile(doc, args.profile_out)  # what is written must load

    try:
        write_text(args.profile_out, json.dumps(doc, indent=1) + "\n")
    except OSError as exc:
        raise UsageError(f"--profile-out {args.profile_out}: cannot write: {exc.strerror}") \
            from None
    wrote(args.profile_out)
