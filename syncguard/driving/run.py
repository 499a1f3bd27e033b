"""``syncguard run``: its options and the one call that runs the scenarios, writes the
reports and shows the run's progress on stderr (see :mod:`syncguard.cli.run` for what the
command does)."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import time
from typing import IO, Any, Callable, List, Optional, Sequence

from .._escape import line_safe, one_line, terminal
from .._paths import new_report_dir
from .._words import plural
from ..console import stdout_console, wrote
from ..errors import EXIT_INTERNAL, EXIT_OK, EXIT_OVER, UsageError
from ..process import signals as _signals
from ..process.atomic import report_folder
from ..renderers import RENDERERS, RESULT_STREAM, run_files, write_reports
from ..results import loader
from . import scenario
from .scenario import ScenarioOptions
from .timing import MAX_ROUNDS


@dataclasses.dataclass
class RunCommand(ScenarioOptions):
    """``syncguard run``'s options as typed: the scenarios and their options, those of
    :func:`syncguard.driving.runner.run_options` for the timed pass, the report folder (None:
    a new ``reports/<time>-<device>``), what the terminal shows, ``--record-lines``, the
    cross-check, and the command line the result header records."""

    exhaustive: Optional[bool] = None
    out: Optional[str] = None
    force: bool = False
    timed: bool = True
    ratio_base: Optional[str] = None
    repeat: Optional[int] = None
    budget: Optional[float] = None
    threads: Optional[int] = None
    width: Optional[int] = None
    verbose: bool = False
    record_lines: List[str] = dataclasses.field(default_factory=list)
    lineage: bool = False
    crosscheck: bool = False
    argv: List[str] = dataclasses.field(default_factory=list)


def crosscheck(scenarios: Sequence[Any], opts: Any, out: str) -> int:
    """Run the per-step native cross-check in a child process; 0 when every step agrees."""
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
        from .plan import Eta  # numpy (results.stats): `--help` never loads it

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


def expectation(scenarios: Sequence[Any], opts: Any, plan: Any, elapsed_s: float = 0.0) -> str:
    """The line printed at the start: what runs, and the expected total time: ``elapsed_s``
    (the time so far, the probe included) plus what ``plan`` (a
    :class:`syncguard.driving.plan.Plan`, from the probe of this machine) expects."""
    from .runner import paths_for  # torch: `--help` never loads it

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


def run(cmd: RunCommand, line_recorder: Callable[[List[str]], Any]) -> int:
    """Run ``cmd``'s scenarios, write the reports, show them; the exit code of ``run``.
    ``line_recorder``: the lint's recorder of the candidate lines under ``--record-lines``
    (None without paths; made where the lint sits above this layer)."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    # torch (runner) and numpy (plan: results.stats): `--help` and `lint` never load them
    from . import runner
    from .plan import Eta

    t_start = time.perf_counter()
    opts = runner.run_options(cmd, timed=cmd.timed, ratio_base=cmd.ratio_base,
                              repeat=cmd.repeat, budget=cmd.budget, lineage=cmd.lineage,
                              threads=cmd.threads)
    opts.exhaustive = bool(cmd.exhaustive)
    lines = line_recorder(cmd.record_lines)
    scenarios = runner.prepare(scenario.resolve(cmd.scenarios), opts)
    interval, mode = progress_interval(), progress_mode(sys.stderr.isatty())
    target = runner.target(opts.device, exhaustive=opts.exhaustive)  # fail early: no file yet
    opts.device = target.kind  # the kind resolved above, as the result header records it
    if opts.exhaustive and target.kind == "cpu":  # the flag is honoured, and finds nothing
        print("syncguard: note: --exhaustive: run --device cpu counts no syncs (the scenarios' "
              "tensors are plain host tensors); --device sim counts them, C++ reads included",
              file=sys.stderr)
    # --out, else a new reports/<time>-<device> with reports/latest pointing at it
    out = report_folder(cmd.out or None, new_report_dir(target.kind), run_files(), cmd.force)
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
            runner.run(scenarios, opts, result_path, progress, argv=cmd.argv,
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
    full = cmd.verbose
    RENDERERS["terminal"].render(res, stdout_console(cmd.width), steps=full, sites=full,
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
    if cmd.crosscheck:
        rc = crosscheck(scenarios, opts, out)
        if rc not in (0, 1):
            return EXIT_INTERNAL
        err.print(f"Wrote {one_line(os.path.join(out, 'crosscheck.json'))}"
                  + ("" if rc == 0 else " (disagreements listed above)"))
        if rc == 1:  # syncguard and the native count disagree: the run's counts are suspect
            return EXIT_OVER
    return EXIT_OK
