"""What does one host read cost under a guard when the model's work has left syncguard's code
and data out of the caches, as it does in a decode step?

``bench_exec_cost.py`` times whole decode steps in child processes; their medians move by
tens of microseconds between rounds on a shared machine, more than one change to the read's
path saves. Here one read is timed alone, right after work like a decode step's model (four
``8 x W`` by ``W x W`` products and an 8 MB pass over memory) has evicted what it can, in
three ways taken in turn: the guarded read (``x.item()`` under a counting ``SyncGuard``
whose events go to a callback, as ``exec``'s do), the same call with the guard's list empty
(the interceptor idle), and torch's own ``item`` (no syncguard). Medians of ``--reads``
reads each; a child process per run, this checkout and ``--base`` alternating, so both see
the same machine.

    python benchmarks/bench_cold_read.py [--runs 5] [--reads 300] [--base DIR]

Results: ``reports/bench/cold_read.json`` and ``.md``. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional

from _common import ROOT, environment, write_reports

#: the program each run executes (argv: reads, width)
PROGRAM = r'''
import json, statistics, sys, time
import torch
import syncguard
from syncguard.core.hub import HUB

torch.set_num_threads(1)
reads, width = int(sys.argv[1]), int(sys.argv[2])
stream = torch.zeros(2_000_000)
w, h = torch.randn(width, width), torch.randn(8, width)
x = torch.tensor([3.0])
plain_item = torch.Tensor.item


def evict():
    for _ in range(4):
        h.matmul(w)
    stream.add_(1.0)


def nest(n, f):  # a few frames of caller, as a decode step has
    return f() if n == 0 else nest(n - 1, f)


def run():
    sink = []
    times = {"guarded": [], "idle": [], "torch": []}
    clock = time.perf_counter
    guard = syncguard.SyncGuard(devices=("cpu",), keep_events=False, on_event=sink.append)
    with guard:
        guards = HUB.guards
        for _ in range(20):
            x.item()
        for _ in range(reads):
            evict()
            t0 = clock(); x.item(); times["guarded"].append(clock() - t0)
            HUB.guards = []
            evict()
            t0 = clock(); x.item(); times["idle"].append(clock() - t0)
            HUB.guards = guards
            evict()
            t0 = clock(); plain_item(x); times["torch"].append(clock() - t0)
            sink.clear()
    assert guard.count == reads + 20, guard.count
    return {k: statistics.median(v) * 1e6 for k, v in times.items()}


print(json.dumps(nest(6, run)))
'''


def run_once(tree: Path, reads: int, width: int) -> Dict[str, float]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(tree)] + (
        [env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    env["OMP_NUM_THREADS"] = "1"
    proc = subprocess.run([sys.executable, "-c", PROGRAM, str(reads), str(width)], env=env,
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"{tree}: exited {proc.returncode}: {proc.stderr[-2000:]}")
    got: Dict[str, float] = json.loads(proc.stdout.strip().splitlines()[-1])
    return got


def summary(runs: List[Dict[str, float]]) -> Dict[str, Any]:
    def of(key: str) -> Dict[str, Any]:
        xs = [r[key] for r in runs]
        return {"median": round(statistics.median(xs), 2),
                "range": [round(min(xs), 2), round(max(xs), 2)]}

    added = [{"read": r["guarded"] - r["idle"], "interceptor": r["idle"] - r["torch"]}
             for r in runs]
    return {"guarded_us": of("guarded"), "idle_us": of("idle"), "torch_us": of("torch"),
            "read_added_us": {
                "median": round(statistics.median(a["read"] for a in added), 2),
                "range": [round(min(a["read"] for a in added), 2),
                          round(max(a["read"] for a in added), 2)]},
            "interceptor_added_us": {
                "median": round(statistics.median(a["interceptor"] for a in added), 2),
                "range": [round(min(a["interceptor"] for a in added), 2),
                          round(max(a["interceptor"] for a in added), 2)]},
            "runs": [{k: round(v, 2) for k, v in r.items()} for r in runs]}


def markdown(r: Dict[str, Any]) -> str:
    e, p = r["env"], r["params"]
    lines = [
        "# One host read under a guard, after the model's work: what it costs",
        "",
        f"`python benchmarks/bench_cold_read.py {' '.join(r['argv'])}`".replace(" `", "`"),
        "",
        f"Machine: {e.get('processor')}, {e.get('cpu_count')} CPUs, load average "
        f"{r['load']}; Python {e['python']}, torch {e['torch']}, syncguard {e['syncguard']} "
        f"at {str(e.get('git_commit'))[:10]}; {e['date']}.",
        "",
        f"{p['runs']} child processes each way, alternating; in each, {p['reads']} reads of "
        f"each kind, every one right after the caches were swept (four 8 x {p['width']} by "
        f"{p['width']} x {p['width']} products and an 8 MB pass). Microseconds, median over "
        "the runs of each run's median (range over the runs).",
        "",
        "| | guarded read | interceptor idle | torch's own | the guard adds | the idle "
        "interceptor adds |",
        "|---|---|---|---|---|---|",
    ]
    for name, s in (("this checkout", r["current"]), ("--base", r.get("base"))):
        if s is None:
            continue
        lines.append(
            f"| {name} | {s['guarded_us']['median']:.1f} | {s['idle_us']['median']:.1f} | "
            f"{s['torch_us']['median']:.1f} | **{s['read_added_us']['median']:.1f}** "
            f"({s['read_added_us']['range'][0]:.1f}-{s['read_added_us']['range'][1]:.1f}) | "
            f"{s['interceptor_added_us']['median']:.1f} "
            f"({s['interceptor_added_us']['range'][0]:.1f}-"
            f"{s['interceptor_added_us']['range'][1]:.1f}) |")
    if r.get("base"):
        lines += ["", f"`--base`: {p['base']}."]
    return "\n".join(lines) + "\n"


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--reads", type=int, default=300)
    ap.add_argument("--width", type=int, default=600)
    ap.add_argument("--base", type=Path, default=None,
                    help="another syncguard checkout (`git archive COMMIT | tar -x -C DIR`) "
                         "run the same way, alternating")
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args(argv)
    load = [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else []
    cur: List[Dict[str, float]] = []
    base: List[Dict[str, float]] = []
    for i in range(a.runs):
        order = [(ROOT, cur)] + ([(a.base.resolve(), base)] if a.base else [])
        for tree, into in (order if i % 2 == 0 else order[::-1]):
            into.append(run_once(tree, a.reads, a.width))
        print(f"run {i + 1}/{a.runs}: this {cur[-1]}" + (f"; base {base[-1]}" if base else ""),
              flush=True)
    result: Dict[str, Any] = {
        "benchmark": "one guarded host read after cache-sweeping work, vs idle and torch's",
        "env": environment(), "load": load,
        "argv": list(argv if argv is not None else sys.argv[1:]),
        "params": {"runs": a.runs, "reads": a.reads, "width": a.width,
                   "base": None if a.base is None else str(a.base)},
        "current": summary(cur), "base": summary(base) if base else None,
    }
    path, md = write_reports("cold_read", result, markdown(result), a.out)
    print(f"Wrote {path}\nWrote {md}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
