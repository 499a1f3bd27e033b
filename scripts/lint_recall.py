"""Recall of `syncguard lint` on syncguard's own sync catalogue (syncguard/core/catalogue.py).

For every case of CATCH (lines that sync) the lint must report a finding on the case's code
(its lambda, or the helper function it calls); for every case of ZERO (no sync) it must report
nothing there. Prints one line per case and the totals; `--json` prints them as JSON.

    python scripts/lint_recall.py [--json]
"""

from __future__ import annotations

import ast
import json
import os
import sys
from typing import Any, Dict, List, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from syncguard.lint import lint_file  # noqa: E402


def case_spans(path: str) -> Dict[str, List[Tuple[str, Tuple[int, int]]]]:
    """{"CATCH"|"ZERO": [(case name, (first line, last line) of its code)]}."""
    tree = ast.parse(open(path, encoding="utf-8").read())
    defs = {n.name: (n.lineno, n.end_lineno or n.lineno) for n in tree.body
            if isinstance(n, ast.FunctionDef)}
    out: Dict[str, List[Tuple[str, Tuple[int, int]]]] = {}
    for node in tree.body:
        if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
                and isinstance(node.value, ast.List)):
            continue
        rows = out.setdefault(node.target.id, [])
        for call in node.value.elts:
            assert isinstance(call, ast.Call)
            name = call.args[0].value  # type: ignore[attr-defined]
            fn = call.args[1]
            spans = []
            if isinstance(fn, ast.Lambda):
                spans.append((fn.lineno, fn.end_lineno or fn.lineno))
                # helpers the lambda calls whose body holds the sync (_if, _print, ...)
                for sub in ast.walk(fn.body):
                    if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Name) and \
                            sub.func.id in defs and sub.func.id not in ("_t", "_n", "_any",
                                                                         "_devmod", "_setup"):
                        spans.append(defs[sub.func.id])
            elif isinstance(fn, ast.Name) and fn.id in defs:
                spans.append(defs[fn.id])
            rows.append((name, spans))  # type: ignore[arg-type]
    return out  # type: ignore[return-value]


def recall(path: str) -> Dict[str, Any]:
    findings = [f for f in lint_file(path) if f.reported]
    rows = []
    for group, cases in case_spans(path).items():
        for name, spans in cases:
            hit = [f for f in findings if any(a <= f.line <= b for a, b in spans)]  # type: ignore
            rows.append({"group": group, "case": name, "flagged": bool(hit),
                         "findings": [f"{f.line} {f.rule} {f.severity} {f.api}" for f in hit]})
    catch = [r for r in rows if r["group"] == "CATCH"]
    zero = [r for r in rows if r["group"] == "ZERO"]
    return {"catch": len(catch), "caught": sum(r["flagged"] for r in catch),
            "zero": len(zero), "zero_flagged": sum(r["flagged"] for r in zero), "rows": rows}


def main() -> int:
    import syncguard.core.catalogue as _  # noqa: F401  (only its path)

    path = os.path.join(os.path.dirname(HERE), "syncguard", "core", "catalogue.py")
    r = recall(path)
    if "--json" in sys.argv:
        print(json.dumps(r, indent=2))
        return 0
    for row in r["rows"]:
        mark = "ok  " if row["flagged"] == (row["group"] == "CATCH") else "MISS" if \
            row["group"] == "CATCH" else "FP  "
        print(f"{mark} {row['group']:5} {row['case']:45} {'; '.join(row['findings'])}")
    print(f"recall {r['caught']}/{r['catch']} catalogued sync cases flagged; "
          f"{r['zero_flagged']}/{r['zero']} no-sync cases flagged")
    return 0


if __name__ == "__main__":
    sys.exit(main())
