"""``syncguard lint``: its options as typed and the one call that lints, reports and gives the
exit code (:func:`run`)."""

from __future__ import annotations

import dataclasses
import os
import sys
from typing import Any, Dict, List, Optional

from ..console import error, wrote
from ..core.sites import display_path
from ..driving.config import config_file
from ..errors import EXIT_OK, EXIT_OVER, UsageError
from ..process.atomic import write_text
from . import LintReport, lint_paths
from . import baseline as lint_baseline
from .backends import fails_on
from .checker import CERTAIN, LIKELY
from .context import SERVING
from .diff import DiffError, changed_lines
from .files import load_config
from .parallel import default_jobs
from .render import RENDERERS, summary_line
from .runs import apply_runs, load_runs


@dataclasses.dataclass
class LintOptions:
    """The command line's choices; None where ``[tool.syncguard.lint]`` (of the configuration
    file, found from the first path) or the default decides."""

    paths: List[str]
    format: Optional[str] = None
    output: Optional[str] = None
    fail_on: Optional[str] = None
    backend: Optional[str] = None
    include_tests: Optional[bool] = None
    show_silent: bool = False
    exclude: List[str] = dataclasses.field(default_factory=list)
    with_run: List[str] = dataclasses.field(default_factory=list)
    baseline: Optional[str] = None
    update_baseline: Optional[str] = None
    diff: Optional[str] = None
    jobs: Optional[int] = None


def run(opts: LintOptions) -> int:
    """Lint ``opts.paths``, write the findings in the format asked, return the exit code."""
    paths = opts.paths or ["."]
    for p in paths:
        if not os.path.exists(p):
            raise UsageError(f"{p}: no such file or folder")
    # read before the lint: a bad result is one line, exit 2, at once
    runs = load_runs(opts.with_run) if opts.with_run else None
    pyproject = config_file(None, paths[0])
    try:
        cfg = load_config(pyproject)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    fmt = opts.format or cfg.format or "text"
    fail_on = opts.fail_on or cfg.fail_on or "likely"
    if fmt not in RENDERERS:
        raise UsageError(f"[tool.syncguard.lint] format: {fmt!r} is not one of "
                         f"{', '.join(RENDERERS)}")
    backend = opts.backend or cfg.backend or "any"
    if backend not in ("any", "cuda", "npu"):
        raise UsageError(f"[tool.syncguard.lint] backend: {backend!r} is not any, cuda or npu")
    include_tests = bool(opts.include_tests if opts.include_tests is not None
                         else cfg.include_tests)
    if fail_on not in ("certain", "likely", "never"):
        raise UsageError(f"[tool.syncguard.lint] fail-on: {fail_on!r} is not certain, likely "
                         f"or never")
    if opts.jobs is not None and opts.jobs < 1:
        raise UsageError(f"--jobs: must be 1 or more, got {opts.jobs}")
    jobs = opts.jobs if opts.jobs is not None else default_jobs()
    root = os.path.dirname(pyproject) if pyproject else None
    report = lint_paths(paths, [*cfg.exclude, *opts.exclude], exclude_root=root, jobs=jobs)
    for e in report.errors:  # a file not linted fails the lint, as a linter's syntax error
        error(e)
    findings = report.findings
    summary: Dict[str, Any] = {"files": report.files, "seconds": report.seconds,
                               "errors": report.errors, "error_items": report.error_items,
                               "counts": report.counts()}
    if opts.diff:
        try:
            changed = changed_lines(opts.diff)
        except DiffError as exc:
            raise UsageError(f"--diff {opts.diff}: {exc}") from None
        findings = [f for f in findings if _touches(f, changed)]
        summary["diff"] = opts.diff
        summary["counts"] = LintReport(findings, 0, [], 0.0).counts()
    if runs is not None:
        summary["runs"] = apply_runs(findings, runs, report.paths)
        summary["misses"] = summary["runs"].pop("misses")
    if opts.update_baseline:
        lint_baseline.save(opts.update_baseline, [f for f in findings if f.reported])
        wrote(display_path(opts.update_baseline),
              f" ({sum(f.reported for f in findings)} findings)")
        return EXIT_OVER if report.errors else EXIT_OK
    shown = [f for f in findings if f.reported or (opts.show_silent and f.allowed is None)]
    baseline = opts.baseline or cfg.baseline
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
    if opts.output and opts.output != "-":
        write_text(opts.output, text)  # a full disk: OutputError, one line, exit 2
        wrote(opts.output)
        print(summary_line(summary), file=sys.stderr)
    else:
        sys.stdout.write(text)
    if fail_on == "never":
        return EXIT_OK
    if report.errors:
        return EXIT_OVER
    return EXIT_OVER if any(f.reported and f.severity in levels and failing(f)
                            for f in shown) else EXIT_OK


def _touches(f: Any, changed: Dict[str, Any]) -> bool:
    lines = changed.get(os.path.realpath(f.path))
    if lines is None:
        return False
    return any(ln in lines for ln in range(f.line, max(f.line, f.end_line) + 1))
