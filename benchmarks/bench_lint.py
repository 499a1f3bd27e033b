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

Speed (``--speed``; writes ``reports/bench/lint_speed.md`` and ``lint_speed.json``):

    python benchmarks/bench_lint.py --speed DIR [DIR ...] [--before SRC] [--jobs 1 2]
        [--rounds 5] [--install] [--note TEXT]

For each DIR, in fresh processes, ``--rounds`` rounds in which every variant lints the tree
once (the order rotating each round): the code of this checkout with each ``--jobs`` value,
and with ``--before SRC`` (a folder holding an older ``syncguard`` package, e.g. ``git archive
REF syncguard | tar -x -C SRC``) that code with one process. Each run reports wall seconds and
CPU seconds of the lint itself (interpreter start and imports left out), workers' CPU
included: files per CPU second compares across machines and loads, files per wall second is
what a user waits. In the same rounds, also in fresh processes: the ``ast.parse``-only rate
(every file parsed once, no analysis, under the collector setting the lint uses: the floor of
any AST lint) and the slowest single file (CPU seconds of its parse and analysis inside a
one-process lint of its tree; the file slowest in most rounds, its median). Medians of the
rounds. The findings of every variant are compared (a digest): they must be the same.

``--install`` also times what the pre-commit hook does on first use: a fresh virtual
environment and ``pip install`` of this checkout without torch, then ``syncguard lint --help``
and a lint of one file in it.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Tuple

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


# -- speed (--speed) ------------------------------------------------------------------------
_CHILD = r"""
import ast, dataclasses, gc, hashlib, json, os, resource, sys, time
code, tree, mode = sys.argv[1], sys.argv[2], sys.argv[3]
sys.path.insert(0, code)
import syncguard.lint as lint
if mode == "parse":  # ast.parse alone, under the collector setting the lint uses
    from syncguard.lint.files import iter_files, read_source
    sources = []
    for p in iter_files([tree]):
        try:
            sources.append(read_source(p))
        except (OSError, ValueError, UnicodeDecodeError):
            pass
    gc.set_threshold(100_000, *gc.get_threshold()[1:])
    c = time.process_time()
    for src in sources:
        try:
            ast.parse(src)
        except (SyntaxError, ValueError, RecursionError):
            pass
    print(json.dumps({"files": len(sources), "cpu": time.process_time() - c,
                      "lines": sum(src.count("\n") for src in sources)}))
    sys.exit(0)
if mode == "per-file":  # CPU s of each file's lint_file (parse and analysis) in a -j 1 lint
    real, per_file = lint.lint_file, []
    def timed(p, *a, **k):
        c0 = time.process_time()
        try:
            return real(p, *a, **k)
        finally:
            per_file.append((time.process_time() - c0, p))
    lint.lint_file = timed
    lint.lint_paths([tree])
    worst, path = max(per_file)
    with open(path, "rb") as fh:
        lines = fh.read().count(b"\n")
    print(json.dumps({"cpu": worst, "path": os.path.relpath(path, tree), "lines": lines}))
    sys.exit(0)
jobs = int(mode)
w, c = time.perf_counter(), time.process_time()
try:
    rep = lint.lint_paths([tree], jobs=jobs)
except TypeError:  # code from before --jobs
    rep = lint.lint_paths([tree])
wall, cpu = time.perf_counter() - w, time.process_time() - c
kids = resource.getrusage(resource.RUSAGE_CHILDREN)
digest = hashlib.sha1(json.dumps([[dataclasses.asdict(f) for f in rep.findings], rep.errors],
                                 sort_keys=True, default=str).encode()).hexdigest()[:12]
print(json.dumps({"files": rep.files, "wall": wall, "cpu": cpu,
                  "cpu_workers": kids.ru_utime + kids.ru_stime, "digest": digest,
                  "findings": len(rep.findings)}))
"""


def _run_child(code: str, tree: str, mode: str) -> Dict[str, Any]:
    import json
    import subprocess

    out = subprocess.run([sys.executable, "-c", _CHILD, code, tree, mode],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def speed_tree(path: str, before: str, jobs: List[int], rounds: int) -> Dict[str, Any]:
    """Interleaved fresh-process runs on ``path`` of each variant (the lint before and now,
    the parse-only floor, the per-file timing); medians."""
    variants: List[Tuple[str, str, str]] = [(f"now -j {j}", str(ROOT), str(j)) for j in jobs]
    if before:
        variants.insert(0, ("before", before, "1"))
    variants += [("parse", str(ROOT), "parse"), ("per-file", str(ROOT), "per-file")]
    runs: Dict[str, List[Dict[str, Any]]] = {v[0]: [] for v in variants}
    for r in range(rounds):
        for name, code, mode in variants[r % len(variants):] + variants[:r % len(variants)]:
            runs[name].append(_run_child(code, path, mode))
    parse, per_file = runs.pop("parse"), runs.pop("per-file")
    out: Dict[str, Any] = {"path": path, "variants": {}, "lines": parse[0]["lines"]}
    digests: set = set()
    for name, rs in runs.items():
        files = rs[0]["files"]
        wall = median([x["wall"] for x in rs])
        cpu = median([x["cpu"] + x["cpu_workers"] for x in rs])
        digests.update(x["digest"] for x in rs)
        out["files"] = files
        out["findings"] = rs[0]["findings"]
        out["variants"][name] = {
            "wall_s": round(wall, 3), "cpu_s": round(cpu, 3),
            "files_per_wall_s": round(files / wall, 1), "files_per_cpu_s": round(files / cpu, 1),
            "rounds": [{k: (round(v, 4) if isinstance(v, float) else v) for k, v in x.items()}
                       for x in rs]}
    out["same_findings"] = len(digests) == 1
    parse_cpu = median([x["cpu"] for x in parse])
    out["parse_only_files_per_cpu_s"] = round(parse[0]["files"] / parse_cpu, 1)
    paths = [x["path"] for x in per_file]
    slow = max(set(paths), key=paths.count)  # the file slowest in most rounds
    out["slowest_file"] = {
        "path": slow, "lines": next(x["lines"] for x in per_file if x["path"] == slow),
        "cpu_s": round(median([x["cpu"] for x in per_file if x["path"] == slow]), 3),
        "worst_round_cpu_s": round(max(x["cpu"] for x in per_file), 3)}
    return out


def bench_install() -> Dict[str, Any]:
    """The pre-commit hook's first use: a fresh venv, ``pip install`` of this checkout (its
    committed files, ``git archive HEAD``) without torch, then the hook's command."""
    import subprocess
    import venv

    out: Dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as d:
        src, env_dir = os.path.join(d, "src"), os.path.join(d, "venv")
        os.mkdir(src)
        subprocess.run(f"git -C '{ROOT}' archive HEAD | tar -x -C '{src}'", shell=True,
                       check=True)
        t0 = time.perf_counter()
        venv.create(env_dir, with_pip=True)
        out["venv_s"] = round(time.perf_counter() - t0, 2)
        py = os.path.join(env_dir, "bin", "python")
        t0 = time.perf_counter()
        subprocess.run([py, "-m", "pip", "install", "-q", src], check=True,
                       capture_output=True)
        out["pip_install_s"] = round(time.perf_counter() - t0, 2)
        out["total_s"] = round(out["venv_s"] + out["pip_install_s"], 2)
        listed = subprocess.run([py, "-m", "pip", "list", "--format", "freeze"],
                                capture_output=True, text=True).stdout.split()
        out["packages"] = sorted(x for x in listed if not x.startswith(("pip==", "setuptools==")))
        out["torch_installed"] = any(x.lower().startswith("torch==") for x in listed)
        exe = os.path.join(env_dir, "bin", "syncguard")
        one = os.path.join(src, "syncguard", "lint", "checker.py")
        with open(one, "rb") as fh:
            out["one_file_lines"] = fh.read().count(b"\n")
        for name, cmd in (("help_s", [exe, "lint", "--help"]),
                          ("lint_one_file_s", [exe, "lint", "--fail-on", "never", one])):
            ts = []
            for _ in range(5):
                t0 = time.perf_counter()
                subprocess.run(cmd, capture_output=True, check=False)
                ts.append(time.perf_counter() - t0)
            out[name] = round(median(ts), 3)
    return out


def write_speed(result: Dict[str, Any], md: Path, argv: List[str]) -> None:
    env = result["env"]
    jobs = result["jobs"]
    lines = [
        "# `syncguard lint` speed",
        "",
        f"Written by `python benchmarks/bench_lint.py {' '.join(argv)}` on "
        f"{env.get('date')}.",
        "",
        f"- Machine: {env.get('processor')}, {env.get('cpu_count')} CPUs "
        f"({env.get('platform')}); load average (1 min) {result['load_before'][0]:.2f} "
        f"before, {result['load_after'][0]:.2f} after (1/5/15 min before: "
        f"{', '.join(f'{x:.2f}' for x in result['load_before'])})"
        + (f"; CPU pressure (share of time some task waited for a CPU, 10 s / 60 s / 300 s): "
           f"{result['pressure_before']} before, {result['pressure_after']} after"
           if result.get("pressure_before") else "") + ".",
        f"- Python {env.get('python')}, syncguard {env.get('syncguard')} at "
        f"`{(env.get('git_commit') or '')[:10]}`"
        + (f" (uncommitted: {', '.join(env['syncguard_uncommitted'])})"
           if env.get("syncguard_uncommitted") else "")
        + (f"; before: `{result['before']}`" if result.get("before") else "") + ".",
        f"- {result['rounds']} rounds per variant, each a fresh process, variants interleaved; "
        "medians. CPU s: the lint's own process plus its workers (interpreter start and "
        "imports left out); wall s: the same lint, as waited for.",
    ]
    if result.get("note"):
        lines += [f"- {result['note']}"]
    head = ["tree", "files", "lines", "`ast.parse` only, files/CPU s"]
    if result.get("before"):
        head += ["before, files/CPU s"]
    for j in jobs:
        head += [f"now -j {j}, files/CPU s", f"now -j {j}, files/s wall"]
    head += ["slowest file (CPU s, lines)", "same findings"]
    lines += ["", "| " + " | ".join(head) + " |",
              "|---|" + "---:|" * (len(head) - 3) + "---|---|"]
    for t in result["trees"]:
        v = t["variants"]
        row = [os.path.basename(t["path"].rstrip("/")), str(t["files"]), str(t["lines"]),
               str(t["parse_only_files_per_cpu_s"])]
        if result.get("before"):
            row += [str(v["before"]["files_per_cpu_s"])]
        for j in jobs:
            x = v[f"now -j {j}"]
            row += [str(x["files_per_cpu_s"]), str(x["files_per_wall_s"])]
        sl = t["slowest_file"]
        row += [f"{sl['path']} ({sl['cpu_s']}, {sl['lines']}; worst round "
                f"{sl['worst_round_cpu_s']})",
                "yes" if t["same_findings"] else "**no**"]
        lines.append("| " + " | ".join(row) + " |")
    inst = result.get("install")
    if inst:
        lines += [
            "", "## The pre-commit hook's install", "",
            f"A fresh venv ({inst['venv_s']} s) and `pip install` of this checkout without "
            f"torch ({inst['pip_install_s']} s): **{inst['total_s']} s** in all; torch "
            f"installed: {'yes' if inst['torch_installed'] else 'no'}. Packages: "
            f"{', '.join(inst['packages'])}. Then in it: `syncguard lint --help` "
            f"{inst['help_s']} s, `syncguard lint` of one {inst['one_file_lines']}-line file "
            f"{inst['lint_one_file_s']} s (wall, median of 5, interpreter start included).",
        ]
    md.parent.mkdir(parents=True, exist_ok=True)
    md.write_text("\n".join(lines) + "\n")


def _pressure() -> str:
    """Linux's CPU pressure (``/proc/pressure/cpu``, "some" line) as ``a% / b% / c%``; the
    load average counts waiting tasks, this says how much of the time one waited."""
    try:
        with open("/proc/pressure/cpu", encoding="ascii") as f:
            some = dict(kv.split("=") for kv in f.readline().split()[1:4])
    except (OSError, ValueError):
        return ""
    return " / ".join(f"{float(some[k]):.0f}%" for k in ("avg10", "avg60", "avg300"))


def main_speed(a: Any, argv: List[str]) -> int:
    import json

    jobs = a.jobs or [1, os.cpu_count() or 1]
    result: Dict[str, Any] = {"env": environment(), "load_before": list(os.getloadavg()),
                              "pressure_before": _pressure(), "rounds": a.rounds,
                              "jobs": jobs, "before": a.before, "note": a.note}
    result["trees"] = [speed_tree(d, a.before, jobs, a.rounds) for d in a.dirs]
    if a.install:
        result["install"] = bench_install()
    result["load_after"] = list(os.getloadavg())
    result["pressure_after"] = _pressure()
    md = Path(a.speed_md)
    Path(md.with_suffix(".json")).write_text(json.dumps(result, indent=2) + "\n")
    write_speed(result, md, argv)
    print(md.read_text())
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dirs", nargs="*")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", default=str(ROOT / "reports" / "lint" / "bench.json"))
    ap.add_argument("--no-recorder", action="store_true")
    ap.add_argument("--recorder-only", action="store_true",
                    help="only the line recorder's overhead (runs without torch)")
    ap.add_argument("--speed", action="store_true",
                    help="speed only: files per CPU and wall second, slowest file, parse floor")
    ap.add_argument("--before", default="", metavar="SRC",
                    help="with --speed: a folder holding the syncguard package to compare")
    ap.add_argument("--jobs", type=int, nargs="*", default=None,
                    help="with --speed: --jobs values to time (default 1 and the CPUs)")
    ap.add_argument("--rounds", type=int, default=5, help="with --speed: rounds per variant")
    ap.add_argument("--install", action="store_true",
                    help="with --speed: time the pre-commit hook's install too")
    ap.add_argument("--note", default="", help="with --speed: a line for the report")
    ap.add_argument("--speed-md", default=str(ROOT / "reports" / "bench" / "lint_speed.md"))
    a = ap.parse_args()
    if a.speed:
        return main_speed(a, sys.argv[1:])
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
