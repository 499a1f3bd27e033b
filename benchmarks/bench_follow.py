"""What does following a child process cost? ``syncguard exec`` guards every process the
program starts (syncguard/execute/follow.py); this measures, paired round by round, the same
program run under ``exec`` with its children followed and with ``--no-follow`` (children
unguarded):

* a spawn child's start: from ``Process.start()`` to its first step (a fresh interpreter,
  ``import torch``, and when followed syncguard's boot, device set-up, session and drain);
* the step inside a child (a ~1 ms decode step with one read), guarded or not, and the same
  step in the parent, always guarded: the per-step cost inside a child against the parent's.

    python benchmarks/bench_follow.py [--rounds 5] [--children 3]

Writes ``reports/bench/follow.json`` and ``follow.md``. Nothing is asserted about time.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from typing import Any, Dict, List

from _common import environment, write_reports

HERE = os.path.dirname(os.path.abspath(__file__))


def _run(follow: bool, children: int, out: str) -> Dict[str, Any]:
    cmd = [sys.executable, "-m", "syncguard", "exec", "--device", "cpu", "--out", out,
           "--force", "--step", "follow_program:loop"]
    if not follow:
        cmd.append("--no-follow")
    cmd += ["--", "python", os.path.join(HERE, "follow_program.py"), str(children)]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=HERE, timeout=900)
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("{"))
    return json.loads(line)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--children", type=int, default=3)
    args = ap.parse_args()
    rows: Dict[str, List[Dict[str, Any]]] = {"follow": [], "no_follow": []}
    load = []
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            load.append(os.getloadavg()[0])
            order = ("follow", "no_follow") if r % 2 == 0 else ("no_follow", "follow")
            for mode in order:
                rows[mode].append(_run(mode == "follow", args.children,
                                       os.path.join(tmp, mode)))
    med = statistics.median

    def flat(mode: str, key: str) -> List[float]:
        return [x for row in rows[mode] for x in row[key]]

    start_f, start_n = flat("follow", "child_start_ms"), flat("no_follow", "child_start_ms")
    # paired per round and child: followed start minus unfollowed start
    added = [f - n for rf, rn in zip(rows["follow"], rows["no_follow"])
             for f, n in zip(rf["child_start_ms"], rn["child_start_ms"])]
    step_child_f = flat("follow", "child_step_us")
    step_child_n = flat("no_follow", "child_step_us")
    step_parent = [row["parent_step_us"] for row in rows["follow"]]
    ratio = [f / n for rf, rn in zip(rows["follow"], rows["no_follow"])
             for f, n in zip(rf["child_step_us"], rn["child_step_us"])]
    result = {
        "environment": environment(), "load_1min": load, "rounds": args.rounds,
        "children": args.children,
        "child_start_ms": {"followed": sorted(start_f), "not_followed": sorted(start_n),
                           "added_paired": sorted(added)},
        "step_us": {"child_followed": sorted(step_child_f),
                    "child_not_followed": sorted(step_child_n),
                    "parent_guarded": sorted(step_parent),
                    "child_guarded_over_unguarded": sorted(ratio)},
    }
    md = (
        f"# Following child processes: what it costs\n\n"
        f"`python benchmarks/bench_follow.py --rounds {args.rounds} --children "
        f"{args.children}`, {result['environment']['date']}, "
        f"{result['environment']['processor']} ({result['environment']['cpu_count']} CPUs), "
        f"Python {result['environment']['python']}, torch {result['environment']['torch']}, "
        f"load (1 min) {min(load):.1f}-{max(load):.1f}. Each round runs the same program "
        f"under `exec --device cpu --step follow_program:loop` with its children followed and "
        f"with `--no-follow`, in alternating order; {args.children} spawn children a run, one "
        f"after the other.\n\n"
        f"| | median | min | max |\n|---|---|---|---|\n"
        f"| child start, followed (ms) | {med(start_f):.0f} | {min(start_f):.0f} | "
        f"{max(start_f):.0f} |\n"
        f"| child start, not followed (ms) | {med(start_n):.0f} | {min(start_n):.0f} | "
        f"{max(start_n):.0f} |\n"
        f"| added per followed child, paired (ms) | {med(added):.0f} | {min(added):.0f} | "
        f"{max(added):.0f} |\n"
        f"| step in a followed child (us) | {med(step_child_f):.0f} | {min(step_child_f):.0f}"
        f" | {max(step_child_f):.0f} |\n"
        f"| step in an unfollowed child (us) | {med(step_child_n):.0f} | "
        f"{min(step_child_n):.0f} | {max(step_child_n):.0f} |\n"
        f"| step in the parent, guarded (us) | {med(step_parent):.0f} | {min(step_parent):.0f}"
        f" | {max(step_parent):.0f} |\n"
        f"| child step, guarded / unguarded, paired | {med(ratio):.3f}x | {min(ratio):.3f}x | "
        f"{max(ratio):.3f}x |\n")
    write_reports("follow", result, md)
    print(md)


if __name__ == "__main__":
    main()
