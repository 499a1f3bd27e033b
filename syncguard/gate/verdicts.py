"""The gate: hidden-sync events plus a budget or a baseline in, a verdict and its text out.

One decision for every front end: ``syncguard check`` (one verdict per scenario and path, on
scenarios or on recorded runs), the pytest plugin (one per test) and ``syncguard exec`` (one
per step name and run). Torch-free.

- :func:`budget` works out what is gated (a :class:`Budget`) from the command line's budgets,
  the configured ones (a scenario's ``[expect]``, a recorded run's own options) and a baseline;
  :meth:`Budget.verdicts` judges one scenario/path on it.
- :class:`Tally` groups hidden syncs by call site as events arrive (allowed and warm-up events
  are skipped), keeping counts per site and step instead of the events; pass ``tally.add`` as
  a guard's ``on_event`` to keep memory flat over long runs, or hand :func:`judge` a list of
  events. Every verdict takes either.
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

import array
import dataclasses
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

from .._words import plural, steps_phrase
from ..core.events import SyncEvent
from ..core.events import site_line as _site_line
from ..core.sites import caller_text, function_name, grows_with_steps, site_key
from .baseline import Baseline, BaselineSite, Finding

__all__ = ["OUTSIDE_GATE", "OUTSIDE_PER_STEP", "Budget", "Site", "StepCounts", "Tally",
           "Verdict", "baseline_from", "budget", "judge", "per_step_verdict", "summary"]

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


class StepCounts:
    """A count per step index, kept as runs ``(first, last, n)`` of consecutive steps with the
    same count ``n``, three machine integers each (24 bytes). Fed in step order (as a run
    records its steps), a loop that syncs the same number of times every step stays one run
    however long it runs; a site that syncs in every other step takes a run per sync. Steps
    fed out of order (steps on several threads) are kept too, as runs of their own, and
    summed when read."""

    __slots__ = ("_runs", "_ordered")

    def __init__(self) -> None:
        self._runs = array.array("q")  # first, last, n, first, last, n, ...
        self._ordered = True

    def add(self, step: int, n: int = 1) -> None:
        """``n`` more at ``step``."""
        r = self._runs
        if not r:
            r.extend((step, step, n))
            return
        first, last, count = r[-3], r[-2], r[-1]
        if step == last:  # the step being fed: its count grows
            if first == step:
                r[-1] = count + n
            else:
                r[-2] = last - 1
                r.extend((step, step, count + n))
        elif step == last + 1 and count == n:
            r[-2] = step
            return
        else:
            if step < last:
                self._ordered = False
            r.extend((step, step, n))
        # the grown step may now continue the run before it
        if len(r) >= 6 and r[-5] + 1 == r[-3] and r[-4] == r[-1]:
            r[-5] = r[-2]
            del r[-3:]

    def __len__(self) -> int:
        """How many runs are kept (what the memory grows with)."""
        return len(self._runs) // 3

    def runs(self) -> List[Tuple[int, int, int]]:
        """``(first, last, n)`` runs, by step, each step once."""
        r = self._runs
        triples = [(r[i], r[i + 1], r[i + 2]) for i in range(0, len(r), 3)]
        if self._ordered:
            return triples
        per: Dict[int, int] = {}
        for a, b, n in triples:
            for i in range(a, b + 1):
                per[i] = per.get(i, 0) + n
        out: List[List[int]] = []
        for i in sorted(per):
            if out and out[-1][1] + 1 == i and out[-1][2] == per[i]:
                out[-1][1] = i
            else:
                out.append([i, i, per[i]])
        return [(a, b, n) for a, b, n in out]

    def within(self, spans: Sequence[Tuple[int, int]]) -> List[Tuple[int, int, int]]:
        """The runs cut to ``spans`` (``(first, last)`` step ranges, by step, disjoint)."""
        out = []
        j = 0
        for a, b, n in self.runs():
            while j < len(spans) and spans[j][1] < a:
                j += 1
            k = j
            while k < len(spans) and spans[k][0] <= b:
                lo, hi = max(a, spans[k][0]), min(b, spans[k][1])
                if lo <= hi:
                    out.append((lo, hi, n))
                k += 1
        return out


@dataclasses.dataclass
class _Variant:
    """One call path (``event.stack``) of a site: its first event, its counts per step and
    its place among the site's call paths in each step it made syncs in (0: the first; a
    loop's code runs in the same order every step, so these stay a run or two)."""

    event: SyncEvent
    order: int
    steps: StepCounts = dataclasses.field(default_factory=StepCounts)
    places: StepCounts = dataclasses.field(default_factory=StepCounts)
    last: Optional[int] = None

    def first_within(self, spans: Sequence[Tuple[int, int]]) -> Optional[Tuple[int, int, int]]:
        """``(step, place, order)`` of this path's first syncs in ``spans``; None if none."""
        mine = self.steps.within(spans)
        if not mine:
            return None
        step = mine[0][0]
        place = next((n for a, b, n in self.places.runs() if a <= step <= b), 0)
        return step, place, self.order


class _Group:
    """One site of a :class:`Tally`: its first event, count, counts per step, whether some
    syncs were outside every step, and its first few call paths (:data:`Tally.PATHS`)."""

    __slots__ = ("event", "count", "steps", "outside", "variants", "step", "paths")

    def __init__(self, ev: SyncEvent) -> None:
        self.event = ev
        self.count = 0
        self.steps = StepCounts()
        self.outside = False
        self.variants: Dict[Any, _Variant] = {}
        self.step: Optional[int] = None  # the step being fed, and its call paths so far
        self.paths = 0


def _steps_of(runs: Iterable[Tuple[int, int, int]]) -> Tuple[int, ...]:
    return tuple(i for a, b, _ in runs for i in range(a, b + 1))


class Tally:
    """Hidden host syncs grouped by call site, fed one event at a time.

    ``add(event)`` skips allowed and warm-up events. ``hidden`` is the number of hidden syncs
    so far; ``sites()`` the sites, most syncs first. ``root`` is the directory site keys and
    shown paths are relative to (default: the current directory).

    A tally keeps counts, not events: per site its first event, its count and its counts per
    step (runs of steps, :class:`StepCounts`), and the first event of each of its first
    :data:`PATHS` call paths (a bounded sample); the hidden syncs per step. Its memory does not
    grow with the steps of a steady loop, and it gives the same verdicts as the events it was
    fed (:func:`judge`, :func:`per_step_verdict`). ``keep_events=True`` also keeps every
    event it counted (:attr:`events`)."""

    #: call paths (distinct ``event.stack``) kept per site, each with its first event
    PATHS = 8

    def __init__(self, root: Optional[str] = None, keep_events: bool = False) -> None:
        self.root = root
        self.hidden = 0
        #: hidden syncs per step (events outside every step left out)
        self.per_step = StepCounts()
        #: every event counted, with ``keep_events`` (else None)
        self.events: Optional[List[SyncEvent]] = [] if keep_events else None
        self._groups: Dict[str, _Group] = {}
        self._keys: Dict[Tuple[Any, ...], str] = {}
        self._seen = 0

    def add(self, ev: SyncEvent) -> None:
        if ev.allowed or ev.warmup:
            return
        self.hidden += ev.count
        if self.events is not None:
            self.events.append(ev)
        ident = (ev.filename, ev.lineno, ev.function, ev.kind, ev.api, ev.op)
        key = self._keys.get(ident)
        if key is None:  # site_key reads the source line: once per distinct site
            key = self._keys[ident] = site_key(ev, self.root)
        g = self._groups.get(key)
        if g is None:
            g = self._groups[key] = _Group(ev)
        g.count += ev.count
        if ev.step is None:
            g.outside = True
            return
        step = int(ev.step)
        g.steps.add(step, ev.count)
        self.per_step.add(step, ev.count)
        if g.step != step:
            g.step, g.paths = step, 0
        v = g.variants.get(ev.stack)
        if v is None and len(g.variants) < self.PATHS:
            self._seen += 1
            v = g.variants[ev.stack] = _Variant(ev, self._seen)
        if v is not None:
            v.steps.add(step, ev.count)
            if v.last != step:
                v.last = step
                v.places.add(step, g.paths)
                g.paths += 1

    def extend(self, events: Iterable[SyncEvent]) -> Tally:
        for ev in events:
            self.add(ev)
        return self

    def kept(self) -> Tuple[int, int]:
        """What the tally holds: ``(events, runs)``, the events one per site and call path
        (and every event with ``keep_events``), the runs those of its :class:`StepCounts`.
        Neither grows with the steps of a loop that syncs alike every step."""
        events = len(self.events or ())
        runs = len(self.per_step)
        for g in self._groups.values():
            events += len(g.variants) or 1
            runs += len(g.steps) + sum(len(v.steps) + len(v.places)
                                       for v in g.variants.values())
        return events, runs

    def sites(self, within: Optional[Sequence[Tuple[int, int]]] = None,
              by_count: bool = True) -> List[Site]:
        """The sites, most syncs first (``by_count=False``: in the order they first synced).
        ``within``: only the syncs made in those steps (``(first, last)`` ranges, by step,
        disjoint), each site then named by its first event in them (as a tally fed only those
        steps' events would)."""
        if within is None:
            out = [Site(k, g.event, g.count, _steps_of(g.steps.runs()), g.outside)
                   for k, g in self._groups.items()]
            if by_count:
                out.sort(key=lambda s: (-s.count, s.event.filename, s.event.lineno))
            return out
        cut: List[Tuple[Tuple[int, int, int], Site]] = []
        for k, g in self._groups.items():
            runs = g.steps.within(within)
            if not runs:
                continue
            best: Optional[Tuple[int, int, int]] = None
            event = g.event
            for v in g.variants.values():  # the call path that synced first in those steps
                first_v = v.first_within(within)
                if first_v is not None and (best is None or first_v < best):
                    best, event = first_v, v.event
            first = best if best is not None else (runs[0][0], 0, 0)
            cut.append((first, Site(k, event, sum((b - a + 1) * n for a, b, n in runs),
                                    _steps_of(runs))))
        cut.sort(key=lambda fs: (-fs[1].count, fs[1].event.filename, fs[1].event.lineno,
                                 fs[0]))
        return [s for _, s in cut]

    def only(self, keys: Iterable[str]) -> Tally:
        """A tally of the sites ``keys`` alone (their counts, steps and call paths)."""
        t = Tally(self.root)
        for k in keys:
            g = self._groups[k]
            t._groups[k] = g
            t.hidden += g.count
            for a, b, n in g.steps.runs():
                for i in range(a, b + 1):
                    t.per_step.add(i, n)
        return t

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


def budget_count(value: Any, where: str, error: type = ValueError) -> int:
    """A sync budget (``--max-syncs``, a scenario's ``expect.max_syncs``, a marker's or the
    config's ``max_syncs``...) read from the user: an integer >= 0, from an int or a string of
    one (a config or the command line). Anything else raises ``error`` naming ``where``. The
    one place a budget is checked."""
    if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
        # also inf and nan (TOML has them): int() of those is an OverflowError/ValueError
        raise error(f"{where}: must be an integer >= 0, got {value!r}")
    try:
        n = int(value)
    except (TypeError, ValueError, OverflowError):
        raise error(f"{where}: must be an integer >= 0, got {str(value)[:40]!r}") from None
    if n < 0:
        raise error(f"{where}: must be an integer >= 0, got {n}")
    return n


def judge(events: Union[Tally, Iterable[SyncEvent]], *, max_syncs: int = 0,
          baseline: Optional[Baseline] = None, scenario: str = "", path: str = "",
          root: Optional[str] = None) -> Verdict:
    """Judge hidden syncs against a budget (``max_syncs``, a count >= 0) or, when given, a
    ``baseline`` (then ``max_syncs`` is not used). ``events`` is a :class:`Tally` or any
    iterable of :class:`SyncEvent` (allowed and warm-up events are skipped). ``scenario`` and
    ``path`` name what is judged; a baseline is looked up under them. ``root``: the directory
    site keys and paths are relative to (default: the current directory)."""
    budget_count(max_syncs, "max_syncs")
    tally = events if isinstance(events, Tally) else Tally(root).extend(events)
    sites = tuple(tally.sites())
    if baseline is not None:
        findings = tuple(baseline.compare(scenario, path, tally.grouped()))
        return Verdict(scenario, path, tally.hidden, None, baseline.source, bool(findings),
                       findings, sites)
    return _on_budget(sites, tally.hidden, max_syncs, scenario, path)


def _on_budget(sites: Tuple[Site, ...], hidden: int, max_syncs: int, scenario: str,
               path: str) -> Verdict:
    failed = hidden > max_syncs
    why = f"{plural(hidden, 'hidden sync')}, budget {max_syncs}"
    findings = tuple(Finding(scenario, path, s.event, s.count, list(s.steps), None, why)
                     for s in sites) if failed else ()
    return Verdict(scenario, path, hidden, max_syncs, None, failed, findings, sites)


def per_step_verdict(events: Union[Tally, Sequence[SyncEvent]], budget: int, scenario: str,
                     path: str) -> Verdict:
    """The verdict on hidden syncs per step call (``--max-syncs-per-step``): failed when one
    step has more than ``budget``; ``hidden`` is the worst step's count, the findings are the
    sites of the steps over budget (allowed and warm-up events are skipped). ``events``: a
    :class:`Tally` or the events."""
    tally = events if isinstance(events, Tally) else Tally().extend(events)
    runs = tally.per_step.runs()
    over = [(a, b) for a, b, n in runs if n > budget]
    worst = max((n for _, _, n in runs), default=0)
    sites = tuple(tally.sites(within=over))
    v = _on_budget(sites, sum(s.count for s in sites), 0, scenario, path)
    n_over = sum(b - a + 1 for a, b in over)
    n_steps = sum(b - a + 1 for a, b, _ in runs)
    why = (f"{worst} hidden syncs in one step call, budget {budget} per step "
           f"({n_over} of {n_steps} steps with syncs over it)")
    return dataclasses.replace(v, hidden=worst, max_syncs=budget, findings=tuple(
        dataclasses.replace(f, message=why) for f in v.findings))


def summary(verdicts: Sequence[Verdict], unit: str = "scenario path") -> str:
    """All verdicts in one line: ``"1 of 2 scenario paths failed (gate: budget)"``, ``"all 2
    scenario paths OK (gate: baseline FILE)"``. ``unit`` names what one verdict judges
    (``exec``: a gated step of the program)."""
    failed = sum(1 for v in verdicts if v.failed)
    against = next((v for v in verdicts if v.max_syncs is None), None)
    gate = "budget" if against is None else against.limit()
    if failed:
        return f"{failed} of {plural(len(verdicts), unit)} failed (gate: {gate})"
    if len(verdicts) == 1:
        return f"1 {unit} OK (gate: {gate})"
    return f"all {plural(len(verdicts), unit)} OK (gate: {gate})"


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
        """The verdicts on one scenario/path's events (or their :class:`Tally`): its total
        (on ``max_syncs``, or the baseline) and, with ``per_step``, its worst step call (path
        ``"<path> per step"``)."""
        out = []
        if self.max_syncs is not None or self.baseline is not None:
            out.append(judge(events, max_syncs=self.max_syncs or 0, baseline=self.baseline,
                             scenario=scenario, path=path, root=root))
        if self.per_step is not None:
            out.append(per_step_verdict(events, self.per_step, scenario, f"{path} per step"))
        return out

    def outside_verdicts(self, events: Union[Tally, Iterable[SyncEvent]], scenario: str,
                         after: Optional[Tally] = None, steps: int = 0) -> List[Verdict]:
        """The verdicts on the hidden syncs made outside every step: all of them on
        ``outside`` (path :data:`OUTSIDE_GATE`) when it is given. Else, when steps are gated
        (``max_syncs`` or ``per_step``), the sites among them that sync once per step or
        more are gated like syncs in a step (path :data:`OUTSIDE_PER_STEP`): a loop whose
        per-token read lands outside the steps cannot pass; only ``--max-syncs-outside`` or
        an allowed site lets them through. ``after``: the same syncs, each counted at the
        step begun last before it; ``steps``: the counted steps of the run
        (:func:`syncguard.core.sites.grows_with_steps` decides from both)."""
        if self.outside is not None:
            return [judge(events, max_syncs=self.outside, scenario=scenario, path=OUTSIDE_GATE)]
        if (self.max_syncs is None and self.per_step is None) or after is None:
            return []
        per = after.only([s.key for s in after.sites(by_count=False)
                          if grows_with_steps(len(s.steps), steps)])
        if not per.hidden:
            return []
        out = []
        if self.max_syncs is not None:
            out.append(judge(per, max_syncs=self.max_syncs, scenario=scenario,
                             path=OUTSIDE_PER_STEP))
        if self.per_step is not None:
            out.append(per_step_verdict(per, self.per_step, scenario, OUTSIDE_PER_STEP))
        return out


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
