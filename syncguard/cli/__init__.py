"""The ``syncguard`` command. Exit codes are API: 0 clean, 1 syncs over budget, 2 usage or
bad input, 3 internal error (130 when interrupted)."""

from __future__ import annotations

import argparse
import os
import sys
from typing import List, Optional

EXIT_OK, EXIT_OVER, EXIT_USAGE, EXIT_INTERNAL, EXIT_INTERRUPTED = 0, 1, 2, 3, 130


class UsageError(Exception):
    """Bad input: one line on stderr, exit code 2."""


def _parser() -> argparse.ArgumentParser:
    from . import calibrate, check, compare, run, show
    from . import exec as exec_cmd

    p = argparse.ArgumentParser(
        prog="syncguard",
        description="Count, attribute and gate hidden host-device syncs in decode loops.",
    )
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    for mod in (run, exec_cmd, show, compare, check, calibrate):
        sp = sub.add_parser(mod.NAME, help=mod.HELP, description=mod.__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
        mod.add_arguments(sp)
        sp.set_defaults(_main=mod.main)
    st = sub.add_parser("selftest", help="plant known syncs and verify the guard sees them")
    st.add_argument("--device", default="sim", help="also probe this device (default sim)")
    st.set_defaults(_main=_selftest)
    return p


def _selftest(args: argparse.Namespace) -> int:
    from .._selftest import selftest, summary_line

    dev = device_for_probe(args.device)
    lines = selftest(dev)
    for line in lines:
        print(line)
    print(summary_line(lines))
    return EXIT_OK


def device_for_probe(kind: str) -> Optional[str]:
    from ..runner import resolve_target

    t = resolve_target(kind)
    return None if t.kind == "cpu" else str(t.device)


def report_width(width: Optional[int]) -> Optional[int]:
    """``--width`` if given; else the terminal's, or 160 columns when stdout is not a terminal
    (CI logs, pipes), where rich would otherwise squeeze the tables into 80."""
    if width:
        return width
    return None if sys.stdout.isatty() else 160


def error(msg: str) -> None:
    print(f"syncguard: error: {msg}", file=sys.stderr)


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
    from .._stop import handling_interrupts
    from ..baseline import BaselineError
    from ..devices import DeviceError
    from ..events import SelfTestError
    from ..opmodel import OpModelError
    from ..results import ResultError
    from ..scenario import ScenarioError

    try:
        with handling_interrupts():
            return int(args._main(args))
    except (UsageError, ScenarioError, DeviceError, ResultError, OpModelError,
            BaselineError) as exc:
        error(str(exc))
        return EXIT_USAGE
    except SelfTestError as exc:
        error(str(exc))
        return EXIT_INTERNAL
    except KeyboardInterrupt:
        error("interrupted")
        return EXIT_INTERRUPTED
    except Exception as exc:  # an internal error: say so, keep the traceback on request
        if os.environ.get("SYNCGUARD_DEBUG"):
            raise
        error(f"internal error: {type(exc).__name__}: {exc} (set SYNCGUARD_DEBUG=1 for the "
              f"traceback)")
        return EXIT_INTERNAL


def console_main() -> None:
    sys.exit(main())
