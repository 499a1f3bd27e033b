"""Run your own program under the guard: `syncguard exec [OPTIONS] -- python SCRIPT [ARGS]`
or `syncguard exec [OPTIONS] -m MODULE [ARGS]`.

The program runs in this process with sys.argv, __main__ and sys.path[0] as a plain run has
them. Each call of a --step function (or each `with syncguard.step():` block) is one step; each
call of a --loop function begins a step that lasts until its next call; with none of them, the
whole program is one step. With --device cpu, --exhaustive also counts the reads made in C++
that no Python entry point sees (docs/device-modes.md). Every finished step is streamed to
OUT/result.jsonl (OUT/result.rank<N>.jsonl under torchrun); `syncguard show` and `compare` read
it.

Exit code: the program's own when it fails (its traceback shown as a plain run shows it);
else 2 when a --step never matched (missing module or attribute), 1 when a step name has
more hidden syncs than --max-syncs over the run, one step call more than
--max-syncs-per-step, or the syncs outside every step more than --max-syncs-outside, 0
otherwise; 130 on Ctrl-C, after writing the reports."""

from __future__ import annotations

import argparse
import os
import re
import sys
from typing import Dict, Optional, Tuple

from .._paths import LATEST_EXEC, new_report_dir, reports_dir
from ..console import report_width
from ..driving.config import allow_sites, config_file, exhaustive
from ..errors import UsageError
from ..execute.engine import EVENTS_PER_SITE, ExecOptions, execute, rank_from_env, result_name
from ..execute.hooks import StepSpecError, parse_step
from ..execute.program import ProgramError, parse_command
from ..lint.lines import check_paths
from ..process.atomic import output_path, prepare_out, report_folder
from ..renderers import gate_file_name as file_of
from ..renderers import run_files
from ..results.merge import rank_files
from . import common
from .common import (
    add_allow_arguments,
    add_device_argument,
    add_exhaustive_argument,
    add_gate_format_arguments,
    add_lineage_argument,
    add_out_arguments,
    add_record_lines_argument,
    add_width_argument,
    budget_flags,
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--step", action="append", default=[], metavar="MODULE:QUALNAME",
                   help="each call of this function or method is one step, e.g. "
                   "sglang.srt.managers.scheduler:Scheduler.run_batch (repeatable)")
    p.add_argument("--loop", action="append", default=[], metavar="MODULE:QUALNAME",
                   help="each call of this function begins a step that lasts until its next "
                   "call (the last until the call that drove the loop returns), so syncs in "
                   "the loop around it count too, e.g. model:Decoder.forward for one step per "
                   "token; a first call with another input shape is labelled prefill "
                   "(repeatable)")
    add_device_argument(p, "auto (npu if torch_npu works, else cuda if available, else sim), "
                        "sim (simulated npu + torch_npu stand-in set up before the program "
                        "starts), npu, cuda, or cpu (CPU tensors counted as device-resident)")
    add_exhaustive_argument(p)
    p.add_argument("--warmup", type=int, default=0,
                   help="the first N steps of each step name are kept but not counted")
    p.add_argument("--max-syncs", type=int, default=None,
                   help="hidden syncs allowed per step name, in total over the run "
                   "(default: no gate)")
    p.add_argument("--max-syncs-per-step", type=int, default=None, metavar="N",
                   help="hidden syncs allowed in any one step call (the max over the steps "
                   "of each step name; default: no gate)")
    p.add_argument("--max-syncs-outside", type=int, default=None, metavar="N",
                   help="hidden syncs allowed outside every step, in total over the run "
                   "(set-up, the readback after the loop; default: no gate)")
    add_allow_arguments(p)
    add_out_arguments(p, "reports/<time>-exec-<device>, reports/latest-exec pointing at it")
    add_gate_format_arguments(p, files_under_out=True)
    add_width_argument(p)
    add_record_lines_argument(p, "(file or folder) ran")
    add_lineage_argument(p)
    p.add_argument("--all-events", action="store_true",
                   help="write every sync event to the result (default: the first "
                   f"{EVENTS_PER_SITE} of each site, the later ones counted on their step's "
                   "line: a long run's file and memory stay small; counts are exact either "
                   "way)")
    p.add_argument("--no-follow", dest="follow", action="store_false",
                   help="guard this process only, not the processes the program starts "
                   "(multiprocessing, torch.multiprocessing, subprocess Python children: "
                   "followed by default, each a row of its own)")
    p.add_argument("--allow-host", action="store_true",
                   help="pass a run in which no process used the device (sim, npu, cuda): "
                   "by default that is an error, as its count of 0 proves nothing")
    p.add_argument("-m", dest="module", nargs=argparse.REMAINDER, default=None,
                   metavar="MODULE [ARGS]", help="run a module as `python -m MODULE ARGS`")
    p.add_argument("program", nargs=argparse.REMAINDER, metavar="-- python SCRIPT [ARGS]",
                   help="the program and its arguments")


def gate_file_name(fmt: str, rank: Optional[int]) -> Optional[str]:
    """The default file, under OUT, of ``--format sarif|junit`` (None for the other
    formats): ``syncguard.sarif`` / ``junit.xml`` (the renderer registry's file names),
    ``.rank<N>`` before the suffix for rank N."""
    name = file_of(fmt)
    if name is None or rank is None:
        return name
    stem, ext = os.path.splitext(name)
    return f"{stem}.rank{rank}{ext}"


_RUN_ID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}", re.ASCII)


def _out_dir(args: argparse.Namespace, device: str, files: Tuple[str, ...]) -> str:
    """``--out``, else ``reports/<time>-exec-<device>`` (under torchrun, the ranks' shared
    ``reports/exec-<run id>-<device>``) with ``reports/latest-exec`` pointing at it (and, with
    ``SYNCGUARD_KEEP_RUNS=N``, only the newest N of exec's folders kept)."""
    if args.out is not None:
        return prepare_out(os.path.abspath(args.out), files, args.force)  # it may chdir
    run_id = os.environ.get("TORCHELASTIC_RUN_ID")
    if run_id and not _RUN_ID.fullmatch(run_id):  # "x/../../..": never outside reports/
        raise UsageError(f"TORCHELASTIC_RUN_ID={run_id[:80]!r}: not a run id the report "
                         f"folder can be named after (letters, digits and _ . - only, at "
                         f"most 64); pass --out")
    # every rank of one torchrun job shares its folder; other runs never share one
    out = (os.path.join(reports_dir(), f"exec-{run_id}-{device}") if run_id
           else new_report_dir(f"exec-{device}"))
    # run's reports/latest stays on run's last report
    return report_folder(None, os.path.abspath(out), files, args.force, LATEST_EXEC)


def _clear_stale_ranks(out: str) -> None:
    """``--force`` under torchrun, on rank 0: remove the rank files of an earlier run that
    this run's ranks will not overwrite (ranks at or above WORLD_SIZE), so `show OUT` never
    merges them into this run."""
    try:
        world = int(os.environ.get("WORLD_SIZE", ""))
        ranks = rank_files(out)
    except ValueError:  # no world size, or a file name not ours: left for `show` to name
        return
    for r, p in ranks:
        if r >= world:
            os.unlink(p)


def main(args: argparse.Namespace) -> int:
    from ..driving.runner import target as cli_target  # torch: `--help` never loads it

    if args.warmup is not None and args.warmup < 0:
        raise UsageError(f"--warmup: must be >= 0, got {args.warmup}")
    budget_flags(args)
    if args.program and args.program[0] != "--" and "--" not in getattr(args, "argv", ["--"]):
        # without it, the program's own options (--tokens) would read as syncguard's
        raise UsageError(f"{args.program[0]}: put `--` before the program: syncguard exec "
                         f"[OPTIONS] -- python SCRIPT [ARGS] (or -m MODULE [ARGS])")
    try:
        program = parse_command(args.program or [], args.module)
        steps = [parse_step(s) for s in args.step]
        steps += [parse_step(s, "--loop") for s in args.loop]
    except (ProgramError, StepSpecError) as exc:
        raise UsageError(str(exc)) from None
    seen: Dict[str, str] = {}
    for t in steps:
        if t.label in seen:
            raise UsageError(f"{t.flag} {t.spec}: step name {t.label} is also {seen[t.label]}: "
                             f"each --step and --loop needs a distinct name")
        seen[t.label] = f"{t.flag} {t.spec}"
    if args.output not in (None, "-"):
        args.output = os.path.abspath(args.output)
        output_path(args.output)  # before the program runs: a folder, socket... refused
    check_paths(args.record_lines)
    try:
        rank = rank_from_env()
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    # the simulated device exists before the program
    config = config_file(args.config)
    target = cli_target(args.device, gpu=True, exhaustive=exhaustive(args.exhaustive, config))
    files = (result_name(rank),) if rank is not None else run_files()
    # sarif/junit without -o: a file under OUT, never stdout, which the program's output shares
    gate_file = gate_file_name(args.format, rank) if args.output is None else None
    out = _out_dir(args, target.kind, files + ((gate_file,) if gate_file else ()))
    if gate_file:
        args.output = os.path.join(out, gate_file)
    if rank == 0 and args.force:
        _clear_stale_ranks(out)
    opts = ExecOptions(program=program, steps=steps, warmup=args.warmup,
                       max_syncs=args.max_syncs, max_syncs_per_step=args.max_syncs_per_step,
                       max_syncs_outside=args.max_syncs_outside,
                       allow_sites=allow_sites(args.allow, config),
                       fmt=args.format, output=args.output, width=report_width(args.width),
                       rank=rank, argv=sys.argv[1:],
                       record_lines=[os.path.abspath(p) for p in args.record_lines],
                       force=args.force, lineage=args.lineage,
                       events_per_site=None if args.all_events else EVENTS_PER_SITE,
                       follow=args.follow, allow_host=args.allow_host,
                       whole_process=common.WHOLE_PROCESS)
    return execute(opts, target, out)
