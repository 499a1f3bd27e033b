"""The ``syncguard`` command. Exit codes are API: 0 clean, 1 syncs over budget, 2 usage or
bad input, 3 internal error; 130 when interrupted (Ctrl-C), 143 when terminated (SIGTERM),
141 when the reader of stdout went away (``syncguard show X | head``)."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import warnings
from typing import Any, Iterable, List, Optional

from ..console import error, warning
from ..driving import devices
from ..errors import (  # noqa: F401  (the CLI's names for them)
    EXIT_BROKEN_PIPE,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_OVER,
    EXIT_TERMINATED,
    EXIT_USAGE,
    ResultWarning,
    SyncguardError,
    UsageError,
)
from ..execute import follow
from ..process import signals as _signals
from . import common
from .common import add_device_argument

#: the commands: name -> (the module that adds its arguments and runs it, its one-line help).
#: Only the command typed is imported: ``syncguard --help`` and ``syncguard lint`` do not load
#: the engine, the scenario runner and the calibration (the first screen's time).
COMMANDS = {
    "run": (".run:main", "run scenarios and write reports (the main job)"),
    "exec": (".exec:main",
             "run your own program under the guard (per-step syncs, reports, CI gate)"),
    "show": (".show:main", "render a result file"),
    "compare": (".compare:main", "compare two runs, or two paths of one run"),
    "check": (".check:main", "counted pass only: exit 1 when hidden syncs exceed the budget"),
    "calibrate": (".calibrate:main",
                  "cross-check the catalogue against the native ground truth; write the op model"),
    "lint": (".lint:main",
             "find lines that can make a hidden sync, statically (optionally confirmed by runs)"),
}


class _Parser(argparse.ArgumentParser):
    """argparse's parser with a short error: the error and where the options are listed, two
    lines (argparse's own prints the whole usage first: 10 lines for ``run --device gpu``)."""

    def error(self, message: str) -> Any:  # argparse's signature: NoReturn
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n"
                              f"(`{self.prog} --help` lists the options)\n")


def _parser(names: Iterable[str] = COMMANDS) -> argparse.ArgumentParser:
    """The command line's parser, with the arguments of the commands in ``names``."""
    p = _Parser(
        prog="syncguard",
        description="Count, attribute and gate hidden host-device syncs in decode loops.",
    )
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    for name, (spec, help) in COMMANDS.items():
        sp = sub.add_parser(name, help=help, formatter_class=argparse.RawDescriptionHelpFormatter)
        if name in names:
            mod = importlib.import_module(spec.split(":")[0], __name__)
            sp.description = mod.__doc__
            mod.add_arguments(sp)
            sp.set_defaults(_main=mod.main)
    st = sub.add_parser(
        "selftest", help="plant known syncs and verify the guard sees them",
        description="Plant known hidden syncs (a bool() of a tensor, a .tolist(), a boolean-"
                    "mask index) and a sync-free control on CPU tensors counted as device ones, "
                    "and on --device, and check the guard counts exactly what each makes: \"0 "
                    "syncs\" must never mean \"detector off\". Exit 0 when all agree, else 3 "
                    "with the probe that missed. exec runs it before the program starts.")
    add_device_argument(st, "also probe this device: auto (the NPU when torch_npu works, "
                        "else the simulated npu; default), sim, npu, cuda, cpu")
    st.set_defaults(_main=_selftest)
    return p


def _selftest(args: argparse.Namespace) -> int:
    # torch: the self-test plants syncs on tensors (`--help` and `lint` never load it)
    from ..core.selftest import selftest, summary_line
    from ..driving.runner import target

    t = target(args.device)
    print(f"device: {t.kind} ({t.name})")
    lines = selftest(None if t.kind == "cpu" else str(t.device))
    for line in lines:
        print(line)
    print(summary_line(lines))
    return EXIT_OK


def _show_warning(message: Any, category: Any, filename: str, lineno: int,
                  file: Any = None, line: Optional[str] = None) -> None:
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
    typed = sys.argv[1:] if argv is None else argv
    parser = _parser(typed[:1])
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse already printed its one-line usage error
        return EXIT_OK if exc.code == 0 else EXIT_USAGE
    if not getattr(args, "command", None):
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    args.argv = list(sys.argv[1:] if argv is None else argv)  # what was typed (exec's `--`)

    try:
        # before anything imports torch: a broken torch_npu must not crash `import torch`
        devices.prepare_process(getattr(args, "device", None),
                                sys.argv[1:] if argv is None else argv)
        with warnings.catch_warnings(), _signals.stop_on_signals():
            warnings.simplefilter("always", ResultWarning)
            warnings.showwarning = _show_warning  # restored by catch_warnings
            return int(args._main(args))
    except SyncguardError as exc:  # each says its own exit code (errors.py)
        error(str(exc))
        return exc.exit_code
    except ImportError as exc:
        if not _missing_torch(exc):
            if os.environ.get("SYNCGUARD_DEBUG"):
                raise
            error(f"internal error: {type(exc).__name__}: {exc} (set SYNCGUARD_DEBUG=1 for "
                  f"the traceback)")
            return EXIT_INTERNAL
        # `syncguard lint`, `show`, `compare` and `check RESULT` run without torch; the
        # commands that drive a device need it
        error(f"`syncguard {args.command}` needs PyTorch, which is not installed: "
              f"pip install 'syncguard[torch]' (or install the torch build for your "
              f"accelerator first)")
        return EXIT_USAGE
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


def _missing_torch(exc: ImportError) -> bool:
    """``exc`` says torch (or torch_npu's own torch) cannot be imported."""
    name = getattr(exc, "name", None) or ""
    return name.split(".")[0] == "torch" or (not name and "torch" in str(exc).split(" ")[-1])


def console_main() -> None:
    follow.leave()  # a syncguard command run by a guarded program is its own run
    common.WHOLE_PROCESS = True  # the command line owns this process
    sys.exit(main())
