"""What an expression is by its syntax alone, before any place is known: dotted names, the
env key of ``self.x``, number and list literals. Every part of the function dataflow
(:mod:`syncguard.lint.state`) reads expressions so."""

from __future__ import annotations

import ast
import io
import re
import tokenize
from typing import Dict, List, Optional

#: the line breaks of Python's tokenizer (and of tracebacks and editors): not the form feed,
#: ``\v``, ``\x1c``-``\x1e``, ``\x85`` or U+2028/2029 that ``str.splitlines()`` also breaks at
_LINE_BREAK = re.compile(r"\r\n|\r|\n")


def source_lines(source: str) -> List[str]:
    """The lines of ``source`` as Python numbers them (``lines[n - 1]`` is line ``n``)."""
    return _LINE_BREAK.split(source)


def char_col(line: str, col: int) -> int:
    """The character (code point) column of ``col``, a UTF-8 byte offset into ``line`` as
    :mod:`ast` gives it."""
    if col <= 0 or line.isascii():
        return col
    return len(line.encode("utf-8", "surrogatepass")[:col].decode("utf-8", "replace"))


def comments(source: str) -> Optional[Dict[int, str]]:
    """The comment of each line that has one (its text from ``#``), by Python's tokenizer;
    None when the tokenizer refuses the source."""
    out: Dict[int, str] = {}
    try:
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            if tok.type == tokenize.COMMENT:
                out[tok.start[0]] = tok.string
    except (tokenize.TokenError, SyntaxError):
        return None
    return out


def _is_list_expr(node: Optional[ast.expr]) -> bool:
    """``node`` makes a Python list: a literal, a comprehension, ``sorted()``/``list()``."""
    if isinstance(node, (ast.List, ast.ListComp)):
        return True
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and (
        node.func.id in ("sorted", "list"))


def _is_number_expr(node: ast.expr) -> bool:
    """A number literal (``0``, ``-1.5``) or ``int()``/``float()``/``bool()`` of something."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        node = node.operand
    if isinstance(node, ast.Constant):
        return isinstance(node.value, (int, float, complex))
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in (
        "int", "float", "bool", "complex")


def _last_name(node: ast.expr) -> Optional[str]:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _dotted(node: ast.expr) -> Optional[str]:
    parts: List[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    if isinstance(node, ast.Call):
        inner = _dotted(node.func)
        return f"{inner}()" + ("." + ".".join(reversed(parts)) if parts else "") if inner else None
    return None


def _attr_key(node: ast.Attribute) -> Optional[str]:
    """``self.x`` for an attribute of a plain name (the env key of attributes)."""
    if isinstance(node.value, ast.Name):
        return f"{node.value.id}.{node.attr}"
    return None
