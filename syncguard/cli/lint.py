"""Find the lines that can make a hidden host-device sync, without running them:
`syncguard lint PATH...` (files or folders).

One finding per line: the rule, the API and why it syncs, ranked by where the value it reads
lives (a small dataflow per function): certain (a device tensor), likely (a tensor, or a
tensor-only API, of unknown place); host-only values stay silent. The APIs are the
interceptors' own table (syncguard.core.syncapis). `# syncguard: allow[reason]` on a line allows it.

With --with-run RESULT (result files or folders of `syncguard exec --record-lines PATH`, or
any run) each finding is marked confirmed (it synced in the run; syncs per step), cleared (it
ran and never synced), unexercised (it never ran) or unknown (the run recorded no lines), and
the syncs the lint did not flag are listed as misses. A run recorded with --lineage adds the
verdict on the value read to each confirmed finding and miss ("hoistable: compute it on the
host where batch.py:113 builds it"). A RESULT that is missing or not a syncguard result is one
line naming it, exit 2.

Each finding says where it runs (context: serving, test, benchmark, script; device-kernel bodies
such as @triton.jit are no host code and get none) and on which backends it syncs (both, cuda,
npu: the op models the runtime guard counts with).

A large tree is read in --jobs processes (default: the CPUs; forked workers, on Linux and
other POSIX systems but macOS); the findings are the same for any number.

Settings: [tool.syncguard.lint] in the nearest pyproject.toml: exclude (gitignore patterns),
fail-on, baseline, format, backend, include-tests. Exit code: 1 when a finding at or above
--fail-on (default likely) remains after the inline allows, the baseline and --diff, in serving
code (unless --include-tests) and syncing on --backend (default any), or when a file could not
be read or analysed (a syntax error, a file nested too deeply, one over 4 MiB, a FIFO or device
named *.py: an error in every format, as a linter's syntax error; not with --fail-on never); 0
otherwise; 2 for usage errors. -o does not overwrite a file without --force.
"""

from __future__ import annotations

import argparse
from typing import List

from ..lint.command import LintOptions, run
from ..process.atomic import output_path
from .common import options


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("paths", nargs="*", metavar="PATH", help="files or folders (default: .)")
    p.add_argument("--format", choices=("text", "github", "sarif", "json"), default=None,
                   help="output: text (default), github (workflow annotations), sarif "
                   "(SARIF 2.1.0 for code scanning), json")
    p.add_argument("-o", "--output", default=None, help="write to this file (default stdout)")
    p.add_argument("--force", action="store_true", help="overwrite --output if it exists")
    p.add_argument("--fail-on", choices=("certain", "likely", "never"), default=None,
                   help="exit 1 when findings at or above this rank remain (default likely)")
    p.add_argument("--backend", choices=("any", "cuda", "npu"), default=None,
                   help="fail only on syncs on this backend (default any); a finding says "
                   "on which it syncs (the op models: x[mask] = 0 syncs on npu only)")
    p.add_argument("--include-tests", action="store_true", default=None,
                   help="findings in tests, benchmarks and __main__ scripts fail too "
                   "(default: shown with their context, not failing)")
    p.add_argument("--show-silent", action="store_true",
                   help="also list the host-only candidates the inference silenced")
    p.add_argument("--exclude", action="append", default=[], metavar="PATTERN",
                   help="gitignore-style pattern of files to skip (repeatable)")
    p.add_argument("--with-run", action="append", default=[], metavar="RESULT",
                   help="result folder or file of a run: mark findings confirmed / cleared / "
                   "unexercised and list misses, with the lineage verdict of a --lineage run "
                   "(repeatable)")
    p.add_argument("--baseline", default=None, metavar="FILE",
                   help="known findings: only new ones are reported and fail")
    p.add_argument("--update-baseline", default=None, metavar="FILE",
                   help="write today's findings to FILE as the baseline, exit 0")
    p.add_argument("--diff", default=None, metavar="REF",
                   help="only lines changed since this git ref (e.g. origin/main)")
    p.add_argument("-j", "--jobs", type=int, default=None, metavar="N",
                   help="processes to read a large tree in (default: the CPUs this process "
                   "may run on; 1: this process only). The findings are the same for any N")


def main(args: argparse.Namespace) -> int:
    opts = options(LintOptions, args)
    output_path(opts.output, force=args.force)  # before any work: exists, folder, FIFO...
    output_path(opts.update_baseline, flag="--update-baseline")
    return run(opts)


__all__: List[str] = ["add_arguments", "main"]
