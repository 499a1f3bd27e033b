"""What the subcommands share: the device of a command (with its note line), output paths
checked before any work, the allowlist options, and the end of a gate (``check``, recorded
runs): a baseline written, or the verdicts emitted in the asked format."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any, List, Optional, Sequence, Tuple

from .._escape import one_line
from ..errors import UsageError


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


def add_allow_arguments(p: argparse.ArgumentParser) -> None:
    """``--allow SITE`` (repeatable) and ``--config PYPROJECT``, as check and exec take them."""
    p.add_argument("--allow", action="append", default=[], metavar="SITE",
                   help="allow hidden syncs at this call site (file.py:line, pkg.mod:function or "
                   "function; repeatable). Added to [tool.syncguard] allow of --config")
    p.add_argument("--config", default=None, metavar="PYPROJECT",
                   help="pyproject.toml whose [tool.syncguard] allow list applies (default: "
                   "./pyproject.toml when present)")


def allow_sites_of(args: argparse.Namespace) -> Tuple[Tuple[str, str], ...]:
    """``--allow`` sites plus ``[tool.syncguard] allow`` of ``--config`` (or ./pyproject.toml)."""
    from ..config import load_tool_table, to_allow
    from ..errors import UsageError

    path = args.config
    if path is None and os.path.isfile("pyproject.toml"):
        path = "pyproject.toml"
    out: Tuple[Tuple[str, str], ...] = ()
    try:
        if path is not None:
            table = load_tool_table(path)
            out += to_allow(table.get("allow", ()), f"[tool.syncguard] allow in {path}")
        out += to_allow(args.allow, "--allow")
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    return out


def finish(args: argparse.Namespace, verdicts: List[Any], bubbles: Sequence[str] = ()) -> int:
    """Write ``--update-baseline`` (exit 0) or emit ``verdicts`` in ``--format``, then the
    ``--max-bubble-us`` failures (``bubbles``, one line each); the exit code of ``check``
    (also for recorded results)."""
    from ..console import wrote
    from ..errors import EXIT_OK, EXIT_OVER
    from ..gate import baseline_from
    from ..renderers.ci import emit

    if args.update_baseline:
        new = baseline_from(verdicts)
        new.save(args.update_baseline)
        wrote(args.update_baseline, f" ({len(new)} sites)")
        return EXIT_OK
    emit(args.format, verdicts, args.output)
    if args.output not in (None, "-") and os.path.exists(args.output):
        wrote(args.output)
    for line in bubbles:
        print(line)
    return EXIT_OVER if any(v.failed for v in verdicts) or bubbles else EXIT_OK
