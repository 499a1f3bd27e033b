"""Statements: assignments bind names to places and shapes, the bodies of branches and loops
run from the same state and are joined, ``def`` and ``class`` read nested functions and methods
(a module-level function's return is recorded for its callers), imports fill the file's
state."""

from __future__ import annotations

import ast
from typing import Dict, List, Optional, Sequence, Set, Tuple

from . import context as _context
from .findings import CERTAIN
from .indexing import BOOL
from .infer import (
    DEVICE,
    HOST,
    OBJ,
    PINNED,
    PY,
    TENSOR,
    UNKNOWN,
    by_annotation,
    by_name,
    combine,
    hint_text,
    join,
)
from .project import Always, ClassInfo
from .state import _NO_SHAPE, _ClassRead, _Ctx, _FuncState, _imports, _Shape
from .syntax import _dotted, _is_list_expr

#: how many functions deep a call read before its callee's def reads that callee ahead (each
#: level is a nest of Python calls: a file of a long chain of functions, each calling the one
#: defined after it, must not exhaust the interpreter's recursion limit)
_READ_AHEAD = 12


class _Statements(_FuncState):
    """The statements part of the function dataflow: each statement run on the state, and the
    functions and classes it defines read."""

    def params(self, args: ast.arguments) -> None:
        every = [*args.posonlyargs, *args.args, *args.kwonlyargs]
        if args.vararg:
            every.append(args.vararg)
        if args.kwarg:
            every.append(args.kwarg)
        for a in every:
            v = by_annotation(a.annotation) or by_name(a.arg)
            if v == TENSOR and by_name(a.arg) in (HOST, PINNED, DEVICE):
                v = by_name(a.arg)  # cu_seqlens_cpu: torch.Tensor: the name says where
            if v is None:
                cls = self.ctx.annotation_class(a.annotation)
                v = OBJ + cls if cls is not None else None
            if a.arg in ("self", "cls"):
                v = PY
            self.env[a.arg] = v or UNKNOWN
            hint = _hint_source(a.annotation)
            if "BoolTensor" in hint:
                self.masks.add(a.arg)
            elif "LongTensor" in hint or "IntTensor" in hint:
                self.ints.add(a.arg)
        for d in [*args.defaults, *[d for d in args.kw_defaults if d is not None]]:
            self.ev(d)

    def branch(self, *bodies: Sequence[ast.stmt]) -> None:
        """Run each body from the current state and join the results. A body with no
        statement ends in the state it starts from: it is not copied, and the start state
        itself becomes the joined one."""
        start = self.env
        start_shapes = self.shapes
        start_synced = self.synced
        all_synced = True  # every body ends having synced
        ends: List[Dict[str, str]] = []
        end_shapes: List[Dict[str, _Shape]] = []
        for b in bodies:
            if not b:
                ends.append(start)
                end_shapes.append(start_shapes)
                all_synced = all_synced and start_synced
                continue
            self.env = dict(start)
            self.shapes = dict(start_shapes)
            self.synced = start_synced
            self.body(b)
            all_synced = all_synced and self.synced
            ends.append(self.env)
            end_shapes.append(self.shapes)
        self.synced = all_synced
        # a name keeps a shape every branch agrees on (set operations on items views: C)
        shapes = end_shapes[0]
        for es in end_shapes[1:]:
            if es is not shapes:
                shapes = dict(shapes.items() & es.items())
        self.shapes = shapes
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
        self.env = start

    def stmt_any(self, s: ast.stmt) -> None:  # noqa: C901
        """:meth:`stmt` by ``isinstance``, for statement classes :data:`_STMT` does not list."""
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)):
            self.def_stmt(s)
        elif isinstance(s, ast.ClassDef):
            self.class_stmt(s)
        elif isinstance(s, ast.Assign):
            self.assign(s)
        elif isinstance(s, ast.AnnAssign):
            self.annassign(s)
        elif isinstance(s, ast.AugAssign):
            self.augassign(s)
        elif isinstance(s, ast.If):
            self.if_stmt(s)
        elif isinstance(s, ast.While):
            self.while_stmt(s)
        elif isinstance(s, (ast.For, ast.AsyncFor)):
            self.for_stmt(s)
        elif isinstance(s, ast.Assert):
            self.assert_stmt(s)
        elif isinstance(s, ast.Return):
            self.return_stmt(s)
        elif isinstance(s, ast.Expr):
            self.ev(s.value)
        elif isinstance(s, (ast.With, ast.AsyncWith)):
            self.with_stmt(s)
        elif isinstance(s, ast.Try) or type(s).__name__ == "TryStar":
            self.try_stmt(s)
        elif isinstance(s, (ast.Import, ast.ImportFrom)):
            _imports(self.ctx, s, self.env)
        else:
            self.stmt_other(s)

    def def_stmt(self, s: ast.stmt) -> None:
        name: str = s.name  # type: ignore[attr-defined]
        start = len(self.ctx.findings)
        f = self.function(s, f"{self.name}.{name}" if self.name != "<module>" else name)
        if self.name == "<module>" and self.ctx.defs.get(name) is s:
            _record_return(self.ctx, name, f)
            self.ctx.spans[name] = (start, len(self.ctx.findings))
        self.env[name] = PY

    def record_call(self, node: ast.Call, name: str) -> None:
        """A call of the module's private function ``name`` (``_helper(x)``): the places it
        gives the parameters (no other module imports a private helper: these are its
        callers)."""
        ctx = self.ctx
        if name.startswith("_") and ctx.collect and ctx.recording and name in ctx.defs:
            ctx.calls.setdefault(name, []).append(
                self.call_places(node, ctx.defs[name], method=False))

    def reread_module(self) -> None:
        """Read again the module's private functions some parameter of which every call in
        the module fills from the device (or every one from the host), with that place:
        their first reading's findings are replaced (the module body's own dataflow)."""
        ctx = self.ctx
        ctx.recording = False
        again: Dict[str, Dict[str, str]] = {}
        for name, calls in ctx.calls.items():
            if name in ctx.spans:
                given = _given_by_callers(ctx.defs[name], calls)
                if given:
                    again[name] = given
        if not again:
            return
        for start, end in sorted((ctx.spans[n] for n in again), reverse=True):
            del ctx.findings[start:end]
        for name, given in again.items():
            f = self.function(ctx.defs[name], name, None, given)
            _record_return(ctx, name, f)

    def class_stmt(self, s: ast.ClassDef) -> None:
        for d in s.decorator_list:
            self.ev(d)
        self.analyse_class(s)
        self.env[s.name] = PY

    def assign(self, s: ast.Assign) -> None:
        v = self.ev(s.value)
        for t in s.targets:
            self.bind(t, v, s.value)
            self.bind_dtype(t, s.value)
            if isinstance(t, ast.Name):
                if _is_list_expr(s.value) or (
                        isinstance(s.value, ast.Name) and s.value.id in self.lists):
                    self.lists.add(t.id)
                else:
                    self.lists.discard(t.id)

    def annassign(self, s: ast.AnnAssign) -> None:
        v = self.ev(s.value) if s.value is not None else UNKNOWN
        hint = by_annotation(s.annotation)
        if hint is not None and not (hint == TENSOR and v in (DEVICE, HOST, PINNED)):
            v = hint
        if s.value is not None or hint is not None:
            self.bind(s.target, v, s.value)

    def augassign(self, s: ast.AugAssign) -> None:
        v = combine([self.ev(s.target), self.ev(s.value)])
        if isinstance(s.target, (ast.Name, ast.Attribute)):
            # x += y has the shape of x + y (broadcast)
            self.bind(s.target, v, ast.BinOp(left=s.target, op=s.op, right=s.value))

    def if_stmt(self, s: ast.If) -> None:
        if _context.is_main_guard(s.test):
            saved_context = self.context
            if self.context == _context.SERVING:
                self.context = _context.SCRIPT
            self.branch(s.body, s.orelse)
            self.context = saved_context
            return
        self.condition(s.test, self.ev(s.test))
        narrowed = _isinstance_py(s.test)
        if narrowed is not None:  # `if isinstance(x, float):` x is no tensor there
            saved = self.env.get(narrowed)
            self.env[narrowed] = PY
            self.body(s.body)
            if saved is None:
                self.env.pop(narrowed, None)
            else:
                self.env[narrowed] = saved
            self.branch(s.orelse, [])
        else:
            self.branch(s.body, s.orelse)

    def while_stmt(self, s: ast.While) -> None:
        self.condition(s.test, self.ev(s.test))
        self.branch(s.body, [])
        self.branch(s.orelse, [])

    def for_stmt(self, s: ast.stmt) -> None:
        self.bind_iter(s.target, s.iter)  # type: ignore[attr-defined]
        target, it = s.target, s.iter  # type: ignore[attr-defined]
        if isinstance(target, ast.Name):
            self.bind_dtype(target, None)
            if isinstance(it, ast.Name) and it.id in self.mask_lists:
                self.masks.add(target.id)  # for m in masks
        self.branch(s.body, [])  # type: ignore[attr-defined]
        self.branch(s.orelse, [])  # type: ignore[attr-defined]

    def assert_stmt(self, s: ast.Assert) -> None:
        self.condition(s.test, self.ev(s.test))
        synced = self.synced
        self.ev(s.msg)  # made only when the assertion fails
        self.synced = synced

    def return_stmt(self, s: ast.Return) -> None:
        v = self.ev(s.value) if s.value is not None else PY
        if not self.synced:
            self.unsynced_exit = True
        self.ret = v if self.ret is None else join(self.ret, v)
        self.ret_shapes.append(self.shape_of(s.value))

    def expr_stmt(self, s: ast.Expr) -> None:
        self.ev(s.value)
        c = s.value
        if isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute) and isinstance(
                c.func.value, ast.Name) and c.func.attr == "append" and len(c.args) == 1 and (
                self.dtype_of(c.args[0]) == BOOL):
            self.mask_lists.add(c.func.value.id)  # masks.append(x > 0)

    def with_stmt(self, s: ast.stmt) -> None:
        for item in s.items:  # type: ignore[attr-defined]
            v = self.ev(item.context_expr)
            if item.optional_vars is not None:
                self.bind(item.optional_vars, UNKNOWN if v == PY else v)
        self.body(s.body)  # type: ignore[attr-defined]

    def try_stmt(self, s: ast.stmt) -> None:
        start_synced = self.synced
        self.body(s.body)  # type: ignore[attr-defined]
        synced = self.synced
        for h in s.handlers:  # type: ignore[attr-defined]
            if h.name:
                self.env[h.name] = PY
            self.synced = start_synced  # a handler runs after part of the body
            self.body(h.body)
            synced = synced and self.synced
        self.synced = synced
        self.body(s.orelse)  # type: ignore[attr-defined]
        self.body(s.finalbody)  # type: ignore[attr-defined]

    def import_stmt(self, s: ast.stmt) -> None:
        _imports(self.ctx, s, self.env)

    def stmt_other(self, s: ast.stmt) -> None:
        # delete, raise, global, match, ...
        synced = self.synced
        if type(s).__name__ == "Match":
            self.ev(s.subject)  # type: ignore[attr-defined]
            for case in s.cases:  # type: ignore[attr-defined]
                self.branch(case.body, [])
            self.synced = synced or self.synced
            return
        for child in ast.iter_child_nodes(s):
            if isinstance(child, ast.expr):
                self.ev(child)
            elif isinstance(child, ast.stmt):
                self.stmt(child)
            else:
                for sub in ast.iter_child_nodes(child):
                    if isinstance(sub, ast.stmt):
                        self.stmt(sub)
                    elif isinstance(sub, ast.expr):
                        self.ev(sub)

    def bind_iter(self, target: ast.expr, it: ast.expr) -> None:
        if isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and isinstance(
                target, ast.Tuple):
            vals = self.args(it)
            if it.func.id == "enumerate" and vals and len(target.elts) == 2:
                self.bind(target.elts[0], PY)
                self.bind(target.elts[1], _element(vals[0]))
                return
            if it.func.id == "zip" and len(vals) == len(target.elts):
                for t, v in zip(target.elts, vals):
                    self.bind(t, _element(v))
                return
            self.bind(target, UNKNOWN)
            return
        self.bind(target, _element(self.ev(it)))

    def function(self, s: ast.AST, qualname: str, seed: Optional[Dict[str, str]] = None,
                 given: Optional[Dict[str, str]] = None) -> _Statements:
        """Read function ``s``; ``seed`` the places its body starts from (the enclosing
        scope's), ``given`` places of parameters its callers pass."""
        name = getattr(s, "name", "")
        context = _context.function_context(name, self.context)
        if (context == _context.SERVING and self.name == "<module>"
                and name in self.ctx.script_funcs):
            context = _context.SCRIPT  # main(), called from the __main__ block
        f = type(self)(self.ctx, qualname, seed if seed is not None else self.env, context)
        f.cls = self.cls
        decorators = getattr(s, "decorator_list", ())
        if any(_context.is_kernel_decorator(d, self.ctx.names) for d in decorators):
            # a device kernel (Triton, CuTe, TileLang...): traced for the device, its
            # branches and reads are no host code
            f.ret = UNKNOWN
            return f
        for d in decorators:
            self.ev(d)
            f.cached = f.cached or "cache" in (_dotted(
                d.func if isinstance(d, ast.Call) else d) or "").lower()
        f.params(s.args)  # type: ignore[attr-defined]
        if given:
            f.env.update(given)
        f.body(s.body)  # type: ignore[attr-defined]
        f.ret = _with_hint(f.ret, getattr(s, "returns", None))
        return f

    def always(self) -> Optional[Always]:
        """What a function read by :meth:`function` syncs on every path through it (its
        first sure sync), or None (also for a cached function: a call may not run it; and
        for one that puts tensors on an argument's device: it syncs where that is one)."""
        s = self.first_sync
        if s is None or not self.synced or self.unsynced_exit or self.generator or (
                self.cached or self.guessed_device):
            return None
        name = self.name.rsplit(".", 1)[-1]
        return Always(s.rule, s.api, s.why, f"{name}() -> {s.chain}", s.backend)

    def call_always(self, node: ast.Call, always: Optional[Always]) -> None:
        """A call of a function that syncs on every path: a sure sync here, the chain in
        the why."""
        if always is not None:
            self.flag(node, always.rule, always.api,
                      f"calls {always.chain}, which syncs on every path ({always.why})",
                      CERTAIN, DEVICE, via=always)

    def analyse_class(self, cls: ast.ClassDef) -> None:
        """Methods of ``cls``, ``__init__`` first: what it puts in ``self.x`` seeds the others."""
        ctx, env, outer = self.ctx, self.env, self.name
        prefix = cls.name if outer == "<module>" else f"{outer}.{cls.name}"
        methods = [s for s in cls.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))]
        methods.sort(key=lambda m: m.name != "__init__")
        seed = dict(env)
        cf = type(self)(ctx, prefix, env,
                        _context.class_context(cls.name, self.context))
        info = ClassInfo(prefix)
        key = f"{ctx.module or ctx.path}:{prefix}"
        cf.cls = key
        ctx.classes[key] = info
        if outer == "<module>":
            ctx.local_classes[cls.name] = key
        read = ctx.class_reads[key] = _ClassRead(cf, seed, {m.name: m for m in methods})
        for m in methods:  # what the hints say, until the bodies say more
            hint = _with_hint(None, m.returns)
            if hint is not None:
                info.methods[m.name] = hint
        for s in cls.body:
            if not isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)):
                cf.stmt(s)
                if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name):
                    # a dataclass field (or a class attribute): what instances hold
                    v = cf.env.get(s.target.id, UNKNOWN)
                    info.attrs[s.target.id] = v
                    seed[f"self.{s.target.id}"] = v
        spans: Dict[str, Tuple[int, int]] = {}
        for m in methods:
            start = len(ctx.findings)
            f = cf.function(m, f"{prefix}.{m.name}", seed)
            spans[m.name] = (start, len(ctx.findings))
            read.known.add(m.name)
            if f.ret is not None and f.ret != UNKNOWN:
                info.methods[m.name] = f.ret
            _keep_always(info.syncs, m.name, f)
            if m.name in ("__init__", "__post_init__", "setup"):
                for k, v in f.env.items():
                    if k.startswith("self."):
                        seed[k] = v
                        if "." not in k[5:] and v != UNKNOWN:
                            info.attrs[k[5:]] = v
        self.reread_by_callers(read, info, prefix, spans)
        del ctx.class_reads[key]

    def reread_by_callers(self, read: _ClassRead, info: ClassInfo, prefix: str,
                          spans: Dict[str, Tuple[int, int]]) -> None:
        """Read again the methods some parameter of which every ``self.m(...)`` call in the
        class fills from the device (or every one from the host), with that place: their
        first reading's findings are replaced."""
        read.recording = False
        again: Dict[str, Dict[str, str]] = {}
        for name, calls in read.calls.items():
            if name not in spans:
                continue
            given = _given_by_callers(read.methods[name], calls)
            if given:
                again[name] = given
        if not again:
            return
        ctx = self.ctx
        for start, end in sorted((spans[n] for n in again), reverse=True):
            del ctx.findings[start:end]
        for name, given in again.items():
            f = read.body.function(read.methods[name], f"{prefix}.{name}", read.seed, given)
            if f.ret is not None and f.ret != UNKNOWN:
                info.methods[name] = f.ret
            _keep_always(info.syncs, name, f)

    def self_call(self, node: ast.Call, m: str) -> Optional[str]:
        """``self.m(...)`` of a method ``m`` of the class being read: its return (read ahead
        of its ``def`` when needed), and the places of the arguments kept for ``m``'s
        parameters; None when ``m`` is no method read here."""
        ctx = self.ctx
        read = ctx.class_reads.get(self.cls) if self.cls is not None else None
        if read is None or m not in read.methods:
            return None
        fn = read.methods[m]
        if read.recording and ctx.collect:
            read.calls.setdefault(m, []).append(self.call_places(node, fn))
        busy = f"{self.cls}.{m}"
        if m not in read.known and busy not in ctx.in_progress and len(
                ctx.in_progress) < _READ_AHEAD:
            ctx.in_progress.add(busy)
            saved, ctx.collect = ctx.collect, False
            try:
                f = read.body.function(fn, busy, read.seed)
            finally:
                ctx.collect = saved
                ctx.in_progress.discard(busy)
            read.known.add(m)
            info = ctx.classes.get(self.cls)  # type: ignore[arg-type]
            if info is not None:
                if f.ret is not None and f.ret != UNKNOWN:
                    info.methods[m] = f.ret
                _keep_always(info.syncs, m, f)
        info = ctx.classes.get(self.cls)  # type: ignore[arg-type]
        if info is None:
            return None
        self.call_always(node, info.syncs.get(m))
        return info.methods.get(m)

    def call_places(self, node: ast.Call, fn: ast.AST, method: bool = True
                    ) -> Dict[str, str]:
        """``{parameter: place}`` of what call ``node`` passes to ``fn`` (a method's first
        parameter, ``self``, left out); empty past a ``*args`` or ``**kwargs``."""
        names = _param_names(fn, method)
        out: Dict[str, str] = {}
        for i, a in enumerate(node.args):
            if isinstance(a, ast.Starred) or i >= len(names):
                return {}
            out[names[i]] = self.ev_quiet(a)
        for kw in node.keywords:
            if kw.arg is None:
                return {}
            out[kw.arg] = self.ev_quiet(kw.value)
        return out

    def lazy_return(self, name: str) -> None:
        """What module-level function ``name`` returns, when a call is read before its ``def``
        ran: a quiet pass over that one function (once; each function is otherwise read once,
        when its ``def`` is reached, and records its return then)."""
        ctx = self.ctx
        node = ctx.defs.get(name)
        if node is None or name in ctx.returns_known or name in ctx.in_progress or len(
                ctx.in_progress) >= _READ_AHEAD:
            return  # past the depth, the callee is read where its def is (its return unknown)
        ctx.in_progress.add(name)
        saved = ctx.collect
        ctx.collect = False
        try:
            f = type(self)(ctx, "<module>").function(node, name)
        finally:
            ctx.collect = saved
            ctx.in_progress.discard(name)
        _record_return(ctx, name, f)


def _hint_source(node: Optional[ast.expr]) -> str:
    """The text of a type hint (empty without one)."""
    if node is None:
        return ""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return hint_text(node) or ""


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


def _with_hint(ret: Optional[str], hint_node: Optional[ast.expr]) -> Optional[str]:
    """What a function returns, ``ret`` as its body says and its return hint: ``-> int`` a
    Python value whatever the body returns; a tensor or array hint where the body says
    nothing sure (a body that returns a numpy array is on the host, whatever the hint)."""
    hint = by_annotation(hint_node)
    if hint == PY:
        return PY  # -> bool / int: what the caller gets is a Python value
    if hint is not None and ret not in (DEVICE, HOST, PINNED, PY):
        return hint
    return ret


def _param_names(fn: ast.AST, method: bool = True) -> List[str]:
    """The positional parameters of ``fn`` a call fills (of a method, ``self`` left out)."""
    args: ast.arguments = fn.args  # type: ignore[attr-defined]
    names = [a.arg for a in [*args.posonlyargs, *args.args]]
    static = not method or any(_dotted(d) == "staticmethod"
                               for d in getattr(fn, "decorator_list", ()))
    return names if static else names[1:]


def _given_by_callers(fn: ast.AST, calls: List[Dict[str, str]]) -> Dict[str, str]:
    """Parameters of ``fn`` every call fills from the device (or every one from the host),
    where the parameter's own hint or name does not say more: ``{name: place}``."""
    args: ast.arguments = fn.args  # type: ignore[attr-defined]
    out: Dict[str, str] = {}
    for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]:
        own = by_annotation(a.annotation) or by_name(a.arg)
        if own not in (None, TENSOR, UNKNOWN) or a.arg in ("self", "cls"):
            continue  # an int, a host array or a name that says where
        got = [c.get(a.arg) for c in calls]
        if not got or None in got:
            continue
        v = got[0]
        for w in got[1:]:
            v = join(v, w)  # type: ignore[arg-type]
        if v in (DEVICE, HOST, PINNED):
            out[a.arg] = v
    return out


def _keep_always(syncs: Dict[str, Always], name: str, f: _Statements) -> None:
    got = f.always()
    if got is not None:
        syncs[name] = got
    else:
        syncs.pop(name, None)


def _record_return(ctx: _Ctx, name: str, f: _Statements) -> None:
    _keep_always(ctx.always, name, f)
    ctx.returns_known.add(name)
    if f.ret is not None and f.ret != UNKNOWN:
        ctx.returns[name] = f.ret
    else:
        ctx.returns.pop(name, None)
    shapes = set(f.ret_shapes)
    if len(shapes) == 1 and _NO_SHAPE not in shapes:
        ctx.shape_returns[name] = shapes.pop()
    else:
        ctx.shape_returns.pop(name, None)
