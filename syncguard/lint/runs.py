"""``syncguard lint --with-run OUT``: what result folders say of each finding.

A finding is **confirmed** when a run recorded a sync event on its lines (with the syncs per
counted step), **cleared** when the run recorded the line as executed and it never synced (a
host value there), **unexercised** when the run recorded which candidate lines of the file ran
and this one did not (the risk no test covers), and **unknown** when no run recorded lines for
its file (a run without ``--record-lines``). Sync events on lines of linted files that the lint
did not report are its **misses**. A run recorded with ``--lineage`` adds, to each confirmed
finding and miss, the verdict on the values read there and a hint (``hoistable: compute it
on the host where batch.py:113 builds it``).

Executed lines come from a result note ``{"type": "note", "kind": "lines", "executed":
{file: [line, ...]}, "candidates": {file: [line, ...]}}`` written by ``syncguard exec
--record-lines PATH`` (:mod:`.lines`); results without it still read.
"""

from __future__ import annotations

import os
from typing import Any, Dict, List, Optional, Sequence, Set, Tuple

from ..core.lineage_words import site_verdict, verdict_hint
from ..errors import UsageError
from ..results.format import GUARDED_PASSES, ResultError
from ..results.loader import load
from .checker import Finding

LINES_NOTE = "lines"


def _real(path: str) -> str:
    return os.path.realpath(path)


def load_runs(paths: Sequence[str]) -> List[Any]:
    """The recorded runs of ``--with-run`` (result files or folders), read before the lint
    starts; one that is missing or not a syncguard result raises a one-line
    :class:`~syncguard.errors.UsageError` naming it (exit 2)."""
    out = []
    for p in paths:
        if not os.path.exists(p):
            raise UsageError(f"--with-run {p}: no such file or folder")
        try:
            out.append(load(p))
        except ResultError as exc:
            msg = str(exc)
            raise UsageError(f"--with-run {msg if msg.startswith(p) else f'{p}: {msg}'}"
                             ) from None
    return out


def apply_runs(findings: Sequence[Finding], runs: Sequence[Any],
               files: Sequence[str] = ()) -> Dict[str, Any]:
    """Mark ``findings`` (their ``run`` field) from ``runs`` (:func:`load_runs`); returns the
    summary ``{"confirmed", "cleared", "unexercised", "unknown", "misses": [...]}``. Misses
    are sought in the files of the findings and in ``files`` (every file linted)."""
    events: Dict[Tuple[str, int], List[Dict[str, Any]]] = {}
    executed: Dict[str, Set[int]] = {}
    recorded: Set[str] = set()
    steps = 0
    by_group: Dict[Tuple[int, str, str], int] = {}  # (run, scenario, path) -> counted steps
    for i, res in enumerate(runs):
        for s in res.steps:
            if not s.warmup and s.pass_ in GUARDED_PASSES:
                steps += 1
                by_group[(i, s.scenario, s.path)] = by_group.get((i, s.scenario, s.path), 0) + 1
        for e in res.iter_events():
            if e.get("warmup") or not e.get("filename") or e.get("lineno") is None:
                continue
            events.setdefault((_real(str(e["filename"])), int(e["lineno"])), []).append(
                {**e, "_run": i})
        for n in res.notes:
            if n.get("kind") != LINES_NOTE:
                continue
            for f in n.get("candidates") or {}:
                recorded.add(_real(f))
            for f, lines in (n.get("executed") or {}).items():
                if isinstance(lines, list):
                    executed.setdefault(_real(f), set()).update(
                        x for x in lines if isinstance(x, int))
    counts = {"confirmed": 0, "cleared": 0, "unexercised": 0, "unknown": 0}
    flagged: Set[Tuple[str, int]] = set()
    linted: Set[str] = {_real(f) for f in files}
    for f in findings:
        real = _real(f.path)
        linted.add(real)
        span = range(f.line, max(f.line, f.end_line) + 1)
        evs = [e for ln in span for e in events.get((real, ln), ())]
        if f.reported:
            flagged.update((real, ln) for ln in span)
        if evs:
            syncs = sum(int(e.get("count") or 1) for e in evs)
            ev_steps = {(e.get("scenario"), e.get("path"), e.get("step")) for e in evs}
            # per counted step of the scenarios/paths where it synced (not of every path run)
            groups = {(int(e["_run"]), str(e.get("scenario")), str(e.get("path")))
                      for e in evs}
            n_steps = sum(by_group.get(g, 0) for g in groups)
            f.run = {"status": "confirmed", "syncs": syncs, "steps": len(ev_steps),
                     "per_step": round(syncs / n_steps, 3) if n_steps else float(syncs),
                     "apis": sorted({str(e.get("api")) for e in evs})}
            hint = _lineage(evs)
            if hint is not None:
                f.run["lineage"] = hint
        elif real in executed and any(ln in executed[real] for ln in span):
            f.run = {"status": "cleared"}
        elif real in recorded or real in executed:
            f.run = {"status": "unexercised"}
        else:
            f.run = {"status": "unknown"}
        counts[f.run["status"]] += 1
    misses = []
    for (real, ln), evs in sorted(events.items()):
        if real not in linted or (real, ln) in flagged:
            continue
        if all(e.get("allowed") for e in evs):
            continue
        miss = {"site": f"{os.path.relpath(real)}:{ln}",
                "api": ", ".join(sorted({str(e.get("api")) for e in evs})),
                "syncs": sum(int(e.get("count") or 1) for e in evs)}
        hint = _lineage(evs)
        if hint is not None:
            miss["lineage"] = hint
        misses.append(miss)
    return {**counts, "misses": misses, "steps": steps}


def _lineage(evs: Sequence[Dict[str, Any]]) -> Optional[Dict[str, Any]]:
    """What the run's lineage (``--lineage``) says of the values read on these lines:
    ``{"verdict", "hint", "uploads", "same"}`` (the most cautious verdict of the events:
    :func:`~syncguard.core.lineage_words.site_verdict`), or None when it was not tracked."""
    v = site_verdict(e.get("lineage") for e in evs)
    if v is None:
        return None
    return {"verdict": str(v.get("verdict") or "unknown"), "hint": verdict_hint(v),
            "uploads": str(v.get("uploads") or ""), "same": int(bool(v.get("same")))}
