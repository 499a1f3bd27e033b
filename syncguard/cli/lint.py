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
import os
import sys
from typing import Any, Dict, List

from ..console import error, wrote
from ..core.atomic import write_text
from ..core.sites import display_path
from ..driving.config import config_file
from ..errors import EXIT_OK, EXIT_OVER, UsageError
from ..lint import LintReport, lint_paths
from ..lint import baseline as lint_baseline
from ..lint.backends import fails_on
from ..lint.checker import CERTAIN, LIKELY
from ..lint.context import SERVING
from ..lint.diff import DiffError, changed_lines
from ..lint.files import load_config
from ..lint.parallel import default_jobs
from ..lint.render import RENDERERS, summary_line
from ..lint.runs import apply_runs, load_runs
from .common import output_path

NAME = "lint"
HELP = "find lines that can make a hidden sync, statically (optionally confirmed by runs)"


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
    paths = args.paths or ["."]
    output_path(args.output, force=args.force)  # before any work: exists, folder, FIFO...
    output_path(args.update_baseline, flag="--update-baseline")
    for p in paths:
        if not os.path.exists(p):
            raise UsageError(f"{p}: no such file or folder")
    if args.with_run:  # read before the lint: a bad result is one line, exit 2, at once
        runs = load_runs(args.with_run)
    pyproject = config_file(None, paths[0])
    try:
        cfg = load_config(pyproject)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    fmt = args.format or cfg.format or "text"
    fail_on = args.fail_on or cfg.fail_on or "likely"
    if fmt not in RENDERERS:
        raise UsageError(f"[tool.syncguard.lint] format: {fmt!r} is not one of "
                         f"{', '.join(RENDERERS)}")
    backend = args.backend or cfg.backend or "any"
    if backend not in ("any", "cuda", "npu"):
        raise UsageError(f"[tool.syncguard.lint] backend: {backend!r} is not any, cuda or npu")
    include_tests = bool(args.include_tests if args.include_tests is not None
                         else cfg.include_tests)
    if fail_on not in ("certain", "likely", "never"):
        raise UsageError(f"[tool.syncguard.lint] fail-on: {fail_on!r} is not certain, likely "
                         f"or never")
    if args.jobs is not None and args.jobs < 1:
        raise UsageError(f"--jobs: must be 1 or more, got {args.jobs}")
    jobs = args.jobs if args.jobs is not None else default_jobs()
    root = os.path.dirname(pyproject) if pyproject else None
    report = lint_paths(paths, [*cfg.exclude, *args.exclude], exclude_root=root, jobs=jobs)
    for e in report.errors:  # a file not linted fails the lint, as a linter's syntax error
        error(e)
    findings = report.findings
    summary: Dict[str, Any] = {"files": report.files, "seconds": report.seconds,
                               "errors": report.errors, "error_items": report.error_items,
                               "counts": report.counts()}
    if args.diff:
        try:
            changed = changed_lines(args.diff)
        except DiffError as exc:
            raise UsageError(f"--diff {args.diff}: {exc}") from None
        findings = [f for f in findings if _touches(f, changed)]
        summary["diff"] = args.diff
        summary["counts"] = _counts(findings)
    if args.with_run:
        summary["runs"] = apply_runs(findings, runs, report.paths)
        summary["misses"] = summary["runs"].pop("misses")
    if args.update_baseline:
        lint_baseline.save(args.update_baseline, [f for f in findings if f.reported])
        wrote(display_path(args.update_baseline),
              f" ({sum(f.reported for f in findings)} findings)")
        return EXIT_OVER if report.errors else EXIT_OK
    shown = [f for f in findings if f.reported or (args.show_silent and f.allowed is None)]
    baseline = args.baseline or cfg.baseline
    if baseline:
        known = lint_baseline.load(baseline)
        shown, summary["baseline_known"] = lint_baseline.new_only(shown, known)
    summary["reported"] = sum(f.reported for f in shown)
    levels = (CERTAIN,) if fail_on == "certain" else (CERTAIN, LIKELY)

    def failing(f: Any) -> bool:
        return (include_tests or f.context == SERVING) and fails_on(f.backend, backend)

    held = [f for f in shown if f.reported and not failing(f)]
    if held:
        reasons = []
        n_ctx = sum(f.context != SERVING for f in held)
        if n_ctx:
            reasons.append(f"{n_ctx} in tests, benchmarks or scripts")
        if len(held) - n_ctx:
            reasons.append(f"{len(held) - n_ctx} not on {backend}")
        summary["not_failing"] = len(held)
        summary["why_not"] = ", ".join(reasons)
    text = RENDERERS[fmt](shown, summary)
    if args.output and args.output != "-":
        write_text(args.output, text)  # a full disk: OutputError, one line, exit 2
        wrote(args.output)

        print(summary_line(summary), file=sys.stderr)
    else:
        sys.stdout.write(text)
    if fail_on == "never":
        return EXIT_OK
    if report.errors:
        return EXIT_OVER
    return EXIT_OVER if any(f.reported and f.severity in levels and failing(f)
                            for f in shown) else EXIT_OK


def _counts(findings: List[Any]) -> Dict[str, int]:
    return LintReport(findings, 0, [], 0.0).counts()


def _touches(f: Any, changed: Dict[str, Any]) -> bool:
    lines = changed.get(os.path.realpath(f.path))
    if lines is None:
        return False
    return any(ln in lines for ln in range(f.line, max(f.line, f.end_line) + 1))


__all__: List[str] = ["NAME", "HELP", "add_arguments", "main"]
