"""Run the counted pass only and gate on hidden host syncs.

Runs the guard's self-test first (so "0 syncs" never means "the detector was off"), then
each scenario on each path under the guard. The budget per path is --max-syncs when given,
else the scenario's [expect] max_syncs for that path, else 0; with --baseline, only new sites
or higher counts than the baseline fail. Exit 0 within budget, 1 over (each site listed as
file:line with counts), 2 usage or bad input, 3 internal error.

Given result files or folders instead of scenarios (a `syncguard exec` run, a folder of
per-rank results), it gates what they recorded: each rank on its own."""

from __future__ import annotations

import argparse

from ..driving.check import CheckOptions, check
from ..process.atomic import output_path
from .common import (
    add_allow_arguments,
    add_gate_format_arguments,
    add_scenario_arguments,
    finish,
    options,
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_scenario_arguments(p)
    p.add_argument("--max-syncs", type=int, default=None,  # also for RESULT folders
                   help="hidden syncs allowed per scenario and path (default: the scenario's "
                   "[expect] max_syncs, else 0)")
    p.add_argument("--baseline", default=None, help="fail only on new sites or higher counts "
                   "than this baseline file")
    p.add_argument("--update-baseline", default=None, metavar="FILE",
                   help="record today's sites and counts in FILE and exit 0")
    add_allow_arguments(p)
    p.add_argument("--max-syncs-outside", type=int, default=None, metavar="N",
                   help="recorded exec runs: hidden syncs allowed outside every step (default: "
                   "the run's own --max-syncs-outside, else not gated)")
    p.add_argument("--max-bubble-us", type=float, default=None, metavar="US",
                   help="also fail when the modeled device idle caused by hidden syncs exceeds "
                   "US microseconds in any measured step (simulated device only; off by "
                   "default; deterministic: from the modeled timeline, see --profile)")
    p.add_argument("--profile", default=None, metavar="NAME|FILE",
                   help="device profile for --max-bubble-us (910b, h200 or a file; "
                   "default 910b)")
    add_gate_format_arguments(p)


def main(args: argparse.Namespace) -> int:
    # sarif and junit without -o: stdout
    filed = args.format in ("sarif", "junit") and args.output is None
    opts = options(CheckOptions, args, output="-" if filed else args.output)
    output_path(opts.output)  # devices and FIFOs written as streams; folders... refused now
    output_path(opts.update_baseline, flag="--update-baseline")
    return finish(opts, *check(opts))
