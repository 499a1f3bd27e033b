"""The time bounds of issue 38, measured (nothing asserted; the tests check the mechanisms):

- ``syncguard show R -o report.html`` of a result with 500 paths (one plot panel per path
  drew past 300 s before the plots were capped);
- ``syncguard exec`` of a program with 300 step names (94 s before; about 8 s expected);
- ``syncguard lint`` of a 50 MB ``.py`` (4 minutes and 12 GB before the size cap);
- a ``*a*a*a*a*a*a*a*azz`` exclude against a 200-character name (over 60 s before RE2).

    python benchmarks/bench_bounds.py [--out reports/bench/bounds.json]

Each figure is the wall time of one run in a child process (``sys.executable -m syncguard``),
so the numbers include the interpreter's start (about 2-3 s with torch on this machine).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import ROOT, environment, write_report  # noqa: E402


def _timed(argv: List[str], cwd: Path) -> Dict[str, Any]:
    t0 = time.perf_counter()
    got = subprocess.run([sys.executable, "-m", "syncguard", *argv], cwd=cwd,
                         capture_output=True, text=True)
    return {"seconds": round(time.perf_counter() - t0, 2), "exit": got.returncode,
            "stderr_tail": got.stderr.strip().splitlines()[-1:] if got.stderr else []}


def _many_paths(path: Path, n: int) -> None:
    lines: List[Dict[str, Any]] = [{"type": "header", "schema": 1,
                                    "env": {"syncguard": "0.1.0", "device": "sim"}}]
    for i in range(n):
        for step in range(4):
            lines.append({"type": "step", "scenario": "s", "path": f"p{i:03d}",
                          "pass": "exec", "step": step, "warmup": False, "batch_size": 0,
                          "syncs": i % 3, "allowed": 0, "latency_ms": 1.0 + step})
    lines.append({"type": "footer", "complete": True})
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    out: Dict[str, Any] = {"environment": environment()}
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        _many_paths(tmp / "r.jsonl", 500)
        out["html_500_paths"] = _timed(["show", "r.jsonl", "-o", "report.html"], tmp)
        (tmp / "steps.py").write_text(
            "import syncguard\n"
            "for i in range(300):\n"
            "    with syncguard.step(f'name{i}'):\n"
            "        pass\n")
        out["exec_300_step_names"] = _timed(
            ["exec", "--device", "cpu", "--out", "o", "--", "python", "steps.py"], tmp)
        big = tmp / "lint" / "big.py"
        big.parent.mkdir()
        with open(big, "w") as f:
            line = "x = [" + ", ".join(str(i) for i in range(60)) + "]\n"
            while f.tell() < 50 << 20:
                f.write(line * 1000)
        out["lint_50mb_file"] = _timed(["lint", "lint"], tmp)
        name = tmp / "pat" / ("a" * 196 + ".py")
        name.parent.mkdir()
        name.write_text("x = 1\n")
        out["lint_backtracking_exclude"] = _timed(
            ["lint", "pat", "--exclude", "*a*a*a*a*a*a*a*azz"], tmp)
    path = write_report("bounds", out, Path(a.out) if a.out else None)
    for k, v in out.items():
        if k != "environment":
            print(f"{k}: {v['seconds']} s (exit {v['exit']})")
    print(f"wrote {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
