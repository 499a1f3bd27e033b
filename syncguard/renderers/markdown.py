"""GitHub-flavoured Markdown report, fit for a PR comment or ``$GITHUB_STEP_SUMMARY``.

Title, environment line, summary table, verdict sentences, sync sites, per-step tables
collapsed in ``<details>``, and a legend. Text from the result is escaped: ``|`` in table
cells, HTML special characters outside code spans.
"""

from __future__ import annotations

import html as _html
from typing import TYPE_CHECKING, List, Optional

from . import _tables, analysis
from ._common import LEGEND, environment_parts, note_texts, status_text, timed_on_hardware, verdicts

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from ..results import RunResult


def text(s: str) -> str:
    """Plain Markdown text: HTML special characters, backslashes, ``*``, ``_``, `` ` ``,
    ``[``, ``]`` and ``|`` escaped, newlines as spaces."""
    s = _html.escape(str(s), quote=False).replace("\n", " ")
    for ch in "\\`*_[]|":
        s = s.replace(ch, "\\" + ch)
    return s


def code(s: str) -> str:
    """A code span that survives backticks in ``s`` and sits safely in a table cell."""
    s = str(s).replace("\n", " ").replace("|", "\\|")
    fence = "``" if "`" in s else "`"
    pad = " " if s.startswith("`") or s.endswith("`") else ""
    return f"{fence}{pad}{s}{pad}{fence}"


def _cell(c: _tables.Cell) -> str:
    if not c.text:
        return ""
    s = code(c.text) if c.code else text(c.text)
    return f"**{s}**" if c.mark in ("worst", "note") and not c.code else s


def table(t: _tables.Tbl) -> str:
    """A GFM pipe table; ellipsis rows (``None``) carry their gap text in the first cell."""
    sep = {"l": ":---", "r": "---:"}
    lines = ["| " + " | ".join(text(h) for h in t.headers) + " |",
             "| " + " | ".join(sep[a] for a in t.align) + " |"]
    gaps = iter(t.gap_text)
    for row in t.rows:
        if row is None:
            cells = [text(next(gaps, "..."))] + [""] * (len(t.headers) - 1)
        else:
            cells = [_cell(c) for c in row]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def render(result: RunResult, *, title: str = "syncguard report", show_time: bool = True,
           max_steps: int = 200, base: Optional[str] = None, heading_level: int = 2) -> str:
    """The report. ``heading_level`` is the level of the title (sections one below);
    ``max_steps`` steps per scenario are listed in full, longer runs are cut to the first and
    last 10 and the notable steps; ``base`` is the directory sites are shown relative to."""
    h = "#" * heading_level
    hs = "#" * (heading_level + 1)
    out: List[str] = [f"{h} {text(title)}", ""]
    out.append(" · ".join(text(p) for p in environment_parts(result, show_time)) + " · "
               + (text(status_text(result)) if result.complete
                  else f"**{text(status_text(result))}**"))
    out.append("")
    for n in note_texts(result):
        out += [f"> {text(n)}", ""]
    sm = analysis.summary(result)
    if sm.empty:
        out += ["**No steps recorded.**", ""]
        return "\n".join(out)
    st = analysis.merge_paths(analysis.sites(result, max_parts=20))
    out += [f"{hs} Summary", "", table(_tables.summary_tbl(sm)), ""]
    out += [f"{hs} Verdict", ""]
    for scenario, sentence in verdicts(sm, st, code=_MARK, base=base,
                                       show_wait=timed_on_hardware(result)):
        out.append(f"- **{text(scenario)}**: {_verdict_md(sentence)}")
    out.append("")
    out += [f"{hs} Sync sites", ""]
    hidden = _tables.sites_tbl(st, False, base)
    if hidden.rows:
        out += [table(hidden), ""]
    else:
        out += ["No hidden syncs outside warm-up steps.", ""]
    allowed = _tables.sites_tbl(st, True, base)
    if allowed.rows:
        out += ["Allowed syncs:", "", table(allowed), ""]
    out += [f"{hs} Per step", ""]
    for scenario in result.scenarios:
        t = _tables.per_step_tbl(result, scenario, max_steps)
        n_records = sum(1 for s in result.steps if s.scenario == scenario)
        steps = len(analysis.per_step(result, scenario))
        out += ["<details>",
                f"<summary>{_html.escape(scenario)}: {steps} steps ({n_records} step records)"
                "</summary>", "", table(t), "", "</details>", ""]
    out += [f"{hs} Legend", ""]
    out += [f"- **{text(k)}**: {text(v)}" for k, v in LEGEND]
    return "\n".join(out) + "\n"


_MARK = "\x00"


def _verdict_md(sentence: str) -> str:
    """Escape a verdict sentence, keeping its :data:`_MARK`-delimited code spans as code."""
    parts = sentence.split(_MARK)
    return "".join(code(p) if i % 2 else text(p) for i, p in enumerate(parts))


def render_compare(df: pd.DataFrame, label_a: str = "A", label_b: str = "B", *,
                   title: str = "syncguard compare", heading_level: int = 2) -> str:
    """A comparison (:func:`analysis.compare` / :func:`analysis.compare_paths`) as Markdown."""
    n = int(df["changed"].sum()) if len(df) else 0
    return "\n".join([
        f"{'#' * heading_level} {text(title)}", "",
        f"A: {code(label_a)} · B: {code(label_b)} · {n} of {len(df)} rows changed "
        f"(hidden syncs differ, the modeled latency moved, or the 95% interval of the median "
        f"latency ratio B / A excludes 1.00x)", "",
        table(_tables.compare_tbl(df, "A", "B")), ""])
