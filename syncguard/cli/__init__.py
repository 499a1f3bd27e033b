"""The ``syncguard`` command. Exit codes are API: 0 clean, 1 syncs over budget, 2 usage or
bad input, 3 internal error; 130 when interrupted (Ctrl-C), 143 when terminated (SIGTERM),
141 when the reader of stdout went away (``syncguard show X | head``)."""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from typing import Any, List, Optional

from .._escape import one_line
from ..errors import (  # noqa: F401  (the CLI's names for them)
    EXIT_BROKEN_PIPE,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_OVER,
    EXIT_TERMINATED,
    EXIT_USAGE,
    UsageError,
)


def _parser() -> argparse.ArgumentParser:
    from . import calibrate, check, compare, lint, run, show
    from . import exec as exec_cmd

    p = argparse.ArgumentParser(
        prog="syncguard",
        description="Count, attribute and gate hidden host-device syncs in decode loops.",
    )
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    for mod in (run, exec_cmd, show, compare, check, calibrate, lint):
        sp = sub.add_parser(mod.NAME, help=mod.HELP, description=mod.__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
        mod.add_arguments(sp)
        sp.set_defaults(_main=mod.main)
    st = sub.add_parser("selftest", help="plant known syncs and verify the guard sees them")
    st.add_argument("--device", default="auto", help="also probe this device: auto (the NPU "
                    "when torch_npu works, else the simulated npu; default), sim, npu, cuda, cpu")
    st.set_defaults(_main=_selftest)
    return p


def _selftest(args: argparse.Namespace) -> int:
    from .._selftest import selftest, summary_line

    t = target(args.device)
    print(f"device: {t.kind} ({t.name})")
    lines = selftest(None if t.kind == "cpu" else str(t.device))
    for line in lines:
        print(line)
    print(summary_line(lines))
    return EXIT_OK


def device_for_probe(kind: str) -> Optional[str]:
    t = target(kind)
    return None if t.kind == "cpu" else str(t.device)


def target(kind: str, gpu: bool = False) -> Any:
    """The command's device (:func:`syncguard.devices.resolve_target`), with one note line on
    stderr when ``auto`` did not take the NPU and why."""
    from ..devices import resolve_target

    t = resolve_target(kind, gpu=gpu)
    if t.note:
        print(f"syncguard: note: {one_line(t.note)}", file=sys.stderr)
    return t


def report_width(width: Optional[int]) -> Optional[int]:
    """``--width`` if given; else the terminal's, or 160 columns when stdout is not a terminal
    (CI logs, pipes), where rich would otherwise squeeze the tables into 80."""
    if width:
        return width
    return None if sys.stdout.isatty() else 160


def stdout_console(width: Optional[int] = None) -> Any:
    """A rich Console on stdout for reports (``width`` as :func:`report_width`). When the
    reader goes away it raises BrokenPipeError, which :func:`main` turns into a quiet exit
    (rich's own handling exits 1, the code for "over budget")."""
    from .._escape import line_safe

    # every printed line passes the workflow-command filter (a folded table cell included)
    return _console_class()(width=report_width(width), file=line_safe(lambda: sys.stdout))


def _console_class() -> Any:
    from rich.console import Console

    class _Console(Console):
        def on_broken_pipe(self) -> None:
            self.quiet = True
            raise BrokenPipeError

    return _Console


def stderr_console(width: Optional[int] = None) -> Any:
    """A rich Console on stderr whose every line passes :func:`~syncguard._escape.
    no_workflow_lines` (``exec`` prints its report there: stdout is the program's); a closed
    pipe raises BrokenPipeError (exit 141 in :func:`main`), not rich's exit 1."""
    from .._escape import line_safe

    return _console_class()(width=width, file=line_safe(lambda: sys.stderr))


def wrote(path: str, detail: str = "") -> None:
    """``Wrote <path><detail>`` on stderr, the path escaped (a user's ``--out`` may hold a
    newline or ESC)."""
    print(f"Wrote {one_line(path)}{detail}", file=sys.stderr)


def output_path(path: Optional[str], force: bool = True, flag: str = "-o") -> None:
    """Refuse (:class:`UsageError`) an output path that cannot be written (a folder, socket,
    FIFO without a reader...) or, without ``force``, a regular file already there; call
    before any work. A device or FIFO is written as a stream, so it needs no ``force``."""
    from .._atomic import OutputError, check_output

    if path in (None, "-"):
        return
    assert path is not None
    try:
        kind = check_output(path)
    except OutputError as exc:
        raise UsageError(f"{flag}: {exc}") from None
    if kind == "file" and not force:
        raise UsageError(f"{flag} {path}: exists; pass --force to overwrite it")


def error(msg: str) -> None:
    """One line on stderr: control characters and newlines in ``msg`` (from untrusted files)
    are shown as escapes."""
    print(f"syncguard: error: {one_line(msg)}", file=sys.stderr)


def warning(msg: str) -> None:
    print(f"syncguard: warning: {one_line(msg)}", file=sys.stderr)


def _show_warning(message: Any, category: Any, filename: str, lineno: int,
                  file: Any = None, line: Optional[str] = None) -> None:
    from ..results import ResultWarning

    if isinstance(category, type) and issubclass(category, ResultWarning):
        warning(str(message))
    else:
        _ORIGINAL_SHOWWARNING(message, category, filename, lineno, file, line)


_ORIGINAL_SHOWWARNING = warnings.showwarning


def _quiet_stdout() -> None:
    """The reader of stdout went away: send what Python still flushes at exit to devnull
    (else it prints "Exception ignored ... BrokenPipeError")."""
    for stream in (sys.stdout, sys.stderr):  # `2>&1 | head`: stderr is the same pipe
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, stream.fileno())
            os.close(devnull)
        except (OSError, ValueError, AttributeError):  # no real file descriptor (tests)
            pass


def main(argv: Optional[List[str]] = None) -> int:
    """Entry point; returns the exit code (never raises for bad input)."""
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse already printed its one-line usage error
        return EXIT_OK if exc.code == 0 else EXIT_USAGE
    if not getattr(args, "command", None):
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    from .. import _signals, devices
    from .._atomic import OutputError
    from ..baseline import BaselineError
    from ..devices import DeviceError
    from ..events import SelfTestError
    from ..opmodel import OpModelError
    from ..results import ResultError, ResultWarning
    from ..scenario import ScenarioError
    from ..subjects import SubjectError

    try:
        # before anything imports torch: a broken torch_npu must not crash `import torch`
        devices.prepare_process(getattr(args, "device", None),
                                sys.argv[1:] if argv is None else argv)
        with warnings.catch_warnings(), _signals.stop_on_signals():
            warnings.simplefilter("always", ResultWarning)
            warnings.showwarning = _show_warning  # restored by catch_warnings
            return int(args._main(args))
    except (UsageError, ScenarioError, DeviceError, ResultError, OpModelError,
            BaselineError, SubjectError, OutputError) as exc:
        error(str(exc))
        return EXIT_USAGE
    except SelfTestError as exc:
        error(str(exc))
        return EXIT_INTERNAL
    except BrokenPipeError:  # `syncguard show X | head`: not an error, and not "over budget"
        _quiet_stdout()
        return EXIT_BROKEN_PIPE
    except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM (_signals.Terminated)
        error(_signals.describe(exc))
        return _signals.exit_code(exc)
    except Exception as exc:  # an internal error: say so, keep the traceback on request
        if os.environ.get("SYNCGUARD_DEBUG"):
            raise
        error(f"internal error: {type(exc).__name__}: {exc} (set SYNCGUARD_DEBUG=1 for the "
              f"traceback)")
        return EXIT_INTERNAL


def console_main() -> None:
    sys.exit(main())
