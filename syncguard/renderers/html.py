"""One self-contained HTML report: inline CSS, plots as inline SVG, no network loads.

Plots (per scenario: latency per step per path from the timed pass, hidden syncs per step per
path from the counted pass, warm-up steps left out) are drawn with matplotlib's Agg backend.
Without matplotlib the tables are still rendered, with a note on how to get the plots. All
text from the result is escaped with :func:`html.escape`.
"""

from __future__ import annotations

import html as _html
import io
from typing import TYPE_CHECKING, Any, Dict, List, Optional

from . import _tables, analysis
from ._common import LEGEND, environment_parts, note_texts, status_text, timed_on_hardware, verdicts
from .analysis import is_missing

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from ..results import RunResult

PLOT_HINT = "pip install matplotlib"

CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:2em auto;
max-width:1100px;padding:0 1em;color:#1f2328;background:#fff;line-height:1.45}
h1{font-size:1.6em;border-bottom:1px solid #d0d7de;padding-bottom:.3em}
h2{font-size:1.3em;margin-top:1.6em;border-bottom:1px solid #d0d7de;padding-bottom:.2em}
h3{font-size:1.1em}
.env{color:#57606a;font-size:.95em}
.status-ok{color:#1a7f37;font-weight:600}
.status-bad{color:#cf222e;font-weight:700}
table{border-collapse:collapse;margin:.6em 0 1.2em;font-size:.9em}
th,td{border:1px solid #d0d7de;padding:.25em .6em;vertical-align:top}
th{background:#f6f8fa;text-align:left}
td.r{text-align:right;font-variant-numeric:tabular-nums}
td.best{color:#1a7f37;font-weight:600}
td.worst{color:#cf222e;font-weight:600}
td.note{background:#fff8c5}
tr.gap td{color:#57606a;font-style:italic;text-align:center}
code{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:.95em;
background:#f6f8fa;padding:.05em .3em;border-radius:4px}
.note{background:#fff8c5;border:1px solid #d4a72c;padding:.5em .8em;border-radius:6px}
.plot svg{max-width:100%;height:auto}
details{margin:.4em 0}
summary{cursor:pointer}
dl.legend dt{font-weight:600}
dl.legend dd{margin:0 0 .4em 1.5em;color:#57606a}
""".strip()


def esc(s: object) -> str:
    """HTML-escaped text (quotes included)."""
    return _html.escape(str(s), quote=True)


def table(t: _tables.Tbl) -> str:
    """An HTML table; ellipsis rows span all columns."""
    out = ["<table>", "<thead><tr>" + "".join(f"<th>{esc(h)}</th>" for h in t.headers)
           + "</tr></thead>", "<tbody>"]
    gaps = iter(t.gap_text)
    for row in t.rows:
        if row is None:
            out.append(f'<tr class="gap"><td colspan="{len(t.headers)}">'
                       f"{esc(next(gaps, '...'))}</td></tr>")
            continue
        cells = []
        for c, a in zip(row, t.align):
            cls = " ".join(x for x in ("r" if a == "r" else "", c.mark) if x)
            attr = f' class="{cls}"' if cls else ""
            body = f"<code>{esc(c.text)}</code>" if c.code and c.text else esc(c.text)
            cells.append(f"<td{attr}>{body}</td>")
        out.append("<tr>" + "".join(cells) + "</tr>")
    out.append("</tbody></table>")
    return "\n".join(out)


def plot_figure(result: RunResult, scenario: str) -> Any:
    """A matplotlib Figure of one scenario (Agg backend): latency per step and path (ms,
    timed pass) above hidden syncs per step and path (counted pass), warm-up steps left out.
    Raises ImportError without matplotlib."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    paths = analysis.ordered_paths(s.path for s in result.steps if s.scenario == scenario)
    lat: Dict[str, List[tuple]] = {p: [] for p in paths}
    syn: Dict[str, List[tuple]] = {p: [] for p in paths}
    for s in result.steps:
        if s.scenario != scenario or s.warmup:
            continue
        if s.pass_ == "timed" and not is_missing(s.latency_ms):
            lat[s.path].append((s.step, float(s.latency_ms)))  # type: ignore[arg-type]
        elif s.pass_ == "counted":
            syn[s.path].append((s.step, s.syncs))
    with matplotlib.rc_context({"font.size": 9}):
        fig = Figure(figsize=(8.0, 5.0), layout="constrained")
        ax1, ax2 = fig.subplots(2, 1, sharex=True)
        styles = ["-", "--", ":", "-."]
        for i, p in enumerate(paths):
            # distinct dashes and thinner lines for later paths: equal series stay visible
            ls, lw = styles[i % len(styles)], max(2.4 - 0.6 * i, 1.0)
            if lat[p]:
                xs, ys = zip(*sorted(lat[p]))
                ax1.plot(xs, ys, marker=".", linestyle=ls, linewidth=lw, label=p)
            if syn[p]:
                xs, ys = zip(*sorted(syn[p]))
                ax2.step(xs, ys, where="mid", linestyle=ls, linewidth=lw, label=p)
        ax1.set_ylabel("latency per step (ms)")
        ax1.set_title(f"{scenario}: latency, timed pass (warm-up excluded)", loc="left")
        ax2.set_ylabel("hidden syncs per step")
        ax2.set_xlabel("step")
        ax2.set_title(f"{scenario}: hidden syncs, counted pass (warm-up excluded)",
                      loc="left")
        ax2.yaxis.get_major_locator().set_params(integer=True)
        top = max([y for p in paths for _, y in syn[p]] + [1])
        ax2.set_ylim(-0.05 * top, top * 1.15)
        ax1.set_ylim(bottom=0)
        for ax in (ax1, ax2):
            ax.grid(True, alpha=0.3)
            if ax.get_legend_handles_labels()[0]:
                ax.legend(loc="best", fontsize=8)
    return fig


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
    for i, scenario in enumerate(result.scenarios):
        out.append(f"<h3>{esc(scenario)}</h3>")
        try:
            out.append(f'<div class="plot">{plot_svg(result, scenario, f"sg{i}")}</div>')
        except Exception as exc:  # a broken plot must not lose the report
            out.append(f'<p class="note">Plot failed: {esc(type(exc).__name__)}: '
                       f"{esc(exc)}</p>")
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
    out.append('<p class="note">Timeline: <a href="trace.json">trace.json</a> (Chrome trace '
               'format, written next to this report: open it in ui.perfetto.dev or '
               'chrome://tracing)</p>')
    sm = analysis.summary(result)
    if sm.empty:
        out += ['<p class="note">No steps recorded.</p>', "</body>", "</html>"]
        return "\n".join(out) + "\n"
    st = analysis.merge_paths(analysis.sites(result, max_parts=20))
    out += ["<h2>Summary</h2>", table(_tables.summary_tbl(sm))]
    out += ["<h2>Verdict</h2>", "<ul>"]
    for scenario, sentence in verdicts(sm, st, code="\x00", base=base,
                                       show_wait=timed_on_hardware(result)):
        parts = sentence.split("\x00")
        body = "".join(f"<code>{esc(p)}</code>" if i % 2 else esc(p)
                       for i, p in enumerate(parts))
        out.append(f"<li><strong>{esc(scenario)}</strong>: {body}</li>")
    out.append("</ul>")
    if plots:
        out += ["<h2>Plots</h2>", *_plots(result)]
    out.append("<h2>Sync sites</h2>")
    hidden = _tables.sites_tbl(st, False, base)
    out.append(table(hidden) if hidden.rows else "<p>No hidden syncs outside warm-up steps.</p>")
    allowed = _tables.sites_tbl(st, True, base)
    if allowed.rows:
        out += ["<h3>Allowed syncs</h3>", table(allowed)]
    out.append("<h2>Per step</h2>")
    for scenario in result.scenarios:
        steps = len(analysis.per_step(result, scenario))
        out += ["<details>", f"<summary>{esc(scenario)}: {steps} steps</summary>",
                table(_tables.per_step_tbl(result, scenario, max_steps)), "</details>"]
    out += ["<h2>Legend</h2>", '<dl class="legend">']
    out += [f"<dt>{esc(k)}</dt><dd>{esc(v)}</dd>" for k, v in LEGEND]
    out += ["</dl>", "</body>", "</html>"]
    return "\n".join(out) + "\n"


def render_compare(df: pd.DataFrame, label_a: str = "A", label_b: str = "B", *,
                   title: str = "syncguard compare") -> str:
    """A comparison (:func:`analysis.compare` / :func:`analysis.compare_paths`) as HTML."""
    n = int(df["changed"].sum()) if len(df) else 0
    return "\n".join([
        "<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
        f"<title>{esc(title)}</title>", f"<style>\n{CSS}\n</style>", "</head>", "<body>",
        f"<h1>{esc(title)}</h1>",
        f'<p class="env">A: <code>{esc(label_a)}</code> · B: <code>{esc(label_b)}</code> · '
        f"{n} of {len(df)} rows changed</p>",
        table(_tables.compare_tbl(df, "A", "B")), "</body>", "</html>"]) + "\n"
