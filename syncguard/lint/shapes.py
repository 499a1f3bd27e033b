"""What the code says of a tensor's shape: its rank, and whether it is known to have no
element (factories' sizes, ``view``/``reshape``, literals, names bound to them, module-level
functions returning them). The cost of some reads depends on it: a Python number written
through an index into a 0-d destination is a copy where one into a row is a fill, and a copy of
no element never waits."""

from __future__ import annotations

import ast
from typing import Optional, Sequence

from .functions import lazy_return
from .infer import DEVICE, HOST, PINNED, PY, TENSOR
from .state import _NO_SHAPE, Func, _Shape
from .syntax import _attr_key, _is_number_expr

#: index or value expressions that are no Python int or number, even of a Python place
_NOT_INT_NODES = (ast.List, ast.Tuple, ast.Set, ast.Dict, ast.ListComp, ast.SetComp,
                  ast.DictComp, ast.GeneratorExp, ast.JoinedStr, ast.Lambda)
#: methods whose result has the receiver's shape
_SAME_RANK = frozenset("""to cuda npu cpu float half double long int bool bfloat16 contiguous
clone detach pin_memory fill_ zero_ copy_ masked_fill_ clamp_ requires_grad_ t transpose
permute softmax log_softmax cumsum neg abs exp log sqrt sigmoid relu tanh""".split())


def bind_shape(st: Func, key: str, value: Optional[ast.expr]) -> None:
    shape = shape_of(st, value)
    if shape == _NO_SHAPE:
        st.shapes.pop(key, None)
    else:
        st.shapes[key] = shape


def rank_of(st: Func, node: Optional[ast.expr]) -> Optional[int]:
    """The number of dimensions of the tensor ``node`` evaluates to, None if unknown."""
    return shape_of(st, node)[0]


def is_empty(st: Func, node: Optional[ast.expr]) -> bool:
    """``node`` is known to be a tensor of no element (its copies copy nothing)."""
    return shape_of(st, node)[1]


def shape_of(st: Func, node: Optional[ast.expr]) -> _Shape:  # noqa: C901
    """What the code says of the shape of the tensor ``node`` evaluates to (factories'
    sizes, ``view``/``reshape``, literals, names bound to them, module functions
    returning them): (rank or None, known to have no element). Reads places quietly."""
    if node is None:
        return _NO_SHAPE
    if isinstance(node, ast.Constant):
        return (0, False) if isinstance(node.value, (int, float, complex)) else _NO_SHAPE
    if isinstance(node, ast.UnaryOp):
        return shape_of(st, node.operand)
    if isinstance(node, ast.Name):
        return st.shapes.get(node.id, _NO_SHAPE)
    if isinstance(node, ast.Attribute):
        key = _attr_key(node)
        return st.shapes.get(key, _NO_SHAPE) if key is not None else _NO_SHAPE
    if isinstance(node, ast.BinOp):
        (lr, le), (rr, re_) = shape_of(st, node.left), shape_of(st, node.right)
        return (None if lr is None or rr is None else max(lr, rr)), le or re_
    if isinstance(node, ast.Subscript):
        base = rank_of(st, node.value)
        if base is None:
            return _NO_SHAPE
        items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        for it in items:
            k = index_kind(st, it)
            if k == "int":
                base -= 1
            elif k == "none":
                base += 1
            elif k != "slice":
                return _NO_SHAPE
        return (base if base >= 0 else None), False
    if isinstance(node, ast.Call):
        return call_shape(st, node)
    return _NO_SHAPE


def call_shape(st: Func, node: ast.Call) -> _Shape:  # noqa: C901
    func = node.func
    q = st.ctx.qual(func)
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
            return literal_rank(st, a), isinstance(a, (ast.List, ast.Tuple)) and not a.elts
        if name.endswith("_like") and node.args:
            return shape_of(st, node.args[0])
        return _NO_SHAPE
    if isinstance(func, ast.Name):
        lazy_return(st, func.id)
        return st.ctx.shape_returns.get(func.id, _NO_SHAPE)
    if not isinstance(func, ast.Attribute):
        return _NO_SHAPE
    m = func.attr
    if m in ("view", "reshape"):  # the same elements
        rank, empty = _size_shape(node.args)
        return rank, empty or is_empty(st, func.value)
    if m in ("new_zeros", "new_ones", "new_empty"):
        return _size_shape(node.args)
    if m == "new_full":
        return _size_shape(node.args[:1])
    if m == "flatten" and not node.args and not node.keywords:
        return 1, is_empty(st, func.value)
    if m == "unsqueeze":
        rank, empty = shape_of(st, func.value)
        return (None if rank is None else rank + 1), empty
    if m in _SAME_RANK:
        return shape_of(st, func.value)
    return _NO_SHAPE


def literal_rank(st: Func, node: ast.expr) -> Optional[int]:
    """Rank of ``torch.tensor(node)``: the nesting of a literal of numbers."""
    if isinstance(node, (ast.List, ast.Tuple)):
        if not node.elts:
            return 1
        ranks = {literal_rank(st, e) for e in node.elts}
        if len(ranks) != 1 or None in ranks:
            return None
        return 1 + ranks.pop()  # type: ignore[operator]
    if isinstance(node, ast.ListComp):  # [float(v) for v in vals]: numbers only
        return 1 if _is_number_expr(node.elt) else None
    if _is_number_expr(node):
        return 0
    return rank_of(st, node)


def index_kind(st: Func, it: ast.expr) -> str:
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
    v = st.ev_quiet(it)
    if v in (DEVICE, TENSOR):
        return "tensor"
    if v in (HOST, PINNED):
        return "host"
    if v == PY:
        return "other" if isinstance(it, _NOT_INT_NODES) else "int"
    return "unknown"


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
