"""Run scenarios on their paths (subjects) and write per-step sync counts and latency reports.

With no scenario, runs every registered scenario set (the `syncguard.scenarios` entry points:
the SGLang Ascend case study shipped with syncguard) on the best device: a real NPU when
torch_npu works, else the simulated one. For each scenario and path: a counted pass
under the guard, then a timed pass without interceptors. Every finished step is streamed to
OUT/result.jsonl, so an interrupted run keeps what it finished (render it with
`syncguard show OUT/result.jsonl`).

Progress goes to stderr: a bar on a terminal; when stderr is not a terminal (CI logs), a plain
line when a scenario finishes and at most once a minute within one
(SYNCGUARD_PROGRESS_SECONDS, default 60); SYNCGUARD_PROGRESS=bar|lines|none chooses. A short
probe of the machine plans the timed rounds (at least 30 timed steps per path, then whole
rounds and more rounds while the run fits --budget, default 180 s: syncguard.driving.plan)
and gives the expected total, printed at the start. Without --out the reports go to
reports/<time>-<device>/, with reports/latest pointing there (syncguard._paths). Ctrl-C or
SIGTERM stops the run: the reports are still written from the finished steps, then the exit
code is 130 (143 for SIGTERM). Report files are written atomically and never through a
symbolic link already in OUT."""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import IO, Any, Callable, Sequence

from .._escape import line_safe, one_line, terminal
from .._paths import keep_runs, new_report_dir, point_latest, prune_reports
from .._words import plural
from ..console import stdout_console, wrote
from ..driving import scenario
from ..driving.timing import MAX_ROUNDS
from ..errors import EXIT_INTERNAL, EXIT_OK, EXIT_OVER, UsageError
from ..lint import candidates
from ..lint.lines import LineRecorder
from ..process import signals as _signals
from ..renderers import RENDERERS, RESULT_STREAM, run_files, write_reports
from ..results import loader
from .common import (
    add_exhaustive_argument,
    add_lineage_argument,
    add_out_arguments,
    add_record_lines_argument,
    add_scenario_arguments,
    add_width_argument,
    prepare_out,
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_scenario_arguments(p)
    add_exhaustive_argument(p)
    add_out_arguments(p, "reports/<time>-<device>, reports/latest pointing at it")
    p.add_argument("--no-timed", action="store_true", help="skip the timed pass")
    p.add_argument("--ratio-base", default=None, metavar="PATH",
                   help="the path latency ratios are taken against (default: each "
                   "scenario's first path)")
    p.add_argument("--repeat", type=int, default=None, metavar="N",
                   help="whole rounds of the timed pass (paths interleaved step by step, each "
                   "round from fresh state; latency verdicts need at least 3 rounds and 30 "
                   "timed steps per path); default: planned from a probe of the machine, 8 "
                   "to 10 rounds and at least 30 timed steps per path, whole rounds as fit "
                   "in --budget")
    p.add_argument("--profile", default=None, metavar="NAME|FILE",
                   help="device profile of the modeled timeline on the simulated device: "
                   "a shipped one (910b, h200; default 910b), a profile JSON file, or none "
                   "(no modeled timeline: saves a few us per op of the counted pass)")
    p.add_argument("--budget", type=float, default=None, metavar="SECONDS",
                   help="the time the run's plan aims at when --repeat is not given "
                   "(default 180): after the counted passes and the minimum evidence (8 "
                   "rounds, 30 timed steps per path), whole rounds and more rounds (up to "
                   "10) as fit; the expected total, from a probe of the machine, is printed "
                   "at the start")
    p.add_argument("--threads", type=int, default=None, metavar="N",
                   help="torch's intra-op threads for the run (default: 1 on the simulated "
                   "device and the CPU, whose kernels run on the host: with more, any other "
                   "job of a shared machine stalls every parallel op and step times vary "
                   "tenfold; torch's own default elsewhere; 0: torch's own default)")
    add_width_argument(p)
    p.add_argument("--verbose", "-v", action="store_true",
                   help="also print every scenario's per-step table, the sync sites and the "
                   "legend (by default the terminal shows the summary and the verdicts; the "
                   "files always hold everything)")
    add_record_lines_argument(p, "ran in the counted pass")
    add_lineage_argument(p)
    p.add_argument("--crosscheck", action="store_true",
                   help="also count the counted pass with the runtime's own mechanism (CUDA "
                   "sync debug/trace, NPU trace, sim backend) in a child process and list "
                   "every step where it disagrees (OUT/crosscheck.json)")


def crosscheck(scenarios: Sequence[Any], opts: Any, out: str) -> int:
    """Run the per-step native cross-check in a child process; 0 when every step agrees."""
    import subprocess

    cmd = [sys.executable, "-m", "syncguard.driving.crosscheck", "--device", opts.device,
           "--out", os.path.join(out, "crosscheck.json")]
    for p in opts.paths or []:
        cmd += ["--paths", p]
    for flag in ("steps", "warmup"):
        v = getattr(opts, flag)
        if v is not None:
            cmd += [f"--{flag}", str(v)]
    cmd += [s.file for s in scenarios]
    return subprocess.run(cmd).returncode


def out_dir(args: argparse.Namespace, device: str) -> str:
    """``--out``, else a new ``reports/<time>-<device>`` with ``reports/latest`` pointing at it
    (:mod:`syncguard._paths`)."""
    if args.out:
        return prepare_out(args.out, run_files(), args.force)
    keep = keep_runs()  # a bad value fails before any folder is made
    out = prepare_out(new_report_dir(device), run_files(), args.force)
    point_latest(out)
    prune_reports(out, keep)
    return out


PROGRESS_ENV, PROGRESS_DEFAULT_S = "SYNCGUARD_PROGRESS_SECONDS", 60.0
#: ``bar`` (a progress bar on stderr, even when it is not a terminal), ``lines`` (plain lines)
#: or ``none``; unset: the bar when stderr is a terminal, else the lines
PROGRESS_MODE_ENV, PROGRESS_MODES = "SYNCGUARD_PROGRESS", ("bar", "lines", "none")


def progress_interval() -> float:
    """Seconds between plain progress lines (``SYNCGUARD_PROGRESS_SECONDS``; 0: every step)."""
    raw = os.environ.get(PROGRESS_ENV, "").strip()
    if not raw:
        return PROGRESS_DEFAULT_S
    try:
        v = float(raw)
    except ValueError:
        v = -1.0
    if not v >= 0.0 or v == float("inf"):
        raise UsageError(f"{PROGRESS_ENV}: must be a number of seconds >= 0, got {raw!r}")
    return v


def progress_mode(is_terminal: bool) -> str:
    """How progress is shown (``SYNCGUARD_PROGRESS``, else by whether stderr is a terminal)."""
    raw = os.environ.get(PROGRESS_MODE_ENV, "").strip().lower()
    if not raw:
        return "bar" if is_terminal else "lines"
    if raw not in PROGRESS_MODES:
        raise UsageError(f"{PROGRESS_MODE_ENV}: one of {', '.join(PROGRESS_MODES)}, got "
                         f"{raw[:40]!r}")
    return raw


class PlainProgress:
    """Progress for logs: one plain line on ``stream`` when a scenario of ``plan`` (a
    :class:`syncguard.driving.plan.Plan`) finishes, with the time it took and about how long
    the run has left; within a scenario, at most one line every ``interval`` seconds (a CI
    log wants a line per scenario or per minute) naming the scenario, path, pass and step,
    the steps done of the plan's and the rate since the previous line (steps per second)."""

    def __init__(self, plan: Any, interval: float, stream: IO[str],
                 clock: Callable[[], float] = time.monotonic) -> None:
        from ..driving.plan import Eta  # numpy (results.stats): `--help` never loads it

        self.interval, self.stream, self.clock = interval, stream, clock
        self.eta = Eta(plan, clock)
        self.total, self.scenarios = plan.total_steps, len(plan.scenarios)
        self.done = 0
        self._t = self._t_sc = clock()
        self._done_at_t = 0

    def __call__(self, sc: str, path: str, pass_: str, step: int, n: int) -> None:
        self.done += 1
        now = self.clock()
        if self.eta.step(sc) is not None:
            text = (f"scenario {len(self.eta.finished)}/{self.scenarios} {terminal(sc)} done "
                    f"({plural(self.eta.done[sc], 'step')} in {now - self._t_sc:.0f} s), "
                    f"{self.done}/{self.total} steps done, about "
                    f"{_duration(self.eta.left_s())} left")
            self._t_sc = now
        elif now - self._t >= self.interval:
            rate = (self.done - self._done_at_t) / max(now - self._t, 1e-9)
            text = (f"{terminal(sc)} {terminal(path)} {pass_} step {step}/{n}, {self.done}/"
                    f"{self.total} steps done, {rate:.1f} steps/s, about "
                    f"{_duration(self.eta.left_s())} left")
        else:
            return
        self._t, self._done_at_t = now, self.done
        try:
            print(f"syncguard: progress: {text}", file=self.stream, flush=True)
        except (OSError, ValueError):  # a closed log must not stop the run
            pass


def _line_recorder(args: argparse.Namespace) -> Any:
    """The lint's line recorder for ``--record-lines`` (None without it)."""
    paths = getattr(args, "record_lines", None) or []
    if not paths:
        return None

    for p in paths:
        if not os.path.exists(p):
            raise UsageError(f"--record-lines {p}: no such file or folder")

    return LineRecorder(candidates(paths))


def expectation(scenarios: Sequence[Any], opts: Any, plan: Any, elapsed_s: float = 0.0) -> str:
    """The line printed at the start: what runs, and the expected total time: ``elapsed_s``
    (the time so far, the probe included) plus what ``plan`` (a
    :class:`syncguard.driving.plan.Plan`, from the probe of this machine) expects."""
    from ..driving.runner import paths_for  # torch: `--help` never loads it

    runs = sum(len(paths_for(s, opts)) for s in scenarios)
    head = f"syncguard: {plural(len(scenarios), 'scenario')}, {plural(runs, 'scenario path')}"
    if not opts.timed:  # no probe: a quick look
        return f"{head}: counted passes only (--no-timed)"
    total = elapsed_s + plan.expected_s
    said = (f"{head}: expect about {_duration(total)} in total (from a {plan.probe_s:.1f} s "
            f"probe of this machine; a machine that gets busier takes longer)")
    if opts.repeat is not None:
        return f"{said}: {opts.repeat} whole timed round(s) each (--repeat)"
    rounds = sorted({s.rounds for s in plan.scenarios if s.rounds}) or [0]
    span = f"{rounds[0]}" if rounds[0] == rounds[-1] else f"{rounds[0]} to {rounds[-1]}"
    text = (f"{said}: {span} timed rounds per scenario (at most {MAX_ROUNDS}), at least "
            f"{plural(plan.min_samples, 'timed step')} per path")
    if total > (plan.budget_s or 0.0) * 1.05:  # information, not an error: the run goes on
        text += (f" (the least a latency verdict needs; on this machine it takes longer than "
                 f"--budget {plan.budget_s:g} s)")
    return text


def _duration(s: float) -> str:
    return f"{max(s, 0.0):.0f} s" if s < 120 else f"{s / 60:.1f} min"


def main(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    # torch (runner) and numpy (plan: results.stats): `--help` and `lint` never load them
    from ..driving import runner
    from ..driving.plan import Eta

    t_start = time.perf_counter()
    opts = runner.run_options(args.device, args.paths, args.steps, args.warmup,
                              paths_flag=getattr(args, "paths_flag", "--paths"),
                              subject_specs=args.subjects, timed=not args.no_timed,
                              ratio_base=args.ratio_base, repeat=args.repeat,
                              budget=args.budget, profile=args.profile, lineage=args.lineage,
                              threads=args.threads)
    opts.exhaustive = bool(args.exhaustive)
    lines = _line_recorder(args)
    scenarios = runner.prepare(scenario.resolve(args.scenarios), opts)
    interval, mode = progress_interval(), progress_mode(sys.stderr.isatty())
    target = runner.target(opts.device, exhaustive=opts.exhaustive)  # fail early: no file yet
    opts.device = target.kind  # the kind resolved above, as the result header records it
    if opts.exhaustive and target.kind == "cpu":  # the flag is honoured, and finds nothing
        print("syncguard: note: --exhaustive: run --device cpu counts no syncs (the scenarios' "
              "tensors are plain host tensors); --device sim counts them, C++ reads included",
              file=sys.stderr)
    out = out_dir(args, target.kind)
    result_path = os.path.join(out, RESULT_STREAM)
    # SYNCGUARD_PROGRESS=bar draws the bar on any stderr (rich's terminal codes included)
    err = Console(stderr=True, file=line_safe(lambda: sys.stderr),
                  force_terminal=True if mode == "bar" else None)
    stop = _signals.Stop()
    try:  # a short probe of this machine, then the rounds of each scenario
        plan = runner.plan_for(scenarios, opts, target)
    except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM (_signals.Terminated)
        stop.caught(exc)
        print(f"syncguard: {stop.describe()} before the first step was written",
              file=sys.stderr)
        return stop.exit_code
    print(expectation(scenarios, opts, plan, time.perf_counter() - t_start), file=sys.stderr,
          flush=True)
    plain = PlainProgress(plan, interval, sys.stderr) if mode == "lines" else None
    eta = Eta(plan)
    with Progress(TextColumn("{task.description}", markup=False), BarColumn(),
                  MofNCompleteColumn(), TextColumn("steps, {task.fields[left]}"),
                  console=err, transient=True, disable=mode != "bar") as bar:
        task = bar.add_task("running", total=plan.total_steps,
                            left=f"about {_duration(plan.expected_s)} left")
        index = {s.name: i for i, s in enumerate(plan.scenarios, 1)}

        def progress(sc: str, path: str, pass_: str, step: int, n: int) -> None:
            if mode == "bar":
                eta.step(sc)
                bar.update(task, advance=1, left=f"about {_duration(eta.left_s())} left",
                           description=f"scenario {index.get(sc, 0)}/{len(index)} {sc} "
                                       f"{path} {pass_}")
            if plain is not None:
                plain(sc, path, pass_, step, n)

        try:
            runner.run(scenarios, opts, result_path, progress, argv=sys.argv[1:],
                       lines=lines, plan=plan, target=target)
        except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM (_signals.Terminated)
            stop.caught(exc)
    if stop.stopped and not os.path.exists(result_path):
        print(f"syncguard: {stop.describe()} before the first step was written",
              file=sys.stderr)
        return stop.exit_code
    # A second Ctrl-C (or a SIGTERM) while the reports are written waits for them: every
    # report is complete (each written atomically) and result.json is never missing.
    with stop.finishing():
        res = loader.load(result_path)
        written = write_reports(res, out)
    full = bool(getattr(args, "verbose", False))
    RENDERERS["terminal"].render(res, stdout_console(args.width), steps=full, sites=full,
                                 legend=full, brief=not full)
    if not full:
        print("Per-step tables, every sync site and the legend: --verbose, or the reports "
              "below (report.html first).", file=sys.stderr)
    # the HTML report last: the one line a person opens
    html = [p for p in written if p.endswith(".html")]
    for path in [p for p in written if p not in html]:
        wrote(path)
    wrote(result_path)
    for path in html:
        wrote(path)
    if stop.stopped:
        print(f"syncguard: {stop.kept(len(res.steps), result_path)}", file=sys.stderr)
        return stop.exit_code
    if args.crosscheck:
        rc = crosscheck(scenarios, opts, out)
        if rc not in (0, 1):
            return EXIT_INTERNAL
        err.print(f"Wrote {one_line(os.path.join(out, 'crosscheck.json'))}"
                  + ("" if rc == 0 else " (disagreements listed above)"))
        if rc == 1:  # syncguard and the native count disagree: the run's counts are suspect
            return EXIT_OVER
    return EXIT_OK
