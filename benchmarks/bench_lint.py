"""Speed and flag density of ``syncguard lint`` on source trees, and the cost of recording
executed candidate lines (``syncguard exec --record-lines``).

    python benchmarks/bench_lint.py DIR [DIR ...] [--repeats 3] [--out reports/lint/bench.json]

For each DIR: files, lines, seconds (median of ``--repeats`` full lints), files/s (wall and
CPU: on a shared machine the CPU figure is the one that compares), the slowest file (CPU
seconds of its own lint, parse included), the parse-only rate (``ast.parse`` of every file:
the ceiling any AST lint has), findings (certain, likely, silent), flags per file (certain +
likely) and the same without test, benchmark and script findings. Then the line recorder's
overhead on a Python-heavy loop whose file holds candidate lines (the recorder's worst case:
every call is a Python call into a watched file), as a ratio to the plain loop. Writes a JSON
report with the machine and versions, and prints a Markdown table.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List

sys.path.insert(0, str(Path(__file__).resolve().parent))

try:
    from _common import ROOT, environment, interleaved, median, paired_ratio
except ImportError:  # no torch on this interpreter: the recorder part still runs
    import platform
    import statistics

    ROOT = Path(__file__).resolve().parent.parent
    sys.path.insert(0, str(ROOT))

    def environment() -> Dict[str, Any]:  # type: ignore[misc]
        return {"python": platform.python_version(), "platform": platform.platform(),
                "cpu_count": os.cpu_count(), "torch": None}

    def interleaved(runners, repeats, warmup=1, inner=1):  # type: ignore[no-untyped-def]
        names = list(runners)
        for k in names:
            runners[k](inner)
        times: Dict[str, List[float]] = {k: [] for k in names}
        for r in range(repeats):
            for k in names[r % len(names):] + names[:r % len(names)]:
                times[k].append(runners[k](inner))
        return times

    def median(xs):  # type: ignore[no-untyped-def]
        return float(statistics.median(xs))

    def paired_ratio(num, den):  # type: ignore[no-untyped-def]
        return median([a / b for a, b in zip(num, den)])


def bench_tree(path: str, repeats: int) -> Dict[str, Any]:
    from syncguard.lint import lint_paths

    times: List[float] = []
    cpu: List[float] = []
    rep = None
    for _ in range(repeats):
        t0, c0 = time.perf_counter(), time.process_time()
        rep = lint_paths([path])
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    assert rep is not None
    lines = 0
    from syncguard.lint.files import iter_files

    files = list(iter_files([path]))
    for f in files:
        try:
            with open(f, "rb") as fh:
                lines += fh.read().count(b"\n")
        except OSError:
            pass
    c = rep.counts()
    secs = median(times)
    per_file: Dict[str, int] = {}
    for f in rep.findings:
        if f.reported:
            per_file[f.path] = per_file.get(f.path, 0) + 1
    flagged = sorted(per_file.values())
    serving = sum(f.reported and f.context == "serving" for f in rep.findings)
    slowest, parse_cpu = _per_file(files)
    return {
        "path": path, "files": rep.files, "lines": lines, "seconds": round(secs, 3),
        "files_per_s": round(rep.files / secs, 1) if secs else None,
        "cpu_seconds": round(median(cpu), 3),
        "files_per_cpu_s": round(rep.files / median(cpu), 1) if median(cpu) else None,
        "lines_per_s": round(lines / secs) if secs else None,
        "certain": c["certain"], "likely": c["likely"], "silent": c["silent"],
        "allowed": c["allowed"], "parse_errors": len(rep.errors),
        "flags_per_file": round((c["certain"] + c["likely"]) / rep.files, 2) if rep.files
        else None,
        "certain_per_file": round(c["certain"] / rep.files, 2) if rep.files else None,
        "files_flagged": len(flagged),
        "median_flags_in_flagged_file": flagged[len(flagged) // 2] if flagged else 0,
        "flags_per_file_serving": round(serving / rep.files, 2) if rep.files else None,
        "slowest_file": slowest,
        "parse_only_files_per_cpu_s": round(len(files) / parse_cpu, 1) if parse_cpu else None,
    }


def _per_file(files: List[str]) -> Any:
    """The slowest file alone (its path, lines and CPU seconds: read, parse and analysis)
    and the CPU seconds of parsing every file."""
    import ast

    from syncguard.lint import lint_file

    worst = (0.0, "", 0)
    parse = 0.0
    for p in files:
        try:
            with open(p, "rb") as fh:
                data = fh.read()
            c0 = time.process_time()
            ast.parse(data)
            parse += time.process_time() - c0
            c0 = time.process_time()
            lint_file(p)
            dt = time.process_time() - c0
        except (SyntaxError, ValueError, OSError, UnicodeDecodeError, RecursionError):
            continue
        if dt > worst[0]:
            worst = (dt, p, data.count(b"\n"))
    return {"path": worst[1], "lines": worst[2], "cpu_seconds": round(worst[0], 3)}, parse


_LOOP = '''
def work(x, n):
    total = 0
    for i in range(n):
        total += helper(i)
    if x.sum() > 0:
        total += 1
    return total

def helper(i):
    return i * 2 + 1
'''


def bench_recorder(repeats: int) -> Dict[str, Any]:
    """Plain vs recorded: 200k Python calls into a file with candidate lines."""
    from syncguard.lint.checker import check_source
    from syncguard.lint.lines import LineRecorder

    class _Sum:
        def sum(self) -> int:
            return 1

    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "loopmod.py")
        with open(path, "w") as f:
            f.write(_LOOP)
        sys.path.insert(0, d)
        try:
            import loopmod  # type: ignore[import-not-found]

            cands = {path: [f.line for f in check_source(_LOOP, path)]}
            x = _Sum()
            n = 200_000

            def plain(inner: int) -> float:
                t0 = time.perf_counter()
                for _ in range(inner):
                    loopmod.work(x, n)
                return time.perf_counter() - t0

            def recorded(inner: int) -> float:
                t0 = time.perf_counter()
                for _ in range(inner):
                    with LineRecorder(cands):
                        loopmod.work(x, n)
                return time.perf_counter() - t0

            def other_file(inner: int) -> float:
                # candidates in another file: loopmod is not watched
                t0 = time.perf_counter()
                for _ in range(inner):
                    with LineRecorder({os.path.join(d, "elsewhere.py"): [1]}):
                        loopmod.work(x, n)
                return time.perf_counter() - t0

            t = interleaved({"plain": plain, "recorded": recorded, "unwatched": other_file},
                            repeats)
            with LineRecorder(cands) as rec:
                loopmod.work(x, 10)
        finally:
            sys.path.remove(d)
            sys.modules.pop("loopmod", None)
    return {
        "calls": n, "mechanism": rec.mechanism,
        "plain_s": round(median(t["plain"]), 4), "recorded_s": round(median(t["recorded"]), 4),
        "unwatched_s": round(median(t["unwatched"]), 4),
        "ratio_watched": round(paired_ratio(t["recorded"], t["plain"]), 2),
        "ratio_unwatched": round(paired_ratio(t["unwatched"], t["plain"]), 2),
        "executed": rec.executed,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dirs", nargs="*")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", default=str(ROOT / "reports" / "lint" / "bench.json"))
    ap.add_argument("--no-recorder", action="store_true")
    ap.add_argument("--recorder-only", action="store_true",
                    help="only the line recorder's overhead (runs without torch)")
    a = ap.parse_args()
    trees = [] if a.recorder_only else [bench_tree(d, a.repeats) for d in a.dirs]
    result: Dict[str, Any] = {"env": environment(), "trees": trees}
    total_files = sum(t["files"] for t in trees)
    total_s = sum(t["seconds"] for t in trees)
    total_cpu = sum(t["cpu_seconds"] for t in trees)
    result["total"] = {"files": total_files, "seconds": round(total_s, 3),
                       "files_per_s": round(total_files / total_s, 1) if total_s else None,
                       "cpu_seconds": round(total_cpu, 3),
                       "files_per_cpu_s": round(total_files / total_cpu, 1) if total_cpu
                       else None}
    if not a.no_recorder:
        result["recorder"] = bench_recorder(max(3, a.repeats))
    import json

    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(result, indent=2) + "\n")
    print("| tree | files | lines | wall s | CPU s | files/CPU s | parse-only files/CPU s "
          "| slowest file (CPU s, lines) | certain | likely | silent | flags/file "
          "| serving flags/file |")
    print("|---|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|")
    for t in trees:
        sl = t["slowest_file"]
        print(f"| {t['path']} | {t['files']} | {t['lines']} | {t['seconds']} | "
              f"{t['cpu_seconds']} | {t['files_per_cpu_s']} | "
              f"{t['parse_only_files_per_cpu_s']} | {os.path.basename(sl['path'])} "
              f"({sl['cpu_seconds']}, {sl['lines']}) | {t['certain']} | {t['likely']} "
              f"| {t['silent']} | {t['flags_per_file']} | {t['flags_per_file_serving']} |")
    if "recorder" in result:
        r = result["recorder"]
        print(f"recorder ({r['mechanism']}): {r['ratio_watched']}x on a loop in a watched "
              f"file, {r['ratio_unwatched']}x when only other files are watched "
              f"({r['calls']} calls; plain {r['plain_s']} s)")
    print(f"Wrote {a.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
