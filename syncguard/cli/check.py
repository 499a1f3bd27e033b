"""Run the counted pass only and gate on hidden host syncs.

Runs the guard's self-test first (so "0 syncs" never means "the detector was off"), then
each scenario on each path under the guard. The budget per path is --max-syncs when given,
else the scenario's [expect] max_syncs for that path, else 0; with --baseline, only new sites
or higher counts than the baseline fail. Exit 0 within budget, 1 over (each site listed as
file:line with counts), 2 usage or bad input, 3 internal error."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any, Dict, List, Tuple

NAME = "check"
HELP = "counted pass only: exit 1 when hidden syncs exceed the budget"


def add_arguments(p: argparse.ArgumentParser) -> None:
    from .run import add_common

    add_common(p)
    p.add_argument("--max-syncs", type=int, default=None,
                   help="hidden syncs allowed per scenario and path (default: the scenario's "
                   "[expect] max_syncs, else 0)")
    p.add_argument("--baseline", default=None, help="fail only on new sites or higher counts "
                   "than this baseline file")
    p.add_argument("--update-baseline", default=None, metavar="FILE",
                   help="record today's sites and counts in FILE and exit 0")
    p.add_argument("--allow", action="append", default=[], metavar="SITE",
                   help="allow hidden syncs at this call site (file.py:line, pkg.mod:function or "
                   "function; repeatable). Added to [tool.syncguard] allow of --config")
    p.add_argument("--config", default=None, metavar="PYPROJECT",
                   help="pyproject.toml whose [tool.syncguard] allow list applies (default: "
                   "./pyproject.toml when present)")
    p.add_argument("--max-bubble-us", type=float, default=None, metavar="US",
                   help="also fail when the modeled device idle caused by hidden syncs exceeds "
                   "US microseconds in any measured step (simulated device only; off by "
                   "default; deterministic: from the modeled timeline, see --profile)")
    p.add_argument("--profile", default=None, metavar="NAME|FILE",
                   help="device profile for --max-bubble-us (910b, h200 or a file; "
                   "default 910b)")
    p.add_argument("--format", default="text", choices=("text", "github", "sarif", "junit"),
                   help="text (default), github (workflow annotations), sarif, junit")
    p.add_argument("--output", "-o", default=None,
                   help="file for --format sarif/junit (default: stdout)")


def _steps(steps: List[int]) -> str:
    from ..renderers.analysis import step_ranges

    return step_ranges(steps)


def _allow_sites(args: argparse.Namespace) -> Tuple[Tuple[str, str], ...]:
    """``--allow`` sites plus ``[tool.syncguard] allow`` of ``--config`` (or ./pyproject.toml)."""
    from ..config import load_tool_table, to_allow
    from . import UsageError

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


def main(args: argparse.Namespace) -> int:
    from .. import runner, scenario
    from .._selftest import selftest
    from ..baseline import Baseline, Finding, site_key
    from . import EXIT_OK, EXIT_OVER, UsageError, device_for_probe
    from .run import options

    if args.max_syncs is not None and args.max_syncs < 0:
        raise UsageError(f"--max-syncs: must be >= 0, got {args.max_syncs}")
    if args.format in ("sarif", "junit") and args.output is None:
        args.output = "-"
    if args.max_bubble_us is not None and not args.max_bubble_us >= 0:
        raise UsageError(f"--max-bubble-us: must be >= 0, got {args.max_bubble_us}")
    opts = options(args, counted=True, timed=False)
    scenarios = runner.prepare(scenario.resolve(args.scenarios), opts)
    target = runner.resolve_target(opts.device)
    prof = None
    if args.max_bubble_us is not None:
        if opts.profile == "none":
            raise UsageError("--max-bubble-us: needs a device profile, not --profile none")
        if target.kind != "sim":
            raise UsageError("--max-bubble-us: the modeled timeline exists on the simulated "
                             "device only (--device sim)")
        from ..timeline import load_profile

        prof = load_profile(opts.profile)
    bubbles: List[str] = []
    selftest(device_for_probe(target.kind))
    base = Baseline.load(args.baseline) if args.baseline else None
    allow_sites = _allow_sites(args)

    findings: List[Finding] = []
    totals: List[Tuple[str, str, int, int, bool]] = []
    observed: Dict[str, Dict[str, Any]] = {}
    for sc in scenarios:
        for path in runner.paths_for(sc, opts):
            evs: List[Any] = []
            kw: Dict[str, Any] = {"on_event": evs.append, "allow_sites": allow_sites}
            recs = runner.run_pass(sc, path, target, True, None, None, guard_kwargs=kw,
                                   profile=prof)
            if prof is not None:
                worst = max((r for r in recs if not r.warmup),
                            key=lambda r: r.sync_bubble_us or 0.0, default=None)
                if worst is not None and (worst.sync_bubble_us or 0.0) > args.max_bubble_us:
                    bubbles.append(f"{sc.name} {path}: modeled device idle from hidden syncs "
                                   f"{worst.sync_bubble_us:.1f} us at step {worst.step} on "
                                   f"{prof.name} (budget --max-bubble-us "
                                   f"{args.max_bubble_us:g})")
            hidden = [e for e in evs if not e.allowed and not e.warmup]
            n = sum(e.count for e in hidden)
            budget = args.max_syncs if args.max_syncs is not None else sc.max_syncs.get(path, 0)
            grouped: Dict[str, Dict[str, Any]] = {}
            for e in hidden:
                k = site_key(e)
                g = grouped.setdefault(k, {"event": e, "count": 0, "steps": []})
                g["count"] += e.count
                if e.step not in g["steps"]:
                    g["steps"].append(e.step)
            for k, g in grouped.items():
                observed[f"{sc.name}|{path}|{k}"] = {"count": g["count"], "event": g["event"]}
            if base is not None:
                over_sites = base.compare(sc.name, path, grouped)
                failed = bool(over_sites)
            else:
                failed = n > budget
                over_sites = [Finding(sc.name, path, g["event"], g["count"],
                                      sorted(s for s in g["steps"] if s is not None),
                                      None, f"{n} hidden syncs, budget {budget}")
                              for g in grouped.values()] if failed else []
            findings.extend(over_sites)
            totals.append((sc.name, path, n, budget, failed))
    if args.update_baseline:
        Baseline.from_observed(observed).save(args.update_baseline)
        print(f"Wrote {args.update_baseline} ({len(observed)} sites)", file=sys.stderr)
        return EXIT_OK
    from ..ci import emit

    emit(args.format, totals, findings, args.output, baseline=args.baseline)
    if args.output not in (None, "-") and os.path.exists(args.output):
        print(f"Wrote {args.output}", file=sys.stderr)
    for line in bubbles:
        print(line)
    return EXIT_OVER if any(t[4] for t in totals) or bubbles else EXIT_OK
