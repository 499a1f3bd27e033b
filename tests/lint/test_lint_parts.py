"""The lint's dataflow is parts over one state object (``lint/state.py``): no class of the
lint is built from another of its classes (mixins sharing one ``self``), and no function is a
stub (a body of ``...`` only) declared so that one part can call another."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Dict, List

from _paths import ROOT


def _mixins_and_stubs(sources: Dict[str, str]) -> List[str]:
    trees = {name: ast.parse(src) for name, src in sources.items()}
    own = {n.name for t in trees.values() for n in ast.walk(t) if isinstance(n, ast.ClassDef)}
    out = []
    for name, tree in sorted(trees.items()):
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                out += [f"{name}:{node.lineno} class {node.name}({b.id})" for b in node.bases
                        if isinstance(b, ast.Name) and b.id in own]
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                body = node.body[1:] if ast.get_docstring(node) is not None else node.body
                if all(isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant)
                       and s.value.value is Ellipsis for s in body):
                    out.append(f"{name}:{node.lineno} def {node.name}: a stub")
    return out


def test_the_dataflow_has_no_mixins_and_no_stubs() -> None:
    sources = {p.name: p.read_text(encoding="utf-8")
               for p in Path(ROOT / "syncguard" / "lint").glob("*.py")}
    assert "state.py" in sources and "calls.py" in sources
    assert not _mixins_and_stubs(sources)


def test_the_check_sees_a_mixin_and_a_stub() -> None:
    planted = {"state.py": "class _State:\n    def ev(self, node): ...\n",
               "calls.py": "from .state import _State\nclass _Calls(_State):\n    pass\n"}
    assert _mixins_and_stubs(planted) == ["calls.py:2 class _Calls(_State)",
                                          "state.py:2 def ev: a stub"]
