"""Does a long run keep memory flat, and how long does its result take to render?

Writes a temporary scenario (vocabulary 64, two top-k 8 requests, N steps, warm-up 2) and runs

    python -m syncguard run SCENARIO --device sim --paths flag --no-timed --out TMP

in a subprocess, sampling the child's resident set (``VmRSS`` in ``/proc/<pid>/status``) every
0.5 s together with the last step written to ``result.jsonl`` (so each sample is placed in the
run: RSS at 10%, 50% and 90% of the steps, the maximum during the step loop, the growth per
1000 steps, and the peak of the whole process, whose end loads the result back and writes the
reports). Then times ``python -m syncguard show result.jsonl`` (terminal) and
``... show result.jsonl -o report.html`` (median of a few runs each, next to the bare CLI start
``python -m syncguard --help``), with each child's own peak RSS (``VmHWM`` read by the child
at exit: ``ru_maxrss`` would carry over this benchmark's own RSS through fork and exec).

If the projected run time exceeds ``--budget`` seconds (default 480: 8 minutes), the run is
stopped after a short measurement and restarted with the largest step count (rounded down to a
thousand) that fits; the report says so (``steps_requested`` vs ``steps``).

    python benchmarks/bench_long_run.py [--steps 10000] [--budget 480] [--keep]

Results go to ``reports/bench/long_run.json``. Nothing is asserted about time or memory.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from _common import ROOT, environment, median, write_report

SCENARIO = """\
name = "long_tiny"
description = "bench_long_run: vocabulary 64, two top-k 8 requests, many steps"
vocab_size = {vocab}
dtype = "float32"
steps = {steps}
warmup = {warmup}
seed = 0

[[requests]]
id = "a"
top_k = 8
temperature = 0.8

[[requests]]
id = "b"
top_k = 8
temperature = 0.8
"""

Sample = Dict[str, Any]  # t (s), rss_kb, jsonl_bytes, step (last written), footer (bool)


def _status_kb(pid: int, key: str) -> Optional[int]:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return None


def _tail_state(path: Path) -> Tuple[int, Optional[int], bool]:
    """(size, index of the last step line written, footer written) of a growing result.jsonl,
    from its last few kB only."""
    try:
        size = path.stat().st_size
        with open(path, "rb") as f:
            f.seek(max(0, size - 8192))
            tail = f.read().decode("utf-8", "replace")
    except OSError:
        return 0, None, False
    step: Optional[int] = None
    for line in reversed(tail.splitlines()):
        if line.startswith('{"type":"step"'):
            i = line.find('"step":', 14)
            if i >= 0:
                digits = line[i + 7 :].split(",", 1)[0]
                if digits.isdigit():
                    step = int(digits)
                    break
    return size, step, '"type":"footer"' in tail


#: Runs ``-m MODULE ARGS`` and, at exit, writes the process's own peak RSS (``VmHWM``, kB) to
#: the file named by SYNCGUARD_BENCH_HWM. (``ru_maxrss`` from ``wait4`` is not the child's own:
#: Linux carries the parent's high-water mark over fork and exec.)
_HWM_WRAPPER = (
    "import atexit, os, runpy, sys\n"
    "def _hwm():\n"
    "    with open('/proc/self/status') as f:\n"
    "        kb = next(line.split()[1] for line in f if line.startswith('VmHWM:'))\n"
    "    with open(os.environ['SYNCGUARD_BENCH_HWM'], 'w') as f:\n"
    "        f.write(kb)\n"
    "atexit.register(_hwm)\n"
    "mod = sys.argv[2]\n"
    "sys.argv = [mod] + sys.argv[3:]\n"
    "runpy.run_module(mod, run_name='__main__', alter_sys=True)\n"
)


class Child:
    """A subprocess, reaped with ``wait4``; its own peak RSS is read back at exit."""

    def __init__(self, cmd: List[str], stdout: Path, env: Dict[str, str]) -> None:
        self.t0 = time.perf_counter()
        self._out = open(stdout, "wb")
        self._hwm = stdout.with_suffix(".hwm")
        if self._hwm.exists():
            self._hwm.unlink()
        if cmd[1:2] == ["-m"]:
            cmd = [cmd[0], "-c", _HWM_WRAPPER, *cmd[1:]]
            env = {**env, "SYNCGUARD_BENCH_HWM": str(self._hwm)}
        # Run from the output's folder: ``-m`` puts the working folder first on sys.path, and
        # the repository's would shadow ``--pythonpath``.
        self.proc = subprocess.Popen(
            cmd, cwd=str(stdout.parent), stdout=self._out, stderr=subprocess.STDOUT, env=env
        )
        self.pid = self.proc.pid
        self.rc: Optional[int] = None
        self.wall: Optional[float] = None
        self.maxrss_kb: Optional[int] = None

    def poll(self) -> bool:
        """True once the child has exited (and was reaped)."""
        if self.rc is not None:
            return True
        pid, status, ru = os.wait4(self.pid, os.WNOHANG)
        if pid == 0:
            return False
        self.wall = time.perf_counter() - self.t0
        self.rc = os.waitstatus_to_exitcode(status)
        self.proc.returncode = self.rc
        try:
            self.maxrss_kb = int(self._hwm.read_text())
        except (OSError, ValueError):  # killed before exit: no own figure
            self.maxrss_kb = None
        self._out.close()
        return True

    def kill(self) -> None:
        if not self.poll():
            self.proc.kill()  # only this child, by its own pid
            while not self.poll():
                time.sleep(0.05)


def run_sampled(
    cmd: List[str],
    stdout: Path,
    env: Dict[str, str],
    jsonl: Optional[Path],
    interval: float,
    steps: int,
    budget: Optional[float],
) -> Tuple[Child, List[Sample], Optional[float]]:
    """Run ``cmd``; every ``interval`` s record RSS and the result file's progress. Returns the
    child, the samples, and (when ``budget`` was exceeded by the projection and the child
    was stopped) the measured seconds per step."""
    child = Child(cmd, stdout, env)
    samples: List[Sample] = []
    while not child.poll():
        rss = _status_kb(child.pid, "VmRSS")
        size, step, footer = _tail_state(jsonl) if jsonl is not None else (0, None, False)
        t = time.perf_counter() - child.t0
        if rss is not None:
            samples.append(
                {
                    "t": round(t, 2),
                    "rss_kb": rss,
                    "jsonl_bytes": size,
                    "step": step,
                    "footer": footer,
                }
            )
        if budget is not None and step is not None and not footer:
            first = next((s for s in samples if s["step"] is not None), None)
            if first is not None and t - first["t"] >= 20 and step > first["step"]:
                rate = (t - first["t"]) / (step - first["step"])
                if t + (steps - 1 - step) * rate * 1.1 > budget:
                    child.kill()
                    return child, samples, rate
        time.sleep(interval)
    return child, samples, None


def timed_runs(cmd: List[str], stdout: Path, env: Dict[str, str], repeats: int) -> Dict[str, Any]:
    walls: List[float] = []
    peaks: List[int] = []
    rcs: List[int] = []
    for _ in range(repeats):
        c = Child(cmd, stdout, env)
        while not c.poll():
            time.sleep(0.01)
        walls.append(c.wall or 0.0)
        peaks.append(c.maxrss_kb or 0)
        rcs.append(c.rc if c.rc is not None else -1)
    return {
        "command": " ".join(cmd[2:]) if cmd[:2] == [sys.executable, "-m"] else cmd,
        "seconds_median": round(median(walls), 3),
        "seconds_all": [round(w, 3) for w in walls],
        "peak_rss_mb": round(max(peaks) / 1024, 1),
        "exit_codes": rcs,
    }


def in_process(jsonl: Path, repeats: int) -> Dict[str, Any]:
    """The same work without the CLI's start-up: load the result, render it for the terminal
    (text, 100 columns) and as HTML (median seconds of ``repeats``)."""
    import syncguard.renderers.html as html
    import syncguard.renderers.terminal as terminal
    from syncguard.results import loader

    t: Dict[str, List[float]] = {"load": [], "terminal": [], "html": []}
    for _ in range(repeats):
        t0 = time.perf_counter()
        res = loader.load(str(jsonl))
        t1 = time.perf_counter()
        terminal.render(res)
        t2 = time.perf_counter()
        html.render(res)
        t3 = time.perf_counter()
        t["load"].append(t1 - t0)
        t["terminal"].append(t2 - t1)
        t["html"].append(t3 - t2)
    return {f"{k}_s": round(median(v), 3) for k, v in t.items()}


def at_fraction(samples: List[Sample], steps: int, frac: float) -> Optional[Sample]:
    want = frac * (steps - 1)
    return next(
        (s for s in samples if s["step"] is not None and s["step"] >= want and not s["footer"]),
        None,
    )


def main(argv: List[str]) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--steps", type=int, default=10000)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--vocab", type=int, default=64)
    ap.add_argument("--interval", type=float, default=0.5, help="RSS sampling period (s)")
    ap.add_argument(
        "--budget",
        type=float,
        default=480.0,
        help="seconds the run may take; longer: rerun with fewer steps",
    )
    ap.add_argument("--show-repeats", type=int, default=3)
    ap.add_argument(
        "--pythonpath",
        default=None,
        help="the folder holding the syncguard the children run (default: this "
        "repository), e.g. a `git archive` of another commit to compare",
    )
    ap.add_argument("--keep", action="store_true", help="keep the temporary folder")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)

    env = dict(os.environ)
    # The children import this repository's syncguard (or --pythonpath's), whatever the
    # installed one is: an editable install can point at another checkout.
    first = Path(args.pythonpath).resolve() if args.pythonpath else ROOT
    env["PYTHONPATH"] = os.pathsep.join(
        [str(first)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])
    )
    env.pop("COLUMNS", None)
    facts = environment()
    probe = subprocess.run(
        [sys.executable, "-c", "import syncguard; print(syncguard.__file__)"],
        cwd=tempfile.gettempdir(),
        env=env,
        capture_output=True,
        text=True,
    )
    facts["child_syncguard_file"] = probe.stdout.strip() or None
    tmp = Path(tempfile.mkdtemp(prefix="syncguard-long-run-"))
    steps = args.steps
    reduced: Optional[Dict[str, Any]] = None
    try:
        while True:
            scen = tmp / "long_tiny.toml"
            scen.write_text(SCENARIO.format(vocab=args.vocab, steps=steps, warmup=args.warmup))
            out = tmp / f"out-{steps}"
            jsonl = out / "result.jsonl"
            cmd = [
                sys.executable,
                "-m",
                "syncguard",
                "run",
                str(scen),
                "--device",
                "sim",
                "--paths",
                "flag",
                "--no-timed",
                "--out",
                str(out),
            ]
            print(f"running {steps} steps: {' '.join(cmd[1:])}", flush=True)
            child, samples, rate = run_sampled(
                cmd, tmp / "run.log", env, jsonl, args.interval, steps, args.budget
            )
            if rate is None:
                break
            fit = int((args.budget * 0.85 - 15) / rate) // 1000 * 1000
            print(
                f"  projected {steps * rate:.0f} s > budget {args.budget:.0f} s "
                f"({rate * 1e3:.1f} ms/step): rerunning with {fit} steps",
                flush=True,
            )
            reduced = {"from": steps, "to": fit, "seconds_per_step": round(rate, 5)}
            if fit < 1000:
                raise SystemExit("not even 1000 steps fit in the budget")
            steps = fit
        log_tail = (tmp / "run.log").read_text(errors="replace")[-2000:]
        if child.rc != 0:
            print(log_tail)
            raise SystemExit(f"syncguard run exited {child.rc}")

        n_steps = n_events = 0
        with open(jsonl, encoding="utf-8") as f:
            for line in f:
                if line.startswith('{"type":"step"'):
                    n_steps += 1
                elif line.startswith('{"type":"event"'):
                    n_events += 1
        loop = [s for s in samples if s["step"] is not None and not s["footer"]]
        points = {f"{int(fr * 100)}%": at_fraction(samples, steps, fr) for fr in (0.1, 0.5, 0.9)}

        def growth(a: Optional[Sample], b: Optional[Sample]) -> Dict[str, Optional[float]]:
            """RSS growth between two samples: MB, and kB per 1000 steps."""
            if a is None or b is None or b["step"] <= a["step"]:
                return {"mb": None, "kb_per_1000_steps": None}
            d = b["rss_kb"] - a["rss_kb"]
            return {
                "mb": round(d / 1024, 2),
                "kb_per_1000_steps": round(d * 1000 / (b["step"] - a["step"]), 2),
            }

        g_10_90 = growth(points["10%"], points["90%"])
        g_50_90 = growth(points["50%"], points["90%"])
        loop_first, loop_last = (loop[0], loop[-1]) if loop else (None, None)
        ms_per_step = None
        if (
            loop_first is not None
            and loop_last is not None
            and loop_last["step"] > loop_first["step"]
        ):
            ms_per_step = round(
                (loop_last["t"] - loop_first["t"]) * 1e3 / (loop_last["step"] - loop_first["step"]),
                2,
            )
        loop_end = loop_last["t"] if loop_last is not None else None
        after = [s for s in samples if s["footer"]]
        jsonl_bytes = jsonl.stat().st_size

        show = {
            "cli_start": timed_runs(
                [sys.executable, "-m", "syncguard", "--help"],
                tmp / "help.log",
                env,
                args.show_repeats,
            ),
            "show_terminal": timed_runs(
                [sys.executable, "-m", "syncguard", "show", str(jsonl)],
                tmp / "show.log",
                env,
                args.show_repeats,
            ),
            "show_html": timed_runs(
                [
                    sys.executable,
                    "-m",
                    "syncguard",
                    "show",
                    str(jsonl),
                    "-o",
                    str(tmp / "report.html"),
                    "--force",
                ],
                tmp / "show_html.log",
                env,
                args.show_repeats,
            ),
        }
        html_bytes = (tmp / "report.html").stat().st_size
        show["in_process"] = in_process(jsonl, args.show_repeats)
        for k in ("show_terminal", "show_html"):
            show[k]["rendering_seconds"] = round(
                show[k]["seconds_median"] - show["cli_start"]["seconds_median"], 3
            )

        def mb(s: Optional[Sample]) -> Optional[float]:
            return None if s is None else round(s["rss_kb"] / 1024, 1)

        result: Dict[str, Any] = {
            "benchmark": "long run: memory over 10k steps, result rendering time",
            "env": facts,
            "params": {
                "steps_requested": args.steps,
                "steps": steps,
                "warmup": args.warmup,
                "vocab": args.vocab,
                "requests": "2 x top_k 8, temperature 0.8",
                "interval_s": args.interval,
                "budget_s": args.budget,
                "show_repeats": args.show_repeats,
                "pythonpath": args.pythonpath,
                "command": "python -m syncguard run long_tiny.toml --device sim "
                "--paths flag --no-timed --out TMP",
            },
            "reduced": reduced,
            "run": {
                "exit_code": child.rc,
                "wall_s": round(child.wall or 0.0, 2),
                "first_step_written_s": loop_first["t"] if loop_first else None,
                "last_step_written_s": loop_end,
                "after_loop_s": round((child.wall or 0) - (loop_end or 0), 2)
                if loop_end is not None
                else None,
                "ms_per_step": ms_per_step,
            },
            "rss_mb": {
                **{k: mb(v) for k, v in points.items()},
                "at_step": {k: (v["step"] if v else None) for k, v in points.items()},
                "first_sample_in_loop": mb(loop[0]) if loop else None,
                "max_in_step_loop": round(max(s["rss_kb"] for s in loop) / 1024, 1)
                if loop
                else None,
                "growth_10_to_90": g_10_90["mb"],
                "growth_kb_per_1000_steps": g_10_90["kb_per_1000_steps"],
                "growth_50_to_90": g_50_90["mb"],
                "growth_kb_per_1000_steps_50_to_90": g_50_90["kb_per_1000_steps"],
                "max_sampled": round(max(s["rss_kb"] for s in samples) / 1024, 1),
                "max_after_loop_sampled": round(max(s["rss_kb"] for s in after) / 1024, 1)
                if after
                else None,
                "peak_process": round((child.maxrss_kb or 0) / 1024, 1),
            },
            "result_jsonl": {
                "bytes": jsonl_bytes,
                "mb": round(jsonl_bytes / 2**20, 2),
                "step_lines": n_steps,
                "event_lines": n_events,
                "bytes_per_step": round(jsonl_bytes / max(n_steps, 1), 1),
            },
            "render": {**show, "report_html_bytes": html_bytes},
            "samples": [
                [s["t"], round(s["rss_kb"] / 1024, 1), s["step"], s["footer"]] for s in samples
            ],
            "samples_columns": ["t_s", "rss_mb", "last_step_written", "footer_written"],
        }
        path = write_report("long_run", result, args.out)
    finally:
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)

    r = result["rss_mb"]
    note = f" (reduced from {args.steps})" if reduced else ""
    print(
        f"{steps} steps{note}: "
        f"run {result['run']['wall_s']} s (last step at {result['run']['last_step_written_s']}"
        f" s, {result['run']['ms_per_step']} ms/step; reports after the loop "
        f"{result['run']['after_loop_s']} s), exit {child.rc}"
    )
    print(
        f"RSS MB at 10% {r['10%']}, 50% {r['50%']}, 90% {r['90%']}; max in loop "
        f"{r['max_in_step_loop']}; growth 10->90% {r['growth_10_to_90']} MB "
        f"({r['growth_kb_per_1000_steps']} kB/1000 steps), 50->90% {r['growth_50_to_90']} MB;"
        f" peak incl. reports "
        f"{r['peak_process']}"
    )
    j = result["result_jsonl"]
    print(f"result.jsonl {j['mb']} MB ({j['step_lines']} steps, {j['event_lines']} events)")
    for k, v in show.items():
        if k == "in_process":
            print(
                f"in process     load {v['load_s']} s, terminal render {v['terminal_s']} s, "
                f"html render {v['html_s']} s"
            )
            continue
        extra = f", rendering {v['rendering_seconds']} s" if "rendering_seconds" in v else ""
        print(f"{k:14s} {v['seconds_median']} s median{extra}, peak RSS {v['peak_rss_mb']} MB")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
