"""What the subcommands share: the options more than one of them takes (the scenario options
of ``run`` and ``check``, ``--device``, ``--width``, the report folder, an output file, the
gate's ``--format``, the allowlist, ``--record-lines``), output paths checked before any
work, and the end of ``check``: a baseline written, or the verdicts emitted in the asked
format.

Everything here is cheap to import: the parser is built without torch or pandas."""

from __future__ import annotations

import argparse
import os
from typing import Any, List, Optional, Sequence

from ..console import wrote
from ..devicenames import DEVICES
from ..driving.devices import EXHAUSTIVE_HELP
from ..errors import EXIT_OK, EXIT_OVER, UsageError
from ..gate.verdicts import baseline_from, budget_count
from ..process.atomic import OutputError, check_output, output_kind
from ..renderers import GATE_RENDERERS, emit_gate


# ---------------------------------------------------------------------------- options
class _AppendPaths(argparse.Action):
    """``--paths``/``--path``: append, and remember which spelling was used (for errors)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: Optional[str] = None) -> None:
        items = list(getattr(namespace, self.dest, None) or [])
        items.append(values)
        setattr(namespace, self.dest, items)
        namespace.paths_flag = option_string or "--paths"


def add_device_argument(p: argparse.ArgumentParser, help: str) -> None:
    """``--device`` (auto, sim, npu, cuda, cpu; default auto); ``help`` says what each means
    for the command."""
    p.add_argument("--device", default="auto", choices=DEVICES, help=help)


def add_scenario_arguments(p: argparse.ArgumentParser) -> None:
    """What ``run`` and ``check`` take to drive scenarios: the scenarios, ``--device``,
    ``--paths``, ``--subject``, ``--steps`` and ``--warmup`` (checked by
    :func:`syncguard.driving.runner.run_options`)."""
    p.add_argument("scenarios", nargs="*", metavar="SCENARIO",
                   help="scenario files, or names of scenarios of the registered scenario "
                   "sets (default: every registered set's scenarios)")
    add_device_argument(p, "auto (npu if torch_npu works, else sim), sim, npu, cuda or cpu "
                        "(plain host tensors: no syncs counted)")
    p.add_argument("--paths", "--path", dest="paths", action=_AppendPaths, default=None,
                   metavar="PATH", help="the paths (subjects) to run: registered subject names "
                   "or MODULE:OBJ (repeat or comma-separate; default: the scenario's paths)")
    p.add_argument("--subject", dest="subjects", action="append", default=[],
                   metavar="MODULE:OBJ", help="also drive this subject (your sampler; see "
                   "syncguard.subjects): MODULE:OBJ or a registered name (repeatable)")
    p.add_argument("--steps", type=int, default=None, help="override the steps per scenario")
    p.add_argument("--warmup", type=int, default=None, help="override the warm-up steps")


def add_exhaustive_argument(p: argparse.ArgumentParser) -> None:
    """``--exhaustive`` (``exec``, ``run``): count the reads made in C++ in cpu mode (the
    dispatch-level net); decided by
    :func:`syncguard.driving.devices.exhaustive_for`."""
    p.add_argument("--exhaustive", action="store_true", default=None, help=EXHAUSTIVE_HELP)


def add_width_argument(p: argparse.ArgumentParser) -> None:
    """``--width`` of the terminal tables (default: the terminal's)."""
    p.add_argument("--width", type=int, default=None, help="terminal width for the tables")


def add_out_arguments(p: argparse.ArgumentParser, default: str) -> None:
    """``--out`` (the report folder; ``default`` says where it goes without one) and
    ``--force`` (checked by :func:`prepare_out`)."""
    p.add_argument("--out", default=None, help=f"report folder (default: {default})")
    p.add_argument("--force", action="store_true", help="overwrite existing report files")


def add_output_arguments(p: argparse.ArgumentParser, help: str,
                         metavar: Optional[str] = None) -> None:
    """``-o``/``--output`` (one file written instead of, or besides, the terminal) and
    ``--force`` to overwrite it (checked by :func:`output_path`)."""
    p.add_argument("-o", "--output", default=None, metavar=metavar, help=help)
    p.add_argument("--force", action="store_true", help="overwrite --output if it exists")


def add_gate_format_arguments(p: argparse.ArgumentParser, files_under_out: bool = False) -> None:
    """``--format``: the gate formats of the renderer registry (``text`` by default); and
    ``--output``/``-o``, the file of a format that has one (sarif, junit): stdout by default,
    or with ``files_under_out`` its file under the report folder (``exec``)."""
    formats = tuple(GATE_RENDERERS)
    filed = [r for r in GATE_RENDERERS.values() if r.file_name]
    p.add_argument("--format", default=formats[0], choices=formats,
                   help=f"gate output: {', '.join(formats)} (default: {formats[0]}; github: "
                   "workflow annotations)")
    default = (", ".join(f"OUT/{r.file_name}" for r in filed) + "; - for stdout"
               if files_under_out else "stdout")
    p.add_argument("--output", "-o", default=None,
                   help=f"file for --format {'/'.join(r.name for r in filed)} "
                   f"(default: {default})")


def add_record_lines_argument(p: argparse.ArgumentParser, which: str) -> None:
    """``--record-lines PATH`` (repeatable); ``which``: the lines recorded, in words."""
    p.add_argument("--record-lines", action="append", default=[], metavar="PATH",
                   help=f"record which `syncguard lint` candidate lines under PATH {which}, "
                   "for `syncguard lint PATH --with-run OUT` (repeatable)")


def add_lineage_argument(p: argparse.ArgumentParser) -> None:
    """``--lineage``, as run and exec take it (the pytest plugin's ``--syncguard-lineage``)."""
    p.add_argument("--lineage", action="store_true",
                   help="track where each read value came from (host uploads, parameters, "
                   "step inputs...) and say per site whether the read can be hoisted to the "
                   "host; costs a Python call per op, so off by default")


def add_allow_arguments(p: argparse.ArgumentParser) -> None:
    """``--allow SITE`` (repeatable) and ``--config PYPROJECT``, as check and exec take them."""
    p.add_argument("--allow", action="append", default=[], metavar="SITE",
                   help="allow hidden syncs at this call site (file.py:line, pkg.mod:function or "
                   "function; repeatable). Added to [tool.syncguard] allow of --config")
    p.add_argument("--config", default=None, metavar="PYPROJECT",
                   help="pyproject.toml whose [tool.syncguard] allow list applies (default: the "
                   "nearest pyproject.toml at or above the working folder)")


# ---------------------------------------------------------------------------- checks
#: the command line owns this process (``console_main``): ``exec`` ends the program as Python
#: would end it (its threads joined, its exit handlers run) under the guard
WHOLE_PROCESS = False


def output_path(path: Optional[str], force: bool = True, flag: str = "-o") -> None:
    """Refuse (:class:`UsageError`) an output path that cannot be written (a folder, socket,
    FIFO without a reader...) or, without ``force``, a regular file already there; call
    before any work. A device or FIFO is written as a stream, so it needs no ``force``."""
    if path in (None, "-"):
        return
    assert path is not None
    try:
        kind = check_output(path)
    except OutputError as exc:
        raise UsageError(f"{flag}: {exc}") from None
    if kind == "file" and not force:
        raise UsageError(f"{flag} {path}: exists; pass --force to overwrite it")


def prepare_out(out: str, files: Sequence[str], force: bool) -> str:
    """Make the report folder ``out``; refuse (UsageError) when it is a file, or when one of
    ``files`` is already there and ``force`` is not set."""
    if os.path.exists(out) and not os.path.isdir(out):
        raise UsageError(f"--out: {out} exists and is not a folder")
    # lexists: a symbolic link (even a dangling one) is a clash too; --force replaces the link
    clash = [f for f in files if os.path.lexists(os.path.join(out, f))]
    for f in clash:  # a folder, device or FIFO named like a report: refused even with --force
        try:
            kind = output_kind(os.path.join(out, f))
        except OutputError as exc:
            raise UsageError(f"--out: {exc}") from None
        if kind != "file":
            raise UsageError(f"--out: {os.path.join(out, f)}: is a device or FIFO, not a "
                             f"regular file")
    if clash and not force:
        raise UsageError(f"{os.path.join(out, clash[0])} exists; pass --force to overwrite "
                         f"or choose another --out")
    try:
        os.makedirs(out, exist_ok=True)
        probe = os.path.join(out, f".syncguard-probe-{os.getpid()}")
        os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        os.unlink(probe)
    except OSError as exc:  # /proc/x, a read-only mount: said now, not after the run
        raise UsageError(f"--out: {out}: cannot write there: {exc.strerror}") from None
    return out


def finish(opts: Any, verdicts: List[Any], bubbles: Sequence[str] = ()) -> int:
    """Write ``opts.update_baseline`` (exit 0) or emit ``verdicts`` in ``opts.format`` to
    ``opts.output``, then the ``--max-bubble-us`` failures (``bubbles``, one line each); the
    exit code of ``check``."""
    if opts.update_baseline:
        new = baseline_from(verdicts)
        new.save(opts.update_baseline)
        wrote(opts.update_baseline, f" ({len(new)} sites)")
        return EXIT_OK
    emit_gate(opts.format, verdicts, opts.output)
    if opts.output not in (None, "-") and os.path.exists(opts.output):
        wrote(opts.output)
    for line in bubbles:
        print(line)
    return EXIT_OVER if any(v.failed for v in verdicts) or bubbles else EXIT_OK


def budget_flags(args: argparse.Namespace) -> None:
    """Check the budget flags a command has (``--max-syncs``, ``--max-syncs-per-step``,
    ``--max-syncs-outside``) with the one budget rule
    (:func:`~syncguard.gate.verdicts.budget_count`)."""
    for name in ("max_syncs", "max_syncs_per_step", "max_syncs_outside"):
        v = getattr(args, name, None)
        if v is not None:
            budget_count(v, "--" + name.replace("_", "-"), UsageError)
