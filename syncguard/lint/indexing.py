"""Indexing a tensor: what reading ``x[i]`` and writing ``x[i] = v`` cost. A boolean mask
reads its count on the host, a host index tensor is copied to the device, a tensor used as a
Python index or slice bound is read on the host, and a Python number written through an index
costs differently per backend (:func:`setitem`)."""

from __future__ import annotations

import ast
from typing import Optional

from .findings import CERTAIN, LIKELY, _sev
from .infer import DEVICE, HOST, PINNED, PY, TENSOR, UNKNOWN, combine, is_tensorish, syncs_on
from .shapes import _NOT_INT_NODES, index_kind, rank_of
from .state import Func
from .syntax import _attr_key, _is_list_expr, _is_number_expr, _last_name

#: what an index tensor holds, by :func:`dtype_of`: booleans (a mask) or integers
BOOL, INT = "bool", "int"
#: methods and torch functions whose result is a boolean tensor
_BOOL_OPS = frozenset("""bool isfinite isnan isinf isneginf isposinf isreal logical_and
logical_or logical_not logical_xor eq ne lt le gt ge greater less greater_equal less_equal
not_equal isin isclose signbit""".split())
#: ... an integer tensor
_INT_OPS = frozenset("""long int short argmax argmin argsort nonzero argwhere multinomial
searchsorted bucketize randperm arange randint""".split())
#: methods whose result holds what their receiver holds (moves, views, copies)
_SAME_OPS = frozenset("""to cuda npu cpu contiguous view reshape squeeze unsqueeze flatten
expand expand_as clone detach t transpose permute repeat narrow flip roll pin_memory
type_as""".split())
#: functions joining tensors: their result holds what the joined ones hold
_JOIN_OPS = frozenset("cat concat concatenate stack hstack vstack".split())
#: methods returning (values, indices): the second element is an integer tensor
_PAIR_OPS = frozenset("topk sort max min kthvalue mode median cummax cummin".split())
_DTYPES = {"bool": BOOL, "long": INT, "int": INT, "int64": INT, "int32": INT, "int16": INT,
           "int8": INT, "short": INT}


def store_subscript(st: Func, target: ast.Subscript, v: str,
                    value: Optional[ast.expr] = None) -> None:
    base = st.ev(target.value)
    idx = st.ev(target.slice)
    slice_bounds(st, target.slice)
    if base in (HOST, PINNED) and value is not None and syncs_on(v):
        # host[a:b] = dev: copy_ from the device into host memory, the host waits
        st.flag(target, "SG201", "Tensor.__setitem__",
                "a device tensor written into a host tensor: a blocking device-to-host "
                "copy", _sev(v), v)
        return
    if is_tensorish(base):
        setitem(st, target, target.value, base, target.slice, idx, value, v)


def setitem(st: Func, node: ast.AST, recv: ast.expr, base: str, idx_node: ast.expr, idx: str,
            value: Optional[ast.expr], v: str) -> None:  # noqa: C901
    """``recv[idx_node] = value`` (a store, or an explicit ``recv.__setitem__`` call) on
    a tensor in place ``base``; ``idx`` and ``v`` the places of the index and value.

    A Python number written through an index costs differently per backend (the op
    models' ``Tensor.__setitem__`` entries): CUDA makes the value on the host, so a
    0-d destination (``x[0]`` of a 1-d x) is a blocking copy_ and an index tensor makes
    index_put_ copy it to the device, while a boolean mask is masked_fill (no sync); the
    NPU makes the value on the device, so only the mask syncs (index_put_ -> nonzero)."""
    number = value is not None and _is_number(value, v)
    if is_mask(st, idx_node, idx):
        if syncs_on(v):
            st.flag(node, "SG301", "Tensor.__setitem__",
                    "a boolean mask assigned a tensor value reads the mask on the host",
                    _sev(combine([idx, v])), idx)
        elif number and base in (DEVICE, TENSOR):
            st.flag(node, "SG301", "Tensor.__setitem__",
                    "a boolean mask assigned a Python number: on NPU index_put_ runs "
                    "nonzero and reads the count on the host (CUDA uses masked_fill: "
                    "no sync)", _sev(DEVICE if DEVICE in (base, idx) else base), base,
                    ("Tensor.__setitem__", "setitem_scalar_bool_mask"))
        return
    if base not in (DEVICE, TENSOR):
        return
    items = idx_node.elts if isinstance(idx_node, ast.Tuple) else [idx_node]
    kinds = [index_kind(st, it) for it in items]
    if idx in (HOST, PINNED) or "host" in kinds:
        st.flag(node, "SG401", "Tensor.__setitem__",
                "a host index tensor is copied to the device", _sev(base), base)
        return
    if not number or any(k in ("slice", "none", "other") for k in kinds):
        return  # a slice or None keeps a dimension: fill_ into it, no copy
    if "tensor" in kinds:
        tensors = [it for it, k in zip(items, kinds) if k == "tensor"]
        if all(dtype_of(st, it) == INT for it in tensors):
            st.flag(node, "SG401", "Tensor.__setitem__",
                    "a Python number written through an index tensor: on CUDA "
                    "index_put_ copies the value to the device and waits (no sync on "
                    "NPU)", _sev(base), base,
                    ("Tensor.__setitem__", "setitem_scalar_int_tensor_index"))
        else:
            # the dtype decides the backend: a mask runs nonzero on the NPU, an integer
            # index copies the value on CUDA; not known to be integers, it is either
            st.flag(node, "SG401", "Tensor.__setitem__",
                    "a Python number written through an index tensor of unknown dtype: "
                    "a boolean mask runs nonzero on NPU (index_put_), an integer index "
                    "copies the value to the device on CUDA", _sev(base), base,
                    models=(("Tensor.__setitem__", "setitem_scalar_bool_mask"),
                            ("Tensor.__setitem__", "setitem_scalar_int_tensor_index")))
        return
    rank = rank_of(st, recv)
    ints = sum(k in ("int", "unknown") for k in kinds)
    # x[keep] = 0 with keep of unknown place and dtype: a boolean mask (nonzero on NPU)
    # unless shown to be an integer
    maybe_mask = kinds == ["unknown"] and dtype_of(st, idx_node) != INT
    mask_model = ("Tensor.__setitem__", "setitem_scalar_bool_mask")
    if rank is None:
        if "ellipsis" in kinds:
            return  # x[..., 0] = 0: mostly on tensors of several dimensions
        sev = LIKELY
    elif rank != ints:
        if maybe_mask:
            st.flag(node, "SG301", "Tensor.__setitem__",
                    "a Python number written through an index of unknown dtype: a "
                    "boolean mask runs nonzero on NPU (index_put_) and reads the count "
                    "on the host", LIKELY, base, mask_model)
        return  # the destination keeps a dimension: fill_, no sync on CUDA
    else:
        sev = CERTAIN if base == DEVICE and "unknown" not in kinds else LIKELY
    into_0d = ("Tensor.__setitem__", "setitem_scalar_into_0d")
    if maybe_mask:
        st.flag(node, "SG401", "Tensor.__setitem__",
                "a Python number written through an index of unknown dtype: the cost "
                "is backend-dependent (CUDA: an integer into a 0-d destination is a "
                "blocking host-to-device copy of the value, a row of a 2-d tensor a "
                "fill_ with no sync; NPU: a boolean mask runs nonzero in index_put_ "
                "and reads the count on the host)", sev, base,
                models=(into_0d, mask_model))
        return
    st.flag(node, "SG401", "Tensor.__setitem__",
            "a Python number written through an integer index: the cost is "
            "backend-dependent (CUDA: a blocking host-to-device copy of the value into "
            "a 0-d destination, e.g. x[i] of a 1-d x; a row of a 2-d tensor is a fill_ "
            "with no sync; NPU: no sync)", sev, base, into_0d)


def is_mask(st: Func, idx_node: ast.expr, idx: str) -> bool:
    """An index that is a boolean tensor (a comparison, ~/&/| of them, ``*mask``, a cast
    to bool, ``cat`` of masks), or a tuple holding one."""
    if isinstance(idx_node, ast.Tuple):
        return any(is_mask(st, e, UNKNOWN) for e in idx_node.elts)
    return dtype_of(st, idx_node) == BOOL


def dtype_of(st: Func, node: ast.expr) -> Optional[str]:  # noqa: C901 - one walk of shapes
    """What tensor ``node`` holds, as its syntax and the names bound so far say:
    :data:`BOOL` (a mask), :data:`INT` (an index) or None (unknown)."""
    cls = node.__class__
    if cls is ast.Compare:
        ops = node.ops  # type: ignore[attr-defined]
        return None if any(isinstance(o, (ast.Is, ast.IsNot, ast.In, ast.NotIn))
                           for o in ops) else BOOL
    if cls is ast.UnaryOp:
        op = node.op  # type: ignore[attr-defined]
        return dtype_of(st, node.operand) if isinstance(  # type: ignore[attr-defined]
            op, ast.Invert) else None
    if cls is ast.BinOp:
        if isinstance(node.op, (ast.BitAnd, ast.BitOr, ast.BitXor)):  # type: ignore
            sides = (dtype_of(st, node.left),  # type: ignore[attr-defined]
                     dtype_of(st, node.right))  # type: ignore[attr-defined]
            return BOOL if BOOL in sides else None
        return None
    if cls is ast.Name or cls is ast.Attribute:
        name = _last_name(node)
        key = node.id if cls is ast.Name else _attr_key(node)  # type: ignore
        if key in st.masks or (name is not None and name.lower().endswith("mask")):
            return BOOL
        if key in st.ints or name == "indices":
            return INT
        return None
    if cls is ast.Subscript:
        base = node.value  # type: ignore[attr-defined]
        if isinstance(base, ast.Name) and base.id in st.mask_lists:
            return BOOL  # masks[i]
        sl = node.slice  # type: ignore[attr-defined]
        if isinstance(base, ast.Call) and isinstance(sl, ast.Constant) and sl.value == 1 \
                and _call_name(base) in _PAIR_OPS:
            return INT  # x.topk(k)[1]
        return None
    if cls is not ast.Call:
        return None
    call: ast.Call = node  # type: ignore[assignment]
    for kw in call.keywords:
        if kw.arg == "dtype":
            return _dtype_const(kw.value)
    name = _call_name(call)
    if name is None:
        return None
    if name in ("to", "type") and call.args:
        got = _dtype_const(call.args[0])
        if got is not None or _is_dtype_expr(call.args[0]):
            return got
    if name in _BOOL_OPS:
        return BOOL
    if name in _INT_OPS:
        return INT
    if name in ("any", "all") and (call.args or call.keywords) and isinstance(
            call.func, ast.Attribute):
        return BOOL  # m.any(dim=-1): a reduced mask
    if name in _SAME_OPS and isinstance(call.func, ast.Attribute):
        return dtype_of(st, call.func.value)
    if name in _JOIN_OPS and call.args:
        arg = call.args[0]
        if isinstance(arg, (ast.List, ast.Tuple)) and arg.elts:
            kinds = {dtype_of(st, e) for e in arg.elts}
            return kinds.pop() if len(kinds) == 1 else None
        if isinstance(arg, ast.ListComp):
            return dtype_of(st, arg.elt)
        if isinstance(arg, ast.Name) and arg.id in st.mask_lists:
            return BOOL
    return None


def bind_dtype(st: Func, target: ast.expr, value: Optional[ast.expr]) -> None:
    """Keep what ``target`` now holds: a mask, an integer index, a list of masks (a
    name or ``self.x``; the elements of a tuple unpacked element by element)."""
    if isinstance(target, (ast.Tuple, ast.List)):
        elts = target.elts
        if isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(elts):
            for t, v in zip(elts, value.elts):
                bind_dtype(st, t, v)
            return
        pair = isinstance(value, ast.Call) and len(elts) == 2 and (
            _call_name(value) in _PAIR_OPS)
        where = isinstance(value, ast.Call) and _call_name(value) in (
            "where", "nonzero") and len(value.args) == 1 and not value.keywords
        for i, t in enumerate(elts):
            bind_dtype(st, t, None)
            key = _target_key(t)
            if key is not None and ((pair and i == 1) or where):
                st.ints.add(key)
        return
    key = _target_key(target)
    if key is None:
        return
    st.masks.discard(key)
    st.ints.discard(key)
    st.mask_lists.discard(key)
    if value is None or isinstance(value, ast.Name) and value.id == key:
        return
    kind = dtype_of(st, value)
    if kind == BOOL:
        st.masks.add(key)
    elif kind == INT:
        st.ints.add(key)
    elif isinstance(value, (ast.List, ast.Tuple)) and value.elts and all(
            dtype_of(st, e) == BOOL for e in value.elts):
        st.mask_lists.add(key)
    elif isinstance(value, ast.ListComp) and dtype_of(st, value.elt) == BOOL:
        st.mask_lists.add(key)
    elif isinstance(value, ast.Name) and value.id in st.mask_lists:
        st.mask_lists.add(key)


def slice_bounds(st: Func, sl: ast.expr) -> None:
    items = sl.elts if isinstance(sl, ast.Tuple) else [sl]
    for it in items:
        if isinstance(it, ast.Slice):
            for b in (it.lower, it.upper, it.step):
                if b is not None:
                    v = st.ev(b)
                    if syncs_on(v):
                        st.api_flag(b, "__index__", "Tensor", _sev(v), v,
                                    "a tensor slice bound is read on the host")


def subscript(st: Func, node: ast.Subscript) -> str:
    base = st.ev(node.value)
    idx = st.ev(node.slice)
    slice_bounds(st, node.slice)
    if base in (DEVICE, TENSOR) or (base == UNKNOWN and idx in (DEVICE, TENSOR)):
        if is_mask(st, node.slice, idx) and idx not in (HOST, PINNED) and (
                is_tensorish(idx) or base != UNKNOWN):
            # a mask of a device tensor: nonzero on the device (or a host mask's indices
            # copied to it): the tensor's place is enough
            mask_v = combine([idx, base]) if is_tensorish(idx) else base
            st.api_flag(node, "__getitem__", "Tensor", _sev(mask_v), mask_v,
                        "boolean-mask indexing runs nonzero: the output size is read "
                        "on the host")
        elif base in (DEVICE, TENSOR) and idx in (HOST, PINNED):
            st.flag(node, "SG401", "Tensor.__getitem__",
                    "a host index tensor is copied to the device", _sev(base), base)
        return base if base != UNKNOWN else idx
    if base == PY and idx in (DEVICE, TENSOR) and not isinstance(node.slice, ast.Slice):
        st.api_flag(node, "__index__", "Tensor", _sev(idx), idx,
                    "a tensor used as a Python index is read on the host")
        return UNKNOWN
    if base == PINNED and is_advanced(st, node.slice, idx):
        return HOST  # a gather into a new tensor, in pageable memory
    return base if base in (HOST, PINNED, PY) else UNKNOWN


def is_advanced(st: Func, idx_node: ast.expr, idx: str) -> bool:
    """An index that gathers into a new tensor (advanced indexing): a tensor, a list
    (a literal, a comprehension, ``sorted()``/``list()``, a name bound to one), or a
    tuple holding one; ints and slices make a view of the same memory."""
    if isinstance(idx_node, ast.Tuple):
        return any(is_advanced(st, e, st.ev_quiet(e)) for e in idx_node.elts)
    if is_tensorish(idx) or _is_list_expr(idx_node):
        return True
    return isinstance(idx_node, ast.Name) and idx_node.id in st.lists


def _call_name(call: ast.Call) -> Optional[str]:
    """The method or function name a call ends with (``x.bool()``, ``torch.cat(...)``)."""
    f = call.func
    if isinstance(f, ast.Attribute):
        return f.attr
    if isinstance(f, ast.Name):
        return f.id
    return None


def _target_key(t: ast.expr) -> Optional[str]:
    if isinstance(t, ast.Name):
        return t.id
    if isinstance(t, ast.Attribute):
        return _attr_key(t)
    return None


def _dtype_const(node: ast.expr) -> Optional[str]:
    """``torch.bool``, ``torch.long``, ``bool``, ``int``... as :data:`BOOL`/:data:`INT`."""
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and (
            node.value.id == "torch"):
        return _DTYPES.get(node.attr)
    if isinstance(node, ast.Name) and node.id in ("bool", "int"):
        return BOOL if node.id == "bool" else INT
    return None


def _is_dtype_expr(node: ast.expr) -> bool:
    """``torch.float16`` and the like: a dtype (not a device) as ``.to()``'s argument."""
    return isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and (
        node.value.id == "torch") and node.attr not in ("device",)


def _is_number(node: ast.expr, v: str) -> bool:
    """``node`` (in place ``v``) is a Python number: a literal, or a Python value that is no
    container, string or function (``n``, ``len(a) - 1``, ``math.inf``)."""
    if _is_number_expr(node):
        return True
    if isinstance(node, ast.Constant):
        return False  # a string, None, bytes
    return v == PY and not isinstance(node, _NOT_INT_NODES)
