"""Run the counted pass only and gate on hidden host syncs.

Runs the guard's self-test first (so "0 syncs" never means "the detector was off"), then
each scenario on each path under the guard. The budget per path is --max-syncs when given,
else the scenario's [expect] max_syncs for that path, else 0; with --baseline, only new sites
or higher counts than the baseline fail. Exit 0 within budget, 1 over (each site listed as
file:line with counts), 2 usage or bad input, 3 internal error.

Given result files or folders instead of scenarios (a `syncguard exec` run, a folder of
per-rank results), it gates what they recorded: each rank on its own."""

from __future__ import annotations

import argparse
from typing import Any, Dict, List

NAME = "check"
HELP = "counted pass only: exit 1 when hidden syncs exceed the budget"


def add_arguments(p: argparse.ArgumentParser) -> None:
    from .common import add_allow_arguments, add_gate_format_arguments, add_scenario_arguments

    add_scenario_arguments(p)
    p.add_argument("--max-syncs", type=int, default=None,  # also for RESULT folders
                   help="hidden syncs allowed per scenario and path (default: the scenario's "
                   "[expect] max_syncs, else 0)")
    p.add_argument("--baseline", default=None, help="fail only on new sites or higher counts "
                   "than this baseline file")
    p.add_argument("--update-baseline", default=None, metavar="FILE",
                   help="record today's sites and counts in FILE and exit 0")
    add_allow_arguments(p)
    p.add_argument("--max-syncs-outside", type=int, default=None, metavar="N",
                   help="recorded exec runs: hidden syncs allowed outside every step (default: "
                   "the run's own --max-syncs-outside, else not gated)")
    p.add_argument("--max-bubble-us", type=float, default=None, metavar="US",
                   help="also fail when the modeled device idle caused by hidden syncs exceeds "
                   "US microseconds in any measured step (simulated device only; off by "
                   "default; deterministic: from the modeled timeline, see --profile)")
    p.add_argument("--profile", default=None, metavar="NAME|FILE",
                   help="device profile for --max-bubble-us (910b, h200 or a file; "
                   "default 910b)")
    add_gate_format_arguments(p)


def main(args: argparse.Namespace) -> int:
    from ..errors import UsageError
    from ..gate.baseline import Baseline
    from ..gate.verdicts import Tally, Verdict, budget
    from .common import (
        allow_sites_of,
        budget_flags,
        device_for_probe,
        finish,
        output_path,
        run_options,
    )
    from .common import target as cli_target

    budget_flags(args)
    if args.format in ("sarif", "junit") and args.output is None:
        args.output = "-"
    output_path(args.output)  # devices and FIFOs written as streams; folders... refused now
    output_path(args.update_baseline, flag="--update-baseline")
    from .recorded import check_results, is_result_path


    if args.scenarios and all(is_result_path(p) for p in args.scenarios):
        return check_results(args, args.scenarios)  # recorded results (exec, ranks)
    if args.max_syncs_outside is not None:
        raise UsageError("--max-syncs-outside: gates recorded exec results (check OUT); "
                         "scenario runs have no syncs outside their steps")
    # a scenario run needs torch; recorded results (above) never import it
    from ..core.selftest import selftest
    from ..driving import runner, scenario
    if args.max_bubble_us is not None and not args.max_bubble_us >= 0:
        raise UsageError(f"--max-bubble-us: must be >= 0, got {args.max_bubble_us}")
    opts = run_options(args, counted=True, timed=False)
    scenarios = runner.prepare(scenario.resolve(args.scenarios), opts)
    target = cli_target(opts.device)
    prof = None
    if args.max_bubble_us is not None:
        if opts.profile == "none":
            raise UsageError("--max-bubble-us: needs a device profile, not --profile none")
        if target.kind != "sim":
            raise UsageError("--max-bubble-us: the modeled timeline exists on the simulated "
                             "device only (--device sim)")
        from ..model.profile import load_profile

        prof = load_profile(opts.profile)
    bubbles: List[str] = []
    selftest(device_for_probe(target.kind))
    base = Baseline.load(args.baseline) if args.baseline else None
    allow_sites = allow_sites_of(args)

    verdicts: List[Verdict] = []
    for sc in scenarios:
        for path in runner.paths_for(sc, opts):
            name = runner.path_label(path)  # as `run` names it: baselines carry over
            tally = Tally()
            kw: Dict[str, Any] = {"on_event": tally.add, "allow_sites": allow_sites}
            recs = runner.run_pass(sc, path, target, True, None, None, guard_kwargs=kw,
                                   profile=prof)
            if prof is not None:
                worst = max((r for r in recs if not r.warmup),
                            key=lambda r: r.sync_bubble_us or 0.0, default=None)
                if worst is not None and (worst.sync_bubble_us or 0.0) > args.max_bubble_us:
                    bubbles.append(f"{sc.name} {name}: modeled device idle from hidden syncs "
                                   f"{worst.sync_bubble_us:.1f} us at step {worst.step} on "
                                   f"{prof.name} (budget --max-bubble-us "
                                   f"{args.max_bubble_us:g})")
            gate = budget(args.max_syncs, baseline=base, configured={
                "max_syncs": sc.max_syncs.get(name, sc.max_syncs.get(path))})
            verdicts += gate.verdicts(tally, sc.name, name)
    return finish(args, verdicts, bubbles)
