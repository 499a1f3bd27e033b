"""The lint's analysis of one source file: rules from :mod:`syncguard.core.syncapis`, ranked by a
small dataflow per function that tracks what lives on the host and what on the device.

One pass over each function's statements in order: assignments bind names (and ``self.x``
attributes) to a place (:mod:`syncguard.lint.infer`), branches are joined, and every
expression that can sync is checked against the place of the value it reads. A finding is
``certain`` when that value is a device tensor, ``likely`` when it is a tensor (or, for
tensor-only APIs, anything) of unknown place, and ``silent`` when it is on the host: silent
findings are not reported but are candidate lines for ``--with-run``.
"""

from __future__ import annotations

import ast
import dataclasses
import re
from typing import Any, Callable, Dict, List, Optional, Sequence, Set, Tuple

from ..core import syncapis
from . import context as _context
from .backends import BOTH, backends_of
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
    is_tensorish,
    join,
    obj_key,
    syncs_on,
)
from .project import ClassInfo, ModuleSummary, Project

CERTAIN, LIKELY, SILENT = "certain", "likely", "silent"
SEVERITIES = (CERTAIN, LIKELY, SILENT)
_RANK = {CERTAIN: 2, LIKELY: 1, SILENT: 0}

_TORCH_WORD = re.compile(r"\btorch\b")
#: array libraries whose arrays share the tensor-only method names (item, tolist, any...)
_OTHER_ARRAY_LIBS = frozenset({"numpy", "pandas", "jax", "tensorflow", "cupy", "mlx", "polars",
                               "scipy", "xarray", "dask"})
_ALLOW = re.compile(r"#\s*syncguard:\s*allow\[([^\]]*)\]")

_APIS = syncapis.by_name()
#: the table's entries of a name that an owner (``Tensor``, ``torch``...) has, in table order
_OWNED: Dict[Tuple[str, str], List[Any]] = {}


def _owned(name: str, owner: str) -> List[Any]:
    key = (name, owner)
    got = _OWNED.get(key)
    if got is None:
        got = _OWNED[key] = [a for a in _APIS.get(name, ()) if owner in a.owners]
    return got


#: attributes whose value is a Python value whatever the tensor's place
_PY_ATTRS = frozenset({"shape", "dtype", "device", "ndim", "is_cuda", "is_cpu", "layout",
                       "requires_grad", "is_leaf", "itemsize", "nbytes"})


@dataclasses.dataclass
class Finding:
    """One line that can make a hidden sync. ``line``/``col`` where the syncing expression
    starts (1-based line, 0-based column), ``end_line`` where it ends; ``rule`` an id of
    :data:`syncguard.core.syncapis.RULES`; ``api`` the Python entry that syncs; ``why`` the reason;
    ``severity`` certain/likely/silent; ``value`` what the read value was inferred to be;
    ``function`` the enclosing function's qualified name; ``allowed`` the reason of an inline
    ``# syncguard: allow[reason]`` (None when not allowed); ``text`` the source line."""

    path: str
    line: int
    col: int
    end_line: int
    rule: str
    api: str
    why: str
    severity: str
    value: str
    function: str
    text: str = ""
    allowed: Optional[str] = None
    #: other candidates on the same line (``rule api``), less severe or later
    also: List[str] = dataclasses.field(default_factory=list)
    #: what result folders said of the line (:mod:`syncguard.lint.runs`): ``status``
    #: confirmed/cleared/unexercised/unknown, ``syncs``, ``steps``, ``per_step``
    run: Optional[Dict[str, Any]] = None
    #: where the line runs: serving, test, benchmark or script (:mod:`.context`)
    context: str = _context.SERVING
    #: on which backends it syncs: both, cuda or npu (from the op models, :mod:`.backends`)
    backend: str = BOTH

    @property
    def reported(self) -> bool:
        return self.severity != SILENT and self.allowed is None


def _sev(v: str, api_only: bool = False) -> str:
    """Severity of a sync on a value in place ``v``; ``api_only``: the API exists only on
    tensors, so an unknown receiver is likely a tensor."""
    if v == DEVICE:
        return CERTAIN
    if v == TENSOR or (api_only and v == UNKNOWN):
        return LIKELY
    return SILENT


#: method names that leave a tensor a tensor (an unknown receiver becomes a tensor)
_TENSOR_METHODS = frozenset("""
argmax argmin softmax log_softmax view reshape contiguous unsqueeze squeeze masked_fill
index_select gather scatter scatter_ clamp clamp_ float half bfloat16 long int bool
cumsum sum mean max min topk sort exp log sigmoid matmul bmm transpose permute flatten
expand expand_as repeat narrow chunk split div mul add sub neg abs sqrt pow lt le gt ge eq ne
logical_and logical_or logical_not fill_ zero_ copy_ index_copy_ index_fill_ any all
""".split())
#: modules whose functions return tensors
_TENSOR_NAMESPACES = frozenset({"torch", "torch.nn.functional", "torch.special", "torch.linalg",
                                "torch.fft", "torch.functional"})
#: methods whose int arguments are read on the host when given a 0-d tensor
_INT_ARG_METHODS = frozenset("view reshape expand narrow repeat new_zeros new_ones new_empty "
                             "new_full".split())
#: methods whose result is a Python value (shapes, counts)
_PY_METHODS = frozenset("""size dim numel stride element_size data_ptr is_contiguous
get_device nelement ndimension is_pinned is_floating_point type keys values items""".split())
#: methods whose result is on the host
_HOST_METHODS = frozenset("cpu numpy tolist item pin_memory".split())
#: table APIs whose name is common on non-tensors: an unknown receiver stays silent
_GENERIC = frozenset("unique equal allclose copy_ to numpy synchronize".split())
#: (rank or None, known to have no element): what the code says of a tensor's shape
_Shape = Tuple[Optional[int], bool]
_NO_SHAPE: _Shape = (None, False)
#: methods whose result has the receiver's shape
_SAME_RANK = frozenset("""to cuda npu cpu float half double long int bool bfloat16 contiguous
clone detach pin_memory fill_ zero_ copy_ masked_fill_ clamp_ requires_grad_ t transpose
permute softmax log_softmax cumsum neg abs exp log sqrt sigmoid relu tanh""".split())
#: index or value expressions that are no Python int or number, even of a Python place
_NOT_INT_NODES = (ast.List, ast.Tuple, ast.Set, ast.Dict, ast.ListComp, ast.SetComp,
                  ast.DictComp, ast.GeneratorExp, ast.JoinedStr, ast.Lambda)
#: the op-model condition an in-kernel read flagged by the lint has been proved to meet (the
#: cases that meet none are silenced before flagging)
_IN_KERNEL_WHEN = {"multinomial": "no_replacement_or_one_sample",
                   "masked_fill": "value_on_device", "masked_fill_": "value_on_device",
                   "normal": "std_on_device"}
#: string methods (some share a name with a tensor method: split): with a string literal
#: argument or receiver the value is a string
_STR_METHODS = frozenset("""split rsplit strip lstrip rstrip find rfind index startswith endswith
replace join lower upper encode decode splitlines partition rpartition count""".split())
#: logging methods that format their arguments
_LOG_LEVELS = frozenset("debug info warning warn error exception critical fatal log".split())
#: receivers that are loggers: ``logger``, ``self.log``, ``_LOGGER``, ``logging``
_LOGGER_NAME = re.compile(r"(?:^|[._])(?:logger|log|logging)$", re.I)
_FACTORIES = frozenset("""zeros ones empty full arange rand randn randint tensor as_tensor
linspace logspace eye empty_strided randperm zeros_like ones_like empty_like full_like
rand_like randn_like randint_like from_numpy frombuffer""".split())


class _Ctx:
    """Per-file state: import aliases, module-level function results and the findings."""

    def __init__(self, path: str, source: str, project: Optional[Project] = None,
                 module: str = "") -> None:
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
        #: what module-level functions' returns say of the shape, where every return agrees
        self.shape_returns: Dict[str, _Shape] = {}
        #: module-level functions, by name; those whose return is known; those being read
        self.defs: Dict[str, ast.AST] = {}
        self.returns_known: Set[str] = set()
        self.in_progress: Set[str] = set()
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
            self._lines = self.source.splitlines()
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


class _Func:
    """The dataflow over one function (or the module body)."""

    def __init__(self, ctx: _Ctx, name: str, env: Optional[Dict[str, str]] = None,
                 context: Optional[str] = None) -> None:
        self.ctx = ctx
        self.name = name
        self.context = context or ctx.file_context
        self.env: Dict[str, str] = dict(env or {})
        self.ret: Optional[str] = None
        #: names bound to boolean tensors (comparisons, ~ & | of them)
        self.masks: Set[str] = set()
        #: names bound to Python lists (``sorted(...)``, ``[...]``): as an index they copy
        self.lists: Set[str] = set()
        #: names (and ``self.x`` keys) bound to tensors of a known rank or known empty
        self.shapes: Dict[str, _Shape] = {}
        #: the shape of each return statement's value (:meth:`shape_of`)
        self.ret_shapes: List[_Shape] = []

    # -- findings ---------------------------------------------------------------------
    def flag(self, node: ast.AST, rule: str, api: str, why: str, severity: str,
             value: str, model: Optional[Tuple[str, str]] = None) -> None:
        """Record a finding; ``model``: (op or entry point, condition) of an op-model entry
        that decides the backends it syncs on (none: every backend)."""
        if not self.ctx.collect:
            return
        backend = BOTH
        if model is not None:
            found = backends_of(*model)
            if found is None:
                return  # no op model counts a read here: no sync on any backend
            backend = found
        line = getattr(node, "lineno", 1)
        text = self.ctx.lines[line - 1].strip() if 0 < line <= len(self.ctx.lines) else ""
        self.ctx.findings.append(Finding(
            self.ctx.path, line, getattr(node, "col_offset", 0),
            getattr(node, "end_lineno", None) or line, rule, api, why, severity, value,
            self.name, text, context=self.context, backend=backend))

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

    def bind(self, target: ast.expr, v: str, value: Optional[ast.expr] = None) -> None:
        """Bind ``target`` to place ``v`` (``value`` the expression, None for an element
        of an unpacked tuple)."""
        if isinstance(target, ast.Name):
            self.env[target.id] = _named(target.id, v, value)
            self.bind_shape(target.id, value)
        elif isinstance(target, ast.Attribute):
            key = _attr_key(target)
            self.ev(target.value)
            if key is not None:
                self.env[key] = _named(target.attr, v, value)
                self.bind_shape(key, value)
        elif isinstance(target, (ast.Tuple, ast.List)):
            vals = value.elts if isinstance(value, (ast.Tuple, ast.List)) and len(
                value.elts) == len(target.elts) else None
            for i, t in enumerate(target.elts):
                self.bind(t, self.ev_quiet(vals[i]) if vals is not None else v)
        elif isinstance(target, ast.Starred):
            self.bind(target.value, v)
        elif isinstance(target, ast.Subscript):
            self.store_subscript(target, v, value)

    def bind_shape(self, key: str, value: Optional[ast.expr]) -> None:
        shape = self.shape_of(value)
        if shape == _NO_SHAPE:
            self.shapes.pop(key, None)
        else:
            self.shapes[key] = shape

    def store_subscript(self, target: ast.Subscript, v: str,
                        value: Optional[ast.expr] = None) -> None:
        base = self.ev(target.value)
        idx = self.ev(target.slice)
        self.slice_bounds(target.slice)
        if base in (HOST, PINNED) and value is not None and syncs_on(v):
            # host[a:b] = dev: copy_ from the device into host memory, the host waits
            self.flag(target, "SG201", "Tensor.__setitem__",
                      "a device tensor written into a host tensor: a blocking device-to-host "
                      "copy", _sev(v), v)
            return
        if is_tensorish(base):
            self.setitem(target, target.value, base, target.slice, idx, value, v)

    def setitem(self, node: ast.AST, recv: ast.expr, base: str, idx_node: ast.expr, idx: str,
                value: Optional[ast.expr], v: str) -> None:  # noqa: C901
        """``recv[idx_node] = value`` (a store, or an explicit ``recv.__setitem__`` call) on
        a tensor in place ``base``; ``idx`` and ``v`` the places of the index and value.

        A Python number written through an index costs differently per backend (the op
        models' ``Tensor.__setitem__`` entries): CUDA makes the value on the host, so a
        0-d destination (``x[0]`` of a 1-d x) is a blocking copy_ and an index tensor makes
        index_put_ copy it to the device, while a boolean mask is masked_fill (no sync); the
        NPU makes the value on the device, so only the mask syncs (index_put_ -> nonzero)."""
        number = value is not None and _is_number(value, v)
        if self.is_mask(idx_node, idx):
            if syncs_on(v):
                self.flag(node, "SG301", "Tensor.__setitem__",
                          "a boolean mask assigned a tensor value reads the mask on the host",
                          _sev(combine([idx, v])), idx)
            elif number and base in (DEVICE, TENSOR):
                self.flag(node, "SG301", "Tensor.__setitem__",
                          "a boolean mask assigned a Python number: on NPU index_put_ runs "
                          "nonzero and reads the count on the host (CUDA uses masked_fill: "
                          "no sync)", _sev(DEVICE if DEVICE in (base, idx) else base), base,
                          ("Tensor.__setitem__", "setitem_scalar_bool_mask"))
            return
        if base not in (DEVICE, TENSOR):
            return
        items = idx_node.elts if isinstance(idx_node, ast.Tuple) else [idx_node]
        kinds = [self.index_kind(it) for it in items]
        if idx in (HOST, PINNED) or "host" in kinds:
            self.flag(node, "SG401", "Tensor.__setitem__",
                      "a host index tensor is copied to the device", _sev(base), base)
            return
        if not number or any(k in ("slice", "none", "other") for k in kinds):
            return  # a slice or None keeps a dimension: fill_ into it, no copy
        if "tensor" in kinds:
            self.flag(node, "SG401", "Tensor.__setitem__",
                      "a Python number written through an index tensor: on CUDA index_put_ "
                      "copies the value to the device and waits (no sync on NPU)",
                      _sev(base), base,
                      ("Tensor.__setitem__", "setitem_scalar_int_tensor_index"))
            return
        rank = self.rank_of(recv)
        ints = sum(k in ("int", "unknown") for k in kinds)
        if rank is None:
            if "ellipsis" in kinds:
                return  # x[..., 0] = 0: mostly on tensors of several dimensions
            sev = LIKELY
        elif rank != ints:
            return  # the destination keeps a dimension: fill_, no sync
        else:
            sev = CERTAIN if base == DEVICE and "unknown" not in kinds else LIKELY
        self.flag(node, "SG401", "Tensor.__setitem__",
                  "a Python number written through an integer index: the cost is "
                  "backend-dependent (CUDA: a blocking host-to-device copy of the value into "
                  "a 0-d destination, e.g. x[i] of a 1-d x; a row of a 2-d tensor is a fill_ "
                  "with no sync; NPU: no sync)", sev, base,
                  ("Tensor.__setitem__", "setitem_scalar_into_0d"))

    def index_kind(self, it: ast.expr) -> str:
        """One item of an index: ``slice``, ``none``, ``ellipsis``, ``int``, ``tensor``,
        ``host`` (a host index tensor), ``unknown`` (a value of unknown place: an int
        mostly) or ``other`` (a list, a bool, a string...)."""
        if isinstance(it, ast.Slice) or (isinstance(it, ast.Call) and isinstance(
                it.func, ast.Name) and it.func.id == "slice"):
            return "slice"
        if isinstance(it, ast.Name) and it.id == "Ellipsis":
            return "ellipsis"
        lit = it.operand if isinstance(it, ast.UnaryOp) and isinstance(
            it.op, (ast.USub, ast.UAdd)) else it
        if isinstance(lit, ast.Constant):
            if lit.value is None:
                return "none"
            if lit.value is Ellipsis:
                return "ellipsis"
            return "int" if isinstance(lit.value, int) and not isinstance(
                lit.value, bool) else "other"
        v = self.ev_quiet(it)
        if v in (DEVICE, TENSOR):
            return "tensor"
        if v in (HOST, PINNED):
            return "host"
        if v == PY:
            return "other" if isinstance(it, _NOT_INT_NODES) else "int"
        return "unknown"

    # -- shapes -------------------------------------------------------------------------
    def rank_of(self, node: Optional[ast.expr]) -> Optional[int]:
        """The number of dimensions of the tensor ``node`` evaluates to, None if unknown."""
        return self.shape_of(node)[0]

    def is_empty(self, node: Optional[ast.expr]) -> bool:
        """``node`` is known to be a tensor of no element (its copies copy nothing)."""
        return self.shape_of(node)[1]

    def shape_of(self, node: Optional[ast.expr]) -> _Shape:  # noqa: C901
        """What the code says of the shape of the tensor ``node`` evaluates to (factories'
        sizes, ``view``/``reshape``, literals, names bound to them, module functions
        returning them): (rank or None, known to have no element). Reads places quietly."""
        if node is None:
            return _NO_SHAPE
        if isinstance(node, ast.Constant):
            return (0, False) if isinstance(node.value, (int, float, complex)) else _NO_SHAPE
        if isinstance(node, ast.UnaryOp):
            return self.shape_of(node.operand)
        if isinstance(node, ast.Name):
            return self.shapes.get(node.id, _NO_SHAPE)
        if isinstance(node, ast.Attribute):
            key = _attr_key(node)
            return self.shapes.get(key, _NO_SHAPE) if key is not None else _NO_SHAPE
        if isinstance(node, ast.BinOp):
            (lr, le), (rr, re_) = self.shape_of(node.left), self.shape_of(node.right)
            return (None if lr is None or rr is None else max(lr, rr)), le or re_
        if isinstance(node, ast.Subscript):
            base = self.rank_of(node.value)
            if base is None:
                return _NO_SHAPE
            items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            for it in items:
                k = self.index_kind(it)
                if k == "int":
                    base -= 1
                elif k == "none":
                    base += 1
                elif k != "slice":
                    return _NO_SHAPE
            return (base if base >= 0 else None), False
        if isinstance(node, ast.Call):
            return self.call_shape(node)
        return _NO_SHAPE

    def call_shape(self, node: ast.Call) -> _Shape:  # noqa: C901
        func = node.func
        q = self.ctx.qual(func)
        if q is not None:
            head, _, name = q.rpartition(".")
            if head != "torch":
                return _NO_SHAPE
            if name in ("zeros", "ones", "empty", "rand", "randn"):
                return _size_shape(node.args)
            if name == "full":
                return _size_shape(node.args[:1])
            if name in ("arange", "linspace", "logspace", "randperm"):
                return 1, False
            if name == "eye":
                return 2, False
            if name in ("tensor", "as_tensor") and node.args:
                a = node.args[0]
                return self.literal_rank(a), isinstance(a, (ast.List, ast.Tuple)) and not a.elts
            if name.endswith("_like") and node.args:
                return self.shape_of(node.args[0])
            return _NO_SHAPE
        if isinstance(func, ast.Name):
            _lazy_return(self.ctx, func.id)
            return self.ctx.shape_returns.get(func.id, _NO_SHAPE)
        if not isinstance(func, ast.Attribute):
            return _NO_SHAPE
        m = func.attr
        if m in ("view", "reshape"):  # the same elements
            rank, empty = _size_shape(node.args)
            return rank, empty or self.is_empty(func.value)
        if m in ("new_zeros", "new_ones", "new_empty"):
            return _size_shape(node.args)
        if m == "new_full":
            return _size_shape(node.args[:1])
        if m == "flatten" and not node.args and not node.keywords:
            return 1, self.is_empty(func.value)
        if m == "unsqueeze":
            rank, empty = self.shape_of(func.value)
            return (None if rank is None else rank + 1), empty
        if m in _SAME_RANK:
            return self.shape_of(func.value)
        return _NO_SHAPE

    def literal_rank(self, node: ast.expr) -> Optional[int]:
        """Rank of ``torch.tensor(node)``: the nesting of a literal of numbers."""
        if isinstance(node, (ast.List, ast.Tuple)):
            if not node.elts:
                return 1
            ranks = {self.literal_rank(e) for e in node.elts}
            if len(ranks) != 1 or None in ranks:
                return None
            return 1 + ranks.pop()  # type: ignore[operator]
        if isinstance(node, ast.ListComp):  # [float(v) for v in vals]: numbers only
            return 1 if _is_number_expr(node.elt) else None
        if _is_number_expr(node):
            return 0
        return self.rank_of(node)

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
        vals = [self.ev(x) for x in node.values]
        for x, v in zip(node.values[:-1], vals[:-1]):
            self.condition(x, v)
        return combine(vals)

    def ifexp(self, node: ast.IfExp) -> str:
        self.condition(node.test, self.ev(node.test))
        return join(self.ev(node.body), self.ev(node.orelse))

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

    def module_summary(self, alias: str) -> Optional[ModuleSummary]:
        if self.ctx.project is None:
            return None
        return self.ctx.project.summaries.get(self.ctx.modules[alias])

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

    def is_mask(self, idx_node: ast.expr, idx: str) -> bool:
        """An index that is a boolean tensor (a comparison, ~/&/| of them, ``*mask``)."""
        if isinstance(idx_node, ast.Tuple):
            return any(self.is_mask(e, UNKNOWN) for e in idx_node.elts)
        if isinstance(idx_node, ast.Compare) and not any(
                isinstance(o, (ast.Is, ast.IsNot, ast.In, ast.NotIn)) for o in idx_node.ops):
            return True
        if isinstance(idx_node, ast.UnaryOp) and isinstance(idx_node.op, ast.Invert):
            return self.is_mask(idx_node.operand, idx)
        if isinstance(idx_node, ast.BinOp) and isinstance(idx_node.op, (ast.BitAnd, ast.BitOr)):
            return self.is_mask(idx_node.left, idx) or self.is_mask(idx_node.right, idx)
        name = _last_name(idx_node)
        return name is not None and (name.lower().endswith("mask") or name in self.masks)

    def slice_bounds(self, sl: ast.expr) -> None:
        items = sl.elts if isinstance(sl, ast.Tuple) else [sl]
        for it in items:
            if isinstance(it, ast.Slice):
                for b in (it.lower, it.upper, it.step):
                    if b is not None:
                        v = self.ev(b)
                        if syncs_on(v):
                            self.api_flag(b, "__index__", "Tensor", _sev(v), v,
                                          "a tensor slice bound is read on the host")

    def subscript(self, node: ast.Subscript) -> str:
        base = self.ev(node.value)
        idx = self.ev(node.slice)
        self.slice_bounds(node.slice)
        if base in (DEVICE, TENSOR) or (base == UNKNOWN and idx in (DEVICE, TENSOR)):
            if self.is_mask(node.slice, idx) and idx not in (HOST, PINNED) and (
                    is_tensorish(idx) or base != UNKNOWN):
                mask_v = idx if is_tensorish(idx) else base
                self.api_flag(node, "__getitem__", "Tensor", _sev(mask_v), mask_v,
                              "boolean-mask indexing runs nonzero: the output size is read "
                              "on the host")
            elif base in (DEVICE, TENSOR) and idx in (HOST, PINNED):
                self.flag(node, "SG401", "Tensor.__getitem__",
                          "a host index tensor is copied to the device", _sev(base), base)
            return base if base != UNKNOWN else idx
        if base == PY and idx in (DEVICE, TENSOR) and not isinstance(node.slice, ast.Slice):
            self.api_flag(node, "__index__", "Tensor", _sev(idx), idx,
                          "a tensor used as a Python index is read on the host")
            return UNKNOWN
        if base == PINNED and self.is_advanced(node.slice, idx):
            return HOST  # a gather into a new tensor, in pageable memory
        return base if base in (HOST, PINNED, PY) else UNKNOWN

    def is_advanced(self, idx_node: ast.expr, idx: str) -> bool:
        """An index that gathers into a new tensor (advanced indexing): a tensor, a list
        (a literal, a comprehension, ``sorted()``/``list()``, a name bound to one), or a
        tuple holding one; ints and slices make a view of the same memory."""
        if isinstance(idx_node, ast.Tuple):
            return any(self.is_advanced(e, self.ev_quiet(e)) for e in idx_node.elts)
        if is_tensorish(idx) or _is_list_expr(idx_node):
            return True
        return isinstance(idx_node, ast.Name) and idx_node.id in self.lists

    # -- calls --------------------------------------------------------------------------
    def call(self, node: ast.Call) -> str:  # noqa: C901
        func = node.func
        q = self.ctx.qual(func)
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and (
                func.value.id in self.ctx.modules and func.value.id not in self.env):
            summary = self.module_summary(func.value.id)
            if summary is not None:
                self.args(node)
                if func.attr in summary.classes:
                    return OBJ + summary.classes[func.attr]
                return summary.returns.get(func.attr, UNKNOWN)
        if q is not None and q.startswith("logging.") and q.count(".") == 1:
            self.log_call(node, func.attr if isinstance(func, ast.Attribute) else "")
            return PY
        if q is not None:
            return self.module_call(node, q)
        if isinstance(func, ast.Name):
            return self.name_call(node, func.id)
        if isinstance(func, ast.Attribute):
            return self.method_call(node, func)
        self.ev(func)
        self.args(node)
        return UNKNOWN

    def log_call(self, node: ast.Call, level: str) -> None:
        """``logger.info("%s", t)``: a logging call formats its arguments on the host (when
        the level is enabled), reading a device tensor's values."""
        vals = self.args(node)
        skip = 2 if level == "log" else 1  # the level, the message
        for a, v in list(zip(node.args, vals))[skip:]:
            if syncs_on(v):
                self.flag(a, "SG501", "Tensor.__repr__",
                          f"logging.{level}() formats the tensor on the host (when the level "
                          "is enabled)", _sev(v), v)

    def format_args(self, node: ast.AST, args: Sequence[ast.expr], how: str) -> None:
        """``"%s" % t`` and ``"{}".format(t)``: each tensor argument is formatted."""
        for a in args:
            v = self.ev_quiet(a.value if isinstance(a, ast.Starred) else a)
            if syncs_on(v):
                self.flag(a, "SG501", "Tensor.__format__",
                          f"{how} formats the tensor on the host", _sev(v), v)

    def args(self, node: ast.Call) -> List[str]:
        vals = [self.ev(a) for a in node.args]
        for kw in node.keywords:
            self.ev(kw.value)
        return vals

    def name_call(self, node: ast.Call, name: str) -> str:
        vals = self.args(node)
        first = vals[0] if vals else PY
        if name in ("print", "str", "repr", "format"):
            for a, v in zip(node.args, vals):
                if is_tensorish(v):
                    api = "Tensor.__format__" if name == "format" else "Tensor.__repr__"
                    self.flag(a, "SG501", api, f"{name}() of a tensor copies it to the host",
                              _sev(v), v)
            return PY
        if name in ("int", "float", "complex", "bool") and node.args:
            if syncs_on(first):
                self.api_flag(node, "__bool__" if name == "bool" else f"__{name}__", "Tensor",
                              _sev(first), first)
            return PY
        if name in ("range",):
            for a, v in zip(node.args, vals):
                if syncs_on(v):
                    self.api_flag(a, "__index__", "Tensor", _sev(v), v,
                                  "range() reads the tensor bound on the host")
            return PY
        if name in ("sorted", "max", "min") and len(node.args) == 1:
            if syncs_on(first):
                self.api_flag(node, "__bool__", "Tensor", _sev(first), first,
                              f"{name}() over a tensor compares its elements on the host")
            return UNKNOWN if is_tensorish(first) else first
        if name in ("len", "isinstance", "hasattr", "id", "type", "callable", "getattr"):
            return PY
        if name in ("list", "tuple", "reversed", "iter", "next"):
            return first if first != PY else PY
        if name not in self.env:
            cls = self.ctx.class_key(name)
            if cls is not None:
                return OBJ + cls
            sym = self.ctx.symbol(name)
            if sym is not None:
                return _given(sym[0].returns.get(sym[1], UNKNOWN), vals)
        _lazy_return(self.ctx, name)
        if name in self.ctx.returns:
            return _given(self.ctx.returns[name], vals)
        return UNKNOWN

    def _device_kw(self, node: ast.Call) -> Optional[ast.expr]:
        for kw in node.keywords:
            if kw.arg == "device":
                return kw.value
        return None

    def place_of_device(self, dev: Optional[ast.expr]) -> Tuple[str, bool]:
        """(where a ``device=`` expression puts a tensor, whether we are sure)."""
        if dev is None:
            return HOST, True
        if isinstance(dev, ast.Constant):
            if dev.value is None:
                return HOST, False
            s = str(dev.value)
            return (HOST, True) if s.startswith("cpu") else (DEVICE, True)
        if isinstance(dev, ast.Call) and self.ctx.qual(dev.func) == "torch.device" and dev.args:
            return self.place_of_device(dev.args[0])
        name = _last_name(dev)
        if name is not None:
            if "cpu" in name.lower() or "host" in name.lower():
                return HOST, True
            if re.search(r"(?:^|_)(?:device|dev)$", name, re.I) or by_name(name) == DEVICE:
                return DEVICE, True
        v = self.ev(dev)
        if is_tensorish(v):
            return v, False  # x.to(other_tensor)
        return DEVICE, False

    def module_call(self, node: ast.Call, q: str) -> str:  # noqa: C901
        vals = self.args(node)
        if q.startswith("numpy."):
            return HOST
        head, _, name = q.rpartition(".")
        if head in ("torch.cuda", "torch.npu") and name == "synchronize":
            self.flag(node, "SG601", q, "blocks the host until the device is idle", CERTAIN,
                      DEVICE)
            return PY
        if head in ("torch.cuda", "torch.npu"):
            return UNKNOWN
        if not q.startswith("torch") or name.startswith(("is_", "are_", "has_", "get_")):
            return PY if name.startswith(("is_", "are_", "has_")) else UNKNOWN
        if head not in _TENSOR_NAMESPACES:
            return UNKNOWN  # torch.jit, torch.overrides, torch.distributed, helpers...
        if name[:1].isupper() and not name.endswith("Tensor"):
            return PY  # torch.Size, torch.device, torch.Generator: no tensor
        kw = {k.arg: k.value for k in node.keywords if k.arg} if node.keywords else {}
        first = vals[0] if vals else PY
        owner = "torch.nn.functional" if head == "torch.nn.functional" else "torch"
        if name in ("tensor", "as_tensor") and head == "torch":
            dev_node = kw.get("device") if "device" in kw else (
                node.args[2] if name == "as_tensor" and len(node.args) > 2 else None)
            place, sure = self.place_of_device(dev_node)
            elems = self.element_places(node.args[0]) if node.args else []
            if node.args and isinstance(node.args[0], (ast.List, ast.Tuple)) and not (
                    node.args[0].elts):
                return place  # torch.tensor([], device=dev): no element, nothing copied
            if any(syncs_on(e) for e in elems):
                # each element is a tensor read as a Python scalar, then the values are built
                # into a host tensor (and uploaded with device=)
                self.flag(node, "SG102", f"torch.{name}",
                          f"torch.{name}() of a list of device tensors reads each element on "
                          "the host (one sync per element)" + (
                              ", then copies the values back to the device" if
                              place == DEVICE else ""),
                          _sev(DEVICE if DEVICE in elems else TENSOR), combine(elems))
                return place
            if place == DEVICE and first != DEVICE:
                self.api_flag(node, name, "torch", CERTAIN if sure else LIKELY, first,
                              "host values copied to the device: the host waits for the copy")
            return place
        if name in _FACTORIES:
            if not name.endswith("_like") and name not in ("tensor", "as_tensor", "from_numpy"):
                self.int_args(node.args, vals)
            if name.endswith("_like") and "device" not in kw:
                return first if is_tensorish(first) else TENSOR
            if name == "from_numpy":
                return HOST
            if _is_true(kw.get("pin_memory")):
                return PINNED
            return self.place_of_device(kw.get("device"))[0]
        apis = _owned(name, owner)
        if apis:
            a = apis[0]
            sev_v = combine(vals[:2]) if vals else UNKNOWN
            if name == "where" and (len(node.args) != 1 or node.keywords):
                sev_v = PY
            elif a.unless_kwarg and (a.unless_kwarg in kw or (
                    name == "one_hot" and len(node.args) > 1)
                    or (name == "repeat_interleave" and len(node.args) > 3)):
                sev_v = PY
            elif name == "repeat_interleave" and len(vals) > 1 and not is_tensorish(vals[1]):
                sev_v = PY
            elif name in ("masked_fill",):
                sev_v = vals[2] if len(vals) > 2 else PY
            elif name == "multinomial" and _no_check_multinomial(node, 1, kw):
                sev_v = PY
            elif name == "normal":
                sev_v = vals[1] if len(vals) > 1 and is_tensorish(vals[0]) else PY
            if syncs_on(sev_v):
                self.api_flag(node, name, owner,
                              _sev(sev_v, name not in _GENERIC and self.tensor_api(name)),
                              sev_v)
        if name in ("equal", "allclose", "is_nonzero", "is_same_size"):
            return PY  # a Python bool (the read, if any, is flagged here)
        res = combine(v for v in vals if v != PY)
        for k, v in kw.items():
            if k not in ("device", "dtype", "out") and v is not None:
                res = combine([res, self.ev_quiet(v)])
        if "device" in kw:
            return self.place_of_device(kw["device"])[0]
        if res in (UNKNOWN, PY):
            return TENSOR
        return res

    def element_places(self, node: ast.expr) -> List[str]:
        """The places of the leaves of a list/tuple literal (nested), or of a list
        comprehension's elements; [] for anything else (a name: a list or a tensor)."""
        if isinstance(node, (ast.List, ast.Tuple)):
            out: List[str] = []
            for e in node.elts:
                out.extend(self.element_places(e) if isinstance(e, (ast.List, ast.Tuple))
                           else [self.ev_quiet(e)])
            return out
        if isinstance(node, ast.ListComp):
            return [self.ev_quiet(node)]
        return []

    def int_args(self, args: Sequence[ast.expr], vals: Sequence[str]) -> None:
        """Arguments where an int is expected: a 0-d tensor there is read on the host, and
        so is one inside a size tuple or list (``torch.zeros((n, 4))``)."""
        for a, v in zip(args, vals):
            if isinstance(a, (ast.List, ast.Tuple)):
                for e in a.elts:
                    if isinstance(e, ast.Starred):
                        continue  # *shape: a torch.Size or a list of ints
                    ev = self.ev_quiet(e)
                    if syncs_on(ev):
                        self.api_flag(e, "__index__", "Tensor", _sev(ev), ev,
                                      "a tensor inside a size is read on the host")
            elif syncs_on(v):
                self.api_flag(a, "__index__", "Tensor", _sev(v), v,
                              "a tensor passed where an int is expected is read on the host")

    def ev_quiet(self, node: ast.expr) -> str:
        saved = self.ctx.collect
        self.ctx.collect = False
        try:
            return self.ev(node)
        finally:
            self.ctx.collect = saved

    def method_call(self, node: ast.Call, func: ast.Attribute) -> str:  # noqa: C901
        m = func.attr
        if m in _LOG_LEVELS and _LOGGER_NAME.search(_dotted(func.value) or ""):
            self.ev(func.value)
            self.log_call(node, m)
            return PY
        if m == "format" and isinstance(func.value, ast.Constant) and isinstance(
                func.value.value, str):
            self.args(node)
            self.format_args(node, [*node.args, *(k.value for k in node.keywords)],
                             "str.format()")
            return PY
        if m in _STR_METHODS and any(isinstance(a, ast.Constant) and isinstance(
                a.value, (str, bytes)) for a in [func.value, *node.args]):
            self.ev(func.value)
            self.args(node)
            return PY  # text.split("\n"): a string method, not Tensor.split
        r = self.ev(func.value)
        cls = obj_key(r)
        if cls is not None:
            self.args(node)
            info = self.ctx.classes.get(cls)
            return info.methods.get(m, UNKNOWN) if info is not None else UNKNOWN
        vals = self.args(node)
        kw = {k.arg: k.value for k in node.keywords if k.arg} if node.keywords else {}
        tensor_recv = r in (DEVICE, TENSOR) or (
            r == UNKNOWN and m not in _GENERIC and not m.startswith("__"))
        if m == "synchronize":
            self.flag(node, "SG601", f"{_dotted(func.value) or 'object'}.synchronize",
                      "blocks the host until the device (stream, event) is done",
                      LIKELY if r != PY else CERTAIN, r)
            return PY
        if "device" in kw and m.startswith("new_"):
            return self.place_of_device(kw["device"])[0]
        if m in _INT_ARG_METHODS and r in (DEVICE, TENSOR):
            self.int_args(node.args, vals)
        if "alpha" in kw and r in (DEVICE, TENSOR):
            self.int_args([kw["alpha"]], [self.ev_quiet(kw["alpha"])])
        if m == "__setitem__" and node.args and r in (DEVICE, TENSOR):
            self.setitem(node, func.value, r, node.args[0], vals[0],
                         node.args[1] if len(node.args) > 1 else None,
                         vals[1] if len(vals) > 1 else DEVICE)
            return r
        if m == "__getitem__" and node.args and r in (DEVICE, TENSOR):
            idx_v = vals[0]
            value_v = vals[1] if len(vals) > 1 else DEVICE
            if self.is_mask(node.args[0], idx_v) and syncs_on(value_v):
                self.api_flag(node, m, "Tensor", _sev(combine([idx_v, value_v])), idx_v,
                              "a boolean mask index reads the mask on the host")
            return r
        if m in ("to", "cuda", "npu") or (m == "copy_" and node.args):
            if self.is_empty(func.value) or (m == "copy_" and self.is_empty(node.args[0])):
                # a copy of no element returns before copying: nothing waits
                saved, self.ctx.collect = self.ctx.collect, False
                try:
                    return self.copy_method(node, m, r, vals, kw)
                finally:
                    self.ctx.collect = saved
            return self.copy_method(node, m, r, vals, kw)
        if r in (HOST, PINNED) and _owned(m, "Tensor"):
            a = _owned(m, "Tensor")[0]
            self.flag(node, a.rule, f"Tensor.{m}", a.why, SILENT, r)  # a candidate only
        if r == PY and isinstance(func.value, ast.Name) and func.value.id in ("self", "cls"):
            # a method of the class: it may return tensors (or tuples of them)
            return PY if m in _PY_METHODS else UNKNOWN
        if r in (HOST, PINNED, PY) and m not in ("to",):
            if m == "pin_memory":
                return PINNED
            return HOST if m == "numpy" else (
                PY if m in _PY_METHODS or m in ("tolist", "item") else r)
        if m in _PY_METHODS:
            return PY
        apis = _owned(m, "Tensor")
        if m in ("cpu", "tolist", "numpy") and self.is_empty(func.value):
            apis = []  # a copy of no element: nothing waits
        if apis and tensor_recv:
            a = apis[0]
            sev_v = r
            if a.unless_kwarg and a.unless_kwarg in kw:
                sev_v = PY
            elif m == "repeat_interleave":
                rep = vals[0] if vals else PY
                sev_v = PY if not is_tensorish(rep) or (len(node.args) > 2) else combine(
                    [r, rep])
            elif m in ("masked_fill", "masked_fill_"):
                sev_v = vals[1] if len(vals) > 1 else self.ev_quiet(kw["value"]) if (
                    "value" in kw) else PY
                sev_v = sev_v if sev_v in (DEVICE, TENSOR) else PY
            elif m == "multinomial" and _no_check_multinomial(node, 0, kw):
                sev_v = PY
            elif m == "numpy" and not _is_true(kw.get("force")):
                sev_v = PY  # raises on a device tensor: nothing is read
            if sev_v != PY:
                when = _IN_KERNEL_WHEN.get(m)
                self.flag(node, a.rule, f"Tensor.{m}", a.why,
                          _sev(sev_v, m not in _GENERIC and self.tensor_api(m)), sev_v,
                          (a.op, when) if a.rule == "SG701" and a.op and when else None)
        if m in _HOST_METHODS:
            return PY if m in ("item", "tolist") else HOST
        if r == UNKNOWN:
            if m in ("all", "any") and not self.ctx.other_arrays and self.is_mask(
                    func.value, r):
                # (ids == stop).all(): a reduction of a comparison is an array; in a file
                # that uses no other array library, a tensor handed in from elsewhere
                return TENSOR
            return TENSOR if m in _TENSOR_METHODS and self.ctx.has_torch else UNKNOWN
        return r

    def tensor_api(self, m: str) -> bool:
        """An unknown receiver of method ``m`` is likely a tensor: in a file that says torch,
        or for a read only tensors (and numpy) have, in a file that uses no other array
        library (a helper module handed device tensors by its callers)."""
        if self.ctx.has_torch:
            return True
        return m in ("item", "tolist", "cpu", "cuda", "npu") and not self.ctx.other_arrays

    def copy_method(self, node: ast.Call, m: str, r: str, vals: List[str],
                    kw: Dict[str, ast.expr]) -> str:
        nb = _is_true(kw.get("non_blocking")) or any(
            isinstance(a, ast.Constant) and a.value is True for a in node.args[1:])
        if m == "copy_":
            src = vals[0]
            if r in (HOST, PINNED) and src in (DEVICE, TENSOR) and (not nb or r == HOST):
                self.flag(node, "SG201", "Tensor.copy_",
                          "a device tensor copied into pageable host memory (non_blocking "
                          "does not help)" if nb else
                          "a device tensor copied into a host buffer (blocking)", _sev(src),
                          src)
            elif r == PINNED and src == UNKNOWN and not nb:
                # a pinned buffer is a staging area for device data: a blocking copy into it
                # of a value of unknown place is the device-to-host copy it was made for
                self.flag(node, "SG201", "Tensor.copy_",
                          "a copy into a pinned host buffer without non_blocking waits for "
                          "the device (when the source is on it)", LIKELY, src)
            elif r in (DEVICE, TENSOR) and src in (HOST, PINNED) and (not nb or src == HOST):
                self.flag(node, "SG401", "Tensor.copy_",
                          "a host tensor copied into a device buffer (blocking)", _sev(r), r)
            return r
        if m in ("cuda", "npu"):
            if r in (HOST, PINNED) and (not nb or r == HOST):
                self.api_flag(node, m, "Tensor", CERTAIN, r,
                              "a host tensor copied to the device (blocking)")
            return DEVICE
        # .to(...)
        target: Optional[ast.expr] = kw.get("device")
        if target is None:
            for a in node.args:
                if isinstance(a, ast.Constant) and isinstance(a.value, bool):
                    continue
                q = self.ctx.qual(a) or ""
                if q.startswith("torch.") and q.rsplit(".", 1)[-1] not in ("device",):
                    continue  # a dtype
                if _last_name(a) in ("dtype",) or (_last_name(a) or "").endswith("dtype"):
                    continue
                target = a
                break
        if target is None:
            return r
        place, sure = self.place_of_device(target)
        if place == HOST and r in (DEVICE, TENSOR, UNKNOWN):
            if r != UNKNOWN:
                self.flag(node, "SG201", "Tensor.to", "a device tensor copied to the host",
                          _sev(r), r)
            return HOST
        if place == DEVICE and r in (HOST, PINNED) and (not nb or r == HOST):
            self.flag(node, "SG401", "Tensor.to",
                      "a non_blocking copy from pageable host memory is synchronous" if nb
                      else "a host tensor copied to the device (blocking)",
                      CERTAIN if sure else LIKELY, r)
            return DEVICE
        if place in (DEVICE, TENSOR):
            return place if sure else (r if r != UNKNOWN else TENSOR)
        return r

    # -- statements ---------------------------------------------------------------------
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
        for d in [*args.defaults, *[d for d in args.kw_defaults if d is not None]]:
            self.ev(d)

    def body(self, stmts: Sequence[ast.stmt]) -> None:
        get = _STMT.get
        for s in stmts:  # :meth:`stmt`, inline
            handler = get(s.__class__)
            if handler is not None:
                handler(self, s)
            else:
                self.stmt_any(s)

    def branch(self, *bodies: Sequence[ast.stmt]) -> None:
        """Run each body from the current state and join the results. A body with no
        statement ends in the state it starts from: it is not copied, and the start state
        itself becomes the joined one."""
        start = self.env
        start_shapes = self.shapes
        ends: List[Dict[str, str]] = []
        end_shapes: List[Dict[str, _Shape]] = []
        for b in bodies:
            if not b:
                ends.append(start)
                end_shapes.append(start_shapes)
                continue
            self.env = dict(start)
            self.shapes = dict(start_shapes)
            self.body(b)
            ends.append(self.env)
            end_shapes.append(self.shapes)
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

    def stmt(self, s: ast.stmt) -> None:
        """Run one statement: a dispatch on its class (:data:`_STMT`); a class not in the
        table goes through :meth:`stmt_any`."""
        handler = _STMT.get(s.__class__)
        if handler is not None:
            handler(self, s)
        else:
            self.stmt_any(s)

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
        f = self.function(s, f"{self.name}.{name}" if self.name != "<module>" else name)
        if self.name == "<module>" and self.ctx.defs.get(name) is s:
            _record_return(self.ctx, name, f)
        self.env[name] = PY

    def class_stmt(self, s: ast.ClassDef) -> None:
        for d in s.decorator_list:
            self.ev(d)
        analyse_class(self.ctx, s, self.env, self.name, self.context)
        self.env[s.name] = PY

    def assign(self, s: ast.Assign) -> None:
        v = self.ev(s.value)
        for t in s.targets:
            self.bind(t, v, s.value)
            if isinstance(t, ast.Name):
                if not isinstance(s.value, ast.Name) and self.is_mask(s.value, v):
                    self.masks.add(t.id)
                else:
                    self.masks.discard(t.id)
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
        self.branch(s.body, [])  # type: ignore[attr-defined]
        self.branch(s.orelse, [])  # type: ignore[attr-defined]

    def assert_stmt(self, s: ast.Assert) -> None:
        self.condition(s.test, self.ev(s.test))
        self.ev(s.msg)

    def return_stmt(self, s: ast.Return) -> None:
        v = self.ev(s.value) if s.value is not None else PY
        self.ret = v if self.ret is None else join(self.ret, v)
        self.ret_shapes.append(self.shape_of(s.value))

    def expr_stmt(self, s: ast.Expr) -> None:
        self.ev(s.value)

    def with_stmt(self, s: ast.stmt) -> None:
        for item in s.items:  # type: ignore[attr-defined]
            v = self.ev(item.context_expr)
            if item.optional_vars is not None:
                self.bind(item.optional_vars, UNKNOWN if v == PY else v)
        self.body(s.body)  # type: ignore[attr-defined]

    def try_stmt(self, s: ast.stmt) -> None:
        self.body(s.body)  # type: ignore[attr-defined]
        for h in s.handlers:  # type: ignore[attr-defined]
            if h.name:
                self.env[h.name] = PY
            self.body(h.body)
        self.body(s.orelse)  # type: ignore[attr-defined]
        self.body(s.finalbody)  # type: ignore[attr-defined]

    def import_stmt(self, s: ast.stmt) -> None:
        _imports(self.ctx, s, self.env)

    def stmt_other(self, s: ast.stmt) -> None:
        # delete, raise, global, match, ...
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

    def function(self, s: ast.AST, qualname: str, seed: Optional[Dict[str, str]] = None
                 ) -> _Func:
        name = getattr(s, "name", "")
        context = _context.function_context(name, self.context)
        if (context == _context.SERVING and self.name == "<module>"
                and name in self.ctx.script_funcs):
            context = _context.SCRIPT  # main(), called from the __main__ block
        f = _Func(self.ctx, qualname, seed if seed is not None else self.env, context)
        decorators = getattr(s, "decorator_list", ())
        if any(_context.is_kernel_decorator(d, self.ctx.names) for d in decorators):
            # a device kernel (Triton, CuTe, TileLang...): traced for the device, its
            # branches and reads are no host code
            f.ret = UNKNOWN
            return f
        for d in decorators:
            self.ev(d)
        f.params(s.args)  # type: ignore[attr-defined]
        f.body(s.body)  # type: ignore[attr-defined]
        hint = by_annotation(getattr(s, "returns", None))
        if hint == PY:
            f.ret = PY  # -> bool / int: what the caller gets is a Python value
        return f


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


def _given(ret: str, vals: Sequence[str]) -> str:
    """What a call returns: ``ret``, the place the function's returns have, except that a
    helper over tensors of any place (``prepare_lens(x)``) given host tensors only computes
    on the host."""
    tensors = [v for v in vals if is_tensorish(v) or v == UNKNOWN]
    if ret == TENSOR and tensors and all(v in (HOST, PINNED) for v in tensors):
        return HOST
    return ret


def _named(name: str, v: str, value: Optional[ast.expr]) -> str:
    """The place of ``name`` bound to a value in place ``v``: a call's result (or an element
    unpacked from one) of unknown place takes a host place its name marks (``x_cpu``,
    ``n_list``: ``a, x_cpu = self.build()``); an alias of a known value keeps what the dataflow
    says, and a name never makes an unknown value a device tensor."""
    if v != UNKNOWN or not (value is None or isinstance(value, ast.Call)):
        return v
    hint = by_name(name)
    return hint if hint in (HOST, PINNED, PY) else v


def _is_list_expr(node: Optional[ast.expr]) -> bool:
    """``node`` makes a Python list: a literal, a comprehension, ``sorted()``/``list()``."""
    if isinstance(node, (ast.List, ast.ListComp)):
        return True
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and (
        node.func.id in ("sorted", "list"))


def _element(v: str) -> str:
    """The place of an element when iterating a value in place ``v``."""
    if v == PINNED:
        return HOST
    return v if v in (DEVICE, TENSOR, HOST) else (PY if v == PY else UNKNOWN)


def _container(vals: List[str]) -> str:
    """A tuple/list/dict literal: its elements' place, UNKNOWN when tensors and Python
    values mix (``("name", tensor)``), PY when empty."""
    if not vals or all(v == PY for v in vals):
        return PY
    if any(v == PY for v in vals):
        return UNKNOWN
    return combine(vals)


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


def _no_check_multinomial(node: ast.Call, pos: int, kw: Dict[str, ast.expr]) -> bool:
    """multinomial with replacement and more than one sample: no host check (CUDA's fast
    path with its two .item() checks is for no replacement or one sample)."""
    rep = kw.get("replacement")
    if rep is None and len(node.args) > pos + 1:
        rep = node.args[pos + 1]
    n = kw.get("num_samples") or (node.args[pos] if len(node.args) > pos else None)
    return _is_true(rep) and not (isinstance(n, ast.Constant) and n.value == 1)


def _is_number_expr(node: ast.expr) -> bool:
    """A number literal (``0``, ``-1.5``) or ``int()``/``float()``/``bool()`` of something."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        node = node.operand
    if isinstance(node, ast.Constant):
        return isinstance(node.value, (int, float, complex))
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in (
        "int", "float", "bool", "complex")


def _is_number(node: ast.expr, v: str) -> bool:
    """``node`` (in place ``v``) is a Python number: a literal, or a Python value that is no
    container, string or function (``n``, ``len(a) - 1``, ``math.inf``)."""
    if _is_number_expr(node):
        return True
    if isinstance(node, ast.Constant):
        return False  # a string, None, bytes
    return v == PY and not isinstance(node, _NOT_INT_NODES)


def _size_shape(args: Sequence[ast.expr]) -> _Shape:
    """What a size given as ``args`` says: (its number of dimensions: ``(2, 3)``, ``2, 3``,
    ``8``, ``-1``; None for one name (an int or a shape) or a starred argument, whether a
    literal 0 makes it empty)."""
    items: Sequence[ast.expr] = args
    if len(args) == 1 and isinstance(args[0], (ast.Tuple, ast.List)):
        items = args[0].elts
    empty = any(isinstance(a, ast.Constant) and a.value == 0 and not isinstance(a.value, bool)
                for a in items)
    if not items or any(isinstance(a, ast.Starred) for a in items):
        return (0 if items is not args and not items else None), empty
    if len(items) > 1:
        return len(items), empty
    a = items[0]
    if items is not args:
        return 1, empty  # (n,)
    if isinstance(a, ast.UnaryOp) and isinstance(a.op, ast.USub):
        a = a.operand
    if isinstance(a, ast.Constant) and isinstance(a.value, int) and not isinstance(
            a.value, bool):
        return 1, empty
    return None, empty


def _is_true(node: Optional[ast.expr]) -> bool:
    return isinstance(node, ast.Constant) and node.value is True


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


def _imports(ctx: _Ctx, s: ast.stmt, env: Dict[str, str]) -> None:
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


def _project_imports(ctx: _Ctx, s: ast.stmt) -> None:
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


def analyse_class(ctx: _Ctx, cls: ast.ClassDef, env: Dict[str, str], outer: str,
                  context: Optional[str] = None) -> None:
    """Methods of ``cls``, ``__init__`` first: what it puts in ``self.x`` seeds the others."""
    prefix = cls.name if outer == "<module>" else f"{outer}.{cls.name}"
    methods = [s for s in cls.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))]
    methods.sort(key=lambda m: m.name != "__init__")
    seed = dict(env)
    cf = _Func(ctx, prefix, env,
               _context.class_context(cls.name, context or ctx.file_context))
    info = ClassInfo(prefix)
    key = f"{ctx.module or ctx.path}:{prefix}"
    ctx.classes[key] = info
    if outer == "<module>":
        ctx.local_classes[cls.name] = key
    for s in cls.body:
        if not isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)):
            cf.stmt(s)
            if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name):
                # a dataclass field (or a class attribute): what instances hold
                v = cf.env.get(s.target.id, UNKNOWN)
                info.attrs[s.target.id] = v
                seed[f"self.{s.target.id}"] = v
    for m in methods:
        f = cf.function(m, f"{prefix}.{m.name}", seed)
        if f.ret is not None and f.ret != UNKNOWN:
            info.methods[m.name] = f.ret
        if m.name in ("__init__", "__post_init__", "setup"):
            for k, v in f.env.items():
                if k.startswith("self."):
                    seed[k] = v
                    if "." not in k[5:] and v != UNKNOWN:
                        info.attrs[k[5:]] = v


def _record_return(ctx: _Ctx, name: str, f: _Func) -> None:
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


def _lazy_return(ctx: _Ctx, name: str) -> None:
    """What module-level function ``name`` returns, when a call is read before its ``def``
    ran: a quiet pass over that one function (once; each function is otherwise read once,
    when its ``def`` is reached, and records its return then)."""
    node = ctx.defs.get(name)
    if node is None or name in ctx.returns_known or name in ctx.in_progress:
        return
    ctx.in_progress.add(name)
    saved = ctx.collect
    ctx.collect = False
    try:
        f = _Func(ctx, "<module>").function(node, name)
    finally:
        ctx.collect = saved
        ctx.in_progress.discard(name)
    _record_return(ctx, name, f)


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
    if project is not None and module:
        project.summaries[module] = ModuleSummary(
            dict(ctx.returns), {n: k for n, k in ctx.local_classes.items()},
            {k: v for k, v in top.env.items() if "." not in k and v != UNKNOWN
             and k not in ctx.local_classes and k not in ctx.defs})
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
    for line in sorted(by_line):
        fs = sorted(by_line[line], key=lambda f: (-_RANK[f.severity], f.col))
        best = fs[0]
        best.also = [f"{f.rule} {f.api}" for f in fs[1:] if f.severity != SILENT]
        best.end_line = max(f.end_line for f in fs)
        lines = ctx.lines
        m = _ALLOW.search(lines[line - 1]) if 0 < line <= len(lines) else None
        if m is not None:
            best.allowed = m.group(1).strip() or "allowed"
        out.append(best)
    return out
