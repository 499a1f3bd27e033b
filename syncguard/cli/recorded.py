"""``syncguard check RESULT|FOLDER``: gate recorded results (an ``exec`` run, a folder of
per-rank results) instead of running scenarios. Each (scenario, path) is gated on its own;
with several ranks each rank is its own scenario (``<name> [rank N]``), so the gate fails
when any rank is over budget and names that rank. ``--allow`` and ``--config`` apply to the
recorded events as they would have in the run: a hidden sync whose recorded stack matches an
allowed site is gated as allowed (a malformed or missing config is an error, as for a run)."""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING, List, Sequence, Tuple

if TYPE_CHECKING:
    from ..core.events import SyncEvent
    from ..results.format import RunResult


def is_result_path(p: str) -> bool:
    """A result file or a folder of results (not a scenario name or file)."""
    return os.path.isdir(p) or (p.endswith((".jsonl", ".json")) and os.path.isfile(p))


def check_results(args: argparse.Namespace, paths: Sequence[str]) -> int:
    from ..gate.baseline import Baseline
    from ..gate.recorded import result_verdicts
    from ..gate.verdicts import Verdict, budget
    from ..results.run import load
    from .common import allow_sites_of, finish

    base = Baseline.load(args.baseline) if args.baseline else None
    allow_sites = allow_sites_of(args)  # --allow and [tool.syncguard] allow, checked now
    verdicts: List[Verdict] = []
    for p in paths:
        res = load(p).result
        if not res.complete:
            _warn_incomplete(p, res)
        options = res.header.get("options")
        # the run's own budgets (an exec run's --max-syncs, --max-syncs-per-step and
        # --max-syncs-outside) gate again when no other budget is asked for
        gate = budget(args.max_syncs, outside=getattr(args, "max_syncs_outside", None),
                      configured=options if isinstance(options, dict) else None,
                      baseline=base, updating=bool(getattr(args, "update_baseline", None)))
        verdicts += result_verdicts(res, gate, lambda evs: allowed_now(evs, allow_sites))
    return finish(args, verdicts)


def allowed_now(events: List[SyncEvent], sites: Sequence[Tuple[str, str]]) -> List[SyncEvent]:
    """``events`` with each hidden sync whose recorded stack (or its own frame) matches one of
    ``sites`` (``(pattern, reason)``, as :class:`~syncguard.core.guard.SyncGuard` takes them)
    marked allowed with that reason."""
    if not sites:
        return events
    import dataclasses

    from ..core.events import Frame
    from ..core.guard import _site_matches

    out = []
    for e in events:
        if not e.allowed:
            frames = e.stack or (Frame(e.filename, e.lineno, e.function),)
            reason = next((r for p, r in sites for fr in frames if _site_matches(p, fr)), None)
            if reason is not None:
                e = dataclasses.replace(e, allowed=True, reason=reason)
        out.append(e)
    return out


def _warn_incomplete(path: str, res: RunResult) -> None:
    """One line: an interrupted or terminated run is gated on the steps it kept only."""
    import sys

    from .._escape import one_line

    footer = res.footer or {}
    why = footer.get("reason") or ("no footer: the run was cut short" if not footer else
                                   "stopped early")
    n = len(res.steps)
    print(one_line(f"syncguard check: warning: {path}: INCOMPLETE run ({str(why)[:200]}): "
                   f"gated on the {n} steps it kept"), file=sys.stderr)
