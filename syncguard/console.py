"""Printing for the front ends: rich consoles whose every line is safe in a CI log, the
``Wrote <path>`` lines, and the one-line errors and warnings. Torch-free; below the CLI and the
exec engine, which both print (the engine never imports the CLI)."""

from __future__ import annotations

import sys
from typing import Any, Optional

from ._escape import line_safe, one_line


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
    return _console_class()(width=width, file=line_safe(lambda: sys.stderr))


def wrote(path: str, detail: str = "") -> None:
    """``Wrote <path><detail>`` on stderr, the path escaped (a user's ``--out`` may hold a
    newline or ESC)."""
    print(f"Wrote {one_line(path)}{detail}", file=sys.stderr)


def error(msg: str) -> None:
    """One line on stderr: control characters and newlines in ``msg`` (from untrusted files)
    are shown as escapes."""
    print(f"syncguard: error: {one_line(msg)}", file=sys.stderr)


def warning(msg: str) -> None:
    print(f"syncguard: warning: {one_line(msg)}", file=sys.stderr)
