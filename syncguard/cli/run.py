"""Run scenarios on the sampling paths and write per-step sync counts and latency reports.

With no scenario, runs the built-in scenarios (scenarios/*.toml) on the best device: a real
NPU when torch_npu works, else the simulated one. For each scenario and path: a counted pass
under the guard, then a timed pass without interceptors. Every finished step is streamed to
OUT/result.jsonl, so an interrupted run keeps what it finished (render it with
`syncguard show OUT/result.jsonl`)."""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any, List, Optional, Sequence

NAME = "run"
HELP = "run scenarios and write reports (the main job)"


class _AppendPaths(argparse.Action):
    """``--paths``/``--path``: append, and remember which spelling was used (for errors)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: Optional[str] = None) -> None:
        items = list(getattr(namespace, self.dest, None) or [])
        items.append(values)
        setattr(namespace, self.dest, items)
        namespace.paths_flag = option_string or "--paths"


def add_common(p: argparse.ArgumentParser) -> None:
    from ..devices import DEVICES

    p.add_argument("scenarios", nargs="*", metavar="SCENARIO",
                   help="scenario files or built-in names (default: all built-in)")
    p.add_argument("--device", default="auto", choices=DEVICES,
                   help="auto (npu if torch_npu works, else sim), sim, npu, cuda or cpu")
    p.add_argument("--paths", "--path", dest="paths", action=_AppendPaths, default=None,
                   metavar="PATH", help="sampling path(s): legacy, flag, flag-recompute "
                   "(repeat or comma-separate; default: the scenario's)")
    p.add_argument("--steps", type=int, default=None, help="override the steps per scenario")
    p.add_argument("--warmup", type=int, default=None, help="override the warm-up steps")


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_common(p)
    p.add_argument("--out", default=None,
                   help="report folder (default: reports/<time>-<device>)")
    p.add_argument("--force", action="store_true", help="overwrite existing report files")
    p.add_argument("--no-timed", action="store_true", help="skip the timed pass")
    p.add_argument("--repeat", type=int, default=None, metavar="N",
                   help="rounds of the timed pass (paths interleaved step by step, each round "
                   "from fresh state); default: as many as fit in --budget (1 to 10)")
    p.add_argument("--profile", default=None, metavar="NAME|FILE",
                   help="device profile of the modeled timeline on the simulated device: "
                   "a shipped one (910b, h200; default 910b), a profile JSON file, or none "
                   "(no modeled timeline: saves a few us per op of the counted pass)")
    p.add_argument("--budget", type=float, default=None, metavar="SECONDS",
                   help="time budget of the timed pass per scenario when --repeat is not "
                   "given (default 20)")
    p.add_argument("--width", type=int, default=None, help="terminal width for the tables")
    p.add_argument("--crosscheck", action="store_true",
                   help="also count the counted pass with the runtime's own mechanism (CUDA "
                   "sync debug/trace, NPU trace, sim backend) in a child process and list "
                   "every step where it disagrees (OUT/crosscheck.json)")


def crosscheck(scenarios: Sequence[Any], opts: Any, out: str) -> int:
    """Run the per-step native cross-check in a child process; 0 when every step agrees."""
    import subprocess

    cmd = [sys.executable, "-m", "syncguard.crosscheck", "--device", opts.device,
           "--out", os.path.join(out, "crosscheck.json")]
    for p in opts.paths or []:
        cmd += ["--paths", p]
    for flag in ("steps", "warmup"):
        v = getattr(opts, flag)
        if v is not None:
            cmd += [f"--{flag}", str(v)]
    cmd += [s.file for s in scenarios]
    return subprocess.run(cmd).returncode


def parse_paths(raw: Optional[List[str]], flag: str = "--paths") -> Optional[List[str]]:
    from ..scenario import PATHS
    from . import UsageError

    if not raw:
        return None
    out: List[str] = []
    for chunk in raw:
        for p in chunk.split(","):
            p = p.strip()
            if p not in PATHS:
                raise UsageError(f"{flag}: unknown path {p!r}; valid: {', '.join(PATHS)}")
            if p not in out:
                out.append(p)
    return out


def options(args: argparse.Namespace, counted: bool = True, timed: bool = True):  # type: ignore[no-untyped-def]
    from ..runner import RunOptions
    from . import UsageError

    if args.steps is not None and args.steps < 1:
        raise UsageError(f"--steps: must be >= 1, got {args.steps}")
    if args.warmup is not None and args.warmup < 0:
        raise UsageError(f"--warmup: must be >= 0, got {args.warmup}")
    if args.steps is not None and args.warmup is not None and args.warmup >= args.steps:
        raise UsageError(f"--warmup: must be < --steps ({args.steps}), got {args.warmup}")
    paths = parse_paths(args.paths, getattr(args, "paths_flag", "--paths"))
    repeat, budget = getattr(args, "repeat", None), getattr(args, "budget", None)
    if repeat is not None and repeat < 1:
        raise UsageError(f"--repeat: must be >= 1, got {repeat}")
    if budget is not None and not budget > 0:
        raise UsageError(f"--budget: must be > 0 seconds, got {budget}")
    profile = getattr(args, "profile", None)
    if profile is not None and profile != "none":
        from ..timeline import ProfileError, load_profile

        try:
            load_profile(profile)  # one clear line (exit 2) before anything runs
        except ProfileError as exc:
            raise UsageError(str(exc)) from None
    return RunOptions(device=args.device, paths=paths, steps=args.steps,
                      warmup=args.warmup, counted=counted, timed=timed, repeat=repeat,
                      budget_s=budget, profile=profile)


REPORT_FILES = ("result.jsonl", "result.json", "steps.csv", "events.csv", "report.md",
                "report.html", "trace.json")


def out_dir(args: argparse.Namespace, device: str) -> str:
    from . import UsageError

    out = args.out or os.path.join("reports", time.strftime("%Y%m%d-%H%M%S") + f"-{device}")
    if os.path.exists(out) and not os.path.isdir(out):
        raise UsageError(f"--out: {out} exists and is not a folder")
    clash = [f for f in REPORT_FILES if os.path.exists(os.path.join(out, f))]
    if clash and not args.force:
        raise UsageError(f"{os.path.join(out, clash[0])} exists; pass --force to overwrite "
                         f"or choose another --out")
    os.makedirs(out, exist_ok=True)
    return out


def main(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    from .. import results, runner, scenario
    from ..renderers import terminal, write_reports
    from . import EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_OK, EXIT_OVER, report_width

    opts = options(args, timed=not args.no_timed)
    scenarios = runner.prepare(scenario.resolve(args.scenarios), opts)
    target = runner.resolve_target(opts.device)  # fail early, before any file is written
    opts.device = target.kind
    out = out_dir(args, target.kind)
    result_path = os.path.join(out, "result.jsonl")
    err = Console(stderr=True)
    from ..timing import MIN_ROUNDS

    rounds = opts.repeat or MIN_ROUNDS  # auto mode may add rounds: the bar then runs on
    total = sum(s.steps * len(runner.paths_for(s, opts))
                * (int(opts.counted) + int(opts.timed) * rounds) for s in scenarios)
    interrupted = False
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  console=err, transient=True, disable=not err.is_terminal) as bar:
        task = bar.add_task("running", total=total)

        def progress(sc: str, path: str, pass_: str, step: int, n: int) -> None:
            bar.update(task, advance=1, description=f"{sc} {path} {pass_}")

        try:
            runner.run(scenarios, opts, result_path, progress, argv=sys.argv[1:])
        except KeyboardInterrupt:
            interrupted = True
    if interrupted and not os.path.exists(result_path):
        err.print("interrupted before the first step was written")
        return EXIT_INTERRUPTED
    res = results.load(result_path)
    console = Console(width=report_width(args.width))
    terminal.render(res, console)
    for path in write_reports(res, out):
        err.print(f"Wrote {path}")
    err.print(f"Wrote {result_path}")
    if interrupted:
        err.print(f"interrupted: kept {len(res.steps)} finished steps in {result_path}")
        return EXIT_INTERRUPTED
    if args.crosscheck:
        rc = crosscheck(scenarios, opts, out)
        if rc not in (0, 1):
            return EXIT_INTERNAL
        err.print(f"Wrote {os.path.join(out, 'crosscheck.json')}"
                  + ("" if rc == 0 else " (disagreements listed above)"))
        if rc == 1:  # syncguard and the native count disagree: the run's counts are suspect
            return EXIT_OVER
    return EXIT_OK
