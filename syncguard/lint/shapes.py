"""What the code says of a tensor's shape: its rank, and whether it is known to have no
element (factories' sizes, ``view``/``reshape``, literals, names bound to them, module-level
functions returning them). The cost of some reads depends on it: a Python number written
through an index into a 0-d destination is a copy where one into a row is a fill, and a copy of
no element never waits."""

from __future__ import annotations

import ast
from typing import Optional, Sequence

from .state import _NO_SHAPE, _FuncState, _Shape
from .syntax import _attr_key, _is_number_expr

#: methods whose result has the receiver's shape
_SAME_RANK = frozenset("""to cuda npu cpu float half double long int bool bfloat16 contiguous
clone detach pin_memory fill_ zero_ copy_ masked_fill_ clamp_ requires_grad_ t transpose
permute softmax log_softmax cumsum neg abs exp log sqrt sigmoid relu tanh""".split())


class _Shapes(_FuncState):
    """The shapes part of the function dataflow: the shape of each expression, from the shapes
    bound to names (:attr:`shapes`)."""

    def bind_shape(self, key: str, value: Optional[ast.expr]) -> None:
        shape = self.shape_of(value)
        if shape == _NO_SHAPE:
            self.shapes.pop(key, None)
        else:
            self.shapes[key] = shape

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
            self.lazy_return(func.id)
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
