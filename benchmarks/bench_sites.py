"""How much memory, time and terminal output does ``syncguard exec`` take for a program with
many distinct sync sites?

For each N (default 1, 20,000 and 200,000), a generated program makes one hidden sync on each
of N distinct lines (functions of 100 lines) inside one ``syncguard.step()``; ``syncguard
exec --device sim`` runs it in a child process. Measured per N: the child's peak resident
memory (``ru_maxrss``), the wall time, the lines printed on stdout and stderr, and the size of
the result file. The memory per site is (peak - peak at N=1) / N.

    python benchmarks/bench_sites.py [--sites 1 20000 200000] [--timeout 1800]

Results go to ``reports/bench/sites.json`` with the machine and versions. Nothing is
asserted.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List

from _common import ROOT, environment, write_report


def _program(n: int, folder: Path) -> Path:
    """N sync lines in functions of at most 100 lines each, all called in one step. (Not one
    200,000-line block: CPython finds a frame's line number by scanning its code object's
    line table, so every tool that reads it, tracebacks included, is quadratic there.)"""
    lines = ["import torch", "import syncguard", "x = torch.ones(1, device='npu')", ""]
    funcs = 0
    for start in range(0, n, 100):
        lines.append(f"def f{funcs}():")
        lines += ["    x.item()"] * min(100, n - start)
        funcs += 1
    lines += ["", "with syncguard.step('decode'):"]
    lines += [f"    f{i}()" for i in range(funcs)] or ["    pass"]
    path = folder / f"sites{n}.py"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def measure(n: int, timeout: float) -> Dict[str, Any]:
    """One ``exec`` of the N-site program in a child process (a fresh interpreter each time,
    so ``ru_maxrss`` of the children is this run's peak: children are measured one at a
    time and RUSAGE_CHILDREN keeps the largest)."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        prog = _program(n, folder)
        env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "160"}
        code = ("import resource, sys, runpy\n"
                "rss = sys.argv[-1] + '.rss'\n"
                "sys.argv = ['syncguard'] + sys.argv[1:]\n"
                "try:\n"
                "    runpy.run_module('syncguard', run_name='__main__')\n"
                "finally:\n"
                "    r = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
                "    open(rss, 'w').write(str(r))\n")
        cmd = [sys.executable, "-c", code, "exec", "--device", "sim", "--out",
               str(folder / "o"), "--", "python", str(prog)]
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, cwd=folder, env=env, capture_output=True, text=True,
                              timeout=timeout)
        wall = time.perf_counter() - t0
        rss_file = Path(str(prog) + ".rss")
        rss_kb = int(rss_file.read_text()) if rss_file.exists() else None
        result = folder / "o" / "result.jsonl"
        return {
            "sites": n, "exit_code": proc.returncode, "wall_s": round(wall, 2),
            "peak_rss_mb": None if rss_kb is None else round(rss_kb / 1024, 1),
            "stdout_lines": len(proc.stdout.splitlines()),
            "stderr_lines": len(proc.stderr.splitlines()),
            "result_jsonl_mb": round(result.stat().st_size / 2**20, 2)
            if result.exists() else None,
        }


def main(argv: List[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sites", type=int, nargs="+", default=[1, 20_000, 200_000])
    ap.add_argument("--timeout", type=float, default=1800.0)
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args(argv)
    runs = []
    for n in a.sites:
        r = measure(n, a.timeout)
        runs.append(r)
        print(r, flush=True)
    base = next((r["peak_rss_mb"] for r in runs if r["sites"] == 1), None)
    for r in runs:
        if base is not None and r["peak_rss_mb"] is not None and r["sites"] > 1:
            r["kb_per_site"] = round((r["peak_rss_mb"] - base) * 1024 / r["sites"], 2)
    report = {"benchmark": "sites", "what": "syncguard exec of a program with N distinct "
              "hidden-sync sites in one step (simulated device)", "env": environment(),
              "runs": runs, "self_rss_mb": round(
                  resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}
    print(f"Wrote {write_report('sites', report, a.out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
