"""The table model every renderer draws: terminal (rich), Markdown, HTML and CSV.

A :class:`Table` is columns plus sections of rows; a :class:`Cell` holds its text, the value
behind it and a semantic :data:`STYLES` name (``best``, ``worst``, ``improved``...). Builders
here (:func:`summary_tbl`, :func:`sites_tbl`, :func:`per_step_tbl`, :func:`compare_tbl`) make
every decision about what is good or bad once; renderers only map a style to their look
(:data:`STYLE_LEGEND` says what each means), so two formats cannot disagree about a cell.

To add a column: append a :class:`Column` and the matching :class:`Cell` in the builder; every
renderer picks it up.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

from ..core.sites import frame_text
from ..results import analysis
from ..results.analysis import is_missing
from ..results.stats import margin_text
from ._common import (
    fmt_int,
    fmt_ms,
    fmt_ratio,
    fmt_ratio_ci,
    fmt_syncs,
    fmt_us,
    row_ratio,
    short_site,
    step_label,
)

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from ..results.format import RunResult

#: Semantic cell styles -> what they mean (shown in every report's legend when used).
STYLE_LEGEND: Dict[str, str] = {
    "best": "best (lowest) value of the column within its scenario",
    "worst": "worst (highest) value of the column within its scenario; hidden-sync counts",
    "improved": "fewer hidden syncs, or faster beyond the 5% margin",
    "regressed": "more hidden syncs, or slower beyond the 5% margin",
    "changed": "changed without a direction (a row on one side only)",
    "note": "notable step: branches differ between paths, or the step differs from the usual",
    "dim": "warm-up step (not counted)",
}
STYLES: Tuple[str, ...] = ("",) + tuple(STYLE_LEGEND)
#: Semantic cell styles -> their look: every format draws the styles of one look alike, and
#: maps only the looks (``good``, ``bad``, ``changed``, ``note``, ``dim``) to its own colours,
#: bold or background; a new style joins a look here.
LOOKS: Dict[str, str] = {
    "best": "good", "worst": "bad", "improved": "good", "regressed": "bad",
    "changed": "changed", "note": "note", "dim": "dim",
}
#: styles that mean "bad" and "good": renderers draw each group alike
BAD = tuple(s for s, look in LOOKS.items() if look == "bad")
GOOD = tuple(s for s, look in LOOKS.items() if look == "good")


@dataclasses.dataclass(frozen=True)
class Cell:
    """One cell: ``text`` (plain, not escaped), shown as code when ``code``; ``style`` one of
    :data:`STYLES`; ``value`` the number behind the text (CSV writes it, NaN as an empty
    field; None: the cell has only its text)."""

    text: str
    code: bool = False
    style: str = ""
    value: Any = None


@dataclasses.dataclass(frozen=True)
class Column:
    """A column: ``header`` (Markdown, HTML, CSV), ``short`` (the terminal's, may hold a
    newline; default ``header``), ``align`` ``"l"``/``"r"``. Terminal-only layout hints:
    ``under`` names a column whose cell this one is printed under (dim); ``group`` shows the
    cell on the first row of a section only."""

    key: str
    header: str
    align: str = "l"
    short: Optional[str] = None
    under: Optional[str] = None
    group: bool = False


@dataclasses.dataclass(frozen=True)
class Gap:
    """An ellipsis row standing for ``hidden`` rows; ``text`` says so."""

    text: str
    hidden: int = 0


Row = Union[List[Cell], Gap]


@dataclasses.dataclass
class Table:
    """``columns`` and ``sections`` of rows (each a list of cells in column order, or a
    :class:`Gap`); ``title`` and a ``footer`` line (e.g. "2 of 4 rows changed")."""

    title: str
    columns: List[Column]
    sections: List[List[Row]]
    footer: str = ""
    footer_style: str = ""

    @property
    def headers(self) -> List[str]:
        return [c.header for c in self.columns]

    @property
    def align(self) -> List[str]:
        return [c.align for c in self.columns]

    @property
    def rows(self) -> List[Optional[List[Cell]]]:
        """Every row in order; a gap is None (see :attr:`gap_text`)."""
        return [None if isinstance(r, Gap) else r for sec in self.sections for r in sec]

    @property
    def gap_text(self) -> List[str]:
        return [r.text for sec in self.sections for r in sec if isinstance(r, Gap)]

    def styles_used(self) -> List[str]:
        used = {c.style for sec in self.sections for r in sec if not isinstance(r, Gap)
                for c in r if c.style}
        return [s for s in STYLE_LEGEND if s in used]


def _best_worst(values: Sequence[Any]) -> List[str]:
    """``best`` at the lowest and ``worst`` at the highest value, when two values differ."""
    nums = [float(v) for v in values if not is_missing(v)]
    if len(nums) < 2 or min(nums) == max(nums):
        return [""] * len(values)
    lo, hi = min(nums), max(nums)
    return ["" if is_missing(v) else "best" if float(v) == lo else "worst" if float(v) == hi
            else "" for v in values]


def fmt_delta(x: Any) -> str:
    """A signed change in syncs per step: ``+1.00``, ``-0.50``; ``0`` for none."""
    if is_missing(x):
        return "-"
    return "0" if float(x) == 0.0 else f"{float(x):+.2f}"


def _num(x: Any) -> Any:
    """The value of a numeric cell: NaN when missing (CSV writes an empty field)."""
    return float("nan") if is_missing(x) else x


# (key, header, terminal header, formatter, coloured best/worst)
_SUMMARY: List[Tuple[str, str, str, Callable[[Any], str], bool]] = [
    ("syncs_mean", "hidden syncs/step", "syncs\n/step", fmt_syncs, True),
    ("syncs_max", "max", "syncs\nmax", fmt_int, True),
    ("allowed_mean", "allowed/step", "allowed\n/step", fmt_syncs, False),
    ("p50_ms", "p50 ms", "p50\nms", fmt_ms, True),
    ("p50_lo_ms", "p50 95% CI", "p50\n95% CI", fmt_ms, False),
    ("p90_ms", "p90 ms", "p90\nms", fmt_ms, True),
    ("p99_ms", "p99 ms", "p99\nms", fmt_ms, True),
    ("outliers", "outliers", "out-\nliers", fmt_int, False),
    ("ratio_vs_baseline", "ratio vs {base}", "ratio\n/{base}", fmt_ratio, True),
    ("ratio_lo", "ratio 95% CI", "ratio\n95% CI", fmt_ratio, False),
    ("saved_per_token_us", "saved us/token", "saved\nus/tok", fmt_us, False),
]
_MODELED: List[Tuple[str, str, str, Callable[[Any], str], bool]] = [
    ("modeled_ms", "modeled ms", "modeled\nms", fmt_ms, True),
    ("bubble_us", "bubble us", "bubble\nus", fmt_int, True),
]


_LATENCY = frozenset({"p50_ms", "p90_ms", "p99_ms", "ratio_vs_baseline"})


def _summary_text(r: Any, col: str, fmt: Any) -> str:
    if col == "ratio_lo":
        lo, hi = r.get("ratio_lo"), r.get("ratio_hi")
        return "-" if is_missing(lo) or is_missing(hi) else f"{lo:.2f}-{hi:.2f}x"
    if col == "p50_lo_ms":
        return "-" if is_missing(r[col]) else f"{fmt_ms(r[col])}-{fmt_ms(r['p50_hi_ms'])}"
    return str(fmt(r[col]))


def summary_tbl(sm: pd.DataFrame, *, branches: bool = True) -> Table:
    """One row per (scenario, path) of :func:`analysis.summary`, one section per scenario;
    the best and worst value of each coloured column within a scenario are marked. The
    modeled columns (named with their device profile) appear when the run was modeled."""
    base = analysis.baseline_label(sm)  # the ratio's baseline: the first path unless chosen
    spec = list(_SUMMARY)
    if len(sm) and not any(sm["baseline"]):  # exec: step names are not alternatives
        spec = [c for c in spec if c[0] not in ("ratio_vs_baseline", "ratio_lo",
                                                "saved_per_token_us")]
    profiles = [p for p in sm.get("profile", []) if p] if len(sm) else []
    if profiles and sm["modeled_ms"].notna().any():
        spec += [(k, f"{h} ({profiles[0]})", f"{short}\n({profiles[0]})", f, c)
                 for k, h, short, f, c in _MODELED]
    cols = [Column("scenario", "scenario", group=True), Column("path", "path")]
    # the intervals sit under their value in the terminal (their own columns elsewhere)
    cols += [Column(k, h.replace("{base}", base), "r", short.replace("{base}", base),
                    under={"p50_lo_ms": "p50_ms", "ratio_lo": "ratio_vs_baseline"}.get(k))
             for k, h, short, _, _ in spec]
    if branches and len(sm) and not any(sm["branches"]):  # no subject reports a branch
        branches = False
    has_dev = bool(len(sm)) and sm["device_ms_mean"].notna().any()
    if has_dev:
        cols.append(Column("device_ms_mean", "device ms", "r", "device\nms"))
    if branches:
        cols.append(Column("branches", "branches"))
    sections: List[List[Row]] = []
    for scenario in dict.fromkeys(sm["scenario"]):
        recs = sm[sm["scenario"] == scenario].to_dict("records")
        # host latency is coloured only where a ratio is measurable (its interval, as
        # printed, lies wholly beyond the margin: Ratio.differs); counts and the modeled
        # values are exact
        measurable = any(row_ratio(r).differs for r in recs)
        marks = {k: _best_worst([r[k] for r in recs])
                 if colour and (measurable or k not in _LATENCY) else [""] * len(recs)
                 for k, _, _, _, colour in spec}
        rows: List[Row] = []
        for i, r in enumerate(recs):
            row = [Cell(str(scenario)), Cell(str(r["path"]))]
            row += [Cell(_summary_text(r, k, fmt), style=marks[k][i], value=_num(r[k]))
                    for k, _, _, fmt, _ in spec]
            if has_dev:
                row.append(Cell(fmt_ms(r["device_ms_mean"]), value=_num(r["device_ms_mean"])))
            if branches:
                row.append(Cell(str(r["branches"])))
            rows.append(row)
        sections.append(rows)
    return Table("Summary", cols, sections)


def sites_tbl(st: pd.DataFrame, allowed: bool, base: Optional[str] = None,
              top: Optional[int] = None) -> Table:
    """Hidden (or allowed) sync sites of :func:`analysis.sites` (through
    :func:`analysis.merge_paths`); hidden counts are marked ``worst``. With ``top``, only the
    ``top`` sites with the most syncs, and a footer counting the rest."""
    sub = st[st["allowed"].astype(bool) == allowed] if len(st) else st
    footer = ""
    if top is not None and len(sub) > top:
        rest = sub.sort_values("count", ascending=False, kind="stable")
        left = rest.iloc[top:]
        sub = rest.iloc[:top]
        footer = (f"... and {len(left)} more {'allowed' if allowed else 'hidden'} sync sites "
                  f"({int(left['count'].sum())} syncs), not shown: every site is in "
                  f"report.md, report.html and sites.csv (totals)")
    cols = [Column("scenario", "scenario", short="scenario\npath"),
            Column("path", "path", under="scenario"),
            Column("site", "site", short="site\nfunction"),
            Column("function", "function", under="site"),
            Column("api", "API", short="API\nop, kind"),
            Column("op", "op", under="api"),
            Column("kind", "kind", under="api"),
            Column("count", "count", "r"),
            Column("steps", "steps")]
    if allowed:
        cols.append(Column("reason", "reason", under="api"))
    callers = bool(len(sub)) and "caller_filename" in sub and any(sub["caller_filename"])
    if callers:  # a site in a helper: the code that called it
        cols.append(Column("caller", "called from", under="site"))
    per = bool(len(sub)) and "per_step" in sub and not allowed
    if per:
        cols.append(Column("per", "per step", under="count"))
    modeled = bool(len(sub)) and "modeled_stall_us" in sub and bool(
        sub["modeled_stall_us"].notna().any())
    if modeled:
        # per read, not per step: the host waits for the device work queued before the read
        # (work the step does anyway); a sync's cost per step is the verdict's modeled cost
        cols += [Column("modeled_stall_us", "modeled host wait us/read", "r",
                        "modeled\nwait\nus/read"),
                 Column("modeled_bubble_us", "modeled device idle us/read", "r",
                        "modeled\nidle\nus/read")]
    rows: List[Row] = []
    for r in sub.to_dict("records"):
        row = [Cell(str(r["scenario"])), Cell(str(r["path"])),
               Cell(short_site(r["site"], base), True), Cell(str(r["function"]), True),
               Cell(str(r["api"]), True), Cell(r["op"] or "-", bool(r["op"])),
               Cell(str(r["kind"])),
               Cell(str(r["count"]), style="" if allowed else "worst", value=int(r["count"])),
               Cell(str(r["steps"]))]
        if allowed:
            row.append(Cell(str(r["reason"])))
        if callers:
            row.append(Cell(caller_phrase(r, base), True))
        if per:
            row.append(Cell(per_phrase(r)))
        if modeled:
            row += [Cell(fmt_int(r["modeled_stall_us"]), value=_num(r["modeled_stall_us"])),
                    Cell(fmt_int(r["modeled_bubble_us"]), value=_num(r["modeled_bubble_us"]))]
        rows.append(row)
    title = "Allowed syncs" if allowed else "Hidden sync sites"
    return Table(title, cols, [[row] for row in rows], footer)


def caller_phrase(r: Dict[str, Any], base: Optional[str] = None) -> str:
    """``called from generate.py:25 in decode_loop`` for a :func:`analysis.sites` row whose
    site is in a helper; ``""`` otherwise."""
    if not r.get("caller_filename"):
        return ""
    return "called from " + frame_text(r["caller_filename"], r["caller_lineno"],
                                       r["caller_function"], base)


def per_phrase(r: Dict[str, Any]) -> str:
    """``1.00/step`` for a site that syncs in most steps, ``once`` for the others."""
    if not r.get("per_step") or is_missing(r.get("rate")):
        return "once"
    return f"{float(r['rate']):.2f}/step"


def _plain(v: Any) -> Any:
    """A numpy scalar as the Python value it holds (anything else as it is)."""
    return v.item() if hasattr(v, "item") else v


def per_step_tbl(result: RunResult, scenario: str, max_steps: int = 200, head: int = 10,
                 tail: int = 10) -> Table:
    """Steps of one scenario, paths side by side: all of them when there are at most
    ``max_steps``, else ``head``, ``tail`` and the notable ones (see :func:`analysis.per_step`).
    Notable steps are marked ``note``, warm-up steps ``dim``."""
    df = analysis.per_step(result, scenario)
    paths = analysis.ordered_paths(s.path for s in result.steps if s.scenario == scenario)
    n = len(df)

    def record(i: int) -> Dict[str, Any]:
        # only the rows shown become Python values (a long run's steps stay columns)
        return {k: _plain(df[k].iat[i]) for k in df.columns}

    # columns that never apply are left out (exec: no batch size); a path's branch column
    # where its subject reports a branch label (an exec loop: a phase)
    batch = not analysis.is_exec(result) or bool(df["batch_size"].notna().any())
    branch = {p: bool((df[f"{p}.branch"] != "").any()) for p in paths}
    cols = [Column("step", "step", "r")] + ([Column("batch", "batch", "r")] if batch else [])
    for p in paths:
        name = "phase" if analysis.is_exec(result) else "branch"
        cols += [Column(f"{p}.branch", f"{p} {name}", short=f"{p}\n{name}")] if branch[p] else []
        cols += [Column(f"{p}.syncs", f"{p} syncs", "r", f"{p}\nsyncs" if not branch[p]
                        else "syncs"),
                 Column(f"{p}.latency_ms", f"{p} ms", "r", "ms")]
    if n <= max_steps:
        plan = [("row", i) for i in range(n)]
    else:
        plan = analysis.elide(n, df["notable"].tolist(), head, tail)
    rows: List[Row] = []
    for kind, val in plan:
        if kind == "gap":
            rows.append(Gap(f"... {val} steps hidden", val))
            continue
        r = record(val)
        mark = "dim" if r["warmup"] else "note" if r["notable"] else ""
        row = [Cell(step_label(r["step"], r["warmup"]), style=mark, value=int(r["step"]))]
        if batch:
            row.append(Cell(fmt_int(r["batch_size"]), style=mark if mark == "dim" else "",
                            value=_num(r["batch_size"])))
        for p in paths:
            if branch[p]:
                row.append(Cell(r[f"{p}.branch"] or "-", style=mark))
            row += [Cell(fmt_int(r[f"{p}.syncs"]), style=mark, value=_num(r[f"{p}.syncs"])),
                    Cell(fmt_ms(r[f"{p}.latency_ms"]), style=mark if mark == "dim" else "",
                         value=_num(r[f"{p}.latency_ms"]))]
        rows.append(row)
    return Table(f"Per step: {scenario}", cols, [rows])


def compare_styles(r: Dict[str, Any]) -> Tuple[str, str, str]:
    """Styles of a compare row's syncs delta, latency ratio and change cells: fewer syncs is
    ``improved``, more ``regressed``; the ratio only when its 95% interval lies wholly beyond
    the margin (``latency_changed``, :attr:`syncguard.results.stats.Ratio.differs`); the row is
    ``regressed`` when either is, else ``improved`` when either is, else ``changed`` when it
    changed at all (a modeled latency that moved)."""
    d = r["syncs_delta"]
    sync = "" if is_missing(d) or d == 0 else ("regressed" if d > 0 else "improved")
    ratio = r["latency_ratio"]
    lat = ""
    if bool(r.get("latency_changed")) and not is_missing(ratio):
        lat = "regressed" if ratio > 1 else "improved"
    if "regressed" in (sync, lat):
        row = "regressed"
    elif "improved" in (sync, lat):
        row = "improved"
    else:
        row = "changed" if r["changed"] else ""
    return sync, lat, row


_CHANGE_TEXT = {"regressed": "worse", "improved": "better", "changed": "changed", "": ""}


def _host_cell(r: Dict[str, Any]) -> Cell:
    """Absolute host time across two runs: a ratio only on the same machine (coloured only
    when its interval lies wholly beyond the margin, ``host_changed``), else why not."""
    why = str(r.get("machine") or "")
    if why and why != "same":
        return Cell("machine differs" if why.startswith("machine differs") else
                    "machine not recorded")
    x: Any = r.get("host_ratio")
    if is_missing(x):
        return Cell("-")
    style = ""
    if r.get("host_changed"):
        style = "regressed" if float(x) > 1 else "improved"
    return Cell(fmt_ratio_ci(x, r.get("host_lo"), r.get("host_hi")), style=style,
                value=_num(x))


def compare_tbl(df: pd.DataFrame, label_a: str = "A", label_b: str = "B",
                title: Optional[str] = None) -> Table:
    """Rows of :func:`analysis.compare` / :func:`analysis.compare_paths`, styled by
    :func:`compare_styles`; the change column says ``worse``, ``better`` or ``changed`` in
    words too, so no reader depends on colour. Modeled latencies appear when either side has
    them (a moved one is a ``note``: it is deterministic)."""
    cols = [Column("scenario", "scenario"), Column("path", "path"),
            Column("a_syncs_mean", f"syncs/step {label_a}", "r", f"syncs/step\n{label_a}"),
            Column("b_syncs_mean", f"syncs/step {label_b}", "r", f"syncs/step\n{label_b}"),
            Column("syncs_delta", "delta", "r", "syncs\ndelta"),
            Column("a_p50_ms", f"p50 ms {label_a}", "r", f"p50 ms\n{label_a}"),
            Column("b_p50_ms", f"p50 ms {label_b}", "r", f"p50 ms\n{label_b}"),
            Column("latency_ratio", "ratio (95% CI)", "r", "latency ratio\n(95% CI)"),
            Column("outliers", f"outliers {label_a}/{label_b}", "r",
                   f"outliers\n{label_a}/{label_b}")]
    runs = "machine" in df and any(isinstance(m, str) and m for m in df["machine"])
    if runs:  # two runs: the ratio column is the path/baseline ratio's move between them
        cols[7] = Column("latency_ratio", "ratio to base, moved (CI)", "r",
                         "ratio to base\nmoved (CI)")
        cols.append(Column("host", f"host time {label_b}/{label_a}", "r",
                           f"host time\n{label_b}/{label_a}"))
    modeled = bool(len(df)) and bool(df["a_modeled_ms"].notna().any()
                                      or df["b_modeled_ms"].notna().any())
    if modeled:
        cols += [Column("a_modeled_ms", f"modeled ms {label_a}", "r",
                        f"modeled ms\n{label_a}"),
                 Column("b_modeled_ms", f"modeled ms {label_b}", "r",
                        f"modeled ms\n{label_b}")]
    cols.append(Column("change", "change"))
    rows: List[Row] = []
    for r in df.to_dict("records"):
        sync, lat, row = compare_styles(r)
        cells = [Cell(str(r["scenario"])), Cell(str(r["path"])),
                 Cell(fmt_syncs(r["a_syncs_mean"]), value=_num(r["a_syncs_mean"])),
                 Cell(fmt_syncs(r["b_syncs_mean"]), value=_num(r["b_syncs_mean"])),
                 Cell(fmt_delta(r["syncs_delta"]), style=sync, value=_num(r["syncs_delta"])),
                 Cell(fmt_ms(r["a_p50_ms"]), value=_num(r["a_p50_ms"])),
                 Cell(fmt_ms(r["b_p50_ms"]), value=_num(r["b_p50_ms"])),
                 Cell(fmt_ratio_ci(r["latency_ratio"], r["ratio_lo"], r["ratio_hi"]),
                      style=lat, value=_num(r["latency_ratio"])),
                 Cell(f"{fmt_int(r['a_outliers'])}/{fmt_int(r['b_outliers'])}")]
        if runs:
            cells.append(_host_cell(r))
        if modeled:
            cells += [Cell(fmt_ms(r["a_modeled_ms"]), value=_num(r["a_modeled_ms"])),
                      Cell(fmt_ms(r["b_modeled_ms"]),
                           style="note" if r["modeled_changed"] else "",
                           value=_num(r["b_modeled_ms"]))]
        cells.append(Cell(_CHANGE_TEXT[row], style=row))
        rows.append(cells)

    n = int(df["changed"].sum()) if len(df) else 0
    margin = margin_text()
    if runs:
        footer = (f"{n} of {len(df)} rows changed (hidden syncs differ, a path's ratio to its "
                  f"run's baseline path moved by more than {margin}, its interval wholly "
                  f"beyond, or the modeled latency moved; intervals over rounds, family-wise "
                  f"95%); host time is compared only on the same machine and never marks a "
                  f"row changed")
    else:
        footer = (f"{n} of {len(df)} rows changed (hidden syncs differ, the latency ratio's "
                  f"95% interval over rounds lies wholly beyond {margin} of 1.0, or the "
                  f"modeled latency moved; ratio = {label_b} / {label_a}, medians)")
    return Table(title or f"Compare: {label_a} -> {label_b}", cols, [rows], footer,
                 "regressed" if any(compare_styles(r)[2] == "regressed"
                                    for r in df.to_dict("records")) else "")
