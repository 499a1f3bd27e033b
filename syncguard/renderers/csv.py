"""CSV: the raw steps and events of a run (pandas ``to_csv(index=False)``), and any table of
the report model (:func:`render_table`: the comparison, the summary).

Columns and units of the raw exports: :data:`syncguard.results.format.STEP_COLUMNS` and
:data:`syncguard.results.format.EVENT_COLUMNS` (plus ``filename`` and ``lineno``). Text cells go
through :func:`syncguard._escape.csv_cell`: none starts a spreadsheet formula.
"""

from __future__ import annotations

import csv as _csv
import io
from typing import IO, TYPE_CHECKING

from .._escape import csv_cell
from ..results import analysis
from ..results.analysis import is_missing
from . import _tables

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from ..results.format import RunResult


def _safe_df(df: pd.DataFrame) -> pd.DataFrame:
    """Text cells through :func:`~syncguard._escape.csv_cell` (no formula, no control
    characters); numbers untouched."""
    from pandas.api.types import is_numeric_dtype

    for col in df.columns:
        if not is_numeric_dtype(df[col].dtype):
            df[col] = df[col].map(csv_cell)
    return df


def render_steps(result: RunResult) -> str:
    """One row per step record (warm-up steps included, flagged in ``warmup``)."""
    return _safe_df(result.steps_df()).to_csv(index=False, lineterminator="\n")


#: rows of steps.csv made safe and written at a time (a long run's table is not copied whole)
_CHUNK = 1000


def write_steps(result: RunResult, f: IO[str]) -> None:
    """:func:`render_steps` written to ``f`` a slice of rows at a time: the same text (each
    column keeps the whole table's type), without a safe copy of every cell at once."""
    df = result.steps_df()
    for start in range(0, max(len(df), 1), _CHUNK):
        _safe_df(df.iloc[start:start + _CHUNK].copy()).to_csv(f, index=False, header=start == 0,
                                                       lineterminator="\n")


def render_events(result: RunResult) -> str:
    """One row per sync event (hidden and allowed, warm-up included)."""
    return _safe_df(result.events_df()).to_csv(index=False, lineterminator="\n")


def render_sites(result: RunResult) -> str:
    """One row per sync site with its totals over the whole run (every read counted, warm-up
    steps left out; :data:`syncguard.results.analysis.SITES_COLUMNS`): ``events.csv`` holds
    each site's first events whole, the later ones only as counts."""
    return _safe_df(analysis.sites(result)).to_csv(index=False, lineterminator="\n")


def render(result: RunResult, table: str = "steps") -> str:
    """``table`` is ``"steps"``, ``"events"`` or ``"sites"``."""
    if table == "steps":
        return render_steps(result)
    if table == "events":
        return render_events(result)
    if table == "sites":
        return render_sites(result)
    raise ValueError(f"csv table must be 'steps', 'events' or 'sites', not {table!r}")


def render_table(t: _tables.Table) -> str:
    """A model table as CSV: a header row of column headers, then one row per table row
    (ellipsis rows left out) holding each cell's value (its text where it has none), and a
    ``<column> style`` column after every styled column (``improved``, ``worst``...)."""
    styled = [i for i, c in enumerate(t.columns)
              if any(not isinstance(r, _tables.Gap) and r[i].style
                     for sec in t.sections for r in sec)]
    header = []
    for i, c in enumerate(t.columns):
        header.append(csv_cell(c.header))
        if i in styled:
            header.append(csv_cell(f"{c.header} style"))
    buf = io.StringIO()
    w = _csv.writer(buf, lineterminator="\n")
    w.writerow(header)
    for sec in t.sections:
        for r in sec:
            if isinstance(r, _tables.Gap):
                continue
            out = []
            for i, cell in enumerate(r):
                if cell.value is None:
                    out.append(csv_cell(cell.text))
                else:
                    out.append("" if is_missing(cell.value) else csv_cell(cell.value))
                if i in styled:
                    out.append(cell.style)
            w.writerow(out)
    return buf.getvalue()


def render_compare(df: pd.DataFrame, label_a: str = "A", label_b: str = "B",
                   title: str = "") -> str:
    """A comparison (:func:`analysis.compare` / :func:`analysis.compare_paths`) as CSV
    (``title`` is not written: a CSV file is its table alone)."""
    return render_table(_tables.compare_tbl(df, label_a, label_b))
