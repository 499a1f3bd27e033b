"""Calls: torch's functions and tensor methods of the table of sync APIs, factories and where
their ``device=`` puts a tensor, copies (``.to``, ``.cuda``, ``copy_``), logging and formatting
of tensors, builtins (``int()``, ``range()``, ``print()``...), and the project's own functions
and classes, by what their summaries say they return."""

from __future__ import annotations

import ast
import re
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..devicenames import HARDWARE
from .findings import CERTAIN, LIKELY, SILENT, _sev
from .functions import lazy_return, record_call, self_call
from .indexing import is_mask, setitem
from .infer import (
    DEVICE,
    HOST,
    OBJ,
    PINNED,
    PY,
    TENSOR,
    UNKNOWN,
    by_name,
    combine,
    is_tensorish,
    obj_key,
    syncs_on,
)
from .shapes import is_empty
from .state import _APIS, _IN_KERNEL_WHEN, Func
from .syntax import _dotted, _last_name

#: the table's entries of a name that an owner (``Tensor``, ``torch``...) has, in table order
_OWNED: Dict[Tuple[str, str], List[Any]] = {}


def _owned(name: str, owner: str) -> List[Any]:
    key = (name, owner)
    got = _OWNED.get(key)
    if got is None:
        got = _OWNED[key] = [a for a in _APIS.get(name, ()) if owner in a.owners]
    return got


#: method names that leave a tensor a tensor (an unknown receiver becomes a tensor)
_TENSOR_METHODS = frozenset("""
argmax argmin softmax log_softmax view reshape contiguous unsqueeze squeeze masked_fill
index_select gather scatter scatter_ clamp clamp_ float half bfloat16 long int bool
cumsum sum mean max min topk sort exp log sigmoid matmul bmm transpose permute flatten
expand expand_as repeat narrow chunk split div mul add sub neg abs sqrt pow lt le gt ge eq ne
logical_and logical_or logical_not fill_ zero_ copy_ index_copy_ index_fill_ any all
isfinite isnan isinf isneginf isposinf nan_to_num logical_xor masked_select nonzero
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
#: methods of torch.nn.Module (``.to(device)``/``.cuda()`` of a module returns the module):
#: what they return is no tensor on the device
_MODULE_METHODS = frozenset("""named_modules named_parameters named_buffers named_children
modules parameters buffers children state_dict eval train apply""".split())
#: methods whose result is on the host
_HOST_METHODS = frozenset("cpu numpy tolist item pin_memory".split())
#: table APIs whose name is common on non-tensors: an unknown receiver stays silent
_GENERIC = frozenset("unique equal allclose copy_ to numpy synchronize".split())
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


def call(st: Func, node: ast.Call) -> str:  # noqa: C901
    func = node.func
    q = st.ctx.qual(func)
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and (
            func.value.id in st.ctx.modules and func.value.id not in st.env):
        summary = st.module_summary(func.value.id)
        if summary is not None:
            ev_args(st, node)
            if func.attr in summary.classes:
                return OBJ + summary.classes[func.attr]
            st.call_always(node, summary.syncs.get(func.attr))
            return summary.returns.get(func.attr, UNKNOWN)
    if q is not None and q.startswith("logging.") and q.count(".") == 1:
        log_call(st, node, func.attr if isinstance(func, ast.Attribute) else "")
        return PY
    if q is not None:
        return module_call(st, node, q)
    if isinstance(func, ast.Name):
        return name_call(st, node, func.id)
    if isinstance(func, ast.Attribute):
        return method_call(st, node, func)
    st.ev(func)
    ev_args(st, node)
    return UNKNOWN


def log_call(st: Func, node: ast.Call, level: str) -> None:
    """``logger.info("%s", t)``: a logging call formats its arguments on the host (when
    the level is enabled), reading a device tensor's values."""
    vals = ev_args(st, node)
    skip = 2 if level == "log" else 1  # the level, the message
    for a, v in list(zip(node.args, vals))[skip:]:
        if syncs_on(v):
            st.flag(a, "SG501", "Tensor.__repr__",
                    f"logging.{level}() formats the tensor on the host (when the level "
                    "is enabled)", _sev(v), v)


def format_args(st: Func, node: ast.AST, items: Sequence[ast.expr], how: str) -> None:
    """``"%s" % t`` and ``"{}".format(t)``: each tensor argument is formatted."""
    for a in items:
        v = st.ev_quiet(a.value if isinstance(a, ast.Starred) else a)
        if syncs_on(v):
            st.flag(a, "SG501", "Tensor.__format__",
                    f"{how} formats the tensor on the host", _sev(v), v)


def ev_args(st: Func, node: ast.Call) -> List[str]:
    """The places of a call's positional arguments (its keywords read too)."""
    vals = [st.ev(a) for a in node.args]
    for kw in node.keywords:
        st.ev(kw.value)
    return vals


def name_call(st: Func, node: ast.Call, name: str) -> str:
    vals = ev_args(st, node)
    first = vals[0] if vals else PY
    if name in ("print", "str", "repr", "format"):
        for a, v in zip(node.args, vals):
            if is_tensorish(v):
                api = "Tensor.__format__" if name == "format" else "Tensor.__repr__"
                st.flag(a, "SG501", api, f"{name}() of a tensor copies it to the host",
                        _sev(v), v)
        return PY
    if name in ("int", "float", "complex", "bool") and node.args:
        if syncs_on(first):
            st.api_flag(node, "__bool__" if name == "bool" else f"__{name}__", "Tensor",
                        _sev(first), first)
        return PY
    if name in ("range",):
        for a, v in zip(node.args, vals):
            if syncs_on(v):
                st.api_flag(a, "__index__", "Tensor", _sev(v), v,
                            "range() reads the tensor bound on the host")
        return PY
    if name in ("sorted", "max", "min", "any", "all") and len(node.args) == 1:
        if syncs_on(first):
            st.api_flag(node, "__bool__", "Tensor", _sev(first), first,
                        f"{name}() over a tensor compares its elements on the host"
                        if name not in ("any", "all") else
                        f"{name}() reads each element of the tensor as a truth value")
        if name in ("any", "all"):
            return PY
        return UNKNOWN if is_tensorish(first) else first
    if name in ("max", "min") and len(node.args) > 1 and name not in st.env:
        # max(a, t): Python compares the arguments, a tensor result read as a truth value
        tensors = [v for v in vals if is_tensorish(v)]
        sure = [v for v in tensors if syncs_on(v)]
        if sure:
            st.api_flag(node, "__bool__", "Tensor", _sev(combine(sure)), combine(sure),
                        f"{name}() of tensors compares them as Python truth values")
        if tensors and len(tensors) == len(vals):
            return combine(tensors)
        return UNKNOWN if tensors else combine(vals)
    if name in ("sum", "abs") and node.args and name not in st.env:
        # sum(t) adds its rows, abs(t) is t.abs(): a tensor where the argument is
        return first if is_tensorish(first) else (PY if first == PY else UNKNOWN)
    if name in ("len", "isinstance", "hasattr", "id", "type", "callable", "getattr"):
        return PY
    if name not in st.env:
        loaded = checkpoint(st, node, st.ctx.names.get(name, ""))
        if loaded is not None:
            return loaded
        if name == "pin_memory" and node.args:
            return PINNED
    if name in ("list", "tuple", "reversed", "iter", "next"):
        return first if first != PY else PY
    if name not in st.env:
        cls = st.ctx.class_key(name)
        if cls is not None:
            return OBJ + cls
        sym = st.ctx.symbol(name)
        if sym is not None:
            st.call_always(node, sym[0].syncs.get(sym[1]))
            return _given(sym[0].returns.get(sym[1], UNKNOWN), vals)
    lazy_return(st, name)
    if name in st.ctx.defs and st.env.get(name, PY) == PY:
        st.call_always(node, st.ctx.always.get(name))
        record_call(st, node, name)
    if name in st.ctx.returns:
        return _given(st.ctx.returns[name], vals)
    return UNKNOWN


def place_of_device(st: Func, dev: Optional[ast.expr]) -> Tuple[str, bool]:
    """(where a ``device=`` expression puts a tensor, whether we are sure)."""
    if dev is None:
        return HOST, True
    if isinstance(dev, ast.Constant):
        if dev.value is None:
            return HOST, False
        s = str(dev.value)
        return (HOST, True) if s.startswith("cpu") else (DEVICE, True)
    if isinstance(dev, ast.Call) and st.ctx.qual(dev.func) == "torch.device" and dev.args:
        return place_of_device(st, dev.args[0])
    if isinstance(dev, ast.Attribute) and dev.attr == "device" and not (
            isinstance(dev.value, ast.Name) and dev.value.id in ("self", "cls")):
        # device=x.device: where x is when that is known; of an x of unknown place
        # taken for the device (the common case), but the function then syncs only
        # where its callers' x is on it
        base = st.ev_quiet(dev.value)
        if base in (HOST, PINNED):
            return HOST, True
        if base in (TENSOR, UNKNOWN):
            st.guessed_device = True
    name = _last_name(dev)
    if name is not None:
        if "cpu" in name.lower() or "host" in name.lower():
            return HOST, True
        if re.search(r"(?:^|_)(?:device|dev)$", name, re.I) or by_name(name) == DEVICE:
            return DEVICE, True
    v = st.ev(dev)
    if is_tensorish(v):
        return v, False  # x.to(other_tensor)
    return DEVICE, False


def module_call(st: Func, node: ast.Call, q: str) -> str:  # noqa: C901
    vals = ev_args(st, node)
    if q.startswith("numpy."):
        return HOST
    loaded = checkpoint(st, node, q)
    if loaded is not None:
        return loaded
    head, _, name = q.rpartition(".")
    if head in ("torch.cuda", "torch.npu") and name == "synchronize":
        st.flag(node, "SG601", q, "blocks the host until the device is idle", CERTAIN,
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
        place, sure = place_of_device(st, dev_node)
        if dev_node is None and _splat(node):
            place, sure = TENSOR, False  # torch.tensor(v, **kwargs): device unknown
        elems = element_places(st, node.args[0]) if node.args else []
        if node.args and isinstance(node.args[0], (ast.List, ast.Tuple)) and not (
                node.args[0].elts):
            return place  # torch.tensor([], device=dev): no element, nothing copied
        if any(syncs_on(e) for e in elems):
            # each element is a tensor read as a Python scalar, then the values are built
            # into a host tensor (and uploaded with device=)
            st.flag(node, "SG102", f"torch.{name}",
                    f"torch.{name}() of a list of device tensors reads each element on "
                    "the host (one sync per element)" + (
                          ", then copies the values back to the device" if
                          place == DEVICE else ""),
                    _sev(DEVICE if DEVICE in elems else TENSOR), combine(elems))
            return place
        if place == DEVICE and first != DEVICE:
            st.api_flag(node, name, "torch", CERTAIN if sure else LIKELY, first,
                        "host values copied to the device: the host waits for the copy")
        if place == HOST and _is_true(kw.get("pin_memory")):
            return PINNED  # torch.tensor(vals, pin_memory=True): a staging buffer
        return place
    if name in _FACTORIES:
        if not name.endswith("_like") and name not in ("tensor", "as_tensor", "from_numpy"):
            int_args(st, node.args, vals)
        if name.endswith("_like") and "device" not in kw:
            return first if is_tensorish(first) else TENSOR
        if name == "from_numpy":
            return HOST
        if _is_true(kw.get("pin_memory")):
            return PINNED
        if "device" not in kw and _splat(node):
            return TENSOR  # torch.zeros(n, **kwargs): the device may be in kwargs
        return place_of_device(st, kw.get("device"))[0]
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
            st.api_flag(node, name, owner,
                        _sev(sev_v, name not in _GENERIC and tensor_api(st, name)),
                        sev_v)
    if name in ("equal", "allclose", "is_nonzero", "is_same_size"):
        return PY  # a Python bool (the read, if any, is flagged here)
    res = combine(v for v in vals if v != PY)
    for k, v in kw.items():
        if k not in ("device", "dtype", "out") and v is not None:
            res = combine([res, st.ev_quiet(v)])
    if "device" in kw:
        return place_of_device(st, kw["device"])[0]
    if res in (UNKNOWN, PY):
        return TENSOR
    return res


def checkpoint(st: Func, node: ast.Call, q: str) -> Optional[str]:
    """Where a checkpoint loader puts what it loads: ``torch.load`` where
    ``map_location`` says (unknown without one: where it was saved), safetensors'
    ``load_file``/``load`` on ``device=`` (the host by default); None for other calls."""
    kw = {k.arg: k.value for k in node.keywords if k.arg}
    if q == "torch.load":
        where = kw.get("map_location", node.args[1] if len(node.args) > 1 else None)
        if where is None:
            return UNKNOWN
        if isinstance(where, (ast.Constant, ast.Call)):
            place, sure = place_of_device(st, where)
            return place if sure else UNKNOWN
        return UNKNOWN  # a variable (device = torch.device("cpu")?), a function, a dict
    if q in ("safetensors.torch.load_file", "safetensors.torch.load"):
        dev = kw.get("device", node.args[1] if len(node.args) > 1 and (
            q.endswith("load_file")) else None)
        return HOST if dev is None else place_of_device(st, dev)[0]
    return None


def element_places(st: Func, node: ast.expr) -> List[str]:
    """The places of the leaves of a list/tuple literal (nested), or of a list
    comprehension's elements; [] for anything else (a name: a list or a tensor)."""
    if isinstance(node, (ast.List, ast.Tuple)):
        out: List[str] = []
        for e in node.elts:
            out.extend(element_places(st, e) if isinstance(e, (ast.List, ast.Tuple))
                       else [st.ev_quiet(e)])
        return out
    if isinstance(node, ast.ListComp):
        return [st.ev_quiet(node)]
    return []


def int_args(st: Func, args: Sequence[ast.expr], vals: Sequence[str]) -> None:
    """Arguments where an int is expected: a 0-d tensor there is read on the host, and
    so is one inside a size tuple or list (``torch.zeros((n, 4))``)."""
    for a, v in zip(args, vals):
        if isinstance(a, (ast.List, ast.Tuple)):
            for e in a.elts:
                if isinstance(e, ast.Starred):
                    continue  # *shape: a torch.Size or a list of ints
                ev = st.ev_quiet(e)
                if syncs_on(ev):
                    st.api_flag(e, "__index__", "Tensor", _sev(ev), ev,
                                "a tensor inside a size is read on the host")
        elif syncs_on(v):
            st.api_flag(a, "__index__", "Tensor", _sev(v), v,
                        "a tensor passed where an int is expected is read on the host")


def method_call(st: Func, node: ast.Call, func: ast.Attribute) -> str:  # noqa: C901
    m = func.attr
    if m in _LOG_LEVELS and _LOGGER_NAME.search(_dotted(func.value) or ""):
        st.ev(func.value)
        log_call(st, node, m)
        return PY
    if m == "format" and isinstance(func.value, ast.Constant) and isinstance(
            func.value.value, str):
        ev_args(st, node)
        format_args(st, node, [*node.args, *(k.value for k in node.keywords)],
                    "str.format()")
        return PY
    if m in _STR_METHODS and any(isinstance(a, ast.Constant) and isinstance(
            a.value, (str, bytes)) for a in [func.value, *node.args]):
        st.ev(func.value)
        ev_args(st, node)
        return PY  # text.split("\n"): a string method, not Tensor.split
    r = st.ev(func.value)
    cls = obj_key(r)
    if cls is not None:
        ev_args(st, node)
        info = st.ctx.classes.get(cls)
        if info is None:
            return UNKNOWN
        st.call_always(node, info.syncs.get(m))
        return info.methods.get(m, UNKNOWN)
    vals = ev_args(st, node)
    if m == "pin_memory" and r != DEVICE:
        # x.pin_memory(), an accelerator's pin_memory(x) helper: page-locked host memory
        return PINNED
    kw = {k.arg: k.value for k in node.keywords if k.arg} if node.keywords else {}
    tensor_recv = r in (DEVICE, TENSOR) or (
        r == UNKNOWN and m not in _GENERIC and not m.startswith("__"))
    if m == "synchronize":
        st.flag(node, "SG601", f"{_dotted(func.value) or 'object'}.synchronize",
                "blocks the host until the device (stream, event) is done",
                LIKELY if r != PY else CERTAIN, r)
        return PY
    if "device" in kw and m.startswith("new_"):
        return place_of_device(st, kw["device"])[0]
    if m in _INT_ARG_METHODS and r in (DEVICE, TENSOR):
        int_args(st, node.args, vals)
    if "alpha" in kw and r in (DEVICE, TENSOR):
        int_args(st, [kw["alpha"]], [st.ev_quiet(kw["alpha"])])
    if m == "__setitem__" and node.args and r in (DEVICE, TENSOR):
        setitem(st, node, func.value, r, node.args[0], vals[0],
                node.args[1] if len(node.args) > 1 else None,
                vals[1] if len(vals) > 1 else DEVICE)
        return r
    if m == "__getitem__" and node.args and r in (DEVICE, TENSOR):
        idx_v = vals[0]
        value_v = vals[1] if len(vals) > 1 else DEVICE
        if is_mask(st, node.args[0], idx_v) and syncs_on(value_v):
            st.api_flag(node, m, "Tensor", _sev(combine([idx_v, value_v])), idx_v,
                        "a boolean mask index reads the mask on the host")
        return r
    if m in ("to", "cuda", "npu") and r == UNKNOWN and _is_module_expr(func.value):
        return UNKNOWN  # model.to(device): the module, moved; no tensor
    if m in ("to", "cuda", "npu") or (m == "copy_" and node.args):
        if is_empty(st, func.value) or (m == "copy_" and is_empty(st, node.args[0])):
            # a copy of no element returns before copying: nothing waits
            saved, st.ctx.collect = st.ctx.collect, False
            try:
                return copy_method(st, node, m, r, vals, kw)
            finally:
                st.ctx.collect = saved
        return copy_method(st, node, m, r, vals, kw)
    if r in (HOST, PINNED) and _owned(m, "Tensor"):
        a = _owned(m, "Tensor")[0]
        st.flag(node, a.rule, f"Tensor.{m}", a.why, SILENT, r)  # a candidate only
    if r == PY and isinstance(func.value, ast.Name) and func.value.id in ("self", "cls"):
        # a method of the class: it may return tensors (or tuples of them)
        got = self_call(st, node, m)
        if got is not None:
            return got
        return PY if m in _PY_METHODS else UNKNOWN
    if r in (HOST, PINNED, PY) and m not in ("to",):
        if m == "pin_memory":
            return PINNED
        return HOST if m == "numpy" else (
            PY if m in _PY_METHODS or m in ("tolist", "item") else r)
    if m in _PY_METHODS:
        return PY
    if m in _MODULE_METHODS:
        return UNKNOWN  # model.to(device).named_modules(): a module's, not a tensor's
    apis = _owned(m, "Tensor")
    if m in ("cpu", "tolist", "numpy") and is_empty(st, func.value):
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
            sev_v = vals[1] if len(vals) > 1 else st.ev_quiet(kw["value"]) if (
                "value" in kw) else PY
            sev_v = sev_v if sev_v in (DEVICE, TENSOR) else PY
        elif m == "multinomial" and _no_check_multinomial(node, 0, kw):
            sev_v = PY
        elif m == "numpy" and not _is_true(kw.get("force")):
            sev_v = PY  # raises on a device tensor: nothing is read
        if sev_v != PY:
            when = _IN_KERNEL_WHEN.get(m)
            st.flag(node, a.rule, f"Tensor.{m}", a.why,
                    _sev(sev_v, m not in _GENERIC and tensor_api(st, m)), sev_v,
                    (a.op, when) if a.rule == "SG701" and a.op and when else None)
    if m in _HOST_METHODS:
        return PY if m in ("item", "tolist") else HOST
    if r == UNKNOWN:
        if m in ("all", "any") and not st.ctx.other_arrays and is_mask(st,
                                                                       func.value, r):
            # (ids == stop).all(): a reduction of a comparison is an array; in a file
            # that uses no other array library, a tensor handed in from elsewhere
            return TENSOR
        return TENSOR if m in _TENSOR_METHODS and st.ctx.has_torch else UNKNOWN
    return r


def tensor_api(st: Func, m: str) -> bool:
    """An unknown receiver of method ``m`` is likely a tensor: in a file that says torch,
    or for a read only tensors (and numpy) have, in a file that uses no other array
    library (a helper module handed device tensors by its callers)."""
    if st.ctx.has_torch:
        return True
    return m in ("item", "tolist", "cpu", "cuda", "npu") and not st.ctx.other_arrays


def copy_method(st: Func, node: ast.Call, m: str, r: str, vals: List[str],
                kw: Dict[str, ast.expr]) -> str:
    nb = _is_true(kw.get("non_blocking")) or any(
        isinstance(a, ast.Constant) and a.value is True for a in node.args[1:])
    if m == "copy_":
        src = vals[0]
        if r in (HOST, PINNED) and src in (DEVICE, TENSOR) and (not nb or r == HOST):
            st.flag(node, "SG201", "Tensor.copy_",
                    "a device tensor copied into pageable host memory (non_blocking "
                    "does not help)" if nb else
                    "a device tensor copied into a host buffer (blocking)", _sev(src),
                    src)
        elif r == PINNED and src == UNKNOWN and not nb:
            # a pinned buffer is a staging area for device data: a blocking copy into it
            # of a value of unknown place is the device-to-host copy it was made for
            st.flag(node, "SG201", "Tensor.copy_",
                    "a copy into a pinned host buffer without non_blocking waits for "
                    "the device (when the source is on it)", LIKELY, src)
        elif r in (DEVICE, TENSOR) and src in (HOST, PINNED) and (not nb or src == HOST):
            st.flag(node, "SG401", "Tensor.copy_",
                    "a host tensor copied into a device buffer (blocking)", _sev(r), r)
        return r
    if m in HARDWARE:  # .cuda(), .npu()
        if r in (HOST, PINNED) and (not nb or r == HOST):
            st.api_flag(node, m, "Tensor", CERTAIN, r,
                        "a host tensor copied to the device (blocking)")
        return DEVICE
    # .to(...)
    target: Optional[ast.expr] = kw.get("device")
    if target is None:
        for a in node.args:
            if isinstance(a, ast.Constant) and isinstance(a.value, bool):
                continue
            q = st.ctx.qual(a) or ""
            if q.startswith("torch.") and q.rsplit(".", 1)[-1] not in ("device",):
                continue  # a dtype
            if _last_name(a) in ("dtype",) or (_last_name(a) or "").endswith("dtype"):
                continue
            target = a
            break
    if target is None:
        return r
    place, sure = place_of_device(st, target)
    if place == HOST and r in (DEVICE, TENSOR, UNKNOWN):
        if r != UNKNOWN:
            st.flag(node, "SG201", "Tensor.to", "a device tensor copied to the host",
                    _sev(r), r)
        return HOST
    if place == DEVICE and r in (HOST, PINNED) and (not nb or r == HOST):
        st.flag(node, "SG401", "Tensor.to",
                "a non_blocking copy from pageable host memory is synchronous" if nb
                else "a host tensor copied to the device (blocking)",
                CERTAIN if sure else LIKELY, r)
        return DEVICE
    if place in (DEVICE, TENSOR):
        return place if sure else (r if r != UNKNOWN else TENSOR)
    return r


def _given(ret: str, vals: Sequence[str]) -> str:
    """What a call returns: ``ret``, the place the function's returns have, except that a
    helper over tensors of any place (``prepare_lens(x)``) given host tensors only computes
    on the host."""
    tensors = [v for v in vals if is_tensorish(v) or v == UNKNOWN]
    if ret == TENSOR and tensors and all(v in (HOST, PINNED) for v in tensors):
        return HOST
    return ret


def _no_check_multinomial(node: ast.Call, pos: int, kw: Dict[str, ast.expr]) -> bool:
    """multinomial with replacement and more than one sample: no host check (CUDA's fast
    path with its two .item() checks is for no replacement or one sample)."""
    rep = kw.get("replacement")
    if rep is None and len(node.args) > pos + 1:
        rep = node.args[pos + 1]
    n = kw.get("num_samples") or (node.args[pos] if len(node.args) > pos else None)
    return _is_true(rep) and not (isinstance(n, ast.Constant) and n.value == 1)


#: names of modules and models (``model.to(device)`` moves a module, not a tensor)
_MODULE_NAME = re.compile(r"(?:^|_)(?:model|module|net|network|encoder|decoder)s?$", re.I)


def _is_module_expr(node: ast.expr) -> bool:
    """A module or model by its syntax: a name like ``model``/``self.encoder``, or what a
    ``from_pretrained``/``from_config`` call or a class (``Net(...)``) makes."""
    if isinstance(node, ast.Call):
        f = node.func
        if isinstance(f, ast.Attribute):
            return f.attr in ("from_pretrained", "from_config") or (
                f.attr in ("to", "cuda", "npu", "eval", "train", "half", "float", "bfloat16")
                and _is_module_expr(f.value))
        return isinstance(f, ast.Name) and f.id[:1].isupper() and not f.id.isupper()
    name = _last_name(node)
    return name is not None and _MODULE_NAME.search(name) is not None


def _splat(node: ast.Call) -> bool:
    """The call passes ``**kwargs`` (which may hold ``device=``)."""
    return any(k.arg is None for k in node.keywords)


def _is_true(node: Optional[ast.expr]) -> bool:
    return isinstance(node, ast.Constant) and node.value is True
