"""What the lint reports: a :class:`Finding` for each line that can make a hidden sync, and
the severities that rank it (:func:`_sev`: the severity of a sync on a value of a given
place)."""

from __future__ import annotations

import dataclasses
from typing import Any, Dict, List, Optional

from . import context as _context
from .backends import BOTH
from .infer import DEVICE, TENSOR, UNKNOWN

CERTAIN, LIKELY, SILENT = "certain", "likely", "silent"
SEVERITIES = (CERTAIN, LIKELY, SILENT)
_RANK = {CERTAIN: 2, LIKELY: 1, SILENT: 0}


@dataclasses.dataclass
class Finding:
    """One line that can make a hidden sync. ``line``/``col`` where the syncing expression
    starts (1-based line as Python numbers lines, 0-based column in characters), ``end_line``
    where it ends; ``rule`` an id of :data:`syncguard.core.syncapis.RULES`; ``api`` the Python
    entry that syncs; ``why`` the reason; ``severity`` certain/likely/silent; ``value`` what the
    read value was inferred to be;
    ``function`` the enclosing function's qualified name; ``allowed`` the reason of an inline
    ``# syncguard: allow[reason]`` (None when not allowed); ``text`` the source line."""

    path: str
    line: int
    col: int
    end_line: int
    rule: str
    api: str
    why: str
    severity: str
    value: str
    function: str
    text: str = ""
    allowed: Optional[str] = None
    #: other candidates on the same line (``rule api``), less severe or later
    also: List[str] = dataclasses.field(default_factory=list)
    #: what result folders said of the line (:mod:`syncguard.lint.runs`): ``status``
    #: confirmed/cleared/unexercised/unknown, ``syncs``, ``steps``, ``per_step``
    run: Optional[Dict[str, Any]] = None
    #: where the line runs: serving, test, benchmark or script (:mod:`.context`)
    context: str = _context.SERVING
    #: on which backends it syncs: both, cuda or npu (from the op models, :mod:`.backends`)
    backend: str = BOTH
    #: in a notebook, the code cell (from 1) whose ``line`` it is (:mod:`.notebook`)
    cell: Optional[int] = None

    @property
    def where(self) -> str:
        """The file, and the cell of a notebook: ``nb.ipynb:cell 3``."""
        return self.path if self.cell is None else f"{self.path}:cell {self.cell}"

    @property
    def reported(self) -> bool:
        return self.severity != SILENT and self.allowed is None


def _sev(v: str, api_only: bool = False) -> str:
    """Severity of a sync on a value in place ``v``; ``api_only``: the API exists only on
    tensors, so an unknown receiver is likely a tensor."""
    if v == DEVICE:
        return CERTAIN
    if v == TENSOR or (api_only and v == UNKNOWN):
        return LIKELY
    return SILENT
