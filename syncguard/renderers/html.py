"""One self-contained HTML report: inline CSS, plots as inline SVG, no network loads.

Plots (per scenario: latency per step per path from the timed pass, hidden syncs per step per
path from the counted pass, warm-up steps left out) are drawn with matplotlib's Agg backend.
Without matplotlib the tables are still rendered, with a note on how to get the plots. All
text from the result is escaped with :func:`html.escape`.
"""

from __future__ import annotations

import io
import operator
import statistics
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Tuple

from .._escape import html_text, plot_text
from ..core.lineage_words import draw_tree
from ..results import analysis
from ..results.analysis import is_missing
from ..results.format import GUARDED_PASSES
from . import _tables
from ._common import (
    environment_parts,
    legend,
    lineage_lines,
    lineage_sites,
    note_texts,
    short_site,
    status_text,
    verdict_options,
    verdicts,
)

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from ..results.format import RunResult, StepRecord

PLOT_HINT = "pip install matplotlib"

CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:2em auto;
max-width:1400px;padding:0 1em;color:#1f2328;background:#fff;line-height:1.45}
h1{font-size:1.6em;border-bottom:1px solid #d0d7de;padding-bottom:.3em}
h2{font-size:1.3em;margin-top:1.6em;border-bottom:1px solid #d0d7de;padding-bottom:.2em}
h3{font-size:1.1em}
.env{color:#57606a;font-size:.95em}
.status-ok{color:#1a7f37;font-weight:600}
.status-bad{color:#cf222e;font-weight:700}
.tbl{max-width:100%;overflow-x:auto;margin:.6em 0 1.2em}
table{border-collapse:collapse;font-size:.9em}
th,td{border:1px solid #d0d7de;padding:.25em .6em;vertical-align:top}
td code{overflow-wrap:normal;word-break:normal}
th{background:#f6f8fa;text-align:left}
td.r{text-align:right;font-variant-numeric:tabular-nums}
.best,.improved{color:#1a7f37;font-weight:600}
.worst,.regressed{color:#cf222e;font-weight:600}
.changed{font-weight:600}
p.key{color:#57606a;font-size:.9em;margin-top:-.6em}
td.note,span.note{background:#fff8c5}
td.dim,span.dim{color:#8c959f}
tr.gap td{color:#57606a;font-style:italic;text-align:center}
code{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:.95em;
background:#f6f8fa;padding:.05em .3em;border-radius:4px}
.note{background:#fff8c5;border:1px solid #d4a72c;padding:.5em .8em;border-radius:6px}
.plot svg{width:100%;height:auto}
details{margin:.4em 0}
summary{cursor:pointer}
ul.lineage-tree,ul.lineage-tree ul{list-style:none;margin:.1em 0;padding-left:1.2em;
border-left:1px solid #d0d7de}
ul.lineage-tree details{margin:0}
.root-kind{color:#57606a;font-size:.85em;text-transform:uppercase}
dl.legend dt{font-weight:600}
dl.legend dd{margin:0 0 .4em 1.5em;color:#57606a}
""".strip()


_BREAK_AFTER = "/\\.:_,"


def code_breaks(s: str) -> str:
    """Escaped code with line-break opportunities (``<wbr>``) only after a run of ``/ \\ . :
    _ ,`` followed by more text: a long path or name wraps between its parts, never
    mid-word (``Tensor.__bool__`` -> ``Tensor.__<wbr>bool__``)."""
    out = []
    for i, ch in enumerate(s):
        out.append(esc(ch))
        if ch in _BREAK_AFTER and i + 1 < len(s) and s[i + 1] not in _BREAK_AFTER:
            out.append("<wbr>")
    return "".join(out)


def esc(s: object) -> str:
    """HTML-escaped text (quotes included), control characters visible."""
    return html_text(s)


#: how each look of :data:`._tables.LOOKS` reads here, for the legend (:data:`CSS` draws it)
_LOOK_WORDS = {"good": "green", "bad": "red", "changed": "bold", "note": "yellow background",
               "dim": "grey"}
#: how each style looks here, for the legend
STYLE_WORDS = {s: _LOOK_WORDS[look] for s, look in _tables.LOOKS.items()}


def _looks(styles: List[str]) -> List[Tuple[str, str, str]]:
    """``(look, a style drawn so, meanings)`` per look of the styles used, in order."""
    looks: Dict[str, List[str]] = {}
    first: Dict[str, str] = {}
    for s in styles:
        looks.setdefault(STYLE_WORDS[s], []).append(_tables.STYLE_LEGEND[s])
        first.setdefault(STYLE_WORDS[s], s)
    return [(w, first[w], "; ".join(v)) for w, v in looks.items()]


def style_legend(styles: List[str]) -> List[str]:
    """``<dt>``/``<dd>`` legend entries for the styles used, one per look."""
    return [f'<dt><span class="{cls}">{esc(w)}</span></dt><dd>{esc(text)}</dd>'
            for w, cls, text in _looks(styles)]


def style_key(styles: List[str]) -> str:
    """One line: what each look used means (``green: best ... · red: worst ...``)."""
    return " · ".join(f'<span class="{cls}">{esc(w)}</span>: {esc(text)}'
                      for w, cls, text in _looks(styles))


def table(t: _tables.Table) -> str:
    """An HTML table of the model, in a box that scrolls sideways when the table is wider
    than the page; cells carry their style as a class; ellipsis rows span all columns."""
    out = ['<div class="tbl"><table>', "<thead><tr>" + "".join(
        f'<th class="r">{esc(c.header)}</th>' if c.align == "r" else f"<th>{esc(c.header)}</th>"
        for c in t.columns) + "</tr></thead>", "<tbody>"]
    for row in (r for sec in t.sections for r in sec):
        if isinstance(row, _tables.Gap):
            out.append(f'<tr class="gap"><td colspan="{len(t.columns)}">'
                       f"{esc(row.text)}</td></tr>")
            continue
        cells = []
        for c, a in zip(row, t.align):
            cls = " ".join(x for x in ("r" if a == "r" else "", c.style) if x)
            attr = f' class="{cls}"' if cls else ""
            body = f"<code>{code_breaks(c.text)}</code>" if c.code and c.text else esc(c.text)
            cells.append(f"<td{attr}>{body}</td>")
        out.append("<tr>" + "".join(cells) + "</tr>")
    out.append("</tbody></table></div>")
    return "\n".join(out)


#: how each kind of root reads at a leaf of a lineage tree
_ROOT_KINDS = {"upload": "upload", "const": "constant", "param": "parameter",
               "input": "step input", "random": "random", "unknown": "unknown"}


def lineage_tree(site: Dict[str, Any], base: Optional[str] = None) -> str:
    """A site's lineage as a small tree (``<details>`` and nested ``<ul>``, no script): the
    value read at the root, the ops that made it as inner nodes, their roots as leaves
    (uploads with their file:line, and "the same value every step" when so). Bounded
    (:data:`syncguard.core.lineage_words.DRAW_DEPTH`...: "N more" for what is left out);
    every text escaped. Empty when the site has no ``lineage_tree``."""
    import json

    raw = site.get("lineage_tree")
    if not isinstance(raw, str) or not raw:
        return ""
    try:
        lin = json.loads(raw)
    except ValueError:
        return ""
    if not isinstance(lin, dict):
        return ""
    nodes = draw_tree(lin)
    if not nodes:
        return ""
    same = bool(lin.get("same"))
    where = code_breaks(short_site(str(site.get("site", "")), base))
    out = ['<details class="lineage"><summary>lineage tree</summary>',
           '<ul class="lineage-tree">',
           f'<li>the value read at <code>{where}</code> ({esc(site.get("api", ""))})']
    out += _tree_items(nodes, 0, same)
    out += ["</li>", "</ul>", "</details>"]
    return "\n".join(out)


def _tree_items(nodes: List[Dict[str, Any]], more: int, same: bool) -> List[str]:
    out = ["<ul>"]
    for n in nodes:
        if "root" in n:
            kind = _ROOT_KINDS.get(n["root"], n["root"])
            text = esc(n["label"])
            if n["site"]:
                text += f" at <code>{code_breaks(n['site'])}</code>"
            if same and n["root"] == "upload":
                text += ", the same value every step"
            tag = f'<span class="root-kind">{esc(kind)}</span> ' if kind else ""
            out.append(f"<li>{tag}{text}</li>")
            continue
        op = f"<code>{esc(n['op'])}</code>" if n["op"] else "ops"
        if n.get("flat"):
            op += (' <span class="dim">(the ops, recorded as a list before lineage trees '
                   'were; the roots:)</span>')
        elif n["cut"]:
            op += ' <span class="dim">(the ops before it were not kept; its roots:)</span>'
        out += ["<li><details open>", f"<summary>{op}</summary>",
                *_tree_items(n["in"], n["more"], same), "</details></li>"]
    if more:
        out.append(f'<li class="dim">{more} more</li>')
    out.append("</ul>")
    return out


#: per path, in order: (marker, line style); later paths get smaller markers, so equal
#: series stay visible one inside the other
_MARKERS = ("o", "s", "^", "D", "v", "P")
_LINES = ("-", "--", ":", "-.")


def plot_figure(result: RunResult, scenario: str) -> Any:
    """A matplotlib Figure of one scenario (Agg backend): latency per step and path (ms,
    timed pass) on top, then hidden syncs per step in one small panel per path (counted
    pass), so no path hides under another; warm-up steps left out, integer steps on the x
    axis. Raises ImportError without matplotlib."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    paths = plotted_paths(result, scenario)[0]
    # one line per (path, round): each round runs the steps again from fresh state, so a
    # line through every round's points would zig-zag back to step 0
    # the records themselves, not a (step, value) pair each: a long run's plot holds one
    # pointer per step and line
    lat: Dict[str, Dict[int, List[StepRecord]]] = {p: {} for p in paths}
    syn: Dict[str, List[StepRecord]] = {p: [] for p in paths}
    for s in result.steps:
        if s.scenario != scenario or s.warmup or s.path not in syn:
            continue
        if s.pass_ in ("timed", "exec") and not is_missing(s.latency_ms):
            lat[s.path].setdefault(int(s.round or 0), []).append(s)
        if s.pass_ in GUARDED_PASSES:
            syn[s.path].append(s)
    n = max(len(paths), 1)
    k = _bin_size(max([len(v) for p in paths for v in lat[p].values()]
                      + [len(v) for v in syn.values()] + [0]))
    with matplotlib.rc_context({"font.size": 9}):
        fig = Figure(figsize=(12.0, 3.2 + 1.1 * n), layout="constrained")
        axes = fig.subplots(1 + n, 1, sharex=True,
                            gridspec_kw={"height_ratios": [3.0] + [1.0] * n})
        ax1, sync_axes = axes[0], list(axes[1:])
        colors = matplotlib.rcParams["axes.prop_cycle"].by_key()["color"]
        top = max([s.syncs for p in paths for s in syn[p]] + [1])
        for i, p in enumerate(paths):
            color = colors[i % len(colors)]
            marker, ls = _MARKERS[i % len(_MARKERS)], _LINES[i % len(_LINES)]
            size = max(7.0 - 1.5 * i, 3.0)
            rounds = sorted(lat[p])
            for j, rnd in enumerate(rounds):
                xs, ys = _binned(lat[p][rnd], "latency_ms", k, statistics.median)
                label = plot_text(p) + (f" ({len(rounds)} rounds)" if len(rounds) > 1 else "")
                ax1.plot(xs, ys, marker=marker if k == 1 else None, markersize=size,
                         linestyle=ls,
                         linewidth=max(2.0 - 0.4 * i, 1.0), color=color,
                         alpha=1.0 if len(rounds) == 1 else 0.6,
                         label=label if j == 0 else None)
            ax = sync_axes[i] if i < len(sync_axes) else sync_axes[-1]
            if syn[p]:
                xs, ys = _binned(syn[p], "syncs", k, max)
                ax.step(xs, ys, where="mid", color=color, linewidth=1.6)
                if k == 1:
                    ax.plot(xs, ys, linestyle="none", marker=marker, markersize=4, color=color)
            ax.set_ylim(-0.1 * top, top * 1.25)
            ax.yaxis.set_major_locator(MaxNLocator(integer=True, nbins=3))
            ax.set_ylabel(plot_text(p), rotation=0, ha="right", va="center", color=color)
        ax1.set_ylabel("latency per step (ms)")
        if analysis.is_exec(result):  # one pass under the guard: no timed or counted pass
            timed, counted, each = "measured under the guard", "", "step name"
        else:
            timed, counted, each = "timed pass, one line per round", ", counted pass", "path"
        binned = "" if k == 1 else f"; each point {k} steps: their median"
        ax1.set_title(f"{plot_text(scenario)}: latency, {timed} (warm-up excluded{binned})",
                      loc="left")
        sync_axes[0].set_title(f"{plot_text(scenario)}: hidden syncs per step{counted}, "
                               f"one panel per {each} (warm-up excluded"
                               f"{'' if k == 1 else f'; each point {k} steps: their most'})",
                               loc="left")
        sync_axes[-1].set_xlabel("step")
        sync_axes[-1].xaxis.set_major_locator(MaxNLocator(integer=True))
        ax1.set_ylim(bottom=0)
        for ax in axes:
            ax.grid(True, alpha=0.3)
        if ax1.get_legend_handles_labels()[0]:
            ax1.legend(loc="best", fontsize=8)
    return fig


#: the most points one line of a plot draws: a longer run's steps are drawn in bins of
#: consecutive steps (latency: the bin's median; syncs: its most), so a 100,000-step run's
#: plot stays a few hundred kB of SVG and still shows every step's syncs in its bin
MAX_POINTS = 600


def _bin_size(n: int) -> int:
    """Steps per plotted point for a line of ``n`` steps (1: every step drawn)."""
    return max(1, -(-n // MAX_POINTS))


def _binned(records: List[StepRecord], field: str, k: int,
            how: Callable[[List[Any]], Any]) -> Tuple[List[int], List[Any]]:
    """The steps and ``field`` values of ``records`` in step order, in bins of ``k``: each
    bin's first step and ``how`` of its values (``k`` 1: every step)."""
    recs = sorted(records, key=operator.attrgetter("step"))
    if k == 1:
        return [r.step for r in recs], [getattr(r, field) for r in recs]
    xs, ys = [], []
    for i in range(0, len(recs), k):
        xs.append(recs[i].step)
        ys.append(how([getattr(r, field) for r in recs[i:i + k]]))
    return xs, ys


#: the most paths (step names) one plot draws, each a panel, and the most scenarios plotted:
#: 500 paths took minutes to draw; the tables list them all
MAX_PANELS = 12
MAX_PLOTS = 12


def plotted_paths(result: RunResult, scenario: str) -> Tuple[List[str], int]:
    """The paths of ``scenario`` its plot draws (the first :data:`MAX_PANELS` in run order,
    those with hidden syncs first) and how many more it leaves to the tables."""
    paths = analysis.ordered_paths(s.path for s in result.steps if s.scenario == scenario)
    if len(paths) <= MAX_PANELS:
        return paths, 0
    synced = {s.path for s in result.steps if s.scenario == scenario and s.syncs
              and not s.warmup}
    keep = set(([p for p in paths if p in synced] + [p for p in paths if p not in synced])
               [:MAX_PANELS])
    return [p for p in paths if p in keep], len(paths) - MAX_PANELS


def plot_svg(result: RunResult, scenario: str, salt: str = "syncguard") -> str:
    """:func:`plot_figure` as inline SVG (text as paths, no external references; ``salt``
    keeps element ids unique and deterministic when several plots share a page)."""
    import matplotlib

    fig = plot_figure(result, scenario)
    buf = io.StringIO()
    with matplotlib.rc_context({"svg.hashsalt": salt, "svg.fonttype": "path"}):
        fig.savefig(buf, format="svg", metadata={"Date": None})
    svg = buf.getvalue()
    return svg[svg.index("<svg"):].strip()


def _plots(result: RunResult) -> List[str]:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return [f'<p class="note">Plots need matplotlib: <code>{esc(PLOT_HINT)}</code></p>']
    out = []
    scenarios = result.scenarios
    for i, scenario in enumerate(scenarios[:MAX_PLOTS]):
        out.append(f"<h3>{esc(scenario)}</h3>")
        more = plotted_paths(result, scenario)[1]
        if more:
            out.append(f'<p class="note">The plot draws {MAX_PANELS} of its '
                       f"{MAX_PANELS + more} paths (those with hidden syncs first); the "
                       f"tables list every one.</p>")
        try:
            out.append(f'<div class="plot">{plot_svg(result, scenario, f"sg{i}")}</div>')
        except Exception as exc:  # a broken plot must not lose the report
            out.append(f'<p class="note">Plot failed: {esc(type(exc).__name__)}: '
                       f"{esc(exc)}</p>")
    if len(scenarios) > MAX_PLOTS:
        out.append(f'<p class="note">Plots of the first {MAX_PLOTS} of {len(scenarios)} '
                   f"scenarios; the tables list every one.</p>")
    return out


def render(result: RunResult, *, title: str = "syncguard report", show_time: bool = True,
           max_steps: int = 200, base: Optional[str] = None, plots: bool = True) -> str:
    """The report as one HTML document (``plots=False`` leaves the plots out)."""
    ok = result.complete
    env = " · ".join(esc(p) for p in environment_parts(result, show_time))
    status = (f'<span class="{"status-ok" if ok else "status-bad"}">'
              f"{esc(status_text(result))}</span>")
    out: List[str] = [
        "<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{esc(title)}</title>", f"<style>\n{CSS}\n</style>", "</head>", "<body>",
        f"<h1>{esc(title)}</h1>", f'<p class="env">{env} · {status}</p>',
    ]
    out += [f'<p class="note">{esc(n)}</p>' for n in note_texts(result)]

    if result.has_guarded_steps():  # trace.json is written only then
        out.append('<p class="note">Timeline: <a href="trace.json">trace.json</a> (Chrome '
                   'trace format, written next to this report: open it in ui.perfetto.dev '
                   'or chrome://tracing)</p>')
    sm = analysis.summary(result)
    if sm.empty:
        out += ['<p class="note">No steps recorded.</p>', "</body>", "</html>"]
        return "\n".join(out) + "\n"
    st = analysis.merge_paths(analysis.sites(result, max_parts=20))
    used: List[str] = []

    def tbl(t: _tables.Table) -> str:
        used.extend(t.styles_used())
        return table(t)

    summary = _tables.summary_tbl(sm)
    out += ["<h2>Summary</h2>", tbl(summary)]
    key = style_key(summary.styles_used())
    if key:
        out.append(f'<p class="key">{key} (all terms in the <a href="#legend">legend</a>)</p>')
    out += ["<h2>Verdict</h2>", "<ul>"]
    for scenario, sentence in verdicts(sm, st, code="\x00", base=base,
                                       **verdict_options(result)):
        parts = sentence.split("\x00")
        body = "".join(f"<code>{esc(p)}</code>" if i % 2 else esc(p)
                       for i, p in enumerate(parts))
        out.append(f"<li><strong>{esc(scenario)}</strong>: {body}</li>")
    out.append("</ul>")
    why = lineage_lines(st, code="\x00", base=base)
    if why:
        out += ["<h3>Why, and how to remove it (lineage)</h3>", "<ul>"]
        for line, row in zip(why, lineage_sites(st)):
            parts = line.split("\x00")
            out.append("<li>" + "".join(f"<code>{esc(p)}</code>" if i % 2 else esc(p)
                                        for i, p in enumerate(parts))
                       + lineage_tree(row, base) + "</li>")
        out.append("</ul>")
    if plots:
        out += ["<h2>Plots</h2>", *_plots(result)]
    out.append("<h2>Sync sites</h2>")
    hidden = _tables.sites_tbl(st, False, base)
    out.append(tbl(hidden) if hidden.rows else "<p>No hidden syncs outside warm-up steps.</p>")
    allowed = _tables.sites_tbl(st, True, base)
    if allowed.rows:
        out += ["<h3>Allowed syncs</h3>", tbl(allowed)]
    out.append("<h2>Per step</h2>")
    for scenario in result.scenarios:
        steps = len(analysis.per_step(result, scenario))
        out += ["<details>", f"<summary>{esc(scenario)}: {steps} steps</summary>",
                tbl(_tables.per_step_tbl(result, scenario, max_steps)), "</details>"]
    out += ['<h2 id="legend">Legend</h2>', '<dl class="legend">']
    out += [f"<dt>{esc(k)}</dt><dd>{esc(v)}</dd>" for k, v in legend(result)]
    out += style_legend(list(dict.fromkeys(used)))
    out += ["</dl>", "</body>", "</html>"]
    return "\n".join(out) + "\n"


def render_compare(df: pd.DataFrame, label_a: str = "A", label_b: str = "B", *,
                   title: str = "syncguard compare") -> str:
    """A comparison (:func:`analysis.compare` / :func:`analysis.compare_paths`) as HTML."""
    t = _tables.compare_tbl(df, "A", "B")
    return "\n".join([
        "<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
        f"<title>{esc(title)}</title>", f"<style>\n{CSS}\n</style>", "</head>", "<body>",
        f"<h1>{esc(title)}</h1>",
        f'<p class="env">A: <code>{esc(label_a)}</code> · B: <code>{esc(label_b)}</code> · '
        f"{esc(t.footer)}</p>",
        table(t), '<dl class="legend">', *style_legend(t.styles_used()), "</dl>",
        "</body>", "</html>"]) + "\n"
