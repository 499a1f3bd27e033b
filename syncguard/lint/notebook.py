"""Jupyter notebooks: their code cells read as one Python source (names flow from cell to
cell, as when the notebook runs top to bottom) and each finding's line mapped back to its
cell (``cell``, numbered among the code cells from 1, and the line inside it). IPython magics
and shell escapes (``%timeit``, ``!pip``, a ``%%bash`` cell) are no Python: blanked, their
lines kept."""

from __future__ import annotations

import json
import re
from typing import List, Sequence, Tuple

from .findings import Finding

#: a line magic or shell escape, alone or assigned (``files = !ls``)
_MAGIC = re.compile(r"^([ \t]*)(?:[\w.]+[ \t]*=[ \t]*)?[%!]")


def is_notebook(path: str) -> bool:
    return path.endswith(".ipynb")


def notebook_source(text: str) -> Tuple[str, List[Tuple[int, int]]]:
    """The code cells of notebook ``text`` (its JSON) as one source, and for each of its
    lines (index ``line - 1``) the (code cell, line in that cell). Raises ValueError for a
    file that is no notebook."""
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"not a notebook: {exc}") from None
    cells = doc.get("cells") if isinstance(doc, dict) else None
    if not isinstance(cells, list):
        raise ValueError("not a notebook: no list of cells")
    lines: List[str] = []
    where: List[Tuple[int, int]] = []
    number = 0
    for cell in cells:
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        number += 1
        src = cell.get("source", "")
        if isinstance(src, list):
            src = "".join(s for s in src if isinstance(s, str))
        if not isinstance(src, str):
            continue
        body = src.split("\n")
        if body and body[-1] == "":
            body.pop()
        cell_magic = bool(body) and body[0].lstrip().startswith("%%")
        for i, line in enumerate(body, 1):
            m = _MAGIC.match(line)
            if cell_magic:
                line = ""
            elif m is not None:
                line = m.group(1) + "pass"  # keeps a block that holds only the magic
            lines.append(line)
            where.append((number, i))
    return "\n".join(lines) + "\n", where


def to_cells(findings: Sequence[Finding], where: Sequence[Tuple[int, int]]) -> List[Finding]:
    """``findings`` of a notebook's source with their lines as (cell, line in the cell)."""
    for f in findings:
        if 0 < f.line <= len(where):
            cell, line = where[f.line - 1]
            end = where[f.end_line - 1] if 0 < f.end_line <= len(where) else (cell, line)
            f.cell, f.line = cell, line
            f.end_line = end[1] if end[0] == cell else line
    return list(findings)


def cell_error(exc: SyntaxError, where: Sequence[Tuple[int, int]]) -> SyntaxError:
    """A syntax error of a notebook's source, placed in its cell."""
    n = exc.lineno or 0
    if 0 < n <= len(where):
        cell, line = where[n - 1]
        out = SyntaxError(f"{exc.msg} (cell {cell}, line {line})")
        out.lineno = line
        return out
    return exc
