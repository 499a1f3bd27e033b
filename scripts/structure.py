"""The package's size and shape, counted the same way each time: code lines (no blank, comment
or docstring lines), modules, modules over 800 lines, imports of the package's own modules
inside functions, and calls passing ten or more positional arguments.

    python scripts/structure.py [--by-folder] [PACKAGE_DIR]
"""

from __future__ import annotations

import argparse
import ast
import io
import tokenize
from collections import Counter
from pathlib import Path
from typing import Set

MAX_LINES = 800


def _docstring_lines(tree: ast.AST) -> Set[int]:
    out: Set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            first = node.body[0] if node.body else None
            if (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
                    and isinstance(first.value.value, str)):
                out.update(range(first.lineno, (first.end_lineno or first.lineno) + 1))
    return out


def code_lines(src: str, tree: ast.AST) -> int:
    docs = _docstring_lines(tree)
    skip = (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT,
            tokenize.ENDMARKER)
    lines: Set[int] = set()
    for tok in tokenize.generate_tokens(io.StringIO(src).readline):
        if tok.type not in skip:
            lines.update(n for n in range(tok.start[0], tok.end[0] + 1) if n not in docs)
    return len(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("package", nargs="?", default="syncguard")
    ap.add_argument("--by-folder", action="store_true", help="code lines per sub-package")
    args = ap.parse_args()
    root = Path(args.package)
    total = modules = lazy = 0
    big, wide = [], []
    folders: Counter = Counter()
    for path in sorted(root.rglob("*.py")):
        src = path.read_text(encoding="utf-8")
        tree = ast.parse(src)
        n = code_lines(src, tree)
        total += n
        modules += 1
        folders[str(path.parent.relative_to(root.parent))] += n
        if len(src.splitlines()) > MAX_LINES:
            big.append(f"{path} ({len(src.splitlines())} lines)")
        for fn in ast.walk(tree):
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for node in ast.walk(fn):
                    if isinstance(node, ast.ImportFrom) and (
                            node.level or (node.module or "").startswith(root.name)):
                        lazy += 1
                    elif isinstance(node, ast.Import) and any(
                            a.name.startswith(root.name) for a in node.names):
                        lazy += 1
            if isinstance(fn, ast.Call) and sum(
                    not isinstance(a, ast.Starred) for a in fn.args) >= 10:
                wide.append(f"{path}:{fn.lineno}")
    print(f"code lines: {total:,}")
    print(f"modules: {modules}")
    print(f"modules over {MAX_LINES} lines: {len(big)}" + "".join(f"\n  {b}" for b in big))
    print(f"imports of its own modules inside functions: {lazy}")
    print(f"calls with 10 or more positional arguments: {len(wide)}"
          + "".join(f"\n  {w}" for w in wide))
    if args.by_folder:
        for folder, n in sorted(folders.items()):
            print(f"  {folder}: {n:,}")


if __name__ == "__main__":
    main()
