"""Run the catalogue of sync and no-sync cases under the native ground truth (CUDA: sync debug
mode and trace callbacks; NPU: trace callbacks; sim: the simulated backend's own op count) in a
child process, report every disagreement, and write the calibrated op sync model.

Exit 0 when every disagreement is a documented blind spot, 1 when some are unexplained (then
``--write-model`` writes nothing: a model is only calibrated from an agreeing run)."""

from __future__ import annotations

import argparse

from ..devicenames import CALIBRATE_DEVICES
from ..driving.calibration import CalibrateOptions, run_calibration
from .common import options


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
    opts = options(CalibrateOptions, args)
    return run_calibration(opts)
