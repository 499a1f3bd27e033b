"""Format-neutral tables shared by the Markdown and HTML renderers."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, List, Optional, Sequence

from . import analysis
from ._common import (
    fmt_int,
    fmt_ms,
    fmt_ratio,
    fmt_ratio_ci,
    fmt_syncs,
    fmt_us,
    short_site,
    step_label,
)
from .analysis import is_missing

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from ..results import RunResult


@dataclasses.dataclass(frozen=True)
class Cell:
    """One cell: ``text`` (plain, not escaped), shown as code when ``code``; ``mark`` is
    ``"best"``, ``"worst"``, ``"note"`` or ``""``."""

    text: str
    code: bool = False
    mark: str = ""


@dataclasses.dataclass
class Tbl:
    """A table: ``align`` per column is ``"l"`` or ``"r"``; a row of ``None`` is an ellipsis
    row whose text is ``gap_text[i]``."""

    headers: List[str]
    align: List[str]
    rows: List[Optional[List[Cell]]]
    gap_text: List[str] = dataclasses.field(default_factory=list)


def _marks(values: Sequence[Any]) -> List[str]:
    nums = [float(v) for v in values if not is_missing(v)]
    if len(nums) < 2 or min(nums) == max(nums):
        return [""] * len(values)
    lo, hi = min(nums), max(nums)
    return ["" if is_missing(v) else "best" if float(v) == lo else "worst" if float(v) == hi
            else "" for v in values]


_SUMMARY = [
    ("hidden syncs/step", "syncs_mean", fmt_syncs, True),
    ("max", "syncs_max", fmt_int, True),
    ("allowed/step", "allowed_mean", fmt_syncs, False),
    ("p50 ms", "p50_ms", fmt_ms, True),
    ("p50 95% CI", "p50_lo_ms", fmt_ms, False),
    ("p90 ms", "p90_ms", fmt_ms, True),
    ("p99 ms", "p99_ms", fmt_ms, True),
    ("outliers", "outliers", fmt_int, False),
    ("ratio vs legacy (95% CI)", "ratio_vs_legacy", fmt_ratio, True),
    ("saved us/token", "saved_per_token_us", fmt_us, False),
]
_MODELED = [
    ("modeled ms", "modeled_ms", fmt_ms, True),
    ("bubble us", "bubble_us", fmt_int, True),
]


def _summary_text(r: Any, col: str, fmt: Any) -> str:
    if col == "ratio_vs_legacy":
        return fmt_ratio_ci(r[col], r.get("ratio_lo"), r.get("ratio_hi"))
    if col == "p50_lo_ms":
        return "-" if is_missing(r[col]) else f"{fmt_ms(r[col])}-{fmt_ms(r['p50_hi_ms'])}"
    return str(fmt(r[col]))


def summary_tbl(sm: pd.DataFrame) -> Tbl:
    cols = list(_SUMMARY)
    profiles = [p for p in sm.get("profile", []) if p] if len(sm) else []
    if profiles and sm["modeled_ms"].notna().any():
        cols += [(f"{h} ({profiles[0]})", c, f, k) for h, c, f, k in _MODELED]
    headers = ["scenario", "path"] + [h for h, *_ in cols] + ["branches"]
    has_dev = bool(len(sm)) and sm["device_ms_mean"].notna().any()
    if has_dev:
        headers.insert(len(cols) + 2, "device ms")
    rows: List[Optional[List[Cell]]] = []
    for scenario in dict.fromkeys(sm["scenario"]):
        recs = sm[sm["scenario"] == scenario].to_dict("records")
        marks = {col: _marks([r[col] for r in recs]) if colour else [""] * len(recs)
                 for _, col, _, colour in cols}
        for i, r in enumerate(recs):
            row = [Cell(str(scenario)), Cell(str(r["path"]))]
            row += [Cell(_summary_text(r, col, fmt), mark=marks[col][i])
                    for _, col, fmt, _ in cols]
            if has_dev:
                row.append(Cell(fmt_ms(r["device_ms_mean"])))
            row.append(Cell(str(r["branches"])))
            rows.append(row)
    align = ["l", "l"] + ["r"] * (len(headers) - 3) + ["l"]
    return Tbl(headers, align, rows)


def sites_tbl(st: pd.DataFrame, allowed: bool, base: Optional[str] = None) -> Tbl:
    sub = st[st["allowed"].astype(bool) == allowed] if len(st) else st
    headers = ["scenario", "path", "site", "function", "API", "op", "kind", "count", "steps"]
    if allowed:
        headers.append("reason")
    modeled = bool(len(sub)) and "modeled_stall_us" in sub and sub["modeled_stall_us"].notna().any()
    if modeled:
        headers += ["modeled stall us", "modeled device idle us"]
    rows: List[Optional[List[Cell]]] = []
    for r in sub.to_dict("records"):
        row = [Cell(r["scenario"]), Cell(r["path"]), Cell(short_site(r["site"], base), True),
               Cell(r["function"], True), Cell(r["api"], True),
               Cell(r["op"] or "-", bool(r["op"])),
               Cell(r["kind"]), Cell(str(r["count"]), mark="" if allowed else "worst"),
               Cell(r["steps"])]
        if allowed:
            row.append(Cell(r["reason"]))
        if modeled:
            row += [Cell(fmt_int(r["modeled_stall_us"])), Cell(fmt_int(r["modeled_bubble_us"]))]
        rows.append(row)
    align = ["l"] * 7 + ["r", "l"] + (["l"] if allowed else []) + (["r", "r"] if modeled else [])
    return Tbl(headers, align, rows)


def per_step_tbl(result: RunResult, scenario: str, max_steps: int = 200, head: int = 10,
                 tail: int = 10) -> Tbl:
    """All steps when there are at most ``max_steps``, else ``head``, ``tail`` and the
    notable ones (see :func:`analysis.per_step`)."""
    df = analysis.per_step(result, scenario)
    paths = analysis.ordered_paths(s.path for s in result.steps if s.scenario == scenario)
    headers = ["step", "batch"]
    for p in paths:
        headers += [f"{p} branch", f"{p} syncs", f"{p} ms"]
    recs = df.to_dict("records")
    if len(recs) <= max_steps:
        plan = [("row", i) for i in range(len(recs))]
    else:
        plan = analysis.elide(len(recs), [r["notable"] for r in recs], head, tail)
    rows: List[Optional[List[Cell]]] = []
    gaps: List[str] = []
    for kind, val in plan:
        if kind == "gap":
            rows.append(None)
            gaps.append(f"... {val} steps hidden")
            continue
        r = recs[val]
        mark = "note" if r["notable"] else ""
        row = [Cell(step_label(r["step"], r["warmup"]), mark=mark),
               Cell(fmt_int(r["batch_size"]))]
        for p in paths:
            row += [Cell(r[f"{p}.branch"] or "-", mark=mark),
                    Cell(fmt_int(r[f"{p}.syncs"]), mark=mark),
                    Cell(fmt_ms(r[f"{p}.latency_ms"]))]
        rows.append(row)
    return Tbl(headers, ["r", "r"] + ["l", "r", "r"] * len(paths), rows, gaps)


def compare_tbl(df: pd.DataFrame, label_a: str = "A", label_b: str = "B") -> Tbl:
    headers = ["scenario", "path", f"syncs/step {label_a}", f"syncs/step {label_b}",
               "delta", f"p50 ms {label_a}", f"p50 ms {label_b}", "ratio (95% CI)",
               f"outliers {label_a}/{label_b}", "changed"]
    modeled = bool(len(df)) and bool(df["a_modeled_ms"].notna().any()
                                      or df["b_modeled_ms"].notna().any())
    if modeled:
        headers[-1:-1] = [f"modeled ms {label_a}", f"modeled ms {label_b}"]
    rows: List[Optional[List[Cell]]] = []
    for r in df.to_dict("records"):
        # each cell marked on its own: fewer syncs is better, more is worse; the latency
        # ratio only when its interval excludes 1.0
        d = r["syncs_delta"]
        sync_mark = "" if is_missing(d) or d == 0 else ("worst" if d > 0 else "best")
        lat_mark = ""
        if r["latency_changed"]:
            lat_mark = "worst" if r["latency_ratio"] > 1 else "best"
        row_mark = "worst" if "worst" in (sync_mark, lat_mark) else (
            "best" if r["changed"] else "")
        rows.append([Cell(str(r["scenario"])), Cell(str(r["path"])),
                     Cell(fmt_syncs(r["a_syncs_mean"])), Cell(fmt_syncs(r["b_syncs_mean"])),
                     Cell(fmt_syncs(r["syncs_delta"]), mark=sync_mark),
                     Cell(fmt_ms(r["a_p50_ms"])), Cell(fmt_ms(r["b_p50_ms"])),
                     Cell(fmt_ratio_ci(r["latency_ratio"], r["ratio_lo"], r["ratio_hi"]),
                          mark=lat_mark),
                     Cell(f"{fmt_int(r['a_outliers'])}/{fmt_int(r['b_outliers'])}"),
                     *([Cell(fmt_ms(r["a_modeled_ms"])),
                        Cell(fmt_ms(r["b_modeled_ms"]),
                             mark="note" if r["modeled_changed"] else "")] if modeled else []),
                     Cell("changed" if r["changed"] else "", mark=row_mark)])
    return Tbl(headers, ["l", "l"] + ["r"] * (len(headers) - 3) + ["l"], rows)
