"""``--step`` on the program's own functions (``__main__:decode_step``): the program's code
runs as ``__main__``, never imported, so no import hook sees it. Its source is compiled with
one extra call after each top-level statement that binds a named function or class; the call
wraps it before the code below can call it. Line numbers and the traceback stay the
program's own (the inserted calls carry the line of the statement before them)."""

from __future__ import annotations

import ast
import builtins
import importlib.util
import os
import sys
import types
from typing import Any, Callable, Iterable, Optional, Set

BIND = "__syncguard_bind__"


def _bound_names(node: ast.stmt) -> Set[str]:
    """Names a top-level statement may bind (an over-approximation: a def, class, assignment
    or import anywhere inside it)."""
    out: Set[str] = set()
    for sub in ast.walk(node):
        if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(sub.name)
        elif isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store):
            out.add(sub.id)
        elif isinstance(sub, ast.alias):
            out.add((sub.asname or sub.name).split(".")[0])
    return out


def compile_bound(source: str, filename: str, names: Iterable[str]) -> types.CodeType:
    """``source`` compiled with a ``__syncguard_bind__()`` call after each top-level statement
    that binds one of ``names``."""
    wanted = set(names)
    tree = ast.parse(source, filename)
    body = []
    for node in tree.body:
        body.append(node)
        if _bound_names(node) & wanted:
            call = ast.Expr(ast.Call(ast.Name(BIND, ast.Load()), [], []))
            for n in (call, call.value, call.value.func):  # type: ignore[attr-defined]
                n.lineno = n.end_lineno = getattr(node, "end_lineno", node.lineno)
                n.col_offset = n.end_col_offset = 0
            body.append(call)
    tree.body = body
    return compile(tree, filename, "exec", dont_inherit=True)


def main_source(target: str, module: bool) -> Optional[str]:
    """The file whose code runs as ``__main__``: the script, or the ``-m`` module's source
    (``PKG/__main__.py`` for a package); None when it is not a plain source file."""
    if not module:
        return os.path.abspath(target)
    try:
        spec = importlib.util.find_spec(target)
        if spec is not None and spec.submodule_search_locations is not None:
            spec = importlib.util.find_spec(f"{target}.__main__")
    except (ImportError, ValueError):
        return None
    origin = getattr(spec, "origin", None)
    return origin if origin and origin.endswith(".py") else None


def run_bound(target: str, module: bool, names: Iterable[str],
              on_bind: Callable[[types.ModuleType], Any]) -> None:
    """Run the program's code as ``__main__`` (as runpy does: a fresh ``__main__`` module in
    ``sys.modules`` during the run, ``sys.argv[0]`` the file), calling ``on_bind(module)``
    after each statement that binds one of ``names``. Falls back to nothing: the caller
    checks :func:`main_source` first."""
    path = main_source(target, module)
    assert path is not None
    with open(path, encoding="utf-8") as f:
        source = f.read()
    code = compile_bound(source, path, names)
    mod = types.ModuleType("__main__")
    spec = None
    if module:
        name = target if not path.endswith("__main__.py") else f"{target}.__main__"
        spec = importlib.util.find_spec(name)
    mod.__dict__.update({
        "__file__": path, "__cached__": None, "__builtins__": builtins, "__spec__": spec,
        "__loader__": getattr(spec, "loader", None), "__package__": getattr(
            spec, "parent", None),
        BIND: lambda: on_bind(mod),
    })
    saved = sys.modules.get("__main__")
    sys.modules["__main__"] = mod
    if module:
        sys.argv[0] = path
    try:
        exec(code, mod.__dict__)
    finally:
        if saved is not None:
            sys.modules["__main__"] = saved
