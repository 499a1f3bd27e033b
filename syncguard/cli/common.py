"""What the subcommands share: the options more than one of them takes (the scenario options
of ``run`` and ``check``, ``--device``, ``--width``, the report folder, an output file, the
gate's ``--format``, the allowlist, ``--record-lines``), a command's options object built
from its parsed arguments (:func:`options`), and the end of ``check``: a baseline written, or
the verdicts emitted in the asked format.

Everything here is cheap to import: the parser is built without torch or pandas."""

from __future__ import annotations

import argparse
import dataclasses
import os
from typing import Any, List, Optional, Sequence, Type, TypeVar

from ..console import wrote
from ..devicenames import DEVICES
from ..driving.devices import EXHAUSTIVE_HELP
from ..errors import EXIT_OK, EXIT_OVER, UsageError
from ..gate.verdicts import baseline_from, budget_count
from ..renderers import GATE_RENDERERS, emit_gate

# ---------------------------------------------------------------------------- options
T = TypeVar("T")


def options(cls: Type[T], args: argparse.Namespace, **given: Any) -> T:
    """The options dataclass ``cls`` of a command from its parsed ``args`` of the same names
    (a field the command line leaves unset keeps its default), ``given`` over them."""
    names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    return cls(**{**{k: v for k, v in vars(args).items() if k in names}, **given})


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
    ``--force`` (checked by :func:`syncguard.process.atomic.prepare_out`)."""
    p.add_argument("--out", default=None, help=f"report folder (default: {default})")
    p.add_argument("--force", action="store_true", help="overwrite existing report files")


def add_output_arguments(p: argparse.ArgumentParser, help: str,
                         metavar: Optional[str] = None) -> None:
    """``-o``/``--output`` (one file written instead of, or besides, the terminal) and
    ``--force`` to overwrite it (checked by :func:`syncguard.process.atomic.output_path`)."""
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
