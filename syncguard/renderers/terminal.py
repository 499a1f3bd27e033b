"""Terminal report with rich: header, summary, per-step and sites tables, legend.

:func:`print_report` prints to a given :class:`rich.console.Console`; :func:`render` returns
the report as text. Best values of a column within a scenario are green, worst red (as
pytest-benchmark does); data from the result is never read as rich markup.
"""

from __future__ import annotations

import io
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence

from . import analysis
from ._common import (
    LEGEND,
    fmt_int,
    fmt_ms,
    fmt_ratio,
    fmt_ratio_ci,
    fmt_syncs,
    fmt_us,
    header_line,
    note_texts,
    short_site,
    step_label,
    timed_on_hardware,
    verdicts,
)
from .analysis import is_missing

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    from ..results import RunResult

BEST = "bold green"
WORST = "bold red"


def _t(value: Any, style: str = "") -> Text:
    from rich.text import Text

    return Text(str(value), style=style)


def _table(title: str, **kw: Any) -> Table:
    from rich import box
    from rich.table import Table

    return Table(title=_t(title, "bold"), title_justify="left", box=box.SIMPLE_HEAD,
                 pad_edge=False, collapse_padding=True, **kw)


def _styles(values: Sequence[Any]) -> List[str]:
    """Best (lowest) green and worst (highest) red, when at least two values differ."""
    nums = [float(v) for v in values if not is_missing(v)]
    if len(nums) < 2 or min(nums) == max(nums):
        return [""] * len(values)
    lo, hi = min(nums), max(nums)
    out = []
    for v in values:
        if is_missing(v):
            out.append("")
        else:
            out.append(BEST if float(v) == lo else WORST if float(v) == hi else "")
    return out


_SUMMARY_COLS: List[tuple] = [
    # (header, column, formatter, colour best/worst)
    ("syncs\n/step", "syncs_mean", fmt_syncs, True),
    ("syncs\nmax", "syncs_max", fmt_int, True),
    ("allowed\n/step", "allowed_mean", fmt_syncs, False),
    ("p50\nms", "p50_ms", fmt_ms, True),
    ("p90\nms", "p90_ms", fmt_ms, True),
    ("p99\nms", "p99_ms", fmt_ms, True),
    ("out", "outliers", fmt_int, False),
    ("ratio /legacy\n(95% CI)", "ratio_vs_legacy", fmt_ratio, True),
    ("saved\nus/tok", "saved_per_token_us", fmt_us, False),
]
#: Shown when the run has a modeled device timeline; the profile goes into the header.
_MODELED_COLS: List[tuple] = [
    ("modeled\nms", "modeled_ms", fmt_ms, True),
    ("bubble\nus", "bubble_us", fmt_us, True),
]


def _cell(r: Dict[str, Any], col: str, fmt: Any) -> str:
    if col == "ratio_vs_legacy":  # the ratio carries its interval
        return fmt_ratio_ci(r[col], r.get("ratio_lo"), r.get("ratio_hi"))
    if col == "bubble_us":
        return fmt_int(r[col])
    return str(fmt(r[col]))


def summary_table(summary_df: pd.DataFrame) -> Table:
    """The summary: one row per (scenario, path), scenarios separated."""
    table = _table("Summary")
    longest = max([len(str(s)) for s in summary_df["scenario"]] + [8])
    table.add_column("scenario", overflow="fold", min_width=min(longest, 14))
    table.add_column("path", no_wrap=True)
    cols = list(_SUMMARY_COLS)
    profiles = [p for p in summary_df.get("profile", []) if p]
    if profiles and summary_df["modeled_ms"].notna().any():
        cols += [(f"{h}\n[{profiles[0]}]", c, f, k) for h, c, f, k in _MODELED_COLS]
    for head, *_ in cols:
        table.add_column(head, justify="right", no_wrap=True)
    first = True
    for scenario in dict.fromkeys(summary_df["scenario"]):
        rows = summary_df[summary_df["scenario"] == scenario].to_dict("records")
        if not first:
            table.add_section()
        first = False
        styles: Dict[str, List[str]] = {}
        for _, col, _, colour in cols:
            styles[col] = _styles([r[col] for r in rows]) if colour else [""] * len(rows)
        for i, r in enumerate(rows):
            cells = [_t(scenario if i == 0 else ""), _t(r["path"])]
            for _, col, fmt, _ in cols:
                cells.append(_t(_cell(r, col, fmt), styles[col][i]))
            table.add_row(*cells)
    return table


def per_step_table(result: RunResult, scenario: str, head: int = 5, tail: int = 5) -> Table:
    """Steps of one scenario side by side: the first ``head``, the last ``tail`` and every
    notable step (yellow; see :func:`analysis.per_step`); an ellipsis row says how many steps
    were hidden. Warm-up steps are dim and marked ``w``."""
    df = analysis.per_step(result, scenario)
    paths = analysis.ordered_paths(s.path for s in result.steps if s.scenario == scenario)
    table = _table(f"Per step: {scenario}")
    table.add_column("step", justify="right", no_wrap=True)
    table.add_column("batch", justify="right", no_wrap=True)
    for p in paths:
        table.add_column(f"{p}\nbranch", overflow="fold")
        table.add_column("syncs", justify="right", no_wrap=True)
        table.add_column("ms", justify="right", no_wrap=True)
    recs = df.to_dict("records")
    for kind, val in analysis.elide(len(recs), [r["notable"] for r in recs], head, tail):
        if kind == "gap":
            table.add_row(_t("..."), _t(""), _t(f"{val} hidden", "dim"),
                          *[_t("") for _ in range(3 * len(paths) - 1)])
            continue
        r = recs[val]
        style = "dim" if r["warmup"] else "yellow" if r["notable"] else ""
        cells = [_t(step_label(r["step"], r["warmup"]), style), _t(fmt_int(r["batch_size"]))]
        for p in paths:
            cells += [_t(r[f"{p}.branch"] or "-", style), _t(fmt_int(r[f"{p}.syncs"]), style),
                      _t(fmt_ms(r[f"{p}.latency_ms"]), style)]
        table.add_row(*cells)
    return table


def sites_table(sites_df: pd.DataFrame, allowed: bool = False,
                base: Optional[str] = None) -> Table:
    """Hidden (or, with ``allowed=True``, allowed) sync sites: scenario over path, file:line
    over function, API over ATen op and kind (and the reason of allowed ones), count, steps."""
    sub = sites_df[sites_df["allowed"].astype(bool) == allowed] if len(sites_df) else sites_df
    table = _table("Allowed syncs" if allowed else "Hidden sync sites")
    table.add_column("scenario\npath", overflow="fold")
    table.add_column("site\nfunction", overflow="fold")
    table.add_column("API\nop, kind", overflow="fold")
    table.add_column("count", justify="right")
    table.add_column("steps", overflow="fold")
    modeled = bool(len(sub)) and "modeled_stall_us" in sub and sub["modeled_stall_us"].notna().any()
    if modeled:
        table.add_column("modeled us\nstall/idle", justify="right")
    for i, r in enumerate(sub.to_dict("records")):
        if i:
            table.add_section()
        where = _t(r["scenario"])
        where.append("\n" + "\n".join(str(r["path"]).split(", ")))
        site = _t(short_site(r["site"], base))
        if r["function"]:
            site.append("\n" + str(r["function"]), "dim")
        api = _t(r["api"])
        if r["op"]:
            api.append("\n" + str(r["op"]), "dim")
        api.append("\n" + str(r["kind"]), "dim")
        if allowed and r["reason"]:
            api.append(f" ({r['reason']})", "dim")
        cells = [where, site, api, _t(r["count"], "" if allowed else WORST), _t(r["steps"])]
        if modeled:
            cells.append(_t(f"{fmt_int(r['modeled_stall_us'])}/"
                            f"{fmt_int(r['modeled_bubble_us'])}"))
        table.add_row(*cells)
    return table


def legend_table() -> Table:
    from rich.table import Table

    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold", no_wrap=True)
    table.add_column()
    for k, v in LEGEND:
        table.add_row(_t(k), _t(v))
    return table


def print_header(result: RunResult, console: Console, show_time: bool = True) -> None:
    style = "bold" if result.complete else "bold red"
    console.print(_t(header_line(result, show_time), style))
    for n in note_texts(result):
        console.print(_t(f"note: {n}", "dim"))


def print_report(result: RunResult, console: Console, *, steps: bool = True,
                 sites: bool = True, legend: bool = True, head: int = 5, tail: int = 5,
                 show_time: bool = True, base: Optional[str] = None) -> None:
    """Print the whole report to ``console``.

    ``steps``/``sites``/``legend`` switch those parts; ``head``/``tail`` steps are always shown
    per scenario; ``show_time=False`` leaves the creation time out of the header; ``base`` is
    the directory site paths are shown relative to (default: the current directory).
    """
    print_header(result, console, show_time)
    sm = analysis.summary(result)
    if sm.empty:
        console.print(_t("no steps recorded", "bold red"))
    else:
        console.print(summary_table(sm))
        st = analysis.merge_paths(analysis.sites(result, max_parts=8))
        console.print(_t("Verdict", "bold"))
        for scenario, sentence in verdicts(sm, st, code="", base=base,
                                       show_wait=timed_on_hardware(result)):
            line = _t(f"{scenario}: ", "bold")
            line.append(sentence)
            console.print(line)
        console.print()
    if steps:
        for scenario in result.scenarios:
            console.print(per_step_table(result, scenario, head, tail))
    if sites:
        st = analysis.merge_paths(analysis.sites(result, max_parts=8))
        hidden = st[~st["allowed"].astype(bool)] if len(st) else st
        if len(hidden):
            console.print(sites_table(st, False, base))
        elif not sm.empty:
            console.print(_t("No hidden syncs outside warm-up.", BEST))
        if len(st) and st["allowed"].astype(bool).any():
            console.print(sites_table(st, True, base))
    if legend:
        console.print(_t("Legend", "bold"))
        console.print(legend_table())


def compare_table(df: pd.DataFrame, label_a: str = "A", label_b: str = "B",
                  title: Optional[str] = None) -> Table:
    """A table of :func:`analysis.compare` / :func:`analysis.compare_paths` rows; changed
    rows are marked ``*`` and coloured (red: more syncs or slower, green: fewer or faster)."""
    table = _table(title or f"Compare: {label_a} -> {label_b}")
    table.add_column("scenario", overflow="fold")
    table.add_column("path", overflow="fold")
    table.add_column(f"syncs/step\n{label_a}", justify="right")
    table.add_column(f"syncs/step\n{label_b}", justify="right")
    table.add_column("syncs\ndelta", justify="right")
    table.add_column(f"p50 ms\n{label_a}", justify="right")
    table.add_column(f"p50 ms\n{label_b}", justify="right")
    table.add_column("latency ratio\n(95% CI)", justify="right")
    table.add_column(f"outliers\n{label_a}/{label_b}", justify="right")
    modeled = bool(len(df)) and bool(df["a_modeled_ms"].notna().any()
                                      or df["b_modeled_ms"].notna().any())
    if modeled:
        table.add_column(f"modeled ms\n{label_a}/{label_b}", justify="right")
    table.add_column("changed", justify="center")
    for r in df.to_dict("records"):
        style = ""
        if r["changed"]:
            worse = (not is_missing(r["syncs_delta"]) and r["syncs_delta"] > 0) or (
                r["latency_changed"] and r["latency_ratio"] > 1)
            style = WORST if worse else BEST
        lat_style = "" if not r["latency_changed"] else (
            WORST if r["latency_ratio"] > 1 else BEST)
        table.add_row(_t(r["scenario"]), _t(r["path"]), _t(fmt_syncs(r["a_syncs_mean"])),
                      _t(fmt_syncs(r["b_syncs_mean"])), _t(fmt_syncs(r["syncs_delta"]), style),
                      _t(fmt_ms(r["a_p50_ms"])), _t(fmt_ms(r["b_p50_ms"])),
                      _t(fmt_ratio_ci(r["latency_ratio"], r["ratio_lo"], r["ratio_hi"]),
                         lat_style),
                      _t(f"{fmt_int(r['a_outliers'])}/{fmt_int(r['b_outliers'])}"),
                      *([_t(f"{fmt_ms(r['a_modeled_ms'])}/{fmt_ms(r['b_modeled_ms'])}",
                            "yellow" if r["modeled_changed"] else "")] if modeled else []),
                      _t("*" if r["changed"] else "", style))
    return table


def print_compare(df: pd.DataFrame, console: Console, title: Optional[str] = None,
                  label_a: str = "A", label_b: str = "B") -> None:
    """Print :func:`compare_table` and a one-line count of changed rows."""
    console.print(compare_table(df, label_a, label_b, title))
    n = int(df["changed"].sum()) if len(df) else 0
    console.print(_t(f"{n} of {len(df)} rows changed (hidden syncs differ, the modeled "
                     f"latency moved, or the 95% interval of the median latency ratio B / A "
                     f"excludes 1.00x)",
                     WORST if n else BEST))


def _recording_console(width: int, color: bool) -> Console:
    from rich.console import Console

    return Console(width=width, record=True, file=io.StringIO(),
                   color_system="truecolor" if color else None, force_terminal=color,
                   highlight=False, emoji=False)


def render(result: RunResult, console: Optional[Console] = None, *, width: int = 100,
           color: bool = False, **kw: Any) -> str:
    """The report. With ``console``, print it there and return ``""``; without, return it as
    text ``width`` columns wide (ANSI colours with ``color=True``). ``kw`` as for
    :func:`print_report`."""
    if console is not None:
        print_report(result, console, **kw)
        return ""
    rec = _recording_console(width, color)
    print_report(result, rec, **kw)
    return rec.export_text(styles=color)


def render_compare(df: pd.DataFrame, console: Optional[Console] = None,
                   title: Optional[str] = None, label_a: str = "A", label_b: str = "B", *,
                   width: int = 100, color: bool = False) -> str:
    """A comparison (:func:`analysis.compare` / :func:`analysis.compare_paths`): printed to
    ``console`` (returns ``""``), or returned as text without one."""
    if console is not None:
        print_compare(df, console, title, label_a, label_b)
        return ""
    rec = _recording_console(width, color)
    print_compare(df, rec, title, label_a, label_b)
    return rec.export_text(styles=color)
