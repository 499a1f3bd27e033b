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
import os
from typing import Dict, List, Sequence, Set, Tuple

from ..gate.baseline import BaselineError
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
    rows = [{"key": k, "path": f.path, "line": f.line, "rule": f.rule, "api": f.api}
            for k, f in keyed(findings)]
    rows.sort(key=lambda r: (r["path"], r["line"], r["key"]))
    tmp = f"{path}.tmp{os.getpid()}"
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump({"format": FORMAT, "version": VERSION, "findings": rows}, f, indent=2)
        f.write("\n")
    os.replace(tmp, path)


def load(path: str) -> Set[str]:
    """The keys of a lint baseline; :class:`~syncguard.gate.baseline.BaselineError` names the file
    and the problem."""
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except OSError as exc:
        raise BaselineError(f"cannot read lint baseline {path}: {exc.strerror or exc}"
                            ) from None
    except ValueError as exc:
        raise BaselineError(f"lint baseline {path} is not valid JSON: {exc}") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise BaselineError(f"{path} is not a syncguard lint baseline (expected an object "
                            f'with "format": "{FORMAT}")')
    if data.get("version") != VERSION:
        raise BaselineError(f"lint baseline {path} has version {data.get('version')!r}; "
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
