"""The state the lint's function dataflow works on: per file, :class:`Ctx` (import aliases,
what module-level functions and classes return, the findings, the parts that read each node
class), and per function, :class:`Func` (the place and shape each name is bound to) with the
recording of a finding, the lookup of names and the dispatch of a node to its part.

The parts (:mod:`.functions`, :mod:`.shapes`, :mod:`.indexing`, :mod:`.calls`,
:mod:`.statements`, the expressions in :mod:`.checker`) are functions of one signature,
``(state, node)``: each takes the function's state explicitly, calls the parts below it by
name, and reads a sub-expression or a body through :meth:`Func.ev` and :meth:`Func.body`,
which hand each node to the part the file's :class:`Ctx` lists for its class.
"""

from __future__ import annotations

import ast
import dataclasses
from typing import Any, Callable, Dict, List, Optional, Sequence, Set, Tuple

from ..core import syncapis
from . import context as _context
from .backends import BOTH, backends_any, backends_of
from .findings import CERTAIN, Finding, _sev
from .infer import DEVICE, PY, UNKNOWN, by_name, is_tensorish
from .project import Always, ClassInfo, ModuleSummary, Project
from .syntax import _dotted, char_col, source_lines

_APIS = syncapis.by_name()
#: the op-model condition an in-kernel read flagged by the lint has been proved to meet (the
#: cases that meet none are silenced before flagging)
_IN_KERNEL_WHEN = {"multinomial": "no_replacement_or_one_sample",
                   "masked_fill": "value_on_device", "masked_fill_": "value_on_device",
                   "normal": "std_on_device"}
#: (rank or None, known to have no element): what the code says of a tensor's shape
_Shape = Tuple[Optional[int], bool]
_NO_SHAPE: _Shape = (None, False)
#: a part's reading of one node class: (the function's state, the node) -> the value's place
#: (an expression) or None (a statement)
Part = Callable[["Func", Any], Any]


@dataclasses.dataclass
class _ClassRead:
    """A class of this file while its methods are read: what a method needs to read another
    one (``self.m()`` before ``m``'s ``def``) and the places each ``self.m(...)`` call gives
    ``m``'s parameters (a parameter every caller fills from the device is on the device)."""

    #: the class body's dataflow (methods are read as its functions) and the methods' seed
    body: Func
    seed: Dict[str, str]
    #: the methods by name; those whose return is known (read in order or ahead of it)
    methods: Dict[str, ast.AST]
    known: Set[str] = dataclasses.field(default_factory=set)
    #: method -> one ``{parameter: place}`` per ``self.m(...)`` call read in the class
    calls: Dict[str, List[Dict[str, str]]] = dataclasses.field(default_factory=dict)
    recording: bool = True


class Ctx:
    """Per-file state: import aliases, module-level function results, the findings, and the
    parts that read each node class (``exprs``, ``stmts``: exact classes; a subclass is read
    by its base's part, a class neither lists by the part of ``ast.AST``)."""

    def __init__(self, path: str, source: str, exprs: Dict[type, Part],
                 stmts: Dict[type, Part], project: Optional[Project] = None,
                 module: str = "") -> None:
        self.exprs = exprs
        self.stmts = stmts
        self.path = path
        self.source = source
        self._lines: Optional[List[str]] = None
        #: the linted tree (None for one file on its own) and this file's module name
        self.project = project
        self.module = module
        #: names imported from modules of the project: local name -> (module, name there)
        self.imported: Dict[str, Tuple[str, str]] = {}
        #: names bound to modules of the project (``import pkg.mod as m``)
        self.modules: Dict[str, str] = {}
        #: classes read, by key, and this module's own classes, by name
        self.classes: Dict[str, ClassInfo] = project.classes if project is not None else {}
        self.local_classes: Dict[str, str] = {}
        self.aliases: Dict[str, str] = {}
        self.returns: Dict[str, str] = {}
        #: module-level functions that sync on every path
        self.always: Dict[str, Always] = {}
        #: what module-level functions' returns say of the shape, where every return agrees
        self.shape_returns: Dict[str, _Shape] = {}
        #: module-level functions, by name; those whose return is known; those being read
        self.defs: Dict[str, ast.AST] = {}
        self.returns_known: Set[str] = set()
        self.in_progress: Set[str] = set()
        #: the classes being read, by key (:class:`_ClassRead`)
        self.class_reads: Dict[str, _ClassRead] = {}
        #: module-level functions: where their findings are in :attr:`findings`; for the
        #: private ones, the places each call in the module gives their parameters
        self.spans: Dict[str, Tuple[int, int]] = {}
        self.calls: Dict[str, List[Dict[str, str]]] = {}
        self.recording = True
        self.findings: List[Finding] = []
        self.collect = True
        #: the file imports torch: without it an unknown value is not taken for a tensor
        #: because of a tensor-like method (numpy and pandas share .any(), .tolist()...)
        self.has_torch = True
        #: the file uses another array library (numpy, pandas, jax...) and never says torch:
        #: there ``.item()``/``.tolist()`` of an unknown value read host arrays mostly
        self.other_arrays = False
        #: every imported name -> what it imports (``jit`` -> ``triton.jit``)
        self.names: Dict[str, str] = {}
        #: the context of the whole file (test files, benchmarks) and the functions the
        #: ``__main__`` block calls
        self.file_context = _context.file_context(path)
        self.script_funcs: Set[str] = set()

    @property
    def lines(self) -> List[str]:
        """The file's lines, split when a finding first needs one (most files have few)."""
        if self._lines is None:
            self._lines = source_lines(self.source)
        return self._lines

    def symbol(self, name: str) -> Optional[Tuple[ModuleSummary, str]]:
        """The summary of the project module ``name`` was imported from, and its name
        there."""
        hit = self.imported.get(name)
        if hit is None or self.project is None:
            return None
        summary = self.project.summaries.get(hit[0])
        return (summary, hit[1]) if summary is not None else None

    def class_key(self, name: str) -> Optional[str]:
        """The key of the class a name means here (a class of this file or imported)."""
        if name in self.local_classes:
            return self.local_classes[name]
        sym = self.symbol(name)
        if sym is not None:
            return sym[0].classes.get(sym[1])
        return None

    def annotation_class(self, node: Optional[ast.expr]) -> Optional[str]:
        """The class key a type hint names: ``Batch``, ``"Batch"``, ``Optional[Batch]``."""
        if node is None:
            return None
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            try:
                node = ast.parse(node.value, mode="eval").body
            except SyntaxError:
                return None
        if isinstance(node, ast.Subscript) and _dotted(node.value) in (
                "Optional", "typing.Optional"):
            node = node.slice
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):  # Batch | None
            for side in (node.left, node.right):
                if not (isinstance(side, ast.Constant) and side.value is None):
                    return self.annotation_class(side)
        if isinstance(node, ast.Name):
            return self.class_key(node.id)
        return None

    def qual(self, node: ast.expr) -> Optional[str]:
        """Dotted name of ``node`` with import aliases resolved (``F.one_hot`` ->
        ``torch.nn.functional.one_hot``), or None."""
        if node.__class__ is ast.Name:
            return self.aliases.get(node.id)  # type: ignore[attr-defined]
        root = node
        while isinstance(root, ast.Attribute):
            root = root.value
        if not isinstance(root, ast.Name):
            return None
        base = self.aliases.get(root.id)
        if base is None:  # most chains: self.x.y, a local's attribute
            return None
        parts: List[str] = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        return ".".join([base, *reversed(parts)])


def _imports(ctx: Ctx, s: ast.stmt, env: Dict[str, str]) -> None:
    if isinstance(s, ast.Import):
        for a in s.names:
            if a.asname:
                ctx.aliases[a.asname] = a.name
                ctx.names[a.asname] = a.name
            else:
                top = a.name.split(".")[0]
                ctx.aliases[top] = top
                ctx.names[top] = top
    if ctx.project is not None:
        _project_imports(ctx, s)
    if isinstance(s, ast.ImportFrom) and s.module and not s.level:
        for a in s.names:
            ctx.names[a.asname or a.name] = f"{s.module}.{a.name}"
            if s.module.split(".")[0] in ("torch", "numpy"):
                ctx.aliases[a.asname or a.name] = f"{s.module}.{a.name}"


def _project_imports(ctx: Ctx, s: ast.stmt) -> None:
    """Imports of modules of the linted tree: their names are read from those modules'
    summaries (:mod:`.project`)."""
    project = ctx.project
    assert project is not None
    if isinstance(s, ast.Import):
        for a in s.names:
            if a.asname and a.name in project.modules:
                ctx.modules[a.asname] = a.name
        return
    if not isinstance(s, ast.ImportFrom):
        return
    mod = project.resolve(ctx.module, s.module, s.level)
    for a in s.names:
        local = a.asname or a.name
        sub = f"{mod}.{a.name}" if mod else project.resolve(ctx.module, a.name, s.level)
        if sub is not None and sub in project.modules:
            ctx.modules[local] = sub  # from pkg import mod
        elif mod is not None:
            ctx.imported[local] = (mod, a.name)


class Func:
    """One function's (or the module body's) state in the dataflow: what each name is bound
    to, what its returns give; the findings it records, the lookup of names, and the
    dispatch of each expression and statement to its part."""

    def __init__(self, ctx: Ctx, name: str, env: Optional[Dict[str, str]] = None,
                 context: Optional[str] = None) -> None:
        self.ctx = ctx
        self._exprs = ctx.exprs
        self._stmts = ctx.stmts
        self.name = name
        self.context = context or ctx.file_context
        self.env: Dict[str, str] = dict(env or {})
        self.ret: Optional[str] = None
        #: the key of the class whose method (or a function nested in one) this is
        self.cls: Optional[str] = None
        #: every path to here has made a sure sync; some return was reached before one;
        #: the first sure sync; the function yields (a call runs nothing)
        self.synced = False
        self.unsynced_exit = False
        self.first_sync: Optional[Always] = None
        self.generator = False
        #: a cache decorator (lru_cache, functools.cache, tensor_cache...) wraps the function
        self.cached = False
        #: a tensor was put on ``x.device`` of an ``x`` of unknown place
        self.guessed_device = False
        #: names bound to boolean tensors (comparisons, ~ & | of them)
        self.masks: Set[str] = set()
        #: names bound to integer index tensors (argmax, topk's indices, ``.long()``...)
        self.ints: Set[str] = set()
        #: names bound to Python lists or tuples of boolean tensors (``torch.cat`` of one is
        #: a mask)
        self.mask_lists: Set[str] = set()
        #: names bound to Python lists (``sorted(...)``, ``[...]``): as an index they copy
        self.lists: Set[str] = set()
        #: names (and ``self.x`` keys) bound to tensors of a known rank or known empty
        self.shapes: Dict[str, _Shape] = {}
        #: the shape of each return statement's value (:func:`.shapes.shape_of`)
        self.ret_shapes: List[_Shape] = []

    # -- findings ---------------------------------------------------------------------
    def flag(self, node: ast.AST, rule: str, api: str, why: str, severity: str,
             value: str, model: Optional[Tuple[str, str]] = None,
             models: Tuple[Tuple[str, str], ...] = (), via: Optional[Always] = None
             ) -> None:
        """Record a finding; ``model``: (op or entry point, condition) of an op-model entry
        that decides the backends it syncs on (none: every backend); ``models``: several
        such entries, any of which may hold (the backends of all of them); ``via``: the
        helper that always syncs, for a call of one."""
        backend = BOTH if via is None else via.backend
        if model is not None or models:
            found = backends_of(*model) if model is not None else backends_any(models)
            if found is None:
                return  # no op model counts a read here: no sync on any backend
            backend = found
        if severity == CERTAIN and rule != "SG401":
            # a read or a wait, not an upload: a helper that uploads host values it was given
            # makes its caller's inputs (the copy is flagged where the helper makes it)
            self.synced = True
            if self.first_sync is None:
                self.first_sync = via or Always(rule, api, why, api, backend)
        if not self.ctx.collect:
            return
        line = getattr(node, "lineno", 1)
        raw = self.ctx.lines[line - 1] if 0 < line <= len(self.ctx.lines) else ""
        self.ctx.findings.append(Finding(
            self.ctx.path, line, char_col(raw, getattr(node, "col_offset", 0)),
            getattr(node, "end_lineno", None) or line, rule=rule, api=api, why=why,
            severity=severity, value=value, function=self.name, text=raw.strip(),
            context=self.context, backend=backend))

    def api_flag(self, node: ast.AST, name: str, owner: str, severity: str, value: str,
                 why: Optional[str] = None) -> None:
        for a in _APIS.get(name, ()):
            if owner in a.owners:
                when = _IN_KERNEL_WHEN.get(name)
                model = (a.op, when) if a.rule == "SG701" and a.op and when else None
                self.flag(node, a.rule, f"{owner}.{name}" if owner != "Tensor" else
                          f"Tensor.{name}", why or a.why, severity, value, model)
                return

    def condition(self, node: ast.expr, v: str) -> None:
        """``node`` (in place ``v``) is read as a Python bool."""
        if is_tensorish(v):
            self.api_flag(node, "__bool__", "Tensor", _sev(v), v,
                          "a tensor read as a truth value")

    def call_always(self, node: ast.Call, always: Optional[Always]) -> None:
        """A call of a function that syncs on every path: a sure sync here, the chain in
        the why."""
        if always is not None:
            self.flag(node, always.rule, always.api,
                      f"calls {always.chain}, which syncs on every path ({always.why})",
                      CERTAIN, DEVICE, via=always)

    # -- places of names --------------------------------------------------------------
    def lookup(self, name: str) -> str:
        if name in self.env:
            return self.env[name]
        if name in self.ctx.aliases or name in ("self", "cls"):
            return PY
        sym = self.ctx.symbol(name)
        if sym is not None:
            summary, there = sym
            if there in summary.globals:
                return summary.globals[there]
            if there in summary.returns or there in summary.classes:
                return PY  # a function or a class
        return by_name(name.rsplit(".", 1)[-1]) or UNKNOWN

    def module_summary(self, alias: str) -> Optional[ModuleSummary]:
        if self.ctx.project is None:
            return None
        return self.ctx.project.summaries.get(self.ctx.modules[alias])

    # -- the dispatch to the parts ------------------------------------------------------
    def ev(self, node: Optional[ast.AST]) -> str:
        """The place of the value ``node`` evaluates to, by the part its class is read by;
        the parts flag the syncs it makes on the way."""
        if node is None:
            return PY
        cls = node.__class__
        if cls is ast.Name:
            return self.lookup(node.id)  # type: ignore[attr-defined]
        if cls is ast.Constant:
            return PY
        return (self._exprs.get(cls) or _inherited(self._exprs, cls))(self, node)

    def ev_quiet(self, node: ast.expr) -> str:
        """:meth:`ev` recording no finding (what a value is, read again elsewhere)."""
        saved = self.ctx.collect
        self.ctx.collect = False
        try:
            return self.ev(node)
        finally:
            self.ctx.collect = saved

    def body(self, stmts: Sequence[ast.stmt]) -> None:
        """Run statements in order, each by the part its class is read by."""
        parts = self._stmts
        for s in stmts:
            cls = s.__class__
            (parts.get(cls) or _inherited(parts, cls))(self, s)

    def stmt(self, s: ast.stmt) -> None:
        """Run one statement (:meth:`body` of one)."""
        cls = s.__class__
        (self._stmts.get(cls) or _inherited(self._stmts, cls))(self, s)


def _inherited(parts: Dict[type, Part], cls: type) -> Part:
    """The part of the nearest base of ``cls`` that ``parts`` lists (that of ``ast.AST``
    when none), kept for ``cls``."""
    part = next(parts[c] for c in cls.__mro__ if c in parts)
    parts[cls] = part
    return part
