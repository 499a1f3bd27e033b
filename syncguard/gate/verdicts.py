"""The gate: hidden-sync events plus a budget or a baseline in, a verdict and its text out.

One decision for every front end: ``syncguard check`` (one verdict per scenario and path, on
scenarios or on recorded runs), the pytest plugin (one per test) and ``syncguard exec`` (one
per step name and run). Torch-free.

- :func:`budget` works out what is gated (a :class:`Budget`) from the command line's budgets,
  the configured ones (a scenario's ``[expect]``, a recorded run's own options) and a baseline;
  :meth:`Budget.verdicts` judges one scenario/path on it.
- :class:`Tally` groups hidden syncs by call site as events arrive (allowed and warm-up events
  are skipped); pass ``tally.add`` as a guard's ``on_event`` to keep memory flat over long
  runs, or hand :func:`judge` a list of events.
- :func:`judge` gives a :class:`Verdict`: with ``max_syncs`` it fails when the hidden syncs
  exceed the budget (every site is then a finding); with a
  :class:`~syncguard.gate.baseline.Baseline` it fails only on a site the baseline does not
  know or a count above the recorded one (sites are matched by
  :func:`~syncguard.core.sites.site_key`, so moved lines still match).
  :func:`per_step_verdict` judges the worst step call instead of the total.
- A :class:`Verdict` writes every text said about it: :meth:`Verdict.line`,
  :meth:`Verdict.row` (``check``'s summary), :meth:`Verdict.brief` (JUnit),
  :meth:`Verdict.test_line` (the pytest plugin), :meth:`Verdict.site_lines`, and
  :func:`summary` over many; the CI renderers (:mod:`syncguard.renderers.ci`) lay them out.
- :func:`baseline_from` turns verdicts into a baseline (``--update-baseline``), merged with
  an older one by :meth:`Baseline.merged <syncguard.gate.baseline.Baseline.merged>`.

Example::

    from syncguard import SyncGuard
    from syncguard.gate.verdicts import Tally, judge

    tally = Tally()
    with SyncGuard(on_event=tally.add, keep_events=False):
        run_my_decode_loop()
    verdict = judge(tally, max_syncs=0, scenario="my-run")
    print(verdict.line())            # "3 hidden syncs, budget 0"
    for text in verdict.site_lines():  # "pkg/mod.py:12 in f: Tensor.item x3, steps 0-2"
        print(text)
    exit_code = 1 if verdict.failed else 0

The CI formats of ``check`` render verdicts too:
``syncguard.renderers.emit_gate("github", verdicts, output=None)``.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

from .._words import plural, steps_phrase
from ..core.events import SyncEvent
from ..core.events import site_line as _site_line
from ..core.sites import caller_text, function_name, group_key, grows_with_steps, site_key
from .baseline import Baseline, BaselineSite, Finding

__all__ = ["OUTSIDE_GATE", "OUTSIDE_PER_STEP", "Budget", "Site", "Tally", "Verdict",
           "baseline_from", "budget", "judge", "per_step_outside", "per_step_verdict", "summary"]

#: the path of the verdict on the hidden syncs an ``exec`` run made outside every step
OUTSIDE_GATE = "outside steps"
#: the path of the verdicts on per-step sites outside every step, gated with the steps
OUTSIDE_PER_STEP = "outside steps, per step"


@dataclasses.dataclass(frozen=True)
class Site:
    """Hidden syncs at one call site: ``count`` host syncs (sum of event counts) made in
    ``steps`` (step indices, sorted; ``outside_steps`` when some were made outside any step);
    ``event`` is the first event seen there; ``key`` its :func:`~syncguard.core.sites.site_key`."""

    key: str
    event: SyncEvent
    count: int
    steps: Tuple[int, ...]
    outside_steps: bool = False

    def line(self, root: Optional[str] = None) -> str:
        """``file:line in function: API (op) xN, steps 2-4`` (see :func:`events.site_line`)."""
        return _line(self.event, self.count, self.steps, root)


def _line(ev: SyncEvent, count: int, steps: Iterable[Optional[int]],
          root: Optional[str]) -> str:
    return _site_line(ev.filename, ev.lineno, function_name(ev.function, ev.stack), ev.api,
                      ev.op, count, steps, root=root,
                      caller=caller_text(ev.filename, ev.stack, root))


def site_line(f: Finding, root: Optional[str] = None) -> str:
    """A failing site's line: ``file:line in function: API (op) xN, steps 2-19``
    (:func:`syncguard.core.events.site_line`; paths relative to ``root``, default the current
    directory)."""
    return _line(f.event, f.count, f.steps, root)


class Tally:
    """Hidden host syncs grouped by call site, fed one event at a time.

    ``add(event)`` skips allowed and warm-up events. ``hidden`` is the number of hidden syncs
    so far; ``sites()`` the sites, most syncs first. ``root`` is the directory site keys and
    shown paths are relative to (default: the current directory)."""

    def __init__(self, root: Optional[str] = None) -> None:
        self.root = root
        self.hidden = 0
        self._groups: Dict[str, Dict[str, Any]] = {}
        self._keys: Dict[Tuple[Any, ...], str] = {}

    def add(self, ev: SyncEvent) -> None:
        if ev.allowed or ev.warmup:
            return
        self.hidden += ev.count
        ident = (ev.filename, ev.lineno, ev.function, ev.kind, ev.api, ev.op)
        key = self._keys.get(ident)
        if key is None:  # site_key reads the source line: once per distinct site
            key = self._keys[ident] = site_key(ev, self.root)
        g = self._groups.setdefault(key, {"event": ev, "count": 0, "steps": set(),
                                          "outside": False})
        g["count"] += ev.count
        if ev.step is None:
            g["outside"] = True
        else:
            g["steps"].add(int(ev.step))

    def extend(self, events: Iterable[SyncEvent]) -> Tally:
        for ev in events:
            self.add(ev)
        return self

    def sites(self) -> List[Site]:
        out = [Site(k, g["event"], g["count"], tuple(sorted(g["steps"])), g["outside"])
               for k, g in self._groups.items()]
        out.sort(key=lambda s: (-s.count, s.event.filename, s.event.lineno))
        return out

    def grouped(self) -> Dict[str, Dict[str, Any]]:
        """``{site_key: {"event", "count", "steps"}}`` as :meth:`Baseline.compare` takes it."""
        return {s.key: {"event": s.event, "count": s.count, "steps": list(s.steps)}
                for s in self.sites()}


@dataclasses.dataclass(frozen=True)
class Verdict:
    """The gate's decision on one scenario/path (``check``), test (plugin) or run (``exec``).

    ``hidden``: hidden host syncs counted (allowed and warm-up ones excluded). ``max_syncs``:
    the budget, or None when a baseline decided (``baseline`` then names its file, if it came
    from one). ``findings``: the sites that fail it (over budget: every site; against a
    baseline: the new sites and those above their recorded count). ``sites``: every hidden
    site, most syncs first."""

    scenario: str
    path: str
    hidden: int
    max_syncs: Optional[int]
    baseline: Optional[str]
    failed: bool
    findings: Tuple[Finding, ...]
    sites: Tuple[Site, ...]

    def limit(self) -> str:
        """``"budget 0"`` or ``"baseline FILE"``."""
        if self.max_syncs is not None:
            return f"budget {self.max_syncs}"
        return f"baseline {self.baseline}" if self.baseline else "baseline"

    def line(self) -> str:
        """``"3 hidden syncs, budget 0"``; against a baseline ``"3 hidden syncs, 1 site new or
        above baseline FILE"``."""
        n = plural(self.hidden, "hidden sync")
        if self.max_syncs is not None:
            return f"{n}, budget {self.max_syncs}"
        return f"{n}, {plural(len(self.findings), 'site')} new or above {self.limit()}"

    @property
    def status(self) -> str:
        """``"FAIL"`` or ``"OK"``."""
        return "FAIL" if self.failed else "OK"

    def row(self) -> str:
        """The verdict in ``check``'s summary, whose head names the baseline file:
        ``"FAIL  steady [legacy]: 3 hidden syncs, budget 0"``; against a baseline
        ``"...: 3 hidden syncs, 1 site new or above the baseline"`` or ``"OK    ...: 2 hidden
        syncs, none new or above the baseline"``."""
        n = plural(self.hidden, "hidden sync")
        if self.max_syncs is not None:
            limit = f"budget {self.max_syncs}"
        elif self.failed:
            limit = f"{plural(len(self.findings), 'site')} new or above the baseline"
        else:
            limit = "none new or above the baseline"
        return f"{self.status:<4}  {self.scenario} [{self.path}]: {n}, {limit}"

    def brief(self) -> str:
        """The count and what it was judged on: ``"3 hidden syncs, budget 0"`` or ``"3
        hidden syncs, baseline FILE"`` (a JUnit test case's message)."""
        return f"{plural(self.hidden, 'hidden sync')}, {self.limit()}"

    def where(self) -> str:
        """Where the hidden syncs were made: ``"in steps 2-4"``, ``"in step 3 and outside
        steps"``, ``"in the test body"`` (none in a step), ``""`` without hidden syncs."""
        if not self.sites:
            return ""
        steps = steps_phrase(i for s in self.sites for i in s.steps)
        if not steps:
            return "in the test body"
        outside = " and outside steps" if any(s.outside_steps for s in self.sites) else ""
        return f"in {steps}{outside}"

    def test_line(self) -> str:
        """The verdict on a test (the pytest plugin): ``"allowed 0 host syncs, saw 3 in steps
        2-4"``; against a baseline ``"1 site new or above baseline FILE, saw 3 host syncs in
        the test body"``."""
        if self.max_syncs is None:
            text = (f"{plural(len(self.findings), 'site')} new or above {self.limit()}, saw "
                    f"{plural(self.hidden, 'host sync')} {self.where()}")
        else:
            text = (f"allowed {plural(self.max_syncs, 'host sync')}, saw {self.hidden} "
                    f"{self.where()}")
        return text.rstrip()

    def site_lines(self, root: Optional[str] = None, failing_only: bool = True,
                   most: Optional[int] = None) -> List[str]:
        """One :func:`events.site_line` per failing site (every hidden site with
        ``failing_only=False``), the first ``most`` of them when given; against a baseline
        each says why it fails."""
        if not failing_only:
            return [s.line(root) for s in self.sites[:most]]
        why = self.max_syncs is None
        return [f"{site_line(f, root)}  ({f.message})" if why else site_line(f, root)
                for f in self.findings[:most]]


def judge(events: Union[Tally, Iterable[SyncEvent]], *, max_syncs: int = 0,
          baseline: Optional[Baseline] = None, scenario: str = "", path: str = "",
          root: Optional[str] = None) -> Verdict:
    """Judge hidden syncs against a budget (``max_syncs``, a count >= 0) or, when given, a
    ``baseline`` (then ``max_syncs`` is not used). ``events`` is a :class:`Tally` or any
    iterable of :class:`SyncEvent` (allowed and warm-up events are skipped). ``scenario`` and
    ``path`` name what is judged; a baseline is looked up under them. ``root``: the directory
    site keys and paths are relative to (default: the current directory)."""
    if max_syncs < 0:
        raise ValueError(f"max_syncs must be >= 0, got {max_syncs}")
    tally = events if isinstance(events, Tally) else Tally(root).extend(events)
    sites = tuple(tally.sites())
    if baseline is not None:
        findings = tuple(baseline.compare(scenario, path, tally.grouped()))
        return Verdict(scenario, path, tally.hidden, None, baseline.source, bool(findings),
                       findings, sites)
    failed = tally.hidden > max_syncs
    why = f"{plural(tally.hidden, 'hidden sync')}, budget {max_syncs}"
    findings = tuple(Finding(scenario, path, s.event, s.count, list(s.steps), None, why)
                     for s in sites) if failed else ()
    return Verdict(scenario, path, tally.hidden, max_syncs, None, failed, findings, sites)


def per_step_verdict(events: Sequence[SyncEvent], budget: int, scenario: str,
                     path: str) -> Verdict:
    """The verdict on hidden syncs per step call (``--max-syncs-per-step``): failed when one
    step has more than ``budget``; ``hidden`` is the worst step's count, the findings are the
    sites of the steps over budget (allowed and warm-up events are skipped)."""
    per: Dict[int, int] = {}
    for e in events:
        if not e.allowed and not e.warmup and e.step is not None:
            per[e.step] = per.get(e.step, 0) + e.count
    over = {i for i, n in per.items() if n > budget}
    worst = max(per.values(), default=0)
    v = judge([e for e in events if e.step in over], max_syncs=0, scenario=scenario, path=path)
    why = (f"{worst} hidden syncs in one step call, budget {budget} per step "
           f"({len(over)} of {len(per)} steps with syncs over it)")
    return dataclasses.replace(v, hidden=worst, max_syncs=budget, findings=tuple(
        dataclasses.replace(f, message=why) for f in v.findings))


def summary(verdicts: Sequence[Verdict]) -> str:
    """All verdicts in one line: ``"1 of 2 scenario paths failed (gate: budget)"``, ``"all 2
    scenario paths OK (gate: baseline FILE)"``."""
    failed = sum(1 for v in verdicts if v.failed)
    against = next((v for v in verdicts if v.max_syncs is None), None)
    gate = "budget" if against is None else against.limit()
    if failed:
        return f"{failed} of {plural(len(verdicts), 'scenario path')} failed (gate: {gate})"
    if len(verdicts) == 1:
        return f"1 scenario path OK (gate: {gate})"
    return f"all {len(verdicts)} scenario paths OK (gate: {gate})"


def _count(value: Any) -> Optional[int]:
    """``value`` when it is a count (an int >= 0, not a bool), else None."""
    ok = isinstance(value, int) and not isinstance(value, bool) and value >= 0
    return value if ok else None


@dataclasses.dataclass(frozen=True)
class Budget:
    """What a run is gated on (see :func:`budget`): ``max_syncs`` hidden syncs per scenario
    and path over the run (None: no total gated), ``per_step`` in any one step call,
    ``outside`` outside every step (``exec`` runs; None: not gated); with a ``baseline`` the
    totals are judged against it instead of ``max_syncs``."""

    max_syncs: Optional[int] = 0
    per_step: Optional[int] = None
    outside: Optional[int] = None
    baseline: Optional[Baseline] = None

    @property
    def gated(self) -> bool:
        """Whether anything is gated at all."""
        return self.baseline is not None or any(
            b is not None for b in (self.max_syncs, self.per_step, self.outside))

    def verdicts(self, events: Union[Tally, Sequence[SyncEvent]], scenario: str, path: str,
                 root: Optional[str] = None) -> List[Verdict]:
        """The verdicts on one scenario/path's events: its total (on ``max_syncs``, or the
        baseline) and, with ``per_step``, its worst step call (path ``"<path> per step"``;
        needs the events as a sequence, not a :class:`Tally`)."""
        out = []
        if self.max_syncs is not None or self.baseline is not None:
            out.append(judge(events, max_syncs=self.max_syncs or 0, baseline=self.baseline,
                             scenario=scenario, path=path, root=root))
        if self.per_step is not None:
            if isinstance(events, Tally):
                raise TypeError("a per-step budget needs the events, not a Tally")
            out.append(per_step_verdict(events, self.per_step, scenario, f"{path} per step"))
        return out

    def outside_verdicts(self, events: Iterable[SyncEvent], scenario: str,
                         after: Optional[Sequence[Optional[int]]] = None,
                         steps: int = 0) -> List[Verdict]:
        """The verdicts on the hidden syncs made outside every step: all of them on
        ``outside`` (path :data:`OUTSIDE_GATE`) when it is given. Else, when steps are gated
        (``max_syncs`` or ``per_step``), the sites among them that sync once per step or
        more (:func:`syncguard.core.sites.grows_with_steps`, from ``after``: for each event
        the index of the step begun last before it, over a run of ``steps`` counted steps)
        are gated like syncs in a step (path :data:`OUTSIDE_PER_STEP`): a loop whose per-token
        read lands outside the steps cannot pass. Only ``--max-syncs-outside`` or an allowed
        site lets them through."""
        evs = list(events)
        if self.outside is not None:
            return [judge(evs, max_syncs=self.outside, scenario=scenario, path=OUTSIDE_GATE)]
        if self.max_syncs is None and self.per_step is None:
            return []
        per = per_step_outside(evs, after or [None] * len(evs), steps)
        if not per:
            return []
        out = []
        if self.max_syncs is not None:
            out.append(judge([e for e, _ in per], max_syncs=self.max_syncs, scenario=scenario,
                             path=OUTSIDE_PER_STEP))
        if self.per_step is not None:
            out.append(per_step_verdict([dataclasses.replace(e, step=a) for e, a in per],
                                        self.per_step, scenario, OUTSIDE_PER_STEP))
        return out


def per_step_outside(events: Sequence[SyncEvent], after: Sequence[Optional[int]],
                     steps: int) -> List[Tuple[SyncEvent, Optional[int]]]:
    """The hidden syncs outside every step (with the step begun last before each, ``after``)
    at sites that sync once per step or more over a run of ``steps`` counted steps."""
    seen: Dict[Tuple[Any, ...], set] = {}
    for e, a in zip(events, after):
        if not e.allowed and not e.warmup:
            seen.setdefault(_outside_key(e), set()).add(a)
    per = {k for k, v in seen.items() if grows_with_steps(len(v - {None}), steps)}
    return [(e, a) for e, a in zip(events, after)
            if not e.allowed and not e.warmup and _outside_key(e) in per]


def _outside_key(e: SyncEvent) -> Tuple[Any, ...]:
    return group_key(e.filename, e.lineno, e.api, e.op, e.kind)


def budget(max_syncs: Optional[int] = None, per_step: Optional[int] = None,
           outside: Optional[int] = None, *, configured: Optional[Mapping[str, Any]] = None,
           baseline: Optional[Baseline] = None, updating: bool = False,
           default: Optional[int] = 0) -> Budget:
    """What is gated, worked out in this one place for ``check`` (scenarios and recorded
    runs) and ``exec``.

    ``max_syncs``, ``per_step``, ``outside``: the command line's ``--max-syncs``,
    ``--max-syncs-per-step`` and ``--max-syncs-outside`` (None: not given; checked counts).
    ``configured``: the budgets configured for what is judged, keys ``max_syncs``,
    ``max_syncs_per_step`` and ``max_syncs_outside`` (a scenario's ``[expect] max_syncs``
    for the path; a recorded run's own options); a value that is not a count is ignored.
    ``baseline``: judge totals against it. ``updating``: a baseline is being written
    (``--update-baseline``).

    - A budget given on the command line is used.
    - Else a configured total is used; a configured per-step or outside budget only when
      nothing else is asked for (no ``baseline``, no ``max_syncs``, not ``updating``): a
      recorded run then gates again as it did.
    - Else the total is ``default`` (``check``: 0; ``exec``: None, not gated), except that
      a per-step budget alone gates no total (as in the run that recorded it).
    """
    conf = configured or {}
    others = baseline is not None or max_syncs is not None or updating
    step = per_step if per_step is not None else (
        None if others else _count(conf.get("max_syncs_per_step")))
    out = outside if outside is not None else (
        None if others else _count(conf.get("max_syncs_outside")))
    total = max_syncs if max_syncs is not None else _count(conf.get("max_syncs"))
    if total is None and step is None:
        total = default
    return Budget(total, step, out, baseline)


def baseline_from(verdicts: Iterable[Verdict], keep: Optional[Baseline] = None,
                  root: Optional[str] = None) -> Baseline:
    """A baseline recording every hidden site of ``verdicts`` with its count. With ``keep``,
    merged into it (:meth:`Baseline.merged <syncguard.gate.baseline.Baseline.merged>`): its sites
    of every scenario/path none of the verdicts judged are kept (a partial run does not forget
    the rest)."""
    judged = []
    sites: List[BaselineSite] = []
    for v in verdicts:
        judged.append((v.scenario, v.path))
        sites += [BaselineSite.of(v.scenario, v.path, s.key, s.count, s.event, root)
                  for s in v.sites]
    return Baseline(sites) if keep is None else keep.merged(sites, judged)
