"""How much does a change to the way ``exec`` records a step save, measured so that the
machine's noise cancels: both ways in one process, step by step.

``bench_exec_cost.py`` compares child processes in rounds; on a shared machine their medians
move by tens of microseconds from one round to the next, more than a change of a few
microseconds per step. Here ``benchmarks/paired_program.py`` runs the 1 ms decode step under
``syncguard exec`` and takes the code a finished step runs (``ExecSession._record``,
``DrainWriter.exec_step``) from this checkout or from ``--base`` step by step, in random
order within each pair of steps, so both see the same machine at the same moment.

It understates a change that leaves less in the caches: what one step's recording evicts
is paid partly by the next step's model, which is the other variant's half the time. The
drain (7b99208) measured about 20 us per step in blocks of 50 steps each way, where paired
steps would have split that between the two.
Per run: the median of the pairs' differences (base minus this checkout; positive: this
checkout is cheaper) and its interquartile range; over the runs: the median and range.

    python benchmarks/bench_exec_paired.py --base DIR [--runs 3] [--steps 3000]

``DIR``: another syncguard checkout (``git archive COMMIT | tar -x -C DIR``) whose swapped
methods take the same arguments. Results: ``reports/bench/exec_paired.json`` and ``.md``.
Nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Dict, List, Optional

from _common import ROOT, environment, write_reports

PROGRAM = ROOT / "benchmarks" / "paired_program.py"
SKIP = 40  # first steps left out (caches, allocator, each site's first event lines)


def one_run(base: Path, steps: int, tmp: Path, swaps: List[str]) -> Dict[str, Any]:
    times = tmp / "times.json"
    cmd = [sys.executable, "-m", "syncguard", "exec", "--device", "cpu", "--step",
           "paired_program:decode_step", "--out", str(tmp / "out"), "--force", "--", "python",
           str(PROGRAM), "--steps", str(steps), "--base", str(base), "--times", str(times),
           *[f"--swap={s}" for s in swaps]]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(cmd, cwd=str(PROGRAM.parent), env=env, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"exec exited {proc.returncode}: {proc.stderr[-2000:]}")
    seq = json.loads(times.read_text())[SKIP:]
    diffs: List[float] = []
    for (v1, t1), (v2, t2) in zip(seq[0::2], seq[1::2]):
        if v1 != v2:
            diffs.append((t1 - t2 if v1 == 1 else t2 - t1) * 1e6)
    diffs.sort()
    q = len(diffs) // 4
    ours = [t for v, t in seq if v == 0]
    return {"pairs": len(diffs), "saved_us": statistics.median(diffs),
            "iqr_us": [diffs[q], diffs[-q - 1]],
            "step_ms": statistics.median(ours) * 1e3}


def markdown(r: Dict[str, Any]) -> str:
    env = r["environment"]
    steps = r["steps"]
    swaps = "".join(f" --swap {x}" for x in r["swapped"]) if isinstance(r["swapped"], list) else ""
    rows = "\n".join(f"| {i + 1} | {x['pairs']} | {x['step_ms']:.3f} | {x['saved_us']:+.1f} | "
                     f"{x['iqr_us'][0]:+.1f} .. {x['iqr_us'][1]:+.1f} |"
                     for i, x in enumerate(r["runs"]))
    return f"""# What a change to exec's step recording saves, paired per step

`python benchmarks/bench_exec_paired.py --base DIR --runs {len(r['runs'])} --steps {steps}{swaps}`
(`DIR`: {r['base_label']}; swapped: {r['swapped']}). Machine: {env.get('processor', '?')},
{env.get('cpu_count', '?')} CPUs, load {r['load']};
Python {env.get('python', '?')}, torch {env.get('torch', '?')}.

One process per run, the 1 ms decode step under `syncguard exec --device cpu --step`, the
step's recording code taken from this checkout or the base step by step (random order within
each pair). Saved: base minus this checkout, median over the pairs (positive: this checkout
costs the step less).

| run | pairs | step (ms, this checkout) | saved per step (us) | interquartile range (us) |
|---:|---:|---:|---:|---:|
{rows}

Median over the runs: **{r['saved_us_median']:+.1f} us** per step (runs
{r['saved_us_range'][0]:+.1f} .. {r['saved_us_range'][1]:+.1f} us).
"""


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--base", type=Path, required=True)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--steps", type=int, default=3000)
    ap.add_argument("--label", default=None, help="what --base is, for the report")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--swap", action="append", default=[],
                    help="module:Class.attribute (under syncguard.) to swap instead of the "
                         "step's recording code; repeat for several")
    a = ap.parse_args(argv)
    if not (a.base / "syncguard" / "__init__.py").is_file():
        print(f"bench_exec_paired: --base {a.base}: no syncguard checkout there",
              file=sys.stderr)
        return 2
    runs = []
    with tempfile.TemporaryDirectory() as t:
        for i in range(a.runs):
            runs.append(one_run(a.base, a.steps, Path(t), a.swap))
            print(f"run {i + 1}: saved {runs[-1]['saved_us']:+.1f} us per step", flush=True)
    saved = [x["saved_us"] for x in runs]
    r = {"steps": a.steps, "runs": runs, "saved_us_median": statistics.median(saved),
         "saved_us_range": [min(saved), max(saved)],
         "swapped": a.swap or "the step's recording code (paired_program.SWAPPED)",
         "base_label": a.label or str(a.base), "environment": environment(),
         "load": " ".join(f"{x:.2f}" for x in os.getloadavg())}
    path, md = write_reports("exec_paired", r, markdown(r), a.out)
    print(f"wrote {path} and {md}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
