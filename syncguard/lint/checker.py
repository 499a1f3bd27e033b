"""The lint's analysis of one source file: rules from :mod:`syncguard.core.syncapis`, ranked by a
small dataflow per function that tracks what lives on the host and what on the device.

One pass over each function's statements in order: assignments bind names (and ``self.x``
attributes) to a place (:mod:`syncguard.lint.infer`), branches are joined, and every
expression that can sync is checked against the place of the value it reads. A finding is
``certain`` when that value is a device tensor, ``likely`` when it is a tensor (or, for
tensor-only APIs, anything) of unknown place, and ``silent`` when it is on the host: silent
findings are not reported but are candidate lines for ``--with-run``.

:class:`.state.Func` is each function's state: its names' places and shapes, its findings.
The dataflow's parts are functions of that state and a node: the functions and classes of
the file (:mod:`.functions`), shapes (:mod:`.shapes`), indexing (:mod:`.indexing`), calls
(:mod:`.calls`), statements (:mod:`.statements`) and the expressions, here, with the tables
that give the state the part of each node class (:data:`_EV`, :data:`_STMT`).
"""

from __future__ import annotations

import ast
import re
from typing import Dict, List, Optional, Set, Tuple

from . import context as _context
from . import statements
from .calls import call, format_args
from .findings import _RANK, CERTAIN, LIKELY, SEVERITIES, SILENT, Finding, _sev
from .functions import params, reread_module
from .indexing import subscript
from .infer import (
    DEVICE,
    HOST,
    PINNED,
    PY,
    TENSOR,
    UNKNOWN,
    by_name,
    combine,
    is_tensorish,
    join,
    obj_key,
    syncs_on,
)
from .project import ModuleSummary, Project
from .state import Ctx, Func, Part, _imports
from .statements import _element, bind
from .syntax import _attr_key, comments

__all__ = ["CERTAIN", "LIKELY", "SILENT", "SEVERITIES", "Finding", "check_source", "check_tree"]

_TORCH_WORD = re.compile(r"\btorch\b")
#: array libraries whose arrays share the tensor-only method names (item, tolist, any...)
_OTHER_ARRAY_LIBS = frozenset({"numpy", "pandas", "jax", "tensorflow", "cupy", "mlx", "polars",
                               "scipy", "xarray", "dask"})
_ALLOW = re.compile(r"#\s*syncguard:\s*allow\[([^\]]*)\]")

#: attributes whose value is a Python value whatever the tensor's place
_PY_ATTRS = frozenset({"shape", "dtype", "device", "ndim", "is_cuda", "is_cpu", "layout",
                       "requires_grad", "is_leaf", "itemsize", "nbytes"})


def ev_other(st: Func, node: ast.AST) -> str:
    # await, yield, ...: look inside, know nothing of the result
    if isinstance(node, (ast.Yield, ast.YieldFrom)):
        st.generator = True  # a call of it runs nothing until iterated
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.expr):
            st.ev(child)
    return UNKNOWN


def binop(st: Func, node: ast.BinOp) -> str:
    if isinstance(node.op, ast.Mod) and isinstance(node.left, ast.Constant) and (
            isinstance(node.left.value, str)):
        st.ev(node.right)
        format_args(st, node, node.right.elts if isinstance(node.right, ast.Tuple)
                    else [node.right], "%-formatting")
        return PY
    return combine([st.ev(node.left), st.ev(node.right)])


def unaryop(st: Func, node: ast.UnaryOp) -> str:
    v = st.ev(node.operand)
    if isinstance(node.op, ast.Not):
        st.condition(node.operand, v)
        return PY
    return v


def boolop(st: Func, node: ast.BoolOp) -> str:
    vals = [st.ev(node.values[0])]
    synced = st.synced  # the operands after the first may not run
    vals += [st.ev(x) for x in node.values[1:]]
    st.synced = synced
    for x, v in zip(node.values[:-1], vals[:-1]):
        st.condition(x, v)
    return combine(vals)


def ifexp(st: Func, node: ast.IfExp) -> str:
    st.condition(node.test, st.ev(node.test))
    synced = st.synced
    body = st.ev(node.body)
    st.synced = synced  # one arm runs: neither is sure to
    orelse = st.ev(node.orelse)
    st.synced = synced
    return join(body, orelse)


def container(st: Func, node: ast.expr) -> str:
    return _container([st.ev(e) for e in node.elts])  # type: ignore[attr-defined]


def dict_display(st: Func, node: ast.Dict) -> str:
    for k in node.keys:
        st.ev(k)
    return _container([st.ev(v) for v in node.values])


def joinedstr(st: Func, node: ast.JoinedStr) -> str:
    for part in node.values:
        if isinstance(part, ast.FormattedValue):
            v = st.ev(part.value)
            if syncs_on(v):
                st.flag(part.value, "SG501", "Tensor.__format__",
                        "an f-string formats the tensor on the host", _sev(v), v)
            if part.format_spec is not None:
                st.ev(part.format_spec)
    return PY


def formattedvalue(st: Func, node: ast.FormattedValue) -> str:
    st.ev(node.value)
    return PY


def starred(st: Func, node: ast.Starred) -> str:
    return st.ev(node.value)


def namedexpr(st: Func, node: ast.NamedExpr) -> str:
    v = st.ev(node.value)
    bind(st, node.target, v)
    return v


def lambda_(st: Func, node: ast.Lambda) -> str:
    sub = Func(st.ctx, f"{st.name}.<lambda>", st.env)
    params(sub, node.args)
    sub.ev(node.body)
    return PY


def slice_(st: Func, node: ast.Slice) -> str:
    for b in (node.lower, node.upper, node.step):
        st.ev(b)
    return PY


def comprehension(st: Func, node: ast.expr) -> str:
    saved = dict(st.env)
    saved_shapes = dict(st.shapes)
    synced = st.synced  # over an empty iterable the body never runs
    for gen in node.generators:  # type: ignore[attr-defined]
        bind(st, gen.target, _element(st.ev(gen.iter)))
        for cond in gen.ifs:
            st.condition(cond, st.ev(cond))
    if isinstance(node, ast.DictComp):
        st.ev(node.key)
        v = st.ev(node.value)
    else:
        v = st.ev(node.elt)  # type: ignore[attr-defined]
    st.env = saved
    st.shapes = saved_shapes
    st.synced = synced
    return v if v != PY else PY


def attribute(st: Func, node: ast.Attribute) -> str:
    if st.ctx.qual(node) is not None:
        return PY  # torch.float32, np.int64, torch.cuda...
    base = st.ev(node.value)
    a = node.attr
    if a in _PY_ATTRS:
        return PY
    if a in ("T", "mT", "H", "data", "real", "imag", "grad"):
        return base
    key = _attr_key(node)
    if key is not None and key in st.env:
        return st.env[key]
    cls = obj_key(base)
    if cls is not None and cls in st.ctx.classes:
        v = st.ctx.classes[cls].attrs.get(a)
        if v is not None:
            hint = by_name(a)
            # a field typed torch.Tensor named seq_lens_cpu: the name says where
            return hint if v == TENSOR and hint in (HOST, PINNED, DEVICE) else v
    if isinstance(node.value, ast.Name) and node.value.id in st.ctx.modules:
        summary = st.module_summary(node.value.id)
        if summary is not None and a in summary.globals:
            return summary.globals[a]
    return by_name(a) or UNKNOWN


def compare(st: Func, node: ast.Compare) -> str:
    left = st.ev(node.left)
    vals = [left]
    for op, comp in zip(node.ops, node.comparators):
        v = st.ev(comp)
        if isinstance(op, (ast.Is, ast.IsNot)):
            return PY
        if isinstance(op, (ast.In, ast.NotIn)):
            # only a known device tensor: `k in <collection of tensors>` is common
            if v == DEVICE:
                st.api_flag(node, "__contains__", "Tensor", _sev(v), v)
            return PY
        vals.append(v)
    res = combine(vals)
    if len(node.ops) > 1 and is_tensorish(res):
        st.condition(node, res)  # a < b < c reads a < b as a bool
    if res == UNKNOWN and any(v == PY for v in vals):
        return UNKNOWN
    return res

#: the part that reads each expression class (:meth:`.state.Func.ev`; the class of an
#: expression none lists, await and yield among them, is read by :func:`ev_other`)
_EV: Dict[type, Part] = {
    ast.Attribute: attribute, ast.Call: call, ast.Subscript: subscript, ast.BinOp: binop,
    ast.UnaryOp: unaryop, ast.BoolOp: boolop, ast.Compare: compare, ast.IfExp: ifexp,
    ast.Tuple: container, ast.List: container, ast.Set: container, ast.Dict: dict_display,
    ast.JoinedStr: joinedstr, ast.FormattedValue: formattedvalue, ast.Starred: starred,
    ast.NamedExpr: namedexpr, ast.Lambda: lambda_, ast.ListComp: comprehension,
    ast.SetComp: comprehension, ast.GeneratorExp: comprehension, ast.DictComp: comprehension,
    ast.Slice: slice_, ast.Constant: lambda st, node: PY,
    ast.Name: lambda st, node: st.lookup(node.id), ast.AST: ev_other,
}
#: the part that runs each statement class (:mod:`.statements`; :meth:`.state.Func.body`)
_STMT: Dict[type, Part] = {
    ast.FunctionDef: statements.def_stmt, ast.AsyncFunctionDef: statements.def_stmt,
    ast.ClassDef: statements.class_stmt, ast.Assign: statements.assign,
    ast.AnnAssign: statements.annassign, ast.AugAssign: statements.augassign,
    ast.If: statements.if_stmt, ast.While: statements.while_stmt, ast.For: statements.for_stmt,
    ast.AsyncFor: statements.for_stmt, ast.Assert: statements.assert_stmt,
    ast.Return: statements.return_stmt, ast.Expr: statements.expr_stmt,
    ast.With: statements.with_stmt, ast.AsyncWith: statements.with_stmt,
    ast.Try: statements.try_stmt, ast.Import: statements.import_stmt,
    ast.ImportFrom: statements.import_stmt, ast.AST: statements.stmt_other,
}
if hasattr(ast, "TryStar"):  # Python 3.11
    _STMT[ast.TryStar] = statements.try_stmt


def _container(vals: List[str]) -> str:
    """A tuple/list/dict literal: its elements' place, UNKNOWN when tensors and Python
    values mix (``("name", tensor)``), PY when empty."""
    if not vals or all(v == PY for v in vals):
        return PY
    if any(v == PY for v in vals):
        return UNKNOWN
    return combine(vals)


def check_source(source: str, path: str) -> List[Finding]:
    """Every candidate line of ``source`` (all severities, silent ones included), one per
    line: the most severe first candidate, with the others in ``also``. Raises SyntaxError."""
    tree = ast.parse(source, filename=path)
    return check_tree(tree, source, path)


def check_tree(tree: ast.Module, source: str, path: str, project: Optional[Project] = None,
               real_path: Optional[str] = None) -> List[Finding]:
    """:func:`check_source` of a parsed ``tree``; with ``project``, names imported from the
    project's modules read already are known, and this module's summary is added to it
    (``real_path`` the file as the project knows it)."""
    module = project.module_of(real_path or path) if project is not None else ""
    ctx = Ctx(path, source, _EV, _STMT, project, module)
    for s in tree.body:
        if isinstance(s, (ast.Import, ast.ImportFrom)):
            _imports(ctx, s, {})
        elif isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)):
            ctx.defs[s.name] = s
    # the substring first: a scan for the word is slow on a file that never says it
    ctx.has_torch = "torch" in source and _TORCH_WORD.search(source) is not None
    ctx.other_arrays = not ctx.has_torch and any(
        v.split(".")[0] in _OTHER_ARRAY_LIBS for v in ctx.names.values())
    ctx.script_funcs = _context.script_functions(tree)
    top = Func(ctx, "<module>")
    top.body(tree.body)
    reread_module(top)
    if project is not None and module:
        project.summaries[module] = ModuleSummary(
            dict(ctx.returns), {n: k for n, k in ctx.local_classes.items()},
            {k: v for k, v in top.env.items() if "." not in k and v != UNKNOWN
             and k not in ctx.local_classes and k not in ctx.defs}, dict(ctx.always))
    return _one_per_line(ctx.findings, ctx)


def _one_per_line(found: List[Finding], ctx: Ctx) -> List[Finding]:
    by_line: Dict[int, List[Finding]] = {}
    seen: Set[Tuple[int, int, str, str]] = set()
    for f in found:
        k = (f.line, f.col, f.rule, f.api)
        if k in seen:
            continue
        seen.add(k)
        by_line.setdefault(f.line, []).append(f)
    out: List[Finding] = []
    # the file's comments, read at the first marker (None: the tokenizer refused the file,
    # the marker on the line is taken as it is)
    notes: Optional[Dict[int, str]] = None
    read_notes = False
    for line in sorted(by_line):
        fs = sorted(by_line[line], key=lambda f: (-_RANK[f.severity], f.col))
        best = fs[0]
        best.also = [f"{f.rule} {f.api}" for f in fs[1:] if f.severity != SILENT]
        best.end_line = max(f.end_line for f in fs)
        lines = ctx.lines
        m = _ALLOW.search(lines[line - 1]) if 0 < line <= len(lines) else None
        if m is not None:
            # a marker counts only in a comment: a log message may mention one
            if not read_notes:
                notes, read_notes = comments(ctx.source), True
            if notes is not None:
                m = _ALLOW.search(notes.get(line, ""))
        if m is not None:
            best.allowed = m.group(1).strip() or "allowed"
        out.append(best)
    return out
