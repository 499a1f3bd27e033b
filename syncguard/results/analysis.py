"""The analysis surface of a result: pandas DataFrames every renderer is built on.

All functions take a :class:`syncguard.results.format.RunResult` and return a new
:class:`pandas.DataFrame`; nothing is cached and nothing is mutated. Conventions:

- Hidden-sync numbers come from the ``counted`` pass (the run under the guard); latency numbers
  from the ``timed`` pass (no interceptors). Latency of the counted pass is never used.
- Warm-up steps (``warmup=True``) are left out of every statistic (they still appear in
  :func:`per_step`, flagged).
- Percentiles use linear interpolation between closest ranks (numpy's/pandas' default).
- Missing values are ``NaN``; a (scenario, path) without a timed pass has ``NaN`` latencies.
- Paths (subjects) are in file order: the order the run drove them, its scenario's
  ``subjects``; ratios are taken against the scenario's first path unless another is asked.
- Subjects' labels are free-form; :func:`summary` and :func:`per_step` show the one named
  ``branch`` (an ``exec`` loop's ``phase`` in :func:`per_step`).
"""

from __future__ import annotations

import math
import operator
from collections import Counter
from typing import TYPE_CHECKING, Any, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

from .._words import step_ranges
from ..core.lineage_words import draw_tree, site_verdict, verdict_text
from ..core.sites import caller_of, function_name, group_key, grows_with_steps
from . import stats
from .format import GUARDED_PASSES, OUTSIDE_PATH, TIMED_PASS
from .machine import machine_differs

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from .format import RunResult, StepRecord

SUMMARY_COLUMNS: Dict[str, str] = {
    "scenario": "scenario name",
    "path": "sampling path",
    "steps": "non-warm-up steps of the counted pass (count)",
    "syncs_mean": "hidden host syncs per step, mean (counted pass, warm-up excluded)",
    "syncs_max": "hidden host syncs per step, max (counted pass, warm-up excluded)",
    "syncs_total": "hidden host syncs summed over the non-warm-up counted steps (count)",
    "allowed_mean": "allowed host syncs per step, mean (counted pass; the token readback)",
    "sites": "distinct file:line sites of hidden syncs (counted pass, warm-up excluded)",
    "timed_steps": "non-warm-up steps of the timed pass (count)",
    "p50_ms": "latency per step, median (ms, timed pass, warm-up excluded)",
    "p90_ms": "latency per step, 90th percentile (ms)",
    "p99_ms": "latency per step, 99th percentile (ms)",
    "mean_ms": "latency per step, mean (ms)",
    "device_ms_mean": "device time per step, mean (ms; NaN where not measured)",
    "sync_wait_us_mean": "host time inside hidden syncs per step, mean (us, counted pass, "
                         "warm-up excluded; NaN where not recorded)",
    "branches": "values of the subject's branch label over non-warm-up steps, by count, "
                "e.g. 'fused 18, generic 2' ('' when it reports none)",
    "ratio_vs_baseline": "this path / the baseline path (column baseline) over rounds: "
                         "exp(mean over rounds of log(median(this) / median(baseline))), the "
                         "round's timed steps paired (round, step)",
    "saved_per_token_us": "(baseline p50_ms - p50_ms) in microseconds per token (step), only "
                          "where the ratio's 95% interval, as printed, lies wholly beyond the "
                          "5% margin (syncguard.results.stats.MARGIN; else NaN: no measurable "
                          "difference)",
    "p50_lo_ms": "95% confidence interval of p50_ms, lower bound (order statistics)",
    "p50_hi_ms": "same, upper bound (ms)",
    "ratio_lo": "95% interval of ratio_vs_baseline, lower bound (Student t over rounds, "
                "syncguard.results.stats.round_ratio; NaN below 3 rounds)",
    "ratio_hi": "same, upper bound",
    "pairs": "timed steps paired with the baseline's (count)",
    "outliers": "timed steps beyond Tukey's fences (1.5 IQR; counted, not dropped)",
    "rounds": "rounds of the timed pass (paths interleaved step by step)",
    "modeled_ms": "modeled step latency on the run's device profile, mean (ms; simulated "
                  "device, counted pass, warm-up excluded; NaN elsewhere)",
    "bubble_us": "modeled device idle time per step, mean (us; same)",
    "modeled_sync_us": "modeled cost of the hidden syncs per step, mean: the step's modeled "
                       "latency minus the same ops replayed without them (us)",
    "modeled_idle_sync_us": "device idle caused by hidden syncs per step, mean (us)",
    "profile": "device profile of the modeled columns ('' when not modeled)",
    "baseline": "the path ratios are taken against (default: the scenario's first path; '' "
                "for exec runs, whose paths are different step functions: no ratio)",
    "rounds_needed": "rounds in all that would show the observed ratio beyond the 5% margin "
                     "when these do not (NaN: resolved, or the ratio itself within the "
                     "margin)",
}

SITES_COLUMNS: Dict[str, str] = {
    "scenario": "scenario name",
    "path": "sampling path",
    "site": "filename:lineno of the user code that synced",
    "filename": "file of the site", "lineno": "line of the site",
    "function": "function of the site",
    "api": "Python-level entry (Tensor.__bool__, ...)",
    "op": "ATen op where known (empty string otherwise)",
    "kind": "sync kind (scalar_read, d2h_copy, ...)",
    "allowed": "True for allowed syncs (e.g. the token readback), False for hidden ones",
    "reason": "why the sync was allowed (empty string for hidden ones)",
    "count": "host syncs at this site over non-warm-up steps (sum of event counts)",
    "steps": "steps with a sync at this site as compact ranges, e.g. '2-4, 7'",
    "wait_us_mean": "mean time the host spent in the intercepted call (us): on a real device "
                    "the cost of this sync per occurrence; NaN when not timed",
    "modeled_stall_us": "modeled host stall per occurrence, mean (us; host read to resume, "
                        "simulated device with a device profile; NaN elsewhere)",
    "modeled_bubble_us": "modeled device idle caused per occurrence, mean (us; from the "
                         "stream's drain to the next kernel)",
    "caller_filename": "file of the first frame outside the site's file that called it (the "
                       "caller of a helper; empty when none), the most frequent one",
    "caller_lineno": "line of that caller (0 when none)",
    "caller_function": "function of that caller (empty when none)",
    "per_step": "True when the site syncs in most steps of its path (at least half of them, "
                "and at least 2; for syncs outside every step: after at least half of the "
                "steps): a cost every step pays; False: once (set-up, prefill)",
    "rate": "count / counted steps of the path (of the scenario's longest path for syncs "
            "outside every step): hidden syncs per step from this site",
    "hoist": "lineage verdict of the values read (``--lineage``): hoistable, device or "
             "unknown; empty when lineage was not tracked",
    "lineage": "that verdict in plain words, with its evidence (the roots and ops)",
    "lineage_tree": "the lineage behind that verdict as JSON, for drawing: ``tree`` (the ops "
                    "that made the value read, down to its roots, bounded; absent in results "
                    "recorded before trees were), ``roots``, ``ops``, ``uploads`` and "
                    "``same`` (1: the same value every step); empty when lineage was not "
                    "tracked",
}

COMPARE_COLUMNS: Dict[str, str] = {
    "scenario": "scenario name",
    "path": "sampling path (compare) / 'A vs B' (compare_paths)",
    "a_syncs_mean": "hidden syncs per step, mean, side A", "b_syncs_mean": "same, side B",
    "syncs_delta": "b_syncs_mean - a_syncs_mean (syncs per step)",
    "a_syncs_total": "hidden syncs in total, side A", "b_syncs_total": "same, side B",
    "a_mean_ms": "mean latency per step, side A (ms)", "b_mean_ms": "same, side B (ms)",
    "latency_delta_ms": "b_mean_ms - a_mean_ms (ms)",
    "a_p50_ms": "median latency per step, side A (ms)", "b_p50_ms": "same, side B (ms)",
    "latency_ratio": "compare_paths: B / A over the run's rounds "
                     "(syncguard.results.stats.round_ratio); "
                     "compare: how this path's within-run ratio to its run's baseline path "
                     "moved, b_ratio / a_ratio (NaN on the baseline row)",
    "ratio_lo": "interval of latency_ratio, lower bound (t over rounds; two runs: Welch, "
                "family-wise 95% over the compared rows)",
    "ratio_hi": "same, upper bound",
    "latency_changed": "True when the latency_ratio interval, as printed, lies wholly beyond "
                       "the 5% margin (below 0.95 or above 1.05; "
                       "syncguard.results.stats.Ratio.differs)",
    "a_ratio": "compare: this path / the baseline path within run A (rounds)",
    "b_ratio": "same, run B",
    "host_ratio": "compare: b / a of this path's absolute host time per step over rounds "
                  "(Welch t on per-round log medians); NaN unless both runs record the same "
                  "machine (see machine)",
    "host_lo": "95% interval of host_ratio, lower bound", "host_hi": "same, upper bound",
    "host_changed": "True when host_ratio's interval, as printed, lies wholly beyond the 5% "
                    "margin on the same machine (never a code change by itself: see changed)",
    "machine": "'same', or why absolute host times are not comparable ('machine differs: "
               "...', 'machine not recorded')",
    "a_outliers": "timed steps beyond Tukey's fences, side A (count)",
    "b_outliers": "same, side B",
    "a_modeled_ms": "modeled step latency, side A (ms; simulated device)",
    "b_modeled_ms": "same, side B",
    "modeled_changed": "True when both sides are modeled on the same profile and the modeled "
                       "latency differs (it is deterministic: the launched ops changed)",
    "changed": "True where the code changed something measurable: hidden syncs differ, the "
               "latency_ratio interval lies beyond the 5% margin (latency_changed), the "
               "modeled latency moved, or a row "
               "exists on one side only (absolute host time never decides it)",
}


def _nan() -> float:
    return float("nan")


def is_missing(x: Any) -> bool:
    """True for None and NaN (and pandas' NA)."""
    if x is None:
        return True
    try:
        return bool(x != x)  # NaN and pd.NA-like
    except (TypeError, ValueError):
        return False


def ordered_paths(paths: Iterable[str]) -> List[str]:
    """The paths in the given order (a run's file order), each once."""
    return list(dict.fromkeys(paths))


def _percentile(values: Sequence[float], q: float) -> float:
    """Linear-interpolation percentile (numpy's default), ``q`` in [0, 100]."""
    if not values:
        return _nan()
    xs = sorted(values)
    pos = (len(xs) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = math.ceil(pos)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else _nan()


#: pass name -> the record passes that serve as it: an ``exec`` record (the program ran
#: once, under the guard) is both the counted and the timed pass
_PASSES = {"counted": GUARDED_PASSES, "timed": (TIMED_PASS, "exec")}


def _records(result: RunResult, scenario: str, path: str, pass_: str,
             warmup: Optional[bool] = False) -> List[StepRecord]:
    return [s for s in result.steps
            if s.scenario == scenario and s.path == path and s.pass_ in _PASSES[pass_]
            and (warmup is None or bool(s.warmup) == warmup)]


def branch_label(record: StepRecord) -> str:
    """The step's ``branch`` label as text (``""`` when the subject reports none)."""
    b = (record.labels or {}).get("branch")
    return "" if b is None else str(b)


def branch_counts(records: Iterable[StepRecord]) -> str:
    """``"fused 18, generic 2"``: the ``branch`` label's values by count (descending, then by
    name)."""
    c = Counter(b for b in map(branch_label, records) if b)
    return ", ".join(f"{b} {n}" for b, n in sorted(c.items(), key=lambda kv: (-kv[1], kv[0])))


def _hidden_events(result: RunResult, include_warmup: bool = False
                   ) -> Iterator[Dict[str, Any]]:
    """The hidden sync events, one at a time (a long run's are never all held)."""
    return (e for e in result.iter_events()
            if not e.get("allowed") and (include_warmup or not e.get("warmup")))


def summary(result: RunResult, baseline: Optional[str] = None) -> pd.DataFrame:
    """One row per (scenario, path); columns and units in :data:`SUMMARY_COLUMNS`.

    Rows are in scenario file order, paths in :func:`ordered_paths` order. Ratios are taken
    against ``baseline`` (else the run's ``options.baseline``, else each scenario's first
    path).
    """
    import pandas as pd

    hidden_sites: Dict[Tuple[str, str], set] = {}
    for e in _hidden_events(result):
        key = (str(e.get("scenario")), str(e.get("path")))
        hidden_sites.setdefault(key, set()).add((e.get("filename"), e.get("lineno")))

    rows: List[Dict[str, Any]] = []
    for scenario in result.scenarios:
        paths = ordered_paths(s.path for s in result.steps if s.scenario == scenario)
        for path in paths:
            counted = _records(result, scenario, path, "counted")
            timed = _records(result, scenario, path, "timed")
            syncs = [float(r.syncs) for r in counted]
            lat = [float(r.latency_ms) for r in timed
                   if r.latency_ms is not None and not is_missing(r.latency_ms)]
            dev = [float(r.device_ms) for r in (timed or counted)
                   if r.device_ms is not None and not is_missing(r.device_ms)]
            rows.append({
                "scenario": scenario, "path": path,
                "steps": len(counted),
                "syncs_mean": _mean(syncs),
                "syncs_max": max(syncs) if syncs else _nan(),
                "syncs_total": sum(syncs) if counted else _nan(),
                "allowed_mean": _mean([float(r.allowed) for r in counted]),
                "sites": len(hidden_sites.get((scenario, path), ())) if counted else 0,
                "timed_steps": len(timed),
                "p50_ms": _percentile(lat, 50), "p90_ms": _percentile(lat, 90),
                "p99_ms": _percentile(lat, 99), "mean_ms": _mean(lat),
                "device_ms_mean": _mean(dev),
                "sync_wait_us_mean": _mean([float(r.sync_wait_us) for r in counted
                                            if r.sync_wait_us is not None]),
                "branches": branch_counts(counted or timed),
            })
    asked: Optional[str] = baseline or (result.header.get("options") or {}).get("baseline")
    base_path: Dict[str, str] = {}
    exec_run = is_exec(result)
    for r in rows:  # the baseline asked for where the scenario has it, else its first path
        sc_paths = [x["path"] for x in rows if x["scenario"] == r["scenario"]]
        base_path[r["scenario"]] = "" if exec_run else (
            asked if asked is not None and asked in sc_paths else sc_paths[0])
    for r in rows:
        r["baseline"] = base_path[r["scenario"]]
        _add_stats(result, r)
    return pd.DataFrame(rows, columns=list(SUMMARY_COLUMNS))


def is_exec(result: RunResult) -> bool:
    """Whether ``result`` is a ``syncguard exec`` run: its paths are different step functions
    of one program, not alternatives of one step, so no ratio is taken between them."""
    return any(s.pass_ == "exec" for s in result.steps)


def loop_paths(result: RunResult) -> List[str]:
    """The step names of an ``exec --loop`` run's loops (one step per call: per token)."""
    loops = (result.header.get("options") or {}).get("loops") or []
    return [str(s).partition(":")[2] for s in loops if isinstance(s, str)]


def baseline_label(summary_df: pd.DataFrame) -> str:
    """The ratio columns' header: the baseline path's name when every scenario has the same
    short one, else ``base``."""
    names = set(summary_df["baseline"]) if len(summary_df) else {"base"}
    name = str(next(iter(names))) if len(names) == 1 else "base"
    return name if len(name) <= 14 else "base"


def _timed_by_key(result: RunResult, scenario: str, path: str) -> Dict[Tuple[int, int], float]:
    return {(int(r.round or 0), r.step): float(r.latency_ms)
            for r in _records(result, scenario, path, "timed")
            if r.latency_ms is not None and not is_missing(r.latency_ms)}


def round_latency(result: RunResult, scenario: str, path_a: str, path_b: str
                  ) -> Tuple[List[List[float]], List[List[float]]]:
    """Per round, the timed non-warm-up latencies (ms) of two paths of one run over the steps
    both ran in that round: ``(rounds_a, rounds_b)`` for
    :func:`syncguard.results.stats.round_ratio`."""
    a = _timed_by_key(result, scenario, path_a)
    b = _timed_by_key(result, scenario, path_b)
    keys = sorted(set(a) & set(b))
    ra: Dict[int, List[float]] = {}
    rb: Dict[int, List[float]] = {}
    for k in keys:
        ra.setdefault(k[0], []).append(a[k])
        rb.setdefault(k[0], []).append(b[k])
    return [ra[i] for i in sorted(ra)], [rb[i] for i in sorted(ra)]


def _round_medians(result: RunResult, scenario: str, path: str) -> List[float]:
    by: Dict[int, List[float]] = {}
    for (rnd, _), v in _timed_by_key(result, scenario, path).items():
        by.setdefault(rnd, []).append(v)
    return [_percentile(by[k], 50) for k in sorted(by)]


def _add_stats(result: RunResult, r: Dict[str, Any]) -> None:
    """Confidence intervals, the paired ratio to the baseline path (``r["baseline"]``),
    outliers and modeled columns."""
    scenario, path, base_name = r["scenario"], r["path"], r["baseline"]
    timed = _records(result, scenario, path, "timed")
    lat = [float(x.latency_ms) for x in timed
           if x.latency_ms is not None and not is_missing(x.latency_ms)]
    m = stats.median_ci(lat)
    r.update(p50_lo_ms=m.lo, p50_hi_ms=m.hi, outliers=m.outliers if lat else _nan(),
             rounds=len({x.round for x in timed}) if timed else 0)
    ratio = stats.Ratio(_nan(), _nan(), _nan(), 0)
    if path == base_name:  # the baseline against itself: 1.00x by definition, no interval
        ratio = stats.Ratio(1.0 if lat else _nan(), _nan(), _nan(), len(lat))
    elif base_name and any(s.path == base_name and s.scenario == scenario
                           for s in result.steps):
        ratio = stats.round_ratio(*round_latency(result, scenario, base_name, path))
    r.update(ratio_vs_baseline=ratio.ratio, ratio_lo=ratio.lo, ratio_hi=ratio.hi, pairs=ratio.n,
             rounds_needed=_nan() if ratio.need is None else float(ratio.need))
    base = _percentile([float(x.latency_ms) for x in _records(result, scenario, base_name,
                        "timed") if x.latency_ms is not None and not is_missing(x.latency_ms)],
                       50)
    r["saved_per_token_us"] = ((base - r["p50_ms"]) * 1000.0 if ratio.differs else _nan())
    counted = _records(result, scenario, path, "counted")
    r["modeled_ms"] = _mean([float(x.modeled_ms) for x in counted if x.modeled_ms is not None])
    r["bubble_us"] = _mean([float(x.bubble_us) for x in counted if x.bubble_us is not None])
    tl = result.header.get("timeline")
    r["profile"] = str(tl.get("profile", "")) if isinstance(tl, dict) else ""
    r["modeled_sync_us"], r["modeled_idle_sync_us"] = _modeled_sync(result, scenario, path,
                                                                    len(counted))


def _modeled_sync(result: RunResult, scenario: str, path: str, n_steps: int
                  ) -> Tuple[float, float]:
    """Per step means of the hidden syncs' modeled cost and device idle (NaN unmodeled)."""
    counted = [x for x in _records(result, scenario, path, "counted")
               if x.sync_cost_us is not None]
    if not counted:
        return _nan(), _nan()
    return (_mean([float(x.sync_cost_us or 0.0) for x in counted]),
            _mean([float(x.sync_bubble_us or 0.0) for x in counted]))


def _first(records: List[StepRecord], pass_: str) -> Optional[StepRecord]:
    """The first of ``records`` of pass ``pass_`` (None when there is none)."""
    return next((r for r in records if r.pass_ == pass_), None)


def per_step(result: RunResult, scenario: str) -> pd.DataFrame:
    """Steps of one scenario side by side, one row per step index.

    Columns: ``step``, ``batch_size``, ``warmup`` (bool), then for each path (in
    :func:`ordered_paths` order) ``<path>.branch`` (its ``branch`` label, an exec loop's
    ``phase``; counted pass, else timed; "" when none),
    ``<path>.syncs`` (hidden syncs, counted pass; NaN if none) and ``<path>.latency_ms``
    (timed pass, ms, the median over its rounds, or the exec record's; NaN if none);
    ``batch_size`` NaN for exec records (not known). Last ``notable`` (bool):
    branches differ between paths at this step, or the step's pattern (branch and sync
    count of every path) differs from the most common pattern of non-warm-up steps (a batch
    that only shrinks is not notable). Warm-up steps are included.
    """
    import pandas as pd

    recs = [s for s in result.steps if s.scenario == scenario]
    paths = ordered_paths(s.path for s in recs)
    # built column by column from the records sorted by step (stable: file order within a
    # step), so a 100,000-step exec run makes no dict per step: per path, the first counted
    # (else exec) and timed (else exec) record of the step stands for it; its latency is the
    # median over the step's rounds
    recs.sort(key=operator.attrgetter("step"))
    cols: Dict[str, List[Any]] = {"step": [], "batch_size": [], "warmup": []}
    for p in paths:
        cols[f"{p}.branch"], cols[f"{p}.syncs"], cols[f"{p}.latency_ms"] = [], [], []
    nan = _nan()
    i, n = 0, len(recs)
    while i < n:
        step, j = recs[i].step, i
        while j < n and recs[j].step == step:
            j += 1
        group = recs[i:j]
        i = j
        batch: Any = nan
        warm = False
        for p in paths:
            mine = [s for s in group if s.path == p]
            c = _first(mine, "counted") or _first(mine, "exec")
            t = _first(mine, "timed") or _first(mine, "exec")
            any_rec = c or t
            if any_rec is not None:
                if batch is nan and any_rec.pass_ != "exec":  # exec: batch not known
                    batch = any_rec.batch_size
                warm = warm or bool(any_rec.warmup)
            cols[f"{p}.branch"].append("" if any_rec is None else (
                branch_label(any_rec) or str((any_rec.labels or {}).get("phase", ""))))
            cols[f"{p}.syncs"].append(c.syncs if c is not None else nan)
            lat = [float(s.latency_ms) for s in mine  # exec: one pass, timed under the guard
                   if s.pass_ in ("timed", "exec") and s.latency_ms is not None
                   and not is_missing(s.latency_ms)]
            cols[f"{p}.latency_ms"].append(_percentile(lat, 50))
        cols["step"].append(step)
        cols["batch_size"].append(batch)
        cols["warmup"].append(warm)
    steps = cols["step"]

    def pattern(i: int) -> Tuple[Any, ...]:
        out: List[Any] = []
        for p in paths:
            s = cols[f"{p}.syncs"][i]
            out += [cols[f"{p}.branch"][i], None if is_missing(s) else s]
        return tuple(out)

    common = Counter(pattern(i) for i in range(len(steps))
                     if not cols["warmup"][i]).most_common(1)
    mode = common[0][0] if common else None
    cols["notable"] = [
        len({cols[f"{p}.branch"][i] for p in paths if cols[f"{p}.branch"][i]}) > 1
        or (not cols["warmup"][i] and pattern(i) != mode) for i in range(len(steps))]
    order = ["step", "batch_size", "warmup"]
    for p in paths:
        order += [f"{p}.branch", f"{p}.syncs", f"{p}.latency_ms"]
    order.append("notable")
    return pd.DataFrame({k: cols[k] for k in order}, columns=order)


def elide(n_rows: int, notable: Sequence[bool], head: int = 5,
          tail: int = 5) -> List[Tuple[str, int]]:
    """Which rows of a long table to show: the first ``head``, the last ``tail`` and every
    notable row. Returns ``("row", index)`` and ``("gap", hidden_count)`` items in order."""
    keep = [i < head or i >= n_rows - tail or bool(notable[i]) for i in range(n_rows)]
    out: List[Tuple[str, int]] = []
    gap = 0
    for i, k in enumerate(keep):
        if k:
            if gap:
                out.append(("gap", gap))
                gap = 0
            out.append(("row", i))
        else:
            gap += 1
    if gap:
        out.append(("gap", gap))
    return out


def site_order(filename: Any, lineno: Any) -> Tuple[str, int]:
    """Sort key of a call site: file, then line as a number (``loop.py:6`` before
    ``loop.py:10``); a missing or malformed line sorts first."""
    try:
        line = int(lineno)
    except (TypeError, ValueError):
        line = -1
    return (str(filename), line)


def sites(result: RunResult, include_allowed: bool = True,
          max_parts: Optional[int] = None) -> pd.DataFrame:
    """Sync sites: events grouped by (scenario, path, site, function, api, op, kind, allowed).

    Warm-up events are left out. Hidden sites come first, each group sorted by scenario and
    path order, then by ``count`` descending. Columns in :data:`SITES_COLUMNS`; ``steps`` is
    cut to ``max_parts`` ranges (see :func:`step_ranges`).
    """
    import pandas as pd


    groups: Dict[Tuple[Any, ...], Dict[str, Any]] = {}
    trees: Dict[str, Any] = {}  # tree_id -> tree: a result file writes each tree once
    for e in result.iter_events():
        lin = e.get("lineage")
        if type(lin) is dict and "tree" in lin and type(lin.get("tree_id")) is str:
            trees.setdefault(lin["tree_id"], lin["tree"])
        if e.get("warmup"):
            continue
        allowed = bool(e.get("allowed"))
        if allowed and not include_allowed:
            continue
        key = (str(e.get("scenario")), str(e.get("path")),
               *group_key(e.get("filename"), e.get("lineno"), e.get("api"), e.get("op"),
                          e.get("kind")), allowed)
        g = groups.get(key)
        if g is None:
            g = groups[key] = {
                "count": 0, "steps": [], "reasons": [], "wait": 0.0, "waits": 0,
                "callers": Counter(), "lineages": [],
                "function": function_name(e.get("function") or "", e.get("stack"))}
        lin = e.get("lineage")
        if lin is not None and len(g["lineages"]) < 1000:  # enough to tell "the same value"
            g["lineages"].append(lin)
        g["callers"][caller_of(e.get("filename"), e.get("stack")) or ("", 0, "")] += 1
        # the step of a read, or the step begun last before one outside every step: one
        # int per read (a long run's site holds no set or dict per read)
        g["steps"].append(e.get("after_step") if e.get("path") == OUTSIDE_PATH
                          else e.get("step"))
        w = e.get("wait_us")
        if w is not None and not is_missing(w):
            g["wait"] += float(w)
            g["waits"] += 1
        cnt = e.get("count")
        g["count"] += int(cnt) if cnt is not None and not is_missing(cnt) else 1
        reason = e.get("reason")
        if reason and reason not in g["reasons"]:
            g["reasons"].append(str(reason))
    scen_idx = {s: i for i, s in enumerate(result.scenarios)}
    path_idx = {p: i for i, p in enumerate(ordered_paths(
        [s.path for s in result.steps] + [k[1] for k in groups]))}
    counted: Counter = Counter()
    for s in result.steps:
        if s.pass_ in _PASSES["counted"] and not s.warmup:
            counted[(s.scenario, s.path)] += 1
    longest: Counter = Counter()
    for (sc, _), n in counted.items():
        longest[sc] = max(longest[sc], n)
    rows: List[Dict[str, Any]] = []
    for key, g in groups.items():
        scenario, path, filename, lineno, api, op, kind, allowed = key
        function = g["function"]
        n = longest[scenario] if path == OUTSIDE_PATH else counted[(scenario, path)]
        seen = len(set(g["steps"]) - {None})
        caller = g["callers"].most_common(1)[0][0]
        hoist = site_verdict(g["lineages"])
        rows.append({
            "scenario": scenario, "path": path, "site": f"{filename}:{lineno}",
            "filename": filename, "lineno": lineno, "function": function, "api": api,
            "op": op, "kind": kind, "allowed": allowed, "reason": "; ".join(g["reasons"]),
            "count": g["count"], "steps": step_ranges(g["steps"], max_parts) if path != (
                OUTSIDE_PATH) else _after(g["steps"], max_parts),
            "wait_us_mean": g["wait"] / g["waits"] if g["waits"] else float("nan"),
            "caller_filename": caller[0], "caller_lineno": caller[1],
            "caller_function": caller[2],
            "per_step": grows_with_steps(seen, n),
            "rate": g["count"] / n if n else float("nan"),
            "hoist": str(hoist["verdict"]) if hoist else "",
            "lineage": verdict_text(hoist) if hoist else "",
            "lineage_tree": _tree_json(hoist, trees) if hoist else "",
        })
    modeled = _modeled_sites(result)
    for r in rows:
        st, bu = modeled.get((r["scenario"], r["path"], r["site"]), ([], []))
        r["modeled_stall_us"] = _mean(st)
        r["modeled_bubble_us"] = _mean(bu)
    rows.sort(key=lambda r: (r["allowed"], scen_idx.get(r["scenario"], len(scen_idx)),
                             path_idx.get(r["path"], 0), -r["count"],
                             *site_order(r["filename"], r["lineno"]), r["api"]))
    return pd.DataFrame(rows, columns=list(SITES_COLUMNS))


def _tree_json(hoist: Dict[str, Any], trees: Dict[str, Any]) -> str:
    """The ``lineage_tree`` of a site: its verdict's lineage as JSON, the tree looked up by
    ``tree_id`` when that event's line left it to an earlier one, checked and bounded as a
    report draws it (:func:`~syncguard.core.lineage_words.draw_tree`: a crafted result may
    hold anything)."""
    import json


    tree = hoist.get("tree")
    if tree is None and isinstance(hoist.get("tree_id"), str):
        tree = trees.get(hoist["tree_id"])
    d = {k: hoist.get(k) for k in ("roots", "ops", "uploads", "same")}
    if isinstance(tree, list) and tree:
        d["tree"] = draw_tree({}, tree)
    return json.dumps(d, separators=(",", ":"), default=str)


def _after(after: Any, max_parts: Optional[int]) -> str:
    """``after 0-4``: the steps after which syncs outside every step came."""
    text = step_ranges([a for a in after if a is not None], max_parts)
    return f"after {text}" if text else "before any"


def _modeled_sites(result: RunResult) -> Dict[Tuple[str, str, str], Tuple[List[float],
                                                                            List[float]]]:
    out: Dict[Tuple[str, str, str], Tuple[List[float], List[float]]] = {}
    for t in result.timelines:
        if t.get("warmup"):
            continue
        for m in t.get("syncs") or []:
            key = (str(t.get("scenario")), str(t.get("path")), str(m.get("site")))
            st, bu = out.setdefault(key, ([], []))
            st.append(float(m.get("stall_us") or 0.0))
            bu.append(float(m.get("bubble_us") or 0.0))
    return out


def merge_paths(sites_df: pd.DataFrame) -> pd.DataFrame:
    """:func:`sites` rows that differ only in ``path`` merged into one, ``path`` then listing
    them (``"flag, flag-recompute"``); order kept (first occurrence)."""
    import pandas as pd

    if not len(sites_df):
        return sites_df.copy()
    # Timing differs between paths by nature: it does not keep two sites apart.
    keys = [c for c in sites_df.columns if c not in ("path", "wait_us_mean", "modeled_stall_us",
                                                     "modeled_bubble_us", "rate")]
    merged: Dict[Tuple[Any, ...], Dict[str, Any]] = {}
    for r in sites_df.to_dict("records"):
        k = tuple(r[c] for c in keys)
        if k in merged:
            merged[k]["path"] += f", {r['path']}"
        else:
            merged[k] = dict(r)
    return pd.DataFrame(list(merged.values()), columns=list(sites_df.columns))


def _lat(result: RunResult, scenario: str, path: str) -> List[float]:
    return [float(r.latency_ms) for r in _records(result, scenario, path, "timed")
            if r.latency_ms is not None and not is_missing(r.latency_ms)]


def _compare_row(scenario: str, label: str, a: Optional[Dict[str, Any]],
                 b: Optional[Dict[str, Any]], ratio: Any, a_out: Any, b_out: Any,
                 extra: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    def g(d: Optional[Dict[str, Any]], k: str) -> Any:
        return _nan() if d is None else d.get(k, _nan())

    a_s, b_s = g(a, "syncs_mean"), g(b, "syncs_mean")
    a_ms, b_ms = g(a, "mean_ms"), g(b, "mean_ms")
    both_s = not is_missing(a_s) and not is_missing(b_s)
    both_ms = not is_missing(a_ms) and not is_missing(b_ms)
    syncs_moved = is_missing(a_s) != is_missing(b_s) or (
        both_s and abs(float(a_s) - float(b_s)) > 1e-9)
    a_p, b_p = g(a, "p50_ms"), g(b, "p50_ms")
    # the modeled latency is deterministic: any move on the same profile is a real change
    a_mod, b_mod = g(a, "modeled_ms"), g(b, "modeled_ms")
    modeled_moved = (not is_missing(a_mod) and not is_missing(b_mod)
                     and g(a, "profile") == g(b, "profile")
                     and abs(float(b_mod) - float(a_mod)) > 1e-9 * max(abs(float(a_mod)), 1.0))
    row = {
        "scenario": scenario, "path": label,
        "a_syncs_mean": a_s, "b_syncs_mean": b_s,
        "syncs_delta": b_s - a_s if both_s else _nan(),
        "a_syncs_total": g(a, "syncs_total"), "b_syncs_total": g(b, "syncs_total"),
        "a_mean_ms": a_ms, "b_mean_ms": b_ms,
        "latency_delta_ms": b_ms - a_ms if both_ms else _nan(),
        "a_p50_ms": a_p, "b_p50_ms": b_p,
        "latency_ratio": ratio.ratio, "ratio_lo": ratio.lo, "ratio_hi": ratio.hi,
        "latency_changed": bool(ratio.differs),
        "a_outliers": a_out, "b_outliers": b_out,
        "a_modeled_ms": a_mod, "b_modeled_ms": b_mod,
        "modeled_changed": modeled_moved,
        "a_ratio": _nan(), "b_ratio": _nan(), "host_ratio": _nan(), "host_lo": _nan(),
        "host_hi": _nan(), "host_changed": False, "machine": "",
        "changed": a is None or b is None or syncs_moved or bool(ratio.differs)
        or is_missing(a_ms) != is_missing(b_ms) or modeled_moved,
    }
    row.update(extra or {})
    return row


#: Family-wise confidence of the latency intervals of :func:`compare` (two runs): split over
#: the rows compared (Bonferroni), so identical code reads "not changed" in 95% of
#: comparisons however many rows they have.
COMPARE_CONFIDENCE = 0.95


def compare(a: RunResult, b: RunResult) -> pd.DataFrame:
    """Two runs side by side, one row per (scenario, path) present in either.

    Columns in :data:`COMPARE_COLUMNS` (``a_*`` from ``a``, ``b_*`` from ``b``). Two runs are
    two machine states, so only what does not depend on the machine decides ``changed``:
    hidden syncs (exact), the modeled latency (exact, same profile), and each path's ratio
    to its run's baseline path measured within each run (per-round log-ratios, Welch's t
    between the runs, family-wise :data:`COMPARE_CONFIDENCE` over the rows). Absolute host
    time (``host_*``) is compared only when both runs record the same machine
    (:func:`syncguard.results.machine.machine_differs`), and never marks a row ``changed``.
    """
    import pandas as pd


    sum_a, sum_b = summary(a), summary(b)
    sa = {(r["scenario"], r["path"]): r for r in sum_a.to_dict("records")}
    sb = {(r["scenario"], r["path"]): r for r in sum_b.to_dict("records")}
    scen = list(dict.fromkeys([k[0] for k in sa] + [k[0] for k in sb]))
    machine = machine_differs(a.header.get("machine"), b.header.get("machine"))
    keys = [(s, p) for s in scen for p in ordered_paths(
        [k[1] for k in sa if k[0] == s] + [k[1] for k in sb if k[0] == s])]
    conf = 1.0 - (1.0 - COMPARE_CONFIDENCE) / max(1, len(keys))
    rows = []
    for s, p in keys:
        ra, rb = sa.get((s, p)), sb.get((s, p))
        base = (ra or rb or {}).get("baseline") or ""
        if rb is not None and ra is not None and rb.get("baseline") != base:
            base = ""  # the runs took ratios against different paths: nothing to compare
        la, lb = _lat(a, s, p), _lat(b, s, p)
        if base and p != base:
            logs_a = stats.round_logs(*round_latency(a, s, base, p))
            logs_b = stats.round_logs(*round_latency(b, s, base, p))
            ratio = stats.ratio_change(logs_a, logs_b, conf)
        else:  # the baseline row (or an exec run): its ratio is 1 by definition
            ratio = stats.Ratio(_nan(), _nan(), _nan(), 0, conf)
        host = stats.Ratio(_nan(), _nan(), _nan(), 0)
        if machine is None:
            ma, mb = _round_medians(a, s, p), _round_medians(b, s, p)
            host = stats.ratio_change(
                [math.log(x) for x in ma if x > 0], [math.log(x) for x in mb if x > 0],
                conf, "Welch t over rounds of log(median)")
        extra = {"a_ratio": _nan() if ra is None or p == base else ra["ratio_vs_baseline"],
                 "b_ratio": _nan() if rb is None or p == base else rb["ratio_vs_baseline"],
                 "host_ratio": host.ratio, "host_lo": host.lo, "host_hi": host.hi,
                 "host_changed": bool(host.differs), "machine": machine or "same"}
        if not la and not lb:
            extra["machine"] = ""
        rows.append(_compare_row(s, p, ra, rb, ratio, stats.outlier_count(la),
                                 stats.outlier_count(lb), extra))
    return pd.DataFrame(rows, columns=list(COMPARE_COLUMNS))


def compare_paths(result: RunResult, path_a: str, path_b: str) -> pd.DataFrame:
    """Two paths of one run side by side, one row per scenario having either path.

    Same columns as :func:`compare`; ``a_*`` is ``path_a``, ``b_*`` is ``path_b`` and the
    ``path`` column reads ``"path_a vs path_b"``. Latency steps are paired by (round, step)
    of the interleaved timed pass, one log-ratio per round (Student t over rounds,
    :func:`syncguard.results.stats.round_ratio`).
    """
    import pandas as pd


    sm = {(r["scenario"], r["path"]): r for r in summary(result).to_dict("records")}
    rows = []
    for s in result.scenarios:
        a, b = sm.get((s, path_a)), sm.get((s, path_b))
        if a is None and b is None:
            continue
        ratio = stats.round_ratio(*round_latency(result, s, path_a, path_b))
        rows.append(_compare_row(s, f"{path_a} vs {path_b}", a, b, ratio,
                                 stats.outlier_count(_lat(result, s, path_a)),
                                 stats.outlier_count(_lat(result, s, path_b))))
    return pd.DataFrame(rows, columns=list(COMPARE_COLUMNS))
