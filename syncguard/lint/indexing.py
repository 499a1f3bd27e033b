"""Indexing a tensor: what reading ``x[i]`` and writing ``x[i] = v`` cost. A boolean mask
reads its count on the host, a host index tensor is copied to the device, a tensor used as a
Python index or slice bound is read on the host, and a Python number written through an index
costs differently per backend (:meth:`_Indexing.setitem`)."""

from __future__ import annotations

import ast
from typing import Optional

from .findings import CERTAIN, LIKELY, _sev
from .infer import DEVICE, HOST, PINNED, PY, TENSOR, UNKNOWN, combine, is_tensorish, syncs_on
from .state import _FuncState
from .syntax import _is_list_expr, _is_number_expr, _last_name

#: index or value expressions that are no Python int or number, even of a Python place
_NOT_INT_NODES = (ast.List, ast.Tuple, ast.Set, ast.Dict, ast.ListComp, ast.SetComp,
                  ast.DictComp, ast.GeneratorExp, ast.JoinedStr, ast.Lambda)


class _Indexing(_FuncState):
    """The indexing part of the function dataflow: subscripts read and stored, and the kinds
    of index (a mask, a host index tensor, an int, a slice...)."""

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


def _is_number(node: ast.expr, v: str) -> bool:
    """``node`` (in place ``v``) is a Python number: a literal, or a Python value that is no
    container, string or function (``n``, ``len(a) - 1``, ``math.inf``)."""
    if _is_number_expr(node):
        return True
    if isinstance(node, ast.Constant):
        return False  # a string, None, bytes
    return v == PY and not isinstance(node, _NOT_INT_NODES)
