"""The gate: hidden-sync events plus a budget or a baseline in, a verdict out.

One decision for every front end: ``syncguard check`` (one verdict per scenario and path), the
pytest plugin (one per test) and ``syncguard exec`` (one per run). Torch-free.

- :class:`Tally` groups hidden syncs by call site as events arrive (allowed and warm-up events
  are skipped); pass ``tally.add`` as a guard's ``on_event`` to keep memory flat over long
  runs, or hand :func:`judge` a list of events.
- :func:`judge` gives a :class:`Verdict`: with ``max_syncs`` it fails when the hidden syncs
  exceed the budget (every site is then a finding); with a :class:`~syncguard.baseline.Baseline`
  it fails only on a site the baseline does not know or a count above the recorded one (sites
  are matched by :func:`~syncguard.baseline.site_key`, so moved lines still match).
- :func:`baseline_from` turns verdicts into a baseline (``--update-baseline``).

Example::

    from syncguard import SyncGuard
    from syncguard.gate import Tally, judge

    tally = Tally()
    with SyncGuard(on_event=tally.add, keep_events=False):
        run_my_decode_loop()
    verdict = judge(tally, max_syncs=0, scenario="my-run")
    print(verdict.line())            # "3 hidden syncs, budget 0"
    for text in verdict.site_lines():  # "pkg/mod.py:12 in f: Tensor.item x3, steps 0-2"
        print(text)
    exit_code = 1 if verdict.failed else 0

The CI formats of ``check`` render verdicts too:
``syncguard.renderers.ci.emit("github", [v.total for v in verdicts],
[f for v in verdicts for f in v.findings], output=None)``.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Dict, Iterable, List, Optional, Tuple, Union

from ._words import plural
from .baseline import Baseline, BaselineSite, Finding, display_path, site_key
from .events import SyncEvent, site_line
from .sites import caller_text, function_name

__all__ = ["Site", "Tally", "Verdict", "baseline_from", "judge"]


@dataclasses.dataclass(frozen=True)
class Site:
    """Hidden syncs at one call site: ``count`` host syncs (sum of event counts) made in
    ``steps`` (step indices, sorted; ``outside_steps`` when some were made outside any step);
    ``event`` is the first event seen there; ``key`` its :func:`~syncguard.baseline.site_key`."""

    key: str
    event: SyncEvent
    count: int
    steps: Tuple[int, ...]
    outside_steps: bool = False

    def line(self, root: Optional[str] = None) -> str:
        """``file:line in function: API (op) xN, steps 2-4`` (see :func:`events.site_line`)."""
        ev = self.event
        return site_line(ev.filename, ev.lineno, function_name(ev.function, ev.stack), ev.api,
                         ev.op, self.count,
                         self.steps, root=root, caller=caller_text(ev.filename, ev.stack, root))


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

    @property
    def total(self) -> Tuple[str, str, int, int, bool]:
        """``(scenario, path, hidden, budget, failed)`` as the CI renderers take it."""
        return (self.scenario, self.path, self.hidden,
                self.max_syncs if self.max_syncs is not None else 0, self.failed)

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

    def site_lines(self, root: Optional[str] = None, failing_only: bool = True) -> List[str]:
        """One :func:`events.site_line` per failing site (every hidden site with
        ``failing_only=False``); against a baseline each says why it fails."""
        if not failing_only:
            return [s.line(root) for s in self.sites]
        out = []
        for f in self.findings:
            ev = f.event
            text = site_line(ev.filename, ev.lineno, function_name(ev.function, ev.stack),
                             ev.api, ev.op, f.count,
                             f.steps, root=root,
                             caller=caller_text(ev.filename, ev.stack, root))
            out.append(f"{text}  ({f.message})" if self.max_syncs is None else text)
        return out


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


def baseline_from(verdicts: Iterable[Verdict], keep: Optional[Baseline] = None,
                  root: Optional[str] = None) -> Baseline:
    """A baseline recording every hidden site of ``verdicts`` with its count. Sites of
    ``keep`` whose scenario/path none of the verdicts judged are kept (a partial run does not
    forget the rest)."""
    judged = set()
    sites: List[BaselineSite] = []
    for v in verdicts:
        judged.add((v.scenario, v.path))
        for s in v.sites:
            ev = s.event
            sites.append(BaselineSite(
                scenario=v.scenario, path=v.path, key=s.key, count=s.count,
                site=f"{display_path(ev.filename, root)}:{ev.lineno}", function=ev.function,
                api=ev.api, op=ev.op, kind=ev.kind))
    if keep is not None:
        sites += [s for s in keep.sites if (s.scenario, s.path) not in judged]
    return Baseline(sites)
