"""Terminal report with rich: header, summary, per-step and sites tables, legend.

:func:`print_report` prints to a given :class:`rich.console.Console`; :func:`render` returns
the report as text. Best values of a column within a scenario are green, worst red (as
pytest-benchmark does); data from the result is never read as rich markup.
"""

from __future__ import annotations

import io
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence, Tuple

from .._escape import terminal as _safe
from ..results import analysis
from . import _tables
from ._common import (
    LEGEND,
    header_get,
    header_line,
    headline,
    lineage_lines,
    note_texts,
    path_headlines,
    verdict_options,
    verdicts,
)
from ._common import legend as _legend

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    from ..results.format import RunResult

#: Sites shown per sites table in the terminal (the rest are counted in one line; the file
#: reports list every site): a program with 20,000 sync sites prints a screenful, not 80,000
#: lines.
MAX_SITES = 20
#: each look of :data:`._tables.LOOKS` here (green good, red bad) and how it reads in the legend
_LOOKS: Dict[str, Tuple[str, str]] = {
    "good": ("bold green", "green"), "bad": ("bold red", "red"), "changed": ("bold", "bold"),
    "note": ("yellow", "yellow"), "dim": ("dim", "dim"),
}
#: the rich style of each semantic style of :mod:`._tables`
STYLE_LOOK: Dict[str, str] = {s: _LOOKS[look][0] for s, look in _tables.LOOKS.items()}
#: how each rich style reads, for the legend
LOOK_WORDS: Dict[str, str] = dict(_LOOKS.values())
BEST = STYLE_LOOK["best"]


def _t(value: Any, style: str = "") -> Text:
    from rich.text import Text

    return Text(_safe(value), style=style)  # data never moves the cursor or adds a line


def _table(title: str, **kw: Any) -> Table:
    from rich import box
    from rich.table import Table

    return Table(title=_t(title, "bold"), title_justify="left", box=box.SIMPLE_HEAD,
                 pad_edge=False, collapse_padding=True, **kw)


#: the columns a table gives up, first to last, when the terminal is too narrow for all of
#: them (the scenario, path, site and the main numbers are never among them): fewer columns,
#: never a cut number
DROP_ORDER: Tuple[str, ...] = (
    "p99_ms", "outliers", "allowed_mean", "syncs_max", "bubble_us", "device_ms_mean",
    "branches", "p90_ms", "saved_per_token_us", "modeled_ms", "p50_lo_ms", "ratio_lo",
    "modeled_bubble_us", "modeled_stall_us", "steps", "kind", "op", "reason",
)


def fitted(t: _tables.Table, width: int, *, unders: bool = True, sections: bool = True,
           drop: Sequence[str] = ()) -> Table:
    """:func:`rich_table` of ``t`` with as many columns as fit ``width`` without cutting a
    cell: the columns of :data:`DROP_ORDER` go, first to last, until the narrowest the table
    can be drawn (long names folded, numbers whole) fits. ``unders=False`` leaves out the
    lines printed under a cell (the intervals), ``sections=False`` the lines between
    sections and the blank edges above and below the rows: a shorter table. The columns in
    ``drop`` are left out whatever the width."""
    drop = [*drop, *([] if unders else [c.key for c in t.columns if c.under is not None])]
    edge = 2 if sections else 0
    for key in DROP_ORDER:
        if _narrowest(t, drop) - 2 + edge <= width:
            break
        if any(c.key == key for c in t.columns) and key not in drop:
            drop.append(key)
    table = rich_table(t, drop, sections)
    table.show_edge = sections
    return table


def _narrowest(t: _tables.Table, drop: Sequence[str]) -> int:
    """The fewest columns :func:`rich_table` needs to draw ``t`` without ``drop`` and without
    cutting a number: each number column as wide as its widest line (header included), each
    text column its folding width, two columns between columns and one at each edge."""
    index = {c.key: i for i, c in enumerate(t.columns)}
    widths = []
    for i, c in enumerate(t.columns):
        if c.under is not None or c.key in drop:
            continue
        lines = (c.short or c.header).split("\n")
        for sec in t.sections:
            for r in sec:
                if isinstance(r, _tables.Gap):
                    continue
                lines.append(r[i].text)
                lines += [r[j].text for j, u in enumerate(t.columns)
                          if u.under == c.key and u.key not in drop]
        longest = max(len(_safe(x)) for x in lines)
        widths.append(longest if c.align == "r" else min(longest, 14))
    del index
    return sum(widths) + 2 * max(len(widths) - 1, 0) + 2


def rich_table(t: _tables.Table, drop: Sequence[str] = (), sections: bool = True) -> Table:
    """A :class:`_tables.Table` as a rich Table: styles by :data:`STYLE_LOOK`; ``under``
    columns printed dim below their column's cell; ``group`` cells on a section's first row.
    The columns whose key is in ``drop`` are left out; ``sections=False`` draws no line
    between sections."""
    table = _table(t.title)
    shown = [i for i, c in enumerate(t.columns) if c.under is None and c.key not in drop]
    unders: Dict[int, List[int]] = {i: [] for i in shown}
    index = {c.key: i for i, c in enumerate(t.columns)}
    for i, c in enumerate(t.columns):
        if c.under is not None and c.key not in drop and index[c.under] in unders:
            unders[index[c.under]].append(i)
    for i in shown:
        c = t.columns[i]
        # a header's own line breaks stay; data in it (a path's name) is made safe
        head = "\n".join(_safe(part) for part in (c.short or c.header).split("\n"))
        if c.align == "r":
            table.add_column(head, justify="right", no_wrap=True)
        else:  # names (scenario, path) kept whole up to 14 characters; longer text folds
            longest = max([len(r[i].text) for sec in t.sections for r in sec
                           if not isinstance(r, _tables.Gap)] + [1])
            table.add_column(head, overflow="fold", min_width=min(longest, 14))
    for n, section in enumerate(t.sections):
        if n and sections:
            table.add_section()
        for k, row in enumerate(section):
            if isinstance(row, _tables.Gap):
                cells = [_t("") for _ in shown]
                cells[0] = _t("...")
                cells[min(2, len(cells) - 1)] = _t(f"{row.hidden} hidden", "dim")
                table.add_row(*cells)
                continue
            cells = []
            for i in shown:
                cell = row[i]
                text = _t("" if t.columns[i].group and k else cell.text,
                          STYLE_LOOK.get(cell.style, ""))
                for j in unders[i]:
                    if row[j].text not in ("", "-"):
                        text.append("\n" + _safe(row[j].text), "dim")
                cells.append(text)
            table.add_row(*cells)
    return table


def style_legend(styles: List[str]) -> List[Tuple[str, str]]:
    """``(look, meaning)`` lines for the semantic styles used, one per look."""
    out: Dict[str, List[str]] = {}
    for s in styles:
        look = LOOK_WORDS[STYLE_LOOK[s]]
        out.setdefault(look, []).append(_tables.STYLE_LEGEND[s])
    return [(look, "; ".join(v)) for look, v in out.items()]


def legend_table(styles: Sequence[str] = (),
                 terms: Sequence[Tuple[str, str]] = LEGEND) -> Table:
    """The legend: every column term (``terms``), then what the colours used mean."""
    from rich.table import Table

    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold", no_wrap=True)
    table.add_column()
    for k, v in terms:
        table.add_row(_t(k), _t(v))
    for look, meaning in style_legend(list(styles)):
        style = next(v for v in STYLE_LOOK.values() if LOOK_WORDS[v] == look)
        table.add_row(_t(look, style), _t(meaning))
    return table


def print_header(result: RunResult, console: Console, show_time: bool = True) -> None:
    style = "bold" if result.complete else "bold red"
    console.print(_t(header_line(result, show_time), style))
    for n in note_texts(result):
        console.print(_t(f"note: {n}", "dim"))


def print_brief(result: RunResult, console: Console, *, show_time: bool = True,
                base: Optional[str] = None) -> None:
    """The main job's answer on one screen: the header, one headline per path over every
    scenario (its count per step, its sites, the host-time verdict against the baseline, the
    modeled cost: :func:`._common.path_headlines`), then the summary with the columns that
    fit the console's width, one line per scenario and path. ``run --verbose`` and the files
    hold the rest."""
    sm = analysis.summary(result)
    style = "bold" if result.complete else "bold red"
    console.print(_t(header_line(result, show_time), style))
    notes = note_texts(result)
    if header_get(result.header, "device") == "sim" and notes:  # the modeled columns' note
        notes = [SIM_NOTE] + [n for n in notes[1:] if not n.startswith("Modeled columns")]
    for n in notes:
        console.print(_t(f"note: {n}", "dim"))
    if sm.empty:
        console.print(_t("no steps recorded", "bold red"))
        return
    st = analysis.merge_paths(analysis.sites(result, max_parts=8))
    for path, sentence in path_headlines(sm, st, base=base):
        line = _t(f"{path}: ", "bold")
        line.append(_safe(sentence))
        console.print(line)
    why = lineage_lines(st, code="", base=base)  # --lineage: why each site reads, the fix
    if why:
        console.print(_t("Why, and how to remove it (lineage)", "bold"))
        for text in dict.fromkeys(why):  # one line per site and path, not per scenario
            console.print(_safe(text))
    # the modeled values are in the headlines; the rest of the columns in --verbose
    t = _tables.summary_tbl(sm, branches=False)
    console.print(fitted(t, console.width, unders=False, sections=False,
                         drop=[c.key for c in t.columns if c.key not in BRIEF_COLUMNS]))


#: the summary's columns on the one screen of :func:`print_brief` (as many as fit)
BRIEF_COLUMNS = ("scenario", "path", "syncs_mean", "p50_ms", "p90_ms", "ratio_vs_baseline",
                 "saved_per_token_us")


#: the simulated device's caveat in one line (:func:`print_brief`)
SIM_NOTE = "simulated npu: latencies are host CPU time; counts and sites carry over"


def print_report(result: RunResult, console: Console, *, steps: bool = True,
                 sites: bool = True, legend: bool = True, head: int = 5, tail: int = 5,
                 show_time: bool = True, base: Optional[str] = None,
                 max_sites: Optional[int] = MAX_SITES, brief: bool = False) -> None:
    """Print the whole report to ``console``.

    ``steps``/``sites``/``legend`` switch those parts; ``head``/``tail`` steps are always shown
    per scenario; ``show_time=False`` leaves the creation time out of the header; ``base`` is
    the directory site paths are shown relative to (default: the current directory);
    ``max_sites``: the sites tables show the sites with the most syncs, then a line counting
    the rest (the file reports list them all; None: every site). ``brief`` (a run of
    scenarios, not ``exec``): :func:`print_brief` instead, the answer on one screen. Tables
    keep the columns that fit the console's width (:func:`fitted`).
    """
    if brief and not analysis.is_exec(result):
        print_brief(result, console, show_time=show_time, base=base)
        return
    sm = analysis.summary(result)
    lead = headline(result, sm, analysis.sites(result, max_parts=8), base)
    if lead:  # an exec run: the answer first
        console.print(_t(lead, "bold"))
    print_header(result, console, show_time)
    used: List[str] = []

    def show(t: _tables.Table) -> None:
        used.extend(t.styles_used())
        console.print(fitted(t, console.width))

    if sm.empty:
        console.print(_t("no steps recorded", "bold red"))
    else:
        show(_tables.summary_tbl(sm, branches=False))
        st = analysis.merge_paths(analysis.sites(result, max_parts=8))
        console.print(_t("Verdict", "bold"))
        for scenario, sentence in verdicts(sm, st, code="", base=base,
                                       **verdict_options(result)):
            line = _t(f"{scenario}: ", "bold")
            line.append(_safe(sentence))
            console.print(line)
        why = lineage_lines(st, code="", base=base)
        if why:
            console.print(_t("Why, and how to remove it (lineage)", "bold"))
            for text in why:
                console.print(_safe(text))
        console.print()
    if steps:
        for scenario in result.scenarios:
            show(_tables.per_step_tbl(result, scenario, 0, head, tail))
    if sites:
        st = analysis.merge_paths(analysis.sites(result, max_parts=8))
        hidden = st[~st["allowed"].astype(bool)] if len(st) else st
        tables = []
        if len(hidden):
            tables.append(_tables.sites_tbl(st, False, base, max_sites))
        elif not sm.empty:
            console.print(_t("No hidden syncs outside warm-up.", BEST))
        if len(st) and st["allowed"].astype(bool).any():
            tables.append(_tables.sites_tbl(st, True, base, max_sites))
        for t in tables:
            show(t)
            if t.footer:
                console.print(_t(t.footer, "dim"))
    if legend:
        console.print(_t("Legend", "bold"))
        console.print(legend_table(list(dict.fromkeys(used)), _legend(result)))


def print_compare(df: pd.DataFrame, console: Console, title: Optional[str] = None,
                  label_a: str = "A", label_b: str = "B") -> None:
    """Print the comparison table, a one-line count of changed rows and the colour legend."""
    t = _tables.compare_tbl(df, label_a, label_b, title)
    console.print(rich_table(t))
    console.print(_t(t.footer, STYLE_LOOK.get(t.footer_style, "")))
    for look, meaning in style_legend(t.styles_used()):
        style = next(v for v in STYLE_LOOK.values() if LOOK_WORDS[v] == look)
        line = _t(look, style)
        line.append(f": {meaning}")
        console.print(line)


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
