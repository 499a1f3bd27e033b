"""Lint baselines (the gate's design, :mod:`syncguard.gate.baseline`): today's findings recorded so
CI fails only on new ones.

A finding is identified by :func:`.render.finding_key` (path, function, rule, API and the
line's text, comment dropped) plus an occurrence index ``#n`` among identical keys in file
order, never by line number: lines moving above it keep it known; editing the line itself
makes it new. File format (JSON, sorted)::

    {"format": "syncguard-lint-baseline", "version": 1,
     "findings": [{"key": "...", "path": "a.py", "line": 12, "rule": "SG103",
                   "api": "Tensor.item"}, ...]}
"""

from __future__ import annotations

import json
from typing import Dict, List, Sequence, Set, Tuple

from ..gate.baseline import BaselineError
from ..process.atomic import write_text
from ..process.untrusted import UntrustedError, load_json
from .checker import Finding
from .render import finding_key

FORMAT = "syncguard-lint-baseline"
VERSION = 1


def keyed(findings: Sequence[Finding]) -> List[Tuple[str, Finding]]:
    """``(key #n, finding)`` with occurrence indexes among identical keys."""
    seen: Dict[str, int] = {}
    out = []
    for f in findings:
        k = finding_key(f)
        n = seen.get(k, 0)
        seen[k] = n + 1
        out.append((f"{k} #{n}", f))
    return out


def save(path: str, findings: Sequence[Finding]) -> None:
    """Write the baseline atomically through the project's one writer
    (:func:`syncguard.process.atomic.write_text`: an unpredictable temporary name, never through
    a link, a folder refused, a full disk one line)."""
    rows = [{"key": k, "path": f.path, "line": f.line, "rule": f.rule, "api": f.api}
            for k, f in keyed(findings)]
    rows.sort(key=lambda r: (r["path"], r["line"], r["key"]))
    write_text(path, json.dumps({"format": FORMAT, "version": VERSION, "findings": rows},
                                indent=2) + "\n")


#: a lint baseline larger than this is not one (a 10,000-finding baseline is about 2.5 MB)
MAX_BYTES = 64 << 20


def load(path: str) -> Set[str]:
    """The keys of a lint baseline; :class:`~syncguard.gate.baseline.BaselineError` names the file
    and the problem. Read through the project's one loader of untrusted files (a FIFO or
    device refused without blocking, size and nesting bounded)."""
    try:
        data = load_json(path, "lint baseline", MAX_BYTES)
    except UntrustedError as exc:
        raise BaselineError(str(exc)) from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise BaselineError(f"{path} is not a syncguard lint baseline (expected an object "
                            f'with "format": "{FORMAT}")')
    if data.get("version") != VERSION:
        raise BaselineError(f"lint baseline {path} has version {str(data.get('version'))[:40]!r}; "
                            f"this syncguard reads version {VERSION}")
    rows = data.get("findings")
    if not isinstance(rows, list) or not all(
            isinstance(r, dict) and isinstance(r.get("key"), str) for r in rows):
        raise BaselineError(f"lint baseline {path}: findings must be a list of objects with "
                            f"a string key")
    return {r["key"] for r in rows}


def new_only(findings: Sequence[Finding], known: Set[str]) -> Tuple[List[Finding], int]:
    """(findings not in the baseline, how many were known)."""
    out, n = [], 0
    for k, f in keyed(findings):
        if k in known:
            n += 1
        else:
            out.append(f)
    return out, n
