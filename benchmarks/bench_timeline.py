"""What does the modeled device timeline add to a simulated run?

The counted pass of a scenario (under the guard, on the simulated device) runs with and
without the modeled timeline (``run_pass(profile=...)``: the op observer, the per-step replay
with and without hidden syncs, the timeline result line), interleaved in one process (order
rotating each round) so both see the same machine state. Reported per scenario: the median
pass time of each variant and the paired ratio with its 95% bootstrap interval
(:func:`syncguard.stats.paired_ratio`); target: under 1.10x. Small scenarios are the worst
case (the observer's cost is per op, and their ops are cheap). Results go to
``reports/bench/timeline.json`` with the machine, versions, git commit and date. No
threshold is asserted: this is a measurement.

    python benchmarks/bench_timeline.py [--repeats 9] [--steps 12] [--scenarios steady tiny_vocab]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Dict, List

from _common import REPORTS, environment, interleaved, median, rounded, time_block, write_report

from syncguard import runner, scenario, stats, timeline

TARGET_RATIO = 1.10


def main(argv: List[str]) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--path", default="legacy")
    ap.add_argument("--profile", default="910b")
    ap.add_argument("--scenarios", nargs="+", default=["steady", "tiny_vocab", "greedy_mix"])
    ap.add_argument("--out", type=Path, default=REPORTS / "timeline.json")
    args = ap.parse_args(argv)
    env = environment()
    target = runner.resolve_target("sim")
    prof = timeline.load_profile(args.profile)
    out: Dict[str, Any] = {}
    for name in args.scenarios:
        sc = scenario.resolve([name])[0].with_steps(args.steps, 1)

        def make(p: Any, sc: Any = sc) -> Any:
            return lambda n: time_block(
                lambda: runner.run_pass(sc, args.path, target, True, collect=False, profile=p),
                n)

        times = interleaved({"plain": make(None), "modeled": make(prof)}, args.repeats,
                            args.warmup)
        r = stats.paired_ratio(times["plain"], times["modeled"])
        out[name] = {
            "plain_pass_ms": round(median(times["plain"]) * 1e3, 2),
            "modeled_pass_ms": round(median(times["modeled"]) * 1e3, 2),
            "ratio_modeled_over_plain": round(r.ratio, 4),
            "ratio_ci95": [round(r.lo, 4), round(r.hi, 4)],
            "verdict": stats.ratio_verdict(r, faster="faster", slower="slower"),
            "within_target": bool(r.known and r.hi < TARGET_RATIO),
            "plain_pass_ms_all": rounded(times["plain"], 1e3, 2),
            "modeled_pass_ms_all": rounded(times["modeled"], 1e3, 2),
        }
        o = out[name]
        print(f"{name:12s} plain {o['plain_pass_ms']:9.1f} ms  modeled {o['modeled_pass_ms']:9.1f}"
              f" ms  {o['verdict']}")
    result = {
        "benchmark": "counted pass on the simulated device, with vs without the modeled "
                     "device timeline",
        "params": {"repeats": args.repeats, "warmup": args.warmup, "steps": args.steps,
                   "path": args.path, "profile": args.profile, "scenarios": args.scenarios},
        "statistic": "median pass time; rounds interleaved, order rotating; ratio = "
                     "median(modeled)/median(plain), paired bootstrap 95% CI",
        "target_ratio": TARGET_RATIO,
        "scenarios": out,
        "env": env,
    }
    path = write_report("timeline", result, args.out)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
