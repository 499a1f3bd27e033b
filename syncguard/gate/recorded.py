"""The verdicts on a recorded result: each (scenario, path) of its steps on its own, then the
syncs each scenario made outside every step. ``syncguard check RESULT`` gates a recorded run
with it, and ``exec`` gates the processes it followed (their parts, recorded by themselves)."""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Dict, List, Optional, Set

from ..core.events import SyncEvent
from ..results.format import OUTSIDE_PATH, RunResult
from .verdicts import Budget, Tally, Verdict

#: a hook that marks events allowed (``check --allow`` applied to recorded events)
Allow = Callable[[List[SyncEvent]], List[SyncEvent]]


def _keep(allow: Optional[Allow], events: List[SyncEvent]) -> List[SyncEvent]:
    return allow(events) if allow is not None else events


def result_verdicts(res: RunResult, gate: Budget, allow: Optional[Allow] = None,
                    scenarios: Optional[Set[str]] = None) -> List[Verdict]:
    """Gate ``res`` on ``gate``: its counted (or ``exec``) steps per scenario and path, and
    the syncs each scenario made outside every step (on ``--max-syncs-outside``, or, a
    per-step site among them, with the steps). ``scenarios``: only these."""
    verdicts: List[Verdict] = []
    mine: Callable[[Any], bool] = (lambda sc: True) if scenarios is None else (
        lambda sc: sc in scenarios)
    keys = list(dict.fromkeys((s.scenario, s.path) for s in res.steps
                              if s.pass_ in ("counted", "exec") and mine(s.scenario)))
    for sc, path in keys:
        evs = _keep(allow, [SyncEvent.from_dict({k: v for k, v in e.items() if k not in (
            "scenario", "path", "pass", "rank", "ref")})
            for e in res.iter_events() if e.get("scenario") == sc and e.get("path") == path
            and e.get("pass") in ("counted", "exec")])
        verdicts += gate.verdicts(evs, sc, path)
    for sc in dict.fromkeys(s.scenario for s in res.steps if mine(s.scenario)):
        raw = [e for e in res.iter_events() if e.get("scenario") == sc
               and e.get("path") == OUTSIDE_PATH and e.get("step") is None]
        evs = _keep(allow, [SyncEvent.from_dict({k: v for k, v in e.items() if k not in (
            "scenario", "path", "pass", "rank", "after_step", "ref")}) for e in raw])
        after = Tally()  # each counted at the step begun last before it
        for e, a in zip(evs, (r.get("after_step") for r in raw)):
            if isinstance(a, int) and not isinstance(a, bool):
                after.add(dataclasses.replace(e, step=a))
        counted: Dict[str, int] = {}
        for s in res.steps:
            if s.scenario == sc and not s.warmup and s.pass_ in ("counted", "exec"):
                counted[s.path] = counted.get(s.path, 0) + 1
        verdicts += gate.outside_verdicts(evs, sc, after, max(counted.values(), default=0))
    return verdicts
