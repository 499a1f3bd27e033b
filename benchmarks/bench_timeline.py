"""What does the modeled device timeline add to a simulated run?

The counted pass of a scenario (under the guard, on the simulated device) runs with and
without the modeled timeline (``run_pass(profile=...)``: the op recording, the per-step replay
with and without hidden syncs, the timeline result line), interleaved in one process (order
rotating each round) so both see the same machine state. Reported per scenario (every shipped
scenario by default): the median pass time of each variant in process CPU time (the headline:
on a shared machine wall time swings 2x between rounds; torch runs one thread) and in wall
time, and the ratio modeled/plain with its 95% interval. Method: each round (one pass of each
arm, back to back) gives one log-ratio; the interval is Student's t over the rounds
(:func:`syncguard.results.stats.ratio_from_logs`, the round as the unit, as the run's own verdicts):
a bootstrap over 15 rounds under-covers. At least ``--repeats`` rounds run, more (up to 400)
while a scenario's rounds fit in ``--budget-s`` seconds, so a fast scenario's interval is
narrower. Target: the interval's upper bound under 1.10x.
Small scenarios are the worst case (the recording's cost is per op, and their ops are
cheap). Results go to ``reports/bench/timeline.json`` with the machine, versions, load
average, git commit and date, and a readable summary beside it (``timeline.md``). No
threshold is asserted: this is a measurement.

    python benchmarks/bench_timeline.py [--repeats 15] [--budget-s 30] [--steps 8]
        [--scenarios steady ...]

``--steps 8`` (the default) shortens every scenario to 8 steps with 1 warm-up step (the
first 3 measured steps carry the trace's op detail, so a short pass is the model's worst
case); ``--steps 0`` runs each scenario's own steps and warm-up, its shipped counted pass.

With ``--whole-run`` the unit is what a user waits for instead: ``syncguard run`` of the
scenario (every path's counted pass, then the interleaved timed pass with ``--run-repeat``
rounds), with ``--profile none`` versus the default profile; results go to
``reports/bench/timeline_run.json``.
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List

import torch
from _common import REPORTS, environment, interleaved, median, rounded, write_report

from syncguard.driving import devices, runner, scenario
from syncguard.model.profile import load_profile
from syncguard.results import stats

TARGET_RATIO = 1.10


def _round_ratio(plain: List[float], modeled: List[float]) -> stats.Ratio:
    logs = [math.log(m / p) for p, m in zip(plain, modeled) if p > 0 and m > 0]
    return stats.ratio_from_logs(logs, method="t over rounds of log(modeled/plain)",
                                 n=len(logs))


def main(argv: List[str]) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--repeats", type=int, default=15, help="rounds at least")
    ap.add_argument("--budget-s", type=float, default=30.0,
                    help="more rounds (up to 400) while a scenario's rounds fit in this many "
                         "seconds: a narrower interval for a fast scenario")
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--path", default="legacy")
    ap.add_argument("--profile", default="910b")
    ap.add_argument("--scenarios", nargs="+", default=[
        os.path.basename(p)[:-5] for p in scenario.builtin_paths()])
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--whole-run", action="store_true",
                    help="time a whole `syncguard run` of each scenario (counted + timed)")
    ap.add_argument("--run-repeat", type=int, default=3, help="timed rounds with --whole-run")
    args = ap.parse_args(argv)
    if args.out is None:
        args.out = REPORTS / ("timeline_run.json" if args.whole_run else "timeline.json")
    load_start = _loadavg()
    tmp = tempfile.mkdtemp(prefix="bench_timeline_")
    torch.set_num_threads(1)  # process CPU time then measures this thread's work
    env = environment()
    target = devices.resolve_target("sim")
    prof = load_profile(args.profile)
    out: Dict[str, Any] = {}
    for name in args.scenarios:
        sc = scenario.resolve([name])[0]
        if args.steps:  # 0: the scenario's own steps and warm-up (its shipped counted pass)
            sc = sc.with_steps(args.steps, 1)
        shape = {"steps": sc.steps, "warmup": sc.warmup}

        wall: Dict[str, List[float]] = {"plain": [], "modeled": []}

        def make(key: str, p: Any, sc: Any = sc,
                 wall: Dict[str, List[float]] = wall) -> Any:
            def once(n: int) -> float:
                w0, c0 = time.perf_counter(), time.process_time()
                for _ in range(n):
                    if args.whole_run:  # what `syncguard run SCENARIO` does
                        opts = runner.RunOptions(device="sim", repeat=args.run_repeat,
                                                 profile=args.profile if p else "none")
                        runner.run(runner.prepare([sc], opts), opts,
                                   os.path.join(tmp, f"{key}.jsonl"))
                    else:
                        runner.run_pass(sc, args.path, target, True, collect=False, profile=p)
                wall[key].append((time.perf_counter() - w0) / n)
                return (time.process_time() - c0) / n
            return once

        arms = {"plain": make("plain", None), "modeled": make("modeled", prof)}
        w0 = time.perf_counter()
        interleaved(arms, 0, args.warmup)
        round_s = (time.perf_counter() - w0) / max(args.warmup, 1)
        rounds = max(args.repeats, min(400, int(args.budget_s / max(round_s, 1e-6))))
        for k in wall:  # drop the warm-up rounds' wall times
            wall[k] = []
        cpu = interleaved(arms, rounds, 0)
        r = _round_ratio(cpu["plain"], cpu["modeled"])
        rw = _round_ratio(wall["plain"], wall["modeled"])
        out[name] = {
            **shape,
            "plain_pass_cpu_ms": round(median(cpu["plain"]) * 1e3, 2),
            "modeled_pass_cpu_ms": round(median(cpu["modeled"]) * 1e3, 2),
            "ratio_cpu": round(r.ratio, 4),
            "ratio_cpu_ci95": [round(r.lo, 4), round(r.hi, 4)],
            "verdict_cpu": stats.ratio_verdict(r),
            "within_target": bool(r.known and r.shown[1] < TARGET_RATIO),
            "rounds": r.rounds,
            "plain_pass_wall_ms": round(median(wall["plain"]) * 1e3, 2),
            "modeled_pass_wall_ms": round(median(wall["modeled"]) * 1e3, 2),
            "ratio_wall": round(rw.ratio, 4),
            "ratio_wall_ci95": [round(rw.lo, 4), round(rw.hi, 4)],
            "plain_pass_cpu_ms_all": rounded(cpu["plain"], 1e3, 2),
            "modeled_pass_cpu_ms_all": rounded(cpu["modeled"], 1e3, 2),
            "plain_pass_wall_ms_all": rounded(wall["plain"], 1e3, 2),
            "modeled_pass_wall_ms_all": rounded(wall["modeled"], 1e3, 2),
        }
        o = out[name]
        print(f"{name:12s} CPU plain {o['plain_pass_cpu_ms']:8.1f} ms  modeled "
              f"{o['modeled_pass_cpu_ms']:8.1f} ms  {o['verdict_cpu']}; wall "
              f"{stats.ratio_verdict(rw)}")
    result = {
        "benchmark": ("whole `syncguard run` (counted passes of every path + interleaved "
                      f"timed pass, {args.run_repeat} rounds)" if args.whole_run else
                      "counted pass") + " on the simulated device, with vs without the "
                     "modeled device timeline",
        "params": {"repeats": args.repeats, "budget_s": args.budget_s,
                   "warmup": args.warmup, "steps": args.steps,
                   "path": args.path, "profile": args.profile, "scenarios": args.scenarios,
                   "whole_run": args.whole_run, "run_repeat": args.run_repeat},
        "statistic": "median pass time, process CPU time (headline: the shared machine's load "
                     "swings wall time by 2x between rounds) and wall time; rounds "
                     "interleaved, order rotating; ratio = exp(mean over rounds of "
                     "log(modeled/plain)), Student t 95% CI over the rounds (the round is the "
                     "unit); torch threads 1",
        "method": METHOD,
        "command": "python benchmarks/bench_timeline.py " + " ".join(argv),
        "target_ratio": TARGET_RATIO,
        "scenarios": out,
        "env": {**env, "load_avg_1_5_15_start": load_start,
                "load_avg_1_5_15_end": _loadavg()},
    }
    shutil.rmtree(tmp, ignore_errors=True)
    path = write_report("timeline", result, args.out)
    md = path.with_suffix(".md")
    md.write_text(markdown(result))
    print(f"wrote {path} and {md}")
    return 0


METHOD = ("Each round runs one pass of each arm back to back (the order rotating), after "
          "warm-up rounds; at least --repeats rounds, more (up to 400) while they fit in "
          "--budget-s seconds, timed from the warm-up round (a fast scenario gets a narrower "
          "interval); each arm's time is the process CPU time of its pass (torch on "
          "one thread, so CPU time is this thread's work; wall time is recorded too). A "
          "round gives one ratio modeled/plain; the ratio reported is exp(mean of the "
          "rounds' log-ratios) and its 95% interval Student's t over the rounds (the round "
          "is the unit: steps within a pass are correlated). Within target: the interval's "
          "upper bound, as printed, under the target ratio.")


def _loadavg() -> List[float]:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return []


def markdown(result: Dict[str, Any]) -> str:
    """The report's summary: one row per scenario, then the method, machine and versions."""
    env = result["env"]
    params = result["params"]
    rows = ["| scenario | steps (warm-up) | plain CPU ms | modeled CPU ms | modeled/plain "
            f"(95% CI) | under {result['target_ratio']:.2f}x |",
            "|---|---|---|---|---|---|"]
    for name, o in result["scenarios"].items():
        lo, hi = o["ratio_cpu_ci95"]
        rows.append(f"| {name} | {o['steps']} ({o['warmup']}) | {o['plain_pass_cpu_ms']:.1f} "
                    f"| {o['modeled_pass_cpu_ms']:.1f} | {o['ratio_cpu']:.3f}x "
                    f"({lo:.3f}-{hi:.3f}x) | {'yes' if o['within_target'] else 'no'} |")
    return "\n".join([
        "# The modeled device timeline's own cost",
        "",
        f"{result['benchmark']}; path {params['path']}, profile {params['profile']}, "
        f"{params['repeats']} interleaved rounds per scenario (after {params['warmup']} "
        "warm-up round).",
        "",
        *rows,
        "",
        f"Method: {result['method']}",
        "",
        f"Command: `{result['command'].strip()}`",
        "",
        f"Machine: {env.get('processor')}, {env.get('cpu_count')} CPUs, {env.get('platform')}; "
        f"load average (1, 5, 15 min) {env.get('load_avg_1_5_15_start')} at the start, "
        f"{env.get('load_avg_1_5_15_end')} at the end (a shared machine). Python "
        f"{env.get('python')}, torch {env.get('torch')} ({env.get('torch_threads')} thread), "
        f"syncguard {env.get('syncguard')}, commit {env.get('git_commit')}"
        + (f" with uncommitted {', '.join(env['syncguard_uncommitted'])}"
           if env.get("syncguard_uncommitted") else "") + f", {env.get('date')}.",
        "",
        "Every round's times are in the JSON beside this file.",
        "",
    ])


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
