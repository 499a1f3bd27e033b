"""What the pytest plugin says of a guarded test: the verdict line, the report section with
its sites and lineage, and the outcomes it changes (a swallowed HostSyncError, xfail)."""

from __future__ import annotations

from typing import (
    TYPE_CHECKING,
    Any,
    Dict,
    List,
)

import pytest

from .._escape import one_line
from ..core.events import H2D_COPY, site_line
from ..core.lineage_words import site_verdict, verdict_text
from ..core.sites import caller_text, function_name, shown_site

# torch-free: the plugin still loads without importing torch

if TYPE_CHECKING:  # pragma: no cover
    from ..core.guard import SyncGuard
    from ..gate.verdicts import Verdict




# ---------------------------------------------------------------------------- verdict
#: a hint when hidden syncs are host-to-device copies, the mark of inputs built in the body
FIXTURE_HINT = ("build inputs such as torch.tensor(..., device=...) in a fixture, which is "
                "not measured")


def verdict_line(verdict: Verdict) -> str:
    """``syncguard: `` and the gate's :meth:`~syncguard.gate.verdicts.Verdict.test_line`
    (``allowed 0 host syncs, saw 3 in steps 2-4``). When host-to-device copies are among the
    hidden syncs, a hint to build inputs in a fixture follows."""
    text = f"syncguard: {verdict.test_line()}"
    h2d = sum(s.count for s in verdict.sites if s.event.kind == H2D_COPY)
    if h2d:
        text += f" ({h2d} host-to-device cop{'y' if h2d == 1 else 'ies'}: {FIXTURE_HINT})"
    return text


def _site_lines(sites: List[Dict[str, Any]], root: str) -> List[str]:
    return ["  " + site_line(s["filename"], s["lineno"],
                             function_name(s["function"], s.get("stack")), s["api"], s["op"],
                             s["count"], s["steps"], root=root,
                             caller=caller_text(s["filename"], s.get("stack"), root))
            for s in sorted(sites, key=lambda s: (-s["count"], s["filename"], s["lineno"]))]


def report_section(guard: SyncGuard, gate: Verdict, root: str, verdict: bool = True) -> str:
    """The ``syncguard`` report section: the verdict (unless ``verdict=False``: it is the
    failure's own text then) and every site (file:line, function, API, op, count, steps);
    allowed syncs listed apart with their reasons. ``gate``: the test's
    :class:`syncguard.gate.verdicts.Verdict`; against a baseline the failing sites say why."""
    lines = [verdict_line(gate)] if verdict else []
    hidden = guard.sites()
    if hidden:
        lines.append("hidden host syncs by site (file:line in function: API (op) xcount):")
        lines += _site_lines(hidden, root)
    if gate.max_syncs is None and gate.findings:
        lines.append("new or above the baseline:")
        lines += ["  " + t for t in gate.site_lines(root)]
    allowed = [s for s in guard.sites(include_allowed=True) if s["allowed"]]
    if allowed:
        lines.append(f"allowed host syncs ({guard.allowed_count}, not counted):")
        reasons = {(e.filename, e.lineno, e.api): e.reason for e in guard.events if e.allowed}
        allowed.sort(key=lambda s: (-s["count"], s["filename"], s["lineno"]))
        for s, text in zip(allowed, _site_lines(allowed, root)):
            reason = reasons.get((s["filename"], s["lineno"], s["api"]))
            lines.append(f"{text} -- {reason}" if reason else text)
    if gate.failed:
        lines.append('to allow one: `with syncguard.allow("why"):` around it, or '
                     'allow=["file.py:line"] in the marker or [tool.syncguard]')
    return "\n".join(lines) + "\n"


def _lineage_text(events: List[Any], root: str) -> str:
    """One line per hidden site whose read values were tracked (``--syncguard-lineage``)."""
    by_site: Dict[str, List[Any]] = {}
    for e in events:
        if e.lineage is not None and not e.allowed and not e.warmup:
            by_site.setdefault(e.site, []).append(e.lineage)
    lines = []
    for site, lins in by_site.items():
        v = site_verdict(lins)
        if v is not None:
            lines.append("  " + one_line(f"{shown_site(site, root)}: {verdict_text(v)}"))
    return "\n".join(["why, and how to remove it (lineage):", *lines]) if lines else ""


def _fail_on_swallowed(report: pytest.TestReport, call: pytest.CallInfo[None],
                       guard: SyncGuard) -> bool:
    """A test that passed although a ``SyncGuard(on_sync="raise")`` inside it raised a
    HostSyncError its code caught (twice: the error and the guard's re-raise at exit) fails:
    the guard raised, the code swallowed it, and the outcome may be wrong output."""
    swallowed = getattr(guard, "swallowed", ())
    if not swallowed or call.excinfo is not None or not report.passed:
        return False
    ev = swallowed[0]
    report.outcome = "failed"
    report.longrepr = (f"syncguard: {len(swallowed)} HostSyncError(s) raised and caught by the "
                       f"code under test, first at {ev.site} in {ev.function}(): {ev.api}")
    return True


def _skipped_in_body(report: pytest.TestReport) -> bool:
    """``pytest.skip()`` inside the test body (not an xfail outcome)."""
    return report.skipped and not hasattr(report, "wasxfail")


def _xfail_of(item: pytest.Item) -> Any:
    """The evaluated xfail mark of ``item`` (pytest's own, so conditions and ``run=`` are
    honoured), or None."""
    try:
        from _pytest.skipping import xfailed_key
    except ImportError:  # pragma: no cover - very old or future pytest
        return None
    return item.stash.get(xfailed_key, None)
