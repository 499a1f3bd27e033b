"""Run scenarios on their paths (subjects) and write per-step sync counts and latency reports.

With no scenario, runs every registered scenario set (the `syncguard.scenarios` entry points:
the SGLang Ascend case study shipped with syncguard) on the best device: a real NPU when
torch_npu works, else the simulated one. For each scenario and path: a counted pass
under the guard, then a timed pass without interceptors. Every finished step is streamed to
OUT/result.jsonl, so an interrupted run keeps what it finished (render it with
`syncguard show OUT/result.jsonl`).

Progress goes to stderr: a bar on a terminal; when stderr is not a terminal (CI logs), a plain
line when a scenario finishes and at most once a minute within one
(SYNCGUARD_PROGRESS_SECONDS, default 60); SYNCGUARD_PROGRESS=bar|lines|none chooses. A short
probe of the machine plans the timed rounds (at least 30 timed steps per path, then whole
rounds and more rounds while the run fits --budget, default 180 s: syncguard.driving.plan)
and gives the expected total, printed at the start. Without --out the reports go to
reports/<time>-<device>/, with reports/latest pointing there (syncguard._paths). Ctrl-C or
SIGTERM stops the run: the reports are still written from the finished steps, then the exit
code is 130 (143 for SIGTERM). Report files are written atomically and never through a
symbolic link already in OUT."""

from __future__ import annotations

import argparse
import sys

from ..driving.run import RunCommand, run
from ..lint.lines import recorder_for
from .common import (
    add_exhaustive_argument,
    add_lineage_argument,
    add_out_arguments,
    add_record_lines_argument,
    add_scenario_arguments,
    add_width_argument,
    options,
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_scenario_arguments(p)
    add_exhaustive_argument(p)
    add_out_arguments(p, "reports/<time>-<device>, reports/latest pointing at it")
    p.add_argument("--no-timed", action="store_true", help="skip the timed pass")
    p.add_argument("--ratio-base", default=None, metavar="PATH",
                   help="the path latency ratios are taken against (default: each "
                   "scenario's first path)")
    p.add_argument("--repeat", type=int, default=None, metavar="N",
                   help="whole rounds of the timed pass (paths interleaved step by step, each "
                   "round from fresh state; latency verdicts need at least 3 rounds and 30 "
                   "timed steps per path); default: planned from a probe of the machine, 8 "
                   "to 10 rounds and at least 30 timed steps per path, whole rounds as fit "
                   "in --budget")
    p.add_argument("--profile", default=None, metavar="NAME|FILE",
                   help="device profile of the modeled timeline on the simulated device: "
                   "a shipped one (910b, h200; default 910b), a profile JSON file, or none "
                   "(no modeled timeline: saves a few us per op of the counted pass)")
    p.add_argument("--budget", type=float, default=None, metavar="SECONDS",
                   help="the time the run's plan aims at when --repeat is not given "
                   "(default 180): after the counted passes and the minimum evidence (8 "
                   "rounds, 30 timed steps per path), whole rounds and more rounds (up to "
                   "10) as fit; the expected total, from a probe of the machine, is printed "
                   "at the start")
    p.add_argument("--threads", type=int, default=None, metavar="N",
                   help="torch's intra-op threads for the run (default: 1 on the simulated "
                   "device and the CPU, whose kernels run on the host: with more, any other "
                   "job of a shared machine stalls every parallel op and step times vary "
                   "tenfold; torch's own default elsewhere; 0: torch's own default)")
    add_width_argument(p)
    p.add_argument("--verbose", "-v", action="store_true",
                   help="also print every scenario's per-step table, the sync sites and the "
                   "legend (by default the terminal shows the summary and the verdicts; the "
                   "files always hold everything)")
    add_record_lines_argument(p, "ran in the counted pass")
    add_lineage_argument(p)
    p.add_argument("--crosscheck", action="store_true",
                   help="also count the counted pass with the runtime's own mechanism (CUDA "
                   "sync debug/trace, NPU trace, sim backend) in a child process and list "
                   "every step where it disagrees (OUT/crosscheck.json)")


def main(args: argparse.Namespace) -> int:
    opts = options(RunCommand, args, timed=not args.no_timed, argv=sys.argv[1:])
    return run(opts, recorder_for)
