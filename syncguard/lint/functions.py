"""The functions and classes of a file: each read in a state of its own (:func:`function`,
:func:`analyse_class`), what a call of one returns and whether it syncs on every path (read
ahead of its ``def`` when called first: :func:`lazy_return`, :func:`self_call`), and the
private ones read again with the places every caller gives a parameter
(:func:`reread_module`, :func:`reread_by_callers`)."""

from __future__ import annotations

import ast
from typing import Dict, List, Optional, Tuple

from . import context as _context
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
    hint_text,
    join,
)
from .project import Always, ClassInfo
from .state import _NO_SHAPE, Ctx, Func, _ClassRead
from .syntax import _dotted

#: how many functions deep a call read before its callee's def reads that callee ahead (each
#: level is a nest of Python calls: a file of a long chain of functions, each calling the one
#: defined after it, must not exhaust the interpreter's recursion limit)
_READ_AHEAD = 12


def params(st: Func, args: ast.arguments) -> None:
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
            cls = st.ctx.annotation_class(a.annotation)
            v = OBJ + cls if cls is not None else None
        if a.arg in ("self", "cls"):
            v = PY
        st.env[a.arg] = v or UNKNOWN
        hint = _hint_source(a.annotation)
        if "BoolTensor" in hint:
            st.masks.add(a.arg)
        elif "LongTensor" in hint or "IntTensor" in hint:
            st.ints.add(a.arg)
    for d in [*args.defaults, *[d for d in args.kw_defaults if d is not None]]:
        st.ev(d)


def record_call(st: Func, node: ast.Call, name: str) -> None:
    """A call of the module's private function ``name`` (``_helper(x)``): the places it
    gives the parameters (no other module imports a private helper: these are its
    callers)."""
    ctx = st.ctx
    if name.startswith("_") and ctx.collect and ctx.recording and name in ctx.defs:
        ctx.calls.setdefault(name, []).append(
            call_places(st, node, ctx.defs[name], method=False))


def reread_module(st: Func) -> None:
    """Read again the module's private functions some parameter of which every call in
    the module fills from the device (or every one from the host), with that place:
    their first reading's findings are replaced (the module body's own dataflow)."""
    ctx = st.ctx
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
        f = function(st, ctx.defs[name], name, None, given)
        record_return(ctx, name, f)


def function(st: Func, s: ast.AST, qualname: str, seed: Optional[Dict[str, str]] = None,
             given: Optional[Dict[str, str]] = None) -> Func:
    """Read function ``s``; ``seed`` the places its body starts from (the enclosing
    scope's), ``given`` places of parameters its callers pass."""
    name = getattr(s, "name", "")
    context = _context.function_context(name, st.context)
    if (context == _context.SERVING and st.name == "<module>"
        and name in st.ctx.script_funcs):
        context = _context.SCRIPT  # main(), called from the __main__ block
    f = Func(st.ctx, qualname, seed if seed is not None else st.env, context)
    f.cls = st.cls
    decorators = getattr(s, "decorator_list", ())
    if any(_context.is_kernel_decorator(d, st.ctx.names) for d in decorators):
        # a device kernel (Triton, CuTe, TileLang...): traced for the device, its
        # branches and reads are no host code
        f.ret = UNKNOWN
        return f
    for d in decorators:
        st.ev(d)
        f.cached = f.cached or "cache" in (_dotted(
            d.func if isinstance(d, ast.Call) else d) or "").lower()
    params(f, s.args)  # type: ignore[attr-defined]
    if given:
        f.env.update(given)
    f.body(s.body)  # type: ignore[attr-defined]
    f.ret = _with_hint(f.ret, getattr(s, "returns", None))
    return f


def always(st: Func) -> Optional[Always]:
    """What a function read by :func:`function` syncs on every path through it (its
    first sure sync), or None (also for a cached function: a call may not run it; and
    for one that puts tensors on an argument's device: it syncs where that is one)."""
    s = st.first_sync
    if s is None or not st.synced or st.unsynced_exit or st.generator or (
            st.cached or st.guessed_device):
        return None
    name = st.name.rsplit(".", 1)[-1]
    return Always(s.rule, s.api, s.why, f"{name}() -> {s.chain}", s.backend)


def analyse_class(st: Func, cls: ast.ClassDef) -> None:
    """Methods of ``cls``, ``__init__`` first: what it puts in ``self.x`` seeds the others."""
    ctx, env, outer = st.ctx, st.env, st.name
    prefix = cls.name if outer == "<module>" else f"{outer}.{cls.name}"
    methods = [s for s in cls.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))]
    methods.sort(key=lambda m: m.name != "__init__")
    seed = dict(env)
    cf = Func(ctx, prefix, env,
              _context.class_context(cls.name, st.context))
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
        f = function(cf, m, f"{prefix}.{m.name}", seed)
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
    reread_by_callers(st, read, info, prefix, spans)
    del ctx.class_reads[key]


def reread_by_callers(st: Func, read: _ClassRead, info: ClassInfo, prefix: str,
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
    ctx = st.ctx
    for start, end in sorted((spans[n] for n in again), reverse=True):
        del ctx.findings[start:end]
    for name, given in again.items():
        f = function(read.body, read.methods[name], f"{prefix}.{name}", read.seed, given)
        if f.ret is not None and f.ret != UNKNOWN:
            info.methods[name] = f.ret
        _keep_always(info.syncs, name, f)


def self_call(st: Func, node: ast.Call, m: str) -> Optional[str]:
    """``self.m(...)`` of a method ``m`` of the class being read: its return (read ahead
    of its ``def`` when needed), and the places of the arguments kept for ``m``'s
    parameters; None when ``m`` is no method read here."""
    ctx = st.ctx
    read = ctx.class_reads.get(st.cls) if st.cls is not None else None
    if read is None or m not in read.methods:
        return None
    fn = read.methods[m]
    if read.recording and ctx.collect:
        read.calls.setdefault(m, []).append(call_places(st, node, fn))
    busy = f"{st.cls}.{m}"
    if m not in read.known and busy not in ctx.in_progress and len(
            ctx.in_progress) < _READ_AHEAD:
        ctx.in_progress.add(busy)
        saved, ctx.collect = ctx.collect, False
        try:
            f = function(read.body, fn, busy, read.seed)
        finally:
            ctx.collect = saved
            ctx.in_progress.discard(busy)
        read.known.add(m)
        info = ctx.classes.get(st.cls)  # type: ignore[arg-type]
        if info is not None:
            if f.ret is not None and f.ret != UNKNOWN:
                info.methods[m] = f.ret
            _keep_always(info.syncs, m, f)
    info = ctx.classes.get(st.cls)  # type: ignore[arg-type]
    if info is None:
        return None
    st.call_always(node, info.syncs.get(m))
    return info.methods.get(m)


def call_places(st: Func, node: ast.Call, fn: ast.AST, method: bool = True
                ) -> Dict[str, str]:
    """``{parameter: place}`` of what call ``node`` passes to ``fn`` (a method's first
    parameter, ``self``, left out); empty past a ``*args`` or ``**kwargs``."""
    names = _param_names(fn, method)
    out: Dict[str, str] = {}
    for i, a in enumerate(node.args):
        if isinstance(a, ast.Starred) or i >= len(names):
            return {}
        out[names[i]] = st.ev_quiet(a)
    for kw in node.keywords:
        if kw.arg is None:
            return {}
        out[kw.arg] = st.ev_quiet(kw.value)
    return out


def lazy_return(st: Func, name: str) -> None:
    """What module-level function ``name`` returns, when a call is read before its ``def``
    ran: a quiet pass over that one function (once; each function is otherwise read once,
    when its ``def`` is reached, and records its return then)."""
    ctx = st.ctx
    node = ctx.defs.get(name)
    if node is None or name in ctx.returns_known or name in ctx.in_progress or len(
            ctx.in_progress) >= _READ_AHEAD:
        return  # past the depth, the callee is read where its def is (its return unknown)
    ctx.in_progress.add(name)
    saved = ctx.collect
    ctx.collect = False
    try:
        f = function(Func(ctx, "<module>"), node, name)
    finally:
        ctx.collect = saved
        ctx.in_progress.discard(name)
    record_return(ctx, name, f)


def _hint_source(node: Optional[ast.expr]) -> str:
    """The text of a type hint (empty without one)."""
    if node is None:
        return ""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return hint_text(node) or ""


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


def _keep_always(syncs: Dict[str, Always], name: str, f: Func) -> None:
    got = always(f)
    if got is not None:
        syncs[name] = got
    else:
        syncs.pop(name, None)


def record_return(ctx: Ctx, name: str, f: Func) -> None:
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
