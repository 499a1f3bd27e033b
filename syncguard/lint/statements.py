"""Statements: assignments bind names to places and shapes, the bodies of branches and loops
run from the same state and are joined, ``def`` and ``class`` read nested functions and methods
(a module-level function's return is recorded for its callers), imports fill the file's
state."""

from __future__ import annotations

import ast
from typing import Dict, List, Optional, Sequence, Set

from . import context as _context
from .calls import ev_args
from .functions import analyse_class, function, record_return
from .indexing import BOOL, bind_dtype, dtype_of, store_subscript
from .infer import DEVICE, HOST, PINNED, PY, TENSOR, UNKNOWN, by_annotation, by_name, combine, join
from .shapes import bind_shape, shape_of
from .state import Func, _imports, _Shape
from .syntax import _attr_key, _dotted, _is_list_expr


def bind(st: Func, target: ast.expr, v: str, value: Optional[ast.expr] = None) -> None:
    """Bind ``target`` to place ``v`` (``value`` the expression, None for an element
    of an unpacked tuple)."""
    if isinstance(target, ast.Name):
        st.env[target.id] = _named(target.id, v, value)
        bind_shape(st, target.id, value)
    elif isinstance(target, ast.Attribute):
        key = _attr_key(target)
        st.ev(target.value)
        if key is not None:
            st.env[key] = _named(target.attr, v, value)
            bind_shape(st, key, value)
    elif isinstance(target, (ast.Tuple, ast.List)):
        vals = value.elts if isinstance(value, (ast.Tuple, ast.List)) and len(
            value.elts) == len(target.elts) else None
        for i, t in enumerate(target.elts):
            bind(st, t, st.ev_quiet(vals[i]) if vals is not None else v)
    elif isinstance(target, ast.Starred):
        bind(st, target.value, v)
    elif isinstance(target, ast.Subscript):
        store_subscript(st, target, v, value)


def _named(name: str, v: str, value: Optional[ast.expr]) -> str:
    """The place of ``name`` bound to a value in place ``v``: a call's result (or an element
    unpacked from one) of unknown place takes a host place its name marks (``x_cpu``,
    ``n_list``: ``a, x_cpu = self.build()``); an alias of a known value keeps what the dataflow
    says, and a name never makes an unknown value a device tensor."""
    if v != UNKNOWN or not (value is None or isinstance(value, ast.Call)):
        return v
    hint = by_name(name)
    return hint if hint in (HOST, PINNED, PY) else v


def branch(st: Func, *bodies: Sequence[ast.stmt]) -> None:
    """Run each body from the current state and join the results. A body with no
    statement ends in the state it starts from: it is not copied, and the start state
    itself becomes the joined one."""
    start = st.env
    start_shapes = st.shapes
    start_synced = st.synced
    all_synced = True  # every body ends having synced
    ends: List[Dict[str, str]] = []
    end_shapes: List[Dict[str, _Shape]] = []
    for b in bodies:
        if not b:
            ends.append(start)
            end_shapes.append(start_shapes)
            all_synced = all_synced and start_synced
            continue
        st.env = dict(start)
        st.shapes = dict(start_shapes)
        st.synced = start_synced
        st.body(b)
        all_synced = all_synced and st.synced
        ends.append(st.env)
        end_shapes.append(st.shapes)
    st.synced = all_synced
    # a name keeps a shape every branch agrees on (set operations on items views: C)
    shapes = end_shapes[0]
    for es in end_shapes[1:]:
        if es is not shapes:
            shapes = dict(shapes.items() & es.items())
    st.shapes = shapes
    changed: Set[str] = set()
    start_items = start.items()
    for e in ends:
        if e is not start:  # the keys a branch bound or rebound
            changed.update(k for k, _ in e.items() - start_items)
    get = start.get
    for k in changed:  # each key read from every end before it is set in start
        vs = [e.get(k, get(k, UNKNOWN)) for e in ends]
        v = vs[0]
        for w in vs[1:]:
            v = join(v, w)
        start[k] = v
    st.env = start


def def_stmt(st: Func, s: ast.stmt) -> None:
    name: str = s.name  # type: ignore[attr-defined]
    start = len(st.ctx.findings)
    f = function(st, s, f"{st.name}.{name}" if st.name != "<module>" else name)
    if st.name == "<module>" and st.ctx.defs.get(name) is s:
        record_return(st.ctx, name, f)
        st.ctx.spans[name] = (start, len(st.ctx.findings))
    st.env[name] = PY


def class_stmt(st: Func, s: ast.ClassDef) -> None:
    for d in s.decorator_list:
        st.ev(d)
    analyse_class(st, s)
    st.env[s.name] = PY


def assign(st: Func, s: ast.Assign) -> None:
    v = st.ev(s.value)
    for t in s.targets:
        bind(st, t, v, s.value)
        bind_dtype(st, t, s.value)
        if isinstance(t, ast.Name):
            if _is_list_expr(s.value) or (
                    isinstance(s.value, ast.Name) and s.value.id in st.lists):
                st.lists.add(t.id)
            else:
                st.lists.discard(t.id)


def annassign(st: Func, s: ast.AnnAssign) -> None:
    v = st.ev(s.value) if s.value is not None else UNKNOWN
    hint = by_annotation(s.annotation)
    if hint is not None and not (hint == TENSOR and v in (DEVICE, HOST, PINNED)):
        v = hint
    if s.value is not None or hint is not None:
        bind(st, s.target, v, s.value)


def augassign(st: Func, s: ast.AugAssign) -> None:
    v = combine([st.ev(s.target), st.ev(s.value)])
    if isinstance(s.target, (ast.Name, ast.Attribute)):
        # x += y has the shape of x + y (broadcast)
        bind(st, s.target, v, ast.BinOp(left=s.target, op=s.op, right=s.value))


def if_stmt(st: Func, s: ast.If) -> None:
    if _context.is_main_guard(s.test):
        saved_context = st.context
        if st.context == _context.SERVING:
            st.context = _context.SCRIPT
        branch(st, s.body, s.orelse)
        st.context = saved_context
        return
    st.condition(s.test, st.ev(s.test))
    narrowed = _isinstance_py(s.test)
    if narrowed is not None:  # `if isinstance(x, float):` x is no tensor there
        saved = st.env.get(narrowed)
        st.env[narrowed] = PY
        st.body(s.body)
        if saved is None:
            st.env.pop(narrowed, None)
        else:
            st.env[narrowed] = saved
        branch(st, s.orelse, [])
    else:
        branch(st, s.body, s.orelse)


def while_stmt(st: Func, s: ast.While) -> None:
    st.condition(s.test, st.ev(s.test))
    branch(st, s.body, [])
    branch(st, s.orelse, [])


def for_stmt(st: Func, s: ast.stmt) -> None:
    bind_iter(st, s.target, s.iter)  # type: ignore[attr-defined]
    target, it = s.target, s.iter  # type: ignore[attr-defined]
    if isinstance(target, ast.Name):
        bind_dtype(st, target, None)
        if isinstance(it, ast.Name) and it.id in st.mask_lists:
            st.masks.add(target.id)  # for m in masks
    branch(st, s.body, [])  # type: ignore[attr-defined]
    branch(st, s.orelse, [])  # type: ignore[attr-defined]


def assert_stmt(st: Func, s: ast.Assert) -> None:
    st.condition(s.test, st.ev(s.test))
    synced = st.synced
    st.ev(s.msg)  # made only when the assertion fails
    st.synced = synced


def return_stmt(st: Func, s: ast.Return) -> None:
    v = st.ev(s.value) if s.value is not None else PY
    if not st.synced:
        st.unsynced_exit = True
    st.ret = v if st.ret is None else join(st.ret, v)
    st.ret_shapes.append(shape_of(st, s.value))


def expr_stmt(st: Func, s: ast.Expr) -> None:
    st.ev(s.value)
    c = s.value
    if isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute) and isinstance(
            c.func.value, ast.Name) and c.func.attr == "append" and len(c.args) == 1 and (
            dtype_of(st, c.args[0]) == BOOL):
        st.mask_lists.add(c.func.value.id)  # masks.append(x > 0)


def with_stmt(st: Func, s: ast.stmt) -> None:
    for item in s.items:  # type: ignore[attr-defined]
        v = st.ev(item.context_expr)
        if item.optional_vars is not None:
            bind(st, item.optional_vars, UNKNOWN if v == PY else v)
    st.body(s.body)  # type: ignore[attr-defined]


def try_stmt(st: Func, s: ast.stmt) -> None:
    start_synced = st.synced
    st.body(s.body)  # type: ignore[attr-defined]
    synced = st.synced
    for h in s.handlers:  # type: ignore[attr-defined]
        if h.name:
            st.env[h.name] = PY
        st.synced = start_synced  # a handler runs after part of the body
        st.body(h.body)
        synced = synced and st.synced
    st.synced = synced
    st.body(s.orelse)  # type: ignore[attr-defined]
    st.body(s.finalbody)  # type: ignore[attr-defined]


def import_stmt(st: Func, s: ast.stmt) -> None:
    _imports(st.ctx, s, st.env)


def stmt_other(st: Func, s: ast.stmt) -> None:
    # delete, raise, global, match, ...
    synced = st.synced
    if type(s).__name__ == "Match":
        st.ev(s.subject)  # type: ignore[attr-defined]
        for case in s.cases:  # type: ignore[attr-defined]
            branch(st, case.body, [])
        st.synced = synced or st.synced
        return
    for child in ast.iter_child_nodes(s):
        if isinstance(child, ast.expr):
            st.ev(child)
        elif isinstance(child, ast.stmt):
            st.stmt(child)
        else:
            for sub in ast.iter_child_nodes(child):
                if isinstance(sub, ast.stmt):
                    st.stmt(sub)
                elif isinstance(sub, ast.expr):
                    st.ev(sub)


def bind_iter(st: Func, target: ast.expr, it: ast.expr) -> None:
    if isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and isinstance(
            target, ast.Tuple):
        vals = ev_args(st, it)
        if it.func.id == "enumerate" and vals and len(target.elts) == 2:
            bind(st, target.elts[0], PY)
            bind(st, target.elts[1], _element(vals[0]))
            return
        if it.func.id == "zip" and len(vals) == len(target.elts):
            for t, v in zip(target.elts, vals):
                bind(st, t, _element(v))
            return
        bind(st, target, UNKNOWN)
        return
    bind(st, target, _element(st.ev(it)))


def _element(v: str) -> str:
    """The place of an element when iterating a value in place ``v``."""
    if v == PINNED:
        return HOST
    return v if v in (DEVICE, TENSOR, HOST) else (PY if v == PY else UNKNOWN)


_PY_TYPES = frozenset({"int", "float", "bool", "str", "bytes", "complex", "list", "tuple",
                       "dict", "set", "Number", "numbers.Number"})


def _isinstance_py(test: ast.expr) -> Optional[str]:
    """The name ``test`` proves a Python value: ``isinstance(x, (int, float))``."""
    if not (isinstance(test, ast.Call) and isinstance(test.func, ast.Name)
            and test.func.id == "isinstance" and len(test.args) == 2
            and isinstance(test.args[0], ast.Name)):
        return None
    t = test.args[1]
    names = t.elts if isinstance(t, ast.Tuple) else [t]
    if names and all(_dotted(n) in _PY_TYPES for n in names):
        return test.args[0].id
    return None

