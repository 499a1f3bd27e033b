"""GitHub-flavoured Markdown report, fit for a PR comment or ``$GITHUB_STEP_SUMMARY``.

Title, environment line, summary table, verdict sentences, sync sites, per-step tables
collapsed in ``<details>``, and a legend. Text from the result is escaped: ``|`` in table
cells, HTML special characters outside code spans.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, List, Optional

from .._escape import html_text, md_code, md_text
from ..results import analysis
from . import _tables
from ._common import (
    environment_parts,
    legend,
    lineage_lines,
    note_texts,
    status_text,
    verdict_options,
    verdicts,
)

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from ..results.format import RunResult


def text(s: str) -> str:
    """Plain Markdown text (:func:`syncguard._escape.md_text`)."""
    return md_text(s)


def code(s: str) -> str:
    """A code span ``s`` cannot break out of (:func:`syncguard._escape.md_code`)."""
    return md_code(s)


#: styles drawn in bold (Markdown has no colour): the bad ones, notable steps, changes;
#: good ones stay plain and a compare's change column says "better" in words
BOLD = tuple(s for s, look in _tables.LOOKS.items() if look in ("bad", "note", "changed"))


def _cell(c: _tables.Cell) -> str:
    if not c.text:
        return ""
    s = code(c.text) if c.code else text(c.text)
    return f"**{s}**" if c.style in BOLD and not c.code else s


def style_legend(styles: List[str]) -> List[str]:
    """Legend lines for the styles used that Markdown draws (bold)."""
    bold = [_tables.STYLE_LEGEND[s] for s in styles if s in BOLD]
    return [f"- **bold**: {text('; '.join(bold))}"] if bold else []


def render_table(t: _tables.Table) -> str:
    """A GFM pipe table of the model; ellipsis rows carry their gap text in the first cell."""
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
    used: List[str] = []

    def table(t: _tables.Table) -> str:
        used.extend(t.styles_used())
        return render_table(t)

    out += [f"{hs} Summary", "", table(_tables.summary_tbl(sm)), ""]
    out += [f"{hs} Verdict", ""]
    for scenario, sentence in verdicts(sm, st, code=_MARK, base=base,
                                       **verdict_options(result)):
        out.append(f"- **{text(scenario)}**: {_verdict_md(sentence)}")
    out.append("")
    why = lineage_lines(st, code=_MARK, base=base)
    if why:
        out += ["Why, and how to remove it (lineage):", ""]
        out += [f"- {_verdict_md(w)}" for w in why]
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
                f"<summary>{html_text(scenario)}: {steps} steps ({n_records} step records)"
                "</summary>", "", table(t), "", "</details>", ""]
    out += [f"{hs} Legend", ""]
    out += [f"- **{text(k)}**: {text(v)}" for k, v in legend(result)]
    out += style_legend(list(dict.fromkeys(used)))
    return "\n".join(out) + "\n"


_MARK = "\x00"


def _verdict_md(sentence: str) -> str:
    """Escape a verdict sentence, keeping its :data:`_MARK`-delimited code spans as code."""
    parts = sentence.split(_MARK)
    return "".join(code(p) if i % 2 else text(p) for i, p in enumerate(parts))


def render_compare(df: pd.DataFrame, label_a: str = "A", label_b: str = "B", *,
                   title: str = "syncguard compare", heading_level: int = 2) -> str:
    """A comparison (:func:`analysis.compare` / :func:`analysis.compare_paths`) as Markdown."""
    t = _tables.compare_tbl(df, "A", "B")
    return "\n".join([
        f"{'#' * heading_level} {text(title)}", "",
        f"A: {code(label_a)} · B: {code(label_b)} · {text(t.footer)}", "",
        render_table(t), "", *style_legend(t.styles_used()), ""])
