"""The lint's analysis of one source file: rules from :mod:`syncguard.core.syncapis`, ranked by a
small dataflow per function that tracks what lives on the host and what on the device.

One pass over each function's statements in order: assignments bind names (and ``self.x``
attributes) to a place (:mod:`syncguard.lint.infer`), branches are joined, and every
expression that can sync is checked against the place of the value it reads. A finding is
``certain`` when that value is a device tensor, ``likely`` when it is a tensor (or, for
tensor-only APIs, anything) of unknown place, and ``silent`` when it is on the host: silent
findings are not reported but are candidate lines for ``--with-run``.

:class:`_Func` is that dataflow, one part per concern: its state, with the binding and lookup
of names (:mod:`.state`), shapes (:mod:`.shapes`), indexing (:mod:`.indexing`), calls
(:mod:`.calls`) and statements (:mod:`.statements`). The expressions are here, with the
dispatch tables of :meth:`_Func.ev` and :meth:`_Func.stmt`, which name methods of every part.
"""

from __future__ import annotations

import ast
import re
from typing import Any, Callable, Dict, List, Optional, Sequence, Set, Tuple

from . import context as _context
from .calls import _Calls
from .findings import _RANK, CERTAIN, LIKELY, SEVERITIES, SILENT, Finding, _sev
from .indexing import _Indexing
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
from .shapes import _Shapes
from .state import _Ctx, _imports
from .statements import _element, _Statements
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


class _Func(_Shapes, _Indexing, _Calls, _Statements):
    """The dataflow over one function (or the module body)."""

    # -- expressions ------------------------------------------------------------------
    def ev(self, node: Optional[ast.AST]) -> str:
        """The place of the value ``node`` evaluates to; flags the syncs it makes on the
        way. One dispatch on the node's class (:data:`_EV`); a class not in the table (a
        subclass of a node class) goes through :meth:`ev_any`."""
        if node is None:
            return PY
        cls = node.__class__
        if cls is ast.Name:
            return self.lookup(node.id)  # type: ignore[attr-defined]
        if cls is ast.Constant:
            return PY
        handler = _EV.get(cls)
        if handler is not None:
            return handler(self, node)
        return self.ev_any(node)

    def ev_any(self, node: ast.AST) -> str:  # noqa: C901 - one dispatch on node type
        """:meth:`ev` by ``isinstance``, for node classes :data:`_EV` does not list."""
        if isinstance(node, ast.Constant):
            return PY
        if isinstance(node, ast.Name):
            return self.lookup(node.id)
        if isinstance(node, ast.Attribute):
            return self.attribute(node)
        if isinstance(node, ast.Call):
            return self.call(node)
        if isinstance(node, ast.Subscript):
            return self.subscript(node)
        if isinstance(node, ast.BinOp):
            return self.binop(node)
        if isinstance(node, ast.UnaryOp):
            return self.unaryop(node)
        if isinstance(node, ast.BoolOp):
            return self.boolop(node)
        if isinstance(node, ast.Compare):
            return self.compare(node)
        if isinstance(node, ast.IfExp):
            return self.ifexp(node)
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            return self.container(node)
        if isinstance(node, ast.Dict):
            return self.dict_display(node)
        if isinstance(node, ast.JoinedStr):
            return self.joinedstr(node)
        if isinstance(node, ast.FormattedValue):
            return self.formattedvalue(node)
        if isinstance(node, ast.Starred):
            return self.ev(node.value)
        if isinstance(node, ast.NamedExpr):
            return self.namedexpr(node)
        if isinstance(node, ast.Lambda):
            return self.lambda_(node)
        if isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
            return self.comprehension(node)
        if isinstance(node, ast.Slice):
            return self.slice_(node)
        return self.ev_other(node)

    def ev_other(self, node: ast.AST) -> str:
        # await, yield, ...: look inside, know nothing of the result
        if isinstance(node, (ast.Yield, ast.YieldFrom)):
            self.generator = True  # a call of it runs nothing until iterated
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.expr):
                self.ev(child)
        return UNKNOWN

    def binop(self, node: ast.BinOp) -> str:
        if isinstance(node.op, ast.Mod) and isinstance(node.left, ast.Constant) and (
                isinstance(node.left.value, str)):
            self.ev(node.right)
            self.format_args(node, node.right.elts if isinstance(node.right, ast.Tuple)
                             else [node.right], "%-formatting")
            return PY
        return combine([self.ev(node.left), self.ev(node.right)])

    def unaryop(self, node: ast.UnaryOp) -> str:
        v = self.ev(node.operand)
        if isinstance(node.op, ast.Not):
            self.condition(node.operand, v)
            return PY
        return v

    def boolop(self, node: ast.BoolOp) -> str:
        vals = [self.ev(node.values[0])]
        synced = self.synced  # the operands after the first may not run
        vals += [self.ev(x) for x in node.values[1:]]
        self.synced = synced
        for x, v in zip(node.values[:-1], vals[:-1]):
            self.condition(x, v)
        return combine(vals)

    def ifexp(self, node: ast.IfExp) -> str:
        self.condition(node.test, self.ev(node.test))
        synced = self.synced
        body = self.ev(node.body)
        self.synced = synced  # one arm runs: neither is sure to
        orelse = self.ev(node.orelse)
        self.synced = synced
        return join(body, orelse)

    def container(self, node: ast.expr) -> str:
        return _container([self.ev(e) for e in node.elts])  # type: ignore[attr-defined]

    def dict_display(self, node: ast.Dict) -> str:
        for k in node.keys:
            self.ev(k)
        return _container([self.ev(v) for v in node.values])

    def joinedstr(self, node: ast.JoinedStr) -> str:
        for part in node.values:
            if isinstance(part, ast.FormattedValue):
                v = self.ev(part.value)
                if syncs_on(v):
                    self.flag(part.value, "SG501", "Tensor.__format__",
                              "an f-string formats the tensor on the host", _sev(v), v)
                if part.format_spec is not None:
                    self.ev(part.format_spec)
        return PY

    def formattedvalue(self, node: ast.FormattedValue) -> str:
        self.ev(node.value)
        return PY

    def starred(self, node: ast.Starred) -> str:
        return self.ev(node.value)

    def namedexpr(self, node: ast.NamedExpr) -> str:
        v = self.ev(node.value)
        self.bind(node.target, v)
        return v

    def lambda_(self, node: ast.Lambda) -> str:
        sub = _Func(self.ctx, f"{self.name}.<lambda>", self.env)
        sub.params(node.args)
        sub.ev(node.body)
        return PY

    def slice_(self, node: ast.Slice) -> str:
        for b in (node.lower, node.upper, node.step):
            self.ev(b)
        return PY

    def comprehension(self, node: ast.expr) -> str:
        saved = dict(self.env)
        saved_shapes = dict(self.shapes)
        synced = self.synced  # over an empty iterable the body never runs
        for gen in node.generators:  # type: ignore[attr-defined]
            self.bind(gen.target, _element(self.ev(gen.iter)))
            for cond in gen.ifs:
                self.condition(cond, self.ev(cond))
        if isinstance(node, ast.DictComp):
            self.ev(node.key)
            v = self.ev(node.value)
        else:
            v = self.ev(node.elt)  # type: ignore[attr-defined]
        self.env = saved
        self.shapes = saved_shapes
        self.synced = synced
        return v if v != PY else PY

    def attribute(self, node: ast.Attribute) -> str:
        if self.ctx.qual(node) is not None:
            return PY  # torch.float32, np.int64, torch.cuda...
        base = self.ev(node.value)
        a = node.attr
        if a in _PY_ATTRS:
            return PY
        if a in ("T", "mT", "H", "data", "real", "imag", "grad"):
            return base
        key = _attr_key(node)
        if key is not None and key in self.env:
            return self.env[key]
        cls = obj_key(base)
        if cls is not None and cls in self.ctx.classes:
            v = self.ctx.classes[cls].attrs.get(a)
            if v is not None:
                hint = by_name(a)
                # a field typed torch.Tensor named seq_lens_cpu: the name says where
                return hint if v == TENSOR and hint in (HOST, PINNED, DEVICE) else v
        if isinstance(node.value, ast.Name) and node.value.id in self.ctx.modules:
            summary = self.module_summary(node.value.id)
            if summary is not None and a in summary.globals:
                return summary.globals[a]
        return by_name(a) or UNKNOWN

    def compare(self, node: ast.Compare) -> str:
        left = self.ev(node.left)
        vals = [left]
        for op, comp in zip(node.ops, node.comparators):
            v = self.ev(comp)
            if isinstance(op, (ast.Is, ast.IsNot)):
                return PY
            if isinstance(op, (ast.In, ast.NotIn)):
                # only a known device tensor: `k in <collection of tensors>` is common
                if v == DEVICE:
                    self.api_flag(node, "__contains__", "Tensor", _sev(v), v)
                return PY
            vals.append(v)
        res = combine(vals)
        if len(node.ops) > 1 and is_tensorish(res):
            self.condition(node, res)  # a < b < c reads a < b as a bool
        if res == UNKNOWN and any(v == PY for v in vals):
            return UNKNOWN
        return res

    def ev_quiet(self, node: ast.expr) -> str:
        saved = self.ctx.collect
        self.ctx.collect = False
        try:
            return self.ev(node)
        finally:
            self.ctx.collect = saved

    # -- statements: the dispatch over :data:`_STMT` (the handlers: :mod:`.statements`) --
    def body(self, stmts: Sequence[ast.stmt]) -> None:
        get = _STMT.get
        for s in stmts:  # :meth:`stmt`, inline
            handler = get(s.__class__)
            if handler is not None:
                handler(self, s)
            else:
                self.stmt_any(s)

    def stmt(self, s: ast.stmt) -> None:
        """Run one statement: a dispatch on its class (:data:`_STMT`); a class not in the
        table goes through :meth:`stmt_any`."""
        handler = _STMT.get(s.__class__)
        if handler is not None:
            handler(self, s)
        else:
            self.stmt_any(s)


#: :meth:`_Func.ev` by node class (exact classes; a subclass goes through ``ev_any``)
_EV: Dict[type, Callable[[_Func, Any], str]] = {
    ast.Attribute: _Func.attribute, ast.Call: _Func.call, ast.Subscript: _Func.subscript,
    ast.BinOp: _Func.binop, ast.UnaryOp: _Func.unaryop, ast.BoolOp: _Func.boolop,
    ast.Compare: _Func.compare, ast.IfExp: _Func.ifexp, ast.Tuple: _Func.container,
    ast.List: _Func.container, ast.Set: _Func.container, ast.Dict: _Func.dict_display,
    ast.JoinedStr: _Func.joinedstr, ast.FormattedValue: _Func.formattedvalue,
    ast.Starred: _Func.starred, ast.NamedExpr: _Func.namedexpr, ast.Lambda: _Func.lambda_,
    ast.ListComp: _Func.comprehension, ast.SetComp: _Func.comprehension,
    ast.GeneratorExp: _Func.comprehension, ast.DictComp: _Func.comprehension,
    ast.Slice: _Func.slice_, ast.Constant: lambda self, node: PY,
    ast.Name: lambda self, node: self.lookup(node.id),
}
#: :meth:`_Func.stmt` by statement class (exact classes; others go through ``stmt_any``)
_STMT: Dict[type, Callable[[_Func, Any], None]] = {
    ast.FunctionDef: _Func.def_stmt, ast.AsyncFunctionDef: _Func.def_stmt,
    ast.ClassDef: _Func.class_stmt, ast.Assign: _Func.assign, ast.AnnAssign: _Func.annassign,
    ast.AugAssign: _Func.augassign, ast.If: _Func.if_stmt, ast.While: _Func.while_stmt,
    ast.For: _Func.for_stmt, ast.AsyncFor: _Func.for_stmt, ast.Assert: _Func.assert_stmt,
    ast.Return: _Func.return_stmt, ast.Expr: _Func.expr_stmt, ast.With: _Func.with_stmt,
    ast.AsyncWith: _Func.with_stmt, ast.Try: _Func.try_stmt, ast.Import: _Func.import_stmt,
    ast.ImportFrom: _Func.import_stmt,
}
if hasattr(ast, "TryStar"):  # Python 3.11
    _STMT[ast.TryStar] = _Func.try_stmt


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
    ctx = _Ctx(path, source, project, module)
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
    top = _Func(ctx, "<module>")
    top.body(tree.body)
    top.reread_module()
    if project is not None and module:
        project.summaries[module] = ModuleSummary(
            dict(ctx.returns), {n: k for n, k in ctx.local_classes.items()},
            {k: v for k, v in top.env.items() if "." not in k and v != UNKNOWN
             and k not in ctx.local_classes and k not in ctx.defs}, dict(ctx.always))
    return _one_per_line(ctx.findings, ctx)


def _one_per_line(found: List[Finding], ctx: _Ctx) -> List[Finding]:
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
