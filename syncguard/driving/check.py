"""``syncguard check``: its options and the one call that gives its verdicts, on scenarios run
now (the counted pass only, after the guard's self-test) or on recorded results
(:func:`syncguard.gate.recorded.recorded_verdicts`)."""

from __future__ import annotations

import dataclasses
from typing import List, Optional, Tuple

from ..errors import UsageError
from ..gate.baseline import Baseline
from ..gate.recorded import is_result_path, recorded_verdicts
from ..gate.verdicts import Tally, Verdict, budget, budget_count
from ..model.profile import load_profile
from .config import allow_sites, config_file
from .scenario import ScenarioOptions, resolve


@dataclasses.dataclass
class CheckOptions(ScenarioOptions):
    """``syncguard check``'s options as typed: the scenarios (or result files and folders)
    and their options, the budgets, the baseline, the allow-list and its configuration file
    (None: :func:`config_file`'s rule), ``--max-bubble-us`` (its device profile the
    scenarios' ``profile``), and where the verdicts go."""

    max_syncs: Optional[int] = None
    max_syncs_outside: Optional[int] = None
    baseline: Optional[str] = None
    update_baseline: Optional[str] = None
    allow: List[str] = dataclasses.field(default_factory=list)
    config: Optional[str] = None
    max_bubble_us: Optional[float] = None
    format: str = "text"
    output: Optional[str] = None


def check(opts: CheckOptions) -> Tuple[List[Verdict], List[str]]:
    """The verdicts of ``check`` and its ``--max-bubble-us`` failures (one line each); a bad
    option is a :class:`UsageError` before anything runs."""
    for flag, value in (("--max-syncs", opts.max_syncs),
                        ("--max-syncs-outside", opts.max_syncs_outside)):
        if value is not None:
            budget_count(value, flag, UsageError)
    base = Baseline.load(opts.baseline) if opts.baseline else None
    sites = allow_sites(opts.allow, config_file(opts.config))
    if opts.scenarios and all(is_result_path(p) for p in opts.scenarios):
        return recorded_verdicts(opts.scenarios, opts.max_syncs, opts.max_syncs_outside,
                                 sites, base, bool(opts.update_baseline)), []
    return _scenario_verdicts(opts, base, sites)


def _scenario_verdicts(opts: CheckOptions, base: Optional[Baseline],
                       sites: Tuple[Tuple[str, str], ...]) -> Tuple[List[Verdict], List[str]]:
    # torch: running scenarios needs it, gating recorded results never imports it
    from ..core.selftest import selftest
    from . import runner

    if opts.max_syncs_outside is not None:
        raise UsageError("--max-syncs-outside: gates recorded exec results (check OUT); "
                         "scenario runs have no syncs outside their steps")
    bubble_us = opts.max_bubble_us
    if bubble_us is not None and not bubble_us >= 0:
        raise UsageError(f"--max-bubble-us: must be >= 0, got {bubble_us}")
    ropts = runner.run_options(opts, timed=False)
    scenarios = runner.prepare(resolve(opts.scenarios), ropts)
    target = runner.target(ropts.device)
    prof = None
    if bubble_us is not None:
        if ropts.profile == "none":
            raise UsageError("--max-bubble-us: needs a device profile, not --profile none")
        if target.kind != "sim":
            raise UsageError("--max-bubble-us: the modeled timeline exists on the simulated "
                             "device only (--device sim)")
        prof = load_profile(ropts.profile)
    selftest(None if target.kind == "cpu" else str(target.device))
    verdicts: List[Verdict] = []
    bubbles: List[str] = []
    for sc in scenarios:
        for path in runner.paths_for(sc, ropts):
            name = runner.path_label(path)  # as `run` names it: baselines carry over
            tally = Tally()
            recs = runner.run_pass(sc, path, target, True, guard_kwargs={
                "on_event": tally.add, "allow_sites": sites}, profile=prof)
            worst = max((r for r in recs if not r.warmup),
                        key=lambda r: r.sync_bubble_us or 0.0, default=None)
            if prof is not None and worst is not None and bubble_us is not None and (
                    worst.sync_bubble_us or 0.0) > bubble_us:
                bubbles.append(f"{sc.name} {name}: modeled device idle from hidden syncs "
                               f"{worst.sync_bubble_us:.1f} us at step {worst.step} on "
                               f"{prof.name} (budget --max-bubble-us {bubble_us:g})")
            gate = budget(opts.max_syncs, baseline=base, configured={
                "max_syncs": sc.max_syncs.get(name, sc.max_syncs.get(path))})
            verdicts += gate.verdicts(tally, sc.name, name)
    return verdicts, bubbles
