"""The verdicts on recorded results: each (scenario, path) of their steps on its own, then the
syncs each scenario made outside every step. ``syncguard check RESULT|FOLDER`` gates recorded
runs with :func:`recorded_verdicts` (an ``exec`` run, a folder of per-rank results: each rank
its own scenario, ``<name> [rank N]``), and ``exec`` gates the processes it followed (their
parts, recorded by themselves) with :func:`result_verdicts`. ``--allow`` and ``--config``
apply to the recorded events as they would have in the run: a hidden sync whose recorded
stack matches an allowed site is gated as allowed (:func:`allowed`)."""

from __future__ import annotations

import dataclasses
import os
import sys
from typing import Any, Callable, Dict, List, Optional, Sequence, Set, Tuple

from .._escape import one_line
from ..core.events import Frame, SyncEvent
from ..core.sites import allow_reason
from ..results.format import GUARDED_PASSES, OUTSIDE_PATH, RunResult
from ..results.loader import load
from .baseline import Baseline
from .verdicts import Budget, Tally, Verdict, budget


def is_result_path(p: str) -> bool:
    """A result file or a folder of results (not a scenario name or file)."""
    return os.path.isdir(p) or (p.endswith((".jsonl", ".json")) and os.path.isfile(p))


def allowed(events: List[SyncEvent], sites: Sequence[Tuple[str, str]]) -> List[SyncEvent]:
    """``events`` with each hidden sync whose recorded stack (or its own frame) matches one of
    ``sites`` (``(pattern, reason)``, as :class:`~syncguard.core.guard.SyncGuard` takes them)
    marked allowed with that reason."""
    out = []
    for e in events:
        reason = None if e.allowed or not sites else allow_reason(
            sites, e.stack or (Frame(e.filename, e.lineno, e.function),))
        out.append(e if reason is None else dataclasses.replace(e, allowed=True, reason=reason))
    return out


def recorded_verdicts(paths: Sequence[str], max_syncs: Optional[int],
                      max_syncs_outside: Optional[int], allow_sites: Sequence[Tuple[str, str]],
                      base: Optional[Baseline], updating: bool) -> List[Verdict]:
    """The verdicts on the results at ``paths``, each on the flags' budgets, else the run's
    own (an exec run's ``--max-syncs``, ``--max-syncs-per-step`` and ``--max-syncs-outside``
    gate again when no other budget is asked for); an incomplete run is gated on the steps it
    kept, with one warning line."""
    verdicts: List[Verdict] = []
    for p in paths:
        res = load(os.fspath(p))
        if not res.complete:
            _warn_incomplete(p, res)
        options = res.header.get("options")
        gate = budget(max_syncs, outside=max_syncs_outside,
                      configured=options if isinstance(options, dict) else None,
                      baseline=base, updating=updating)
        verdicts += result_verdicts(res, gate, allow_sites)
    return verdicts


def _warn_incomplete(path: str, res: RunResult) -> None:
    footer = res.footer or {}
    why = footer.get("reason") or ("no footer: the run was cut short" if not footer else
                                   "stopped early")
    print(one_line(f"syncguard check: warning: {path}: INCOMPLETE run ({str(why)[:200]}): "
                   f"gated on the {len(res.steps)} steps it kept"), file=sys.stderr)


def result_verdicts(res: RunResult, gate: Budget, allow_sites: Sequence[Tuple[str, str]] = (),
                    scenarios: Optional[Set[str]] = None) -> List[Verdict]:
    """Gate ``res`` on ``gate``: its counted (or ``exec``) steps per scenario and path, and
    the syncs each scenario made outside every step (on ``--max-syncs-outside``, or, a
    per-step site among them, with the steps), ``allow_sites`` applied (:func:`allowed`).
    ``scenarios``: only these."""
    verdicts: List[Verdict] = []
    mine: Callable[[Any], bool] = (lambda sc: True) if scenarios is None else (
        lambda sc: sc in scenarios)
    # one pass over the events (each read's event is made as it is asked for), grouped by
    # (scenario, path) of the guarded passes and by scenario outside every step
    guarded: Dict[Tuple[Any, Any], List[Dict[str, Any]]] = {}
    outside: Dict[Any, List[Dict[str, Any]]] = {}
    for e in res.iter_events():
        sc, path = e.get("scenario"), e.get("path")
        if e.get("pass") in GUARDED_PASSES:
            guarded.setdefault((sc, path), []).append(e)
        if path == OUTSIDE_PATH and e.get("step") is None:
            outside.setdefault(sc, []).append(e)
    counted: Dict[Any, Dict[str, int]] = {}  # scenario -> path -> its counted steps
    for s in res.steps:
        if not s.warmup and s.pass_ in GUARDED_PASSES:
            paths = counted.setdefault(s.scenario, {})
            paths[s.path] = paths.get(s.path, 0) + 1
    keys = list(dict.fromkeys((s.scenario, s.path) for s in res.steps
                              if s.pass_ in GUARDED_PASSES and mine(s.scenario)))
    for sc, path in keys:
        evs = allowed([SyncEvent.from_dict(e) for e in guarded.get((sc, path), ())],
                      allow_sites)
        verdicts += gate.verdicts(evs, sc, path)
    for sc in dict.fromkeys(s.scenario for s in res.steps if mine(s.scenario)):
        raw = outside.get(sc, [])
        evs = allowed([SyncEvent.from_dict(e) for e in raw], allow_sites)
        after = Tally()  # each counted at the step begun last before it
        for ev, a in zip(evs, (r.get("after_step") for r in raw)):
            if isinstance(a, int) and not isinstance(a, bool):
                after.add(dataclasses.replace(ev, step=a))
        verdicts += gate.outside_verdicts(evs, sc, after,
                                          max(counted.get(sc, {}).values(), default=0))
    return verdicts
