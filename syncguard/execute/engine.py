"""The ``exec`` engine: check the program and its ``--step``/``--loop`` targets, run it under
one guard with the step recorder (:mod:`.session`), then the footer, the reports and the gate."""


from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import os
import sys
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Sequence, Tuple

from .._escape import one_line
from .._words import plural
from ..console import stderr_console, wrote
from ..core import steps as markers
from ..core.sites import shown_path
from ..driving.devices import EXEC_CPU_NAME
from ..errors import EXIT_BROKEN_PIPE, EXIT_OK, EXIT_OVER, EXIT_USAGE, SyncguardError, UsageError
from ..gate.recorded import result_verdicts
from ..gate.verdicts import budget
from ..lint import candidates
from ..lint.lines import LineRecorder
from ..process import signals as _signals
from ..process.atomic import claim, stream_of
from ..process.fds import Own
from ..renderers import emit_gate, write_reports
from ..results import drain, loader
from ..results.environment import environment
from ..results.format import ResultError
from ..results.loader import process_parts
from ..results.machine import machine_state
from ..results.merge import PARTS_DIR, process_label
from ..results.writer import ResultWriter
from . import follow
from .hooks import StepHooks, StepTarget, findable, static_missing
from .mainhook import main_source
from .program import ProgramError, check, program_path, run, show_exception

if TYPE_CHECKING:  # pragma: no cover
    from ..gate.verdicts import Budget, Tally


@dataclasses.dataclass
class ExecOptions:
    """One ``exec`` run: the program, the ``--step`` targets, the gate and output options."""

    program: Any  # program.Program
    steps: Sequence[StepTarget] = ()
    warmup: int = 0
    max_syncs: Optional[int] = None
    max_syncs_per_step: Optional[int] = None
    max_syncs_outside: Optional[int] = None
    allow_sites: Sequence[Tuple[str, str]] = ()
    fmt: str = "text"
    output: Optional[str] = None
    width: Optional[int] = None
    rank: Optional[int] = None
    argv: List[str] = dataclasses.field(default_factory=list)
    #: files/folders whose ``syncguard lint`` candidate lines are recorded as they run
    record_lines: Sequence[str] = ()
    #: ``--force``: an earlier run's result file in the folder may be replaced
    force: bool = True
    #: track where each read value came from (``--lineage``; syncguard.core.lineage)
    lineage: bool = False
    #: events of a site written whole, the later ones counted (None: all, ``--all-events``)
    events_per_site: Optional[int] = None
    #: guard every process the program starts too (``--no-follow``: this one only)
    follow: bool = True
    #: this process is the program's (the command line's): after the program returns, its
    #: non-daemon threads are joined and its exit handlers run under the guard, as Python
    #: would before exiting, so a server's threads and the children joined at exit count
    whole_process: bool = False
    #: pass a run whose device mode (sim, npu, cuda) saw no device use (``--allow-host``)
    allow_host: bool = False


#: ``exec``'s default :attr:`ExecOptions.events_per_site`: enough to show a site's steps and
#: stacks in the event tables and the trace; a run of 100,000 steps then writes and loads
#: counts, not 100,000 event lines
EVENTS_PER_SITE = 16


def rank_from_env(env: Optional[Mapping[str, str]] = None) -> Optional[int]:
    """This process's rank under torchrun (``RANK`` and ``WORLD_SIZE`` set), else None.
    Raises ValueError (one line) for a ``RANK`` that is not an integer from 0 to
    ``WORLD_SIZE - 1`` in ASCII digits, or a ``WORLD_SIZE`` that is not a positive integer:
    said before the program runs, not after (its result would be refused)."""
    e: Mapping[str, str] = os.environ if env is None else env
    rank, world = e.get("RANK"), e.get("WORLD_SIZE")
    if rank is None or world is None:
        return None
    import re

    digits = re.compile(r"0|[1-9][0-9]{0,5}", re.ASCII)
    if not digits.fullmatch(world) or int(world) < 1:
        raise ValueError(f"WORLD_SIZE={world[:40]!r}: must be a positive integer (as torchrun "
                         f"sets it)")
    if not digits.fullmatch(rank) or int(rank) >= int(world):
        raise ValueError(f"RANK={rank[:40]!r}: must be an integer from 0 to "
                         f"{int(world) - 1} (WORLD_SIZE={world}), as torchrun sets it")
    return int(rank)


def result_name(rank: Optional[int]) -> str:
    """``result.jsonl``, or ``result.rank<N>.jsonl`` for rank N."""
    return "result.jsonl" if rank is None else f"result.rank{rank}.jsonl"


def _exit_code(exc: SystemExit) -> int:
    code = exc.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)  # sys.exit("message"), as Python prints it
    return 1


def execute(opts: ExecOptions, target: Any, out: str) -> int:
    """Run the program under the guard, write the results into ``out`` and return the exit
    code (see :mod:`syncguard.cli.exec`)."""
    from ..core.selftest import selftest  # torch: after the program's environment is set

    program = opts.program
    try:
        check(program)
    except ProgramError as exc:
        raise UsageError(str(exc)) from None
    own = {"__main__", own_module(program)}
    with program_path(program):
        main_file = main_source(program.target, program.module)
        for t in opts.steps:
            if t.module in own:  # the program's own code, which runs as __main__
                if main_file is None:
                    raise UsageError(f"{t.flag} {t.spec}: the program's code is not a Python "
                                     f"source file; mark the step with syncguard.step()")
                t.module = "__main__"
            why = static_missing(t, main_file if t.module == "__main__" else None)
            if why is None and t.module != "__main__" and not findable(t.module):
                why = (f"no module {t.module.split('.')[0]!r} on the program's path (its "
                       f"folder, the current one, PYTHONPATH and site-packages); check the "
                       f"name, or run from the folder that holds it")
            if why is not None:
                raise UsageError(f"{t.flag} {t.spec}: {why}")
    if not _budget(opts).gated and opts.fmt != "text":
        raise UsageError(f"--format {opts.fmt}: needs --max-syncs, --max-syncs-per-step or "
                         f"--max-syncs-outside (the budget to gate on)")
    selftest(None if target.kind == "cpu" else str(target.device))

    follow.forget_device_use(target)  # the self-test's ops are syncguard's, not the program's

    path = os.path.join(out, result_name(opts.rank))
    run_id = follow.new_run_id() if opts.follow else None
    if opts.follow and opts.rank is None:
        _clear_parts(out)
    header = {
        "env": environment(target.kind, EXEC_CPU_NAME if target.kind == "cpu" else target.name),
        "machine": machine_state(),  # compare of two exec runs: same machine or not
        "argv": opts.argv,
        "options": {"steps": [t.spec for t in opts.steps if not t.loop],
                    "loops": [t.spec for t in opts.steps if t.loop], "warmup": opts.warmup,
                    "max_syncs": opts.max_syncs,
                    "max_syncs_per_step": opts.max_syncs_per_step,
                    "max_syncs_outside": opts.max_syncs_outside, "device": target.kind,
                    "exhaustive": target.exhaustive},
        "exec": {"program": program.target, "module": program.module, "args": program.args,
                 "rank": opts.rank, "world_size": os.environ.get("WORLD_SIZE"),
                 "follow": run_id},
        "scenarios": {program.name: {"file": program.target, "steps": None,
                                     "warmup": opts.warmup, "max_syncs": {}}},
    }

    # the result file is this run's alone until its reports are written (a second run into
    # the same --out is refused in one line); released when the process closes it
    claimed = claim(path, opts.force)
    settings = None
    if run_id is not None:
        settings = follow.Settings(
            run=run_id, out=os.path.abspath(out), root=os.getpid(), device=target.kind,
            exhaustive=target.asked_exhaustive,
            steps=[[t.spec, t.flag, t.module] for t in opts.steps],
            warmup=opts.warmup, allow=[list(a) for a in opts.allow_sites],
            lineage=opts.lineage, events_per_site=opts.events_per_site, rank=opts.rank,
            program=program.name, header=header)
    held = Own(claimed)  # the program may close the number, or open a file of its own on it
    try:
        return _run(opts, target, out, program, path, header, claimed, settings)
    finally:
        held.close()


def _clear_parts(out: str) -> None:
    """Remove the processes' parts an earlier run left in ``out`` (this run owns the folder
    now: its result file is claimed)."""
    where = os.path.join(out, PARTS_DIR)
    try:
        names = os.listdir(where)
    except OSError:
        return
    for name in names:
        if name.endswith(".jsonl"):
            try:
                os.unlink(os.path.join(where, name))
            except OSError:
                pass


class _EndLikePython:
    """Around the program: what Python does after the main module returns or raises, done
    while the guard is on (``on``: this process is the program's): join the non-daemon
    threads (a server's main module often returns at once) and run the exit handlers
    (``multiprocessing`` joins its children there and stops its daemons; the program's own
    ``atexit`` functions). After Ctrl-C or SIGTERM nothing waits; a forked child's end is
    its own part's (:mod:`.follow`)."""

    def __init__(self, on: bool) -> None:
        self.on = on

    def __enter__(self) -> None:
        return None

    def __exit__(self, exc_type: Any, *exc: Any) -> None:
        if not self.on or follow.is_child() or (
                exc_type is not None and issubclass(exc_type, KeyboardInterrupt)):
            return
        import atexit
        import threading

        threading._shutdown()  # type: ignore[attr-defined]  # joins them, as Python does
        atexit._run_exitfuncs()


def _run(opts: ExecOptions, target: Any, out: str, program: Any, path: str,
         header: Dict[str, Any], claimed: int, settings: Any = None) -> int:
    from .session import ExecSession  # torch (the guard): after the environment is set

    # the file is written by a drain process (syncguard.results.drain: a finished step costs
    # the program one pipe write), or here where none can be started
    writer: Any = drain.start(path, claimed, header, opts.events_per_site)
    if writer is None:
        writer = ResultWriter(path, header, stream_of(claimed),
                              events_per_site=opts.events_per_site)
    session = ExecSession(program.name, writer, target, warmup=opts.warmup,
                          allow_sites=opts.allow_sites, rank=opts.rank,
                          devices=("cpu",) if target.kind == "cpu" else ())
    hooks = StepHooks(opts.steps)
    code, raised = 0, None
    stop = _signals.Stop()  # Ctrl-C, or SIGTERM (_signals.Terminated)
    prev = markers.set_recorder(session)
    recorder = _line_recorder(opts.record_lines)
    from ..driving.lineage import tracking  # torch: after the environment is set

    if settings is not None:
        if opts.steps:  # the steps may all be a child's: no empty step of the whole program
            session.record_empty = False
        follow.set_session(session)
        follow.install_fork_hook()
    following: Any = (follow.following(settings) if settings is not None
                      else contextlib.nullcontext())
    try:
        with tracking(target, opts.lineage), session, following:
            hooks.install()
            try:
                with recorder, _signals.program_handlers():  # its own SIGTERM handler
                    with _EndLikePython(opts.whole_process):
                        run(program, hooks.main_names(), hooks.module_ready)
            finally:
                hooks.uninstall()
    except SystemExit as exc:
        code = _exit_code(exc)
    except KeyboardInterrupt as exc:
        if isinstance(exc, _signals.Terminated) or _signals.interrupts() or \
                _signals.requested() is not None:
            stop.caught(exc)
            writer.sync()  # the finished steps on disk now: the footer and reports take long
        else:  # the program's own `raise KeyboardInterrupt`: an exception like any other
            show_exception(exc)
            code, raised = 130, type(exc).__name__
    except BrokenPipeError:  # the reader of its output went away (`| head`): as `run`, 141
        code = EXIT_BROKEN_PIPE
    except SyncguardError as exc:  # syncguard's own refusal (the simulated device's): a line
        print(f"syncguard: error: {exc}", file=sys.stderr)
        code, raised = exc.exit_code, type(exc).__name__
    except BaseException as exc:  # the program failed: its traceback, as a plain run shows
        show_exception(exc)
        code, raised = 1, type(exc).__name__
    if follow.is_child():  # a forked child of the program returned here: its own part
        follow._finish_child(reason=f"exited {code}" if code else None)
        _child_exit(stop.exit_code if stop.stopped else code)
    if os.getpid() != session.pid:  # a forked child left the program: the run is not its own
        _child_exit(stop.exit_code if stop.stopped else code)
    # A second Ctrl-C or a SIGTERM now waits: the footer and every report are written whole.
    with stop.finishing():
        markers.set_recorder(prev)
        stopped = stop.stopped  # decided once: the footer and the reports agree
        session.finish(complete=not stopped)
        if opts.record_lines:
            writer.note(**recorder.note())
        for line in hooks.notes():  # a step traced inside a fullgraph region
            writer.note(message=line)
        parts = _parts(out, settings)
        seen = set(session.step_names()) | {s.path for _, res in parts for s in res.steps}
        # a --step/--loop target no process called: the headline says so, not a count of
        # the whole program's syncs that would read like a result; never a pass
        unmatched = [_never_called(t, parts, program.name) for t in opts.steps
                     if t.label not in seen]
        if unmatched:
            writer.note(message=f"no step matched: {'; '.join(unmatched)}", no_step=True)
        # a part with no end (killed, still running) cannot say: not taken as host-only
        used = follow.process_used_device(session) or any(
            res.footer is None or res.footer.get("device_used", True) for _, res in parts)
        host_only = not used and not opts.allow_host
        if host_only:
            writer.note(message=_host_only_line(target), host_only=True)
        session.write_outside()  # per site, as events: kind, op, line and count of each
        outside = session.outside  # the hidden ones, counted per site
        if outside.sites():
            writer.note(message=outside_message(outside, opts.max_syncs_outside,
                                                _budget(opts).gated),
                        outside_steps=outside.hidden, sites=_sites(outside))
        cut = session.aborted if not stopped else 0
        if stopped:
            writer.close(False, reason=stop.reason(), exit_code=stop.exit_code,
                         device_used=used)
        elif cut:  # Ctrl-C cut steps, the program caught it and went on: not every step kept
            writer.close(False, reason=f"interrupted: Ctrl-C cut {cut} step(s), not recorded; "
                         f"the program caught it and went on", exit_code=code,
                         device_used=used)
        elif code != 0:  # ran to its end, and failed: the reports say how
            writer.close(True, exit_code=code, reason=f"program raised {raised}" if raised
                         else f"program exited {code}", device_used=used)
        else:
            writer.close(True, exit_code=0, device_used=used)
        merged = _report(opts, path, out, stop if stopped else None, outside)
        writer.raise_error()  # a full disk: one line, exit 2, the lines before it kept
    for line in _process_lines(merged):
        print(f"syncguard: {line}", file=sys.stderr)
    # a target that matched in some process is not an error of this one's hooks
    step_errors = [e for e in hooks.errors()
                   if not any(e.startswith(f"{t.flag} {t.spec}:") and t.label in seen
                              for t in opts.steps)]
    for line in step_errors:
        print(f"syncguard: error: {line}", file=sys.stderr)
    if stop.stopped:
        return stop.exit_code
    if code != 0:
        return code
    if step_errors:
        return EXIT_USAGE
    if unmatched:
        for line in unmatched:
            print(f"syncguard: error: {line}", file=sys.stderr)
        return EXIT_USAGE
    if host_only:
        print(f"syncguard: error: {_host_only_line(target)}", file=sys.stderr)
        return EXIT_USAGE
    return EXIT_OVER if _gate(opts, session, merged, parts) else EXIT_OK


def _parts(out: str, settings: Any) -> List[Tuple[Dict[str, Any], Any]]:
    """The parts the processes the program started wrote (:mod:`.follow`), by pid; a part
    that cannot be read is left to the reports' loader to name."""
    if settings is None:
        return []

    try:
        return process_parts(os.path.abspath(out), settings.run)
    except ResultError:
        return []


def _never_called(t: StepTarget, parts: Sequence[Tuple[Dict[str, Any], Any]],
                  root: str) -> str:
    """``--loop m:f was never called in any of the 2 processes that ran (gen.py pid 1,
    worker pid 2)``; with no process followed, ``... was never called`` (or ``installed``)."""
    if not parts:
        return f"{t.flag} {t.spec} " + ("was never called" if t.installed else
                                       "was never installed")
    who = [f"{root} pid {os.getpid()}"] + [process_label(info) for info, _ in parts]
    more = f" and {len(who) - 4} more" if len(who) > 4 else ""
    return (f"{t.flag} {t.spec} was never called in any of the {len(who)} processes that ran "
            f"({', '.join(who[:4])}{more})")


def _host_only_line(target: Any) -> str:
    """What to say when the run's device mode saw no device use in any process."""
    return (f"no process used the {target.kind} device (--device {target.kind}): the program "
            f"stayed on the host, so no read of it can sync and a count of 0 proves nothing. "
            f"Put its tensors on the device (on --device sim the device is 'npu': "
            f"torch.device('npu'), .to('npu'), .npu()), or run with --device cpu to count "
            f"reads of host tensors as syncs; --allow-host accepts a run that stays on the host")


def _process_lines(merged: Any) -> List[str]:
    """One line per followed process that did not end whole (killed, crashed, still
    running when the run ended): its steps after that were not seen."""
    out = []
    for p in (merged.header.get("processes") or []) if merged is not None else []:
        if not p.get("complete"):
            why = p.get("reason") or "killed, crashed or still running: its part has no end"
            out.append(f"warning: process {p.get('label')}: INCOMPLETE ({why}); gated on the "
                       f"{p.get('steps')} steps it kept")
    return out


def _line_recorder(paths: Sequence[str]) -> Any:
    """A :class:`syncguard.lint.lines.LineRecorder` of the lint's candidate lines under
    ``paths`` (a no-op one without paths)."""
    return LineRecorder(candidates(paths) if paths else {})


def _child_exit(code: int) -> None:
    """End a forked child of the program as Python would (its atexit handlers, its buffered
    output) but without syncguard's finalisation: reports, footer and gate belong to the
    process that started the run."""
    import atexit

    try:
        atexit._run_exitfuncs()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError, AttributeError):
                pass
        os._exit(code & 0xFF)


def own_module(program: Any) -> str:
    """The module name the program's code would have if imported: the script's stem, the
    ``-m`` module, or ``PKG.__main__`` for ``-m PKG``."""
    if not program.module:
        return os.path.splitext(os.path.basename(program.target))[0]

    with program_path(program):
        try:
            spec = importlib.util.find_spec(program.target)
        except (ImportError, ValueError):
            spec = None
    if spec is not None and spec.submodule_search_locations is not None:
        return f"{program.target}.__main__"
    return str(program.target)


def _site_counts(outside: Tally) -> Dict[str, int]:
    """Hidden syncs per ``file:line`` (paths as the reports show them), in the order the lines
    first synced."""
    counts: Dict[str, int] = {}
    for s in outside.sites(by_count=False):
        site = f"{shown_path(s.event.filename)}:{int(s.event.lineno or 0)}"
        counts[site] = counts.get(site, 0) + s.count
    return counts


def _sites(outside: Tally) -> List[str]:
    """``file:line`` of ``outside``'s sites, paths as the reports show them: each once, by file
    then line."""
    return [f"{f}:{n}" for f, n in sorted({(shown_path(s.event.filename), int(s.event.lineno or 0))
                                           for s in outside.sites()})]


def outside_message(outside: Tally, budget: Optional[int] = None,
                    steps_gated: bool = False) -> str:
    """One line on the hidden syncs made outside every step (counted in ``outside``): the
    sites with the most first, each with its count (``generate.py:39 x5``); gated on
    ``--max-syncs-outside``, or (its per-step sites) with the steps (``steps_gated``)."""
    counts = _site_counts(outside)
    sites = [f"{s} x{n}" for s, n in sorted(counts.items(), key=lambda kv: -kv[1])]
    more = f" and {len(sites) - 3} more" if len(sites) > 3 else ""
    gate = (f"budget {budget}" if budget is not None else "per-step sites gated with the steps"
            if steps_gated else "not gated")
    return (f"{plural(outside.hidden, 'hidden sync')} outside every step "
            f"({gate}): {', '.join(sites[:3])}{more}")


def _report(opts: ExecOptions, path: str, out: str, stop: Optional[_signals.Stop],
            outside: Tally) -> Any:
    """Write the reports and print the terminal's; the loaded result (its processes' parts
    merged) for the gate."""
    # numpy (the report's tables): `exec --help` and the program's start never load it
    from ..renderers import terminal

    err = stderr_console(opts.width)
    res = loader.load(path)
    if opts.rank is None:
        written = write_reports(res, out)  # before printing: a closed pipe loses no report
        terminal.render(res, err)
        for p in written:
            wrote(p)
    else:  # ranks print at once: one line each; `syncguard show OUT` merges them
        hidden = sum(s.syncs for s in res.steps if not s.warmup)
        err.print(f"rank {opts.rank}: {hidden} hidden syncs in {len(res.steps)} steps; "
                  f"`syncguard show {one_line(out)}` merges the ranks", markup=False)
    wrote(path)
    if outside.sites() and opts.rank is not None:  # else the rendered report's notes say it
        err.print(outside_message(outside, opts.max_syncs_outside), markup=False)
    if stop is not None:
        err.print(stop.kept(len(res.steps), path), markup=False)
    return res


def _gate(opts: ExecOptions, session: Any, merged: Any = None,
          parts: Sequence[Tuple[Dict[str, Any], Any]] = ()) -> bool:
    """Gate each step name's hidden syncs on ``--max-syncs`` (their total over the run) and
    ``--max-syncs-per-step`` (the worst step call), and the syncs outside every step on
    ``--max-syncs-outside``; True when one is over. Each process the program started is
    gated the same way, on its own part (``merged``: the result with the parts in it)."""
    gate = _budget(opts)
    if not gate.gated:
        return False

    label = opts.program.name if opts.rank is None else f"{opts.program.name} [rank {opts.rank}]"
    verdicts = []
    for name, tot in session.totals.items():  # counts per site and step, not events
        verdicts += gate.verdicts(tot.tally, label, name)
    steps = max((t.steps - min(t.steps, opts.warmup) for t in session.totals.values()),
                default=0)
    verdicts += gate.outside_verdicts(session.outside, label, session.outside_after, steps)
    if parts and merged is not None:
        theirs = {f"{s.scenario} [{process_label(info)}]" for info, res in parts
                  for s in res.steps}
        verdicts += result_verdicts(merged, gate, scenarios=theirs)
    emit_gate(opts.fmt, verdicts, opts.output, command="exec")
    if opts.output not in (None, "-") and os.path.exists(opts.output):
        wrote(opts.output)
    return any(v.failed for v in verdicts)


def _budget(opts: ExecOptions) -> Budget:
    """What the run is gated on (:func:`syncguard.gate.verdicts.budget`): its own flags only."""
    return budget(opts.max_syncs, opts.max_syncs_per_step, opts.max_syncs_outside,
                  default=None)
