"""Where a value lives: a small lattice and the naming and type-hint conventions that place a
value on the host or the device before any dataflow (:mod:`syncguard.lint.checker`)."""

from __future__ import annotations

import ast
import functools
import re
from typing import Iterable, Optional

#: a Python value that is not a tensor (int, str, list of them, a torch.device, a dtype)
PY = "py"
#: a host tensor or numpy array
HOST = "host"
#: a host tensor in pinned (page-locked) memory: non_blocking copies to and from it are async
PINNED = "pinned"
#: a tensor whose device is unknown
TENSOR = "tensor"
#: a tensor on the device
DEVICE = "device"
#: nothing known
UNKNOWN = "unknown"
#: an instance of a class the lint read (``obj:<key>``, :class:`.project.ClassInfo`): no tensor
OBJ = "obj:"

_TENSORISH = (HOST, PINNED, TENSOR, DEVICE)

#: names the code marks as host values: ``token_ids_cpu``, ``cpu_buf``, ``x_np``, ``seq_lens_list``
HOST_NAME = re.compile(r"(?:^|_)(?:cpu|np|numpy|host|pinned|list|lst|py)(?:$|_)", re.I)
#: names of pinned host buffers: ``pinned_buf``, ``x_pinned``
PINNED_NAME = re.compile(r"(?:^|_)(?:pinned|pin)(?:$|_)", re.I)
#: names the code marks as device tensors: ``x_gpu``, ``buf_npu``, ``logits_cuda`` (a suffix:
#: ``npu_top_k_eligible`` is a flag about the npu, not a tensor on it)
DEVICE_NAME = re.compile(r"_(?:gpu|npu|cuda)$", re.I)
#: names of counts per device: ``train_micro_batch_size_per_gpu``
_PER_DEVICE = re.compile(r"_per_(?:gpu|npu|cuda)$", re.I)
#: names that hold a device *object* (``device``, ``self.device``, ``target_dev``)
DEVICE_OBJ_NAME = re.compile(r"(?:^|_)(?:device|dev)$", re.I)
#: names that are tensors by convention (device unknown)
TENSOR_NAME = re.compile(r"^(?:.*_)?(?:tensor|logits|probs|hidden_states)$", re.I)


def join(a: str, b: str) -> str:
    """Where a value is after two branches that gave ``a`` and ``b``."""
    if a == b:
        return a
    s = {a, b}
    if s <= {PY, HOST, PINNED}:
        return HOST
    if s <= set(_TENSORISH):
        return TENSOR
    return UNKNOWN


def combine(vals: Iterable[str]) -> str:
    """Where the result of an op over ``vals`` lives: on the device if any operand is."""
    seen = set(vals)
    if PINNED in seen:  # an op on a pinned tensor makes a new, pageable one
        seen.add(HOST)
    for v in (DEVICE, TENSOR, UNKNOWN, HOST):
        if v in seen:
            return v
    return PY


#: names of flags and switches: ``clamp_hidden_states``, ``return_logits``, ``use_cuda``
FLAG_NAME = re.compile(r"^_*(?:is|has|use|uses|enable|enabled|disable|do|with|return|output|"
                       r"clamp|apply|skip|need|needs|should|allow|keep|no|save|compute)_", re.I)


#: answers kept of by_name (by name) and by_annotation (by the hint's text): pure functions
#: of a string, asked about the same strings many times
_CACHE_MAX = 1 << 16


@functools.lru_cache(maxsize=_CACHE_MAX)
def by_name(name: str) -> Optional[str]:
    """The place a variable or attribute name marks, or None."""
    if FLAG_NAME.match(name):
        return PY  # a switch (clamp_hidden_states), whatever noun it ends with
    if DEVICE_OBJ_NAME.search(name) or (name.isupper() and len(name) > 1) or name in (
            "torch_npu", "torch_mlu", "torch_xla"):
        return PY  # a device object, or a CONSTANT
    if DEVICE_NAME.search(name):
        # micro_batch_size_per_gpu, tokens_per_npu: a count per device, not a tensor on one
        return PY if _PER_DEVICE.search(name) else DEVICE
    if PINNED_NAME.search(name):
        return PINNED
    if HOST_NAME.search(name):
        return HOST
    if TENSOR_NAME.match(name):
        return TENSOR
    return None


_PY_HINTS = re.compile(r"^(?:int|float|bool|str|bytes|complex|None|"
                       r"(?:typing\.)?(?:List|Dict|Tuple|Set|Sequence|Iterable|Mapping)"
                       r"|list|dict|tuple|set|torch\.device|torch\.dtype)\b")


_CONTAINER_HINT = re.compile(r"\b(?:typing\.)?(?:List|Tuple|Sequence|Iterable|Iterator|Dict|"
                             r"Mapping|Set|list|tuple|dict|set)\[")


def by_annotation(node: Optional[ast.expr]) -> Optional[str]:
    """The place a type hint marks: ``torch.Tensor`` a tensor, ``np.ndarray`` the host,
    ``int``/``List[int]`` a Python value; None when it says nothing."""
    if node is None:
        return None
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        text: str = node.value
    else:
        known = hint_text(node)
        if known is not None:
            text = known
        else:
            try:
                text = ast.unparse(node)
            except Exception:  # pragma: no cover - malformed hint
                return None
    return _by_hint_text(text)


def hint_text(node: ast.expr) -> Optional[str]:
    """``ast.unparse(node)`` of the common shapes of a type hint (``a.b.C``, ``None``,
    ``X[a, b.C]``, ``a | None``), without the unparser; None for any other shape."""
    if type(node) is ast.Name:
        return node.id
    if type(node) is ast.Constant and node.value is None:
        return "None"
    if type(node) is ast.BinOp and type(node.op) is ast.BitOr:  # a | b | None
        if type(node.right) is ast.BinOp:
            return None  # a | (b | c): the unparser adds parentheses
        left, right = hint_text(node.left), hint_text(node.right)
        return None if left is None or right is None else f"{left} | {right}"
    if type(node) is ast.Attribute or type(node) is ast.Subscript:
        if type(node.value) is not ast.Name and type(node.value) is not ast.Attribute:
            return None
        base = hint_text(node.value)
        if base is None:
            return None
        if isinstance(node, ast.Attribute):
            return f"{base}.{node.attr}"
        sl = node.slice
        if type(sl) is ast.Tuple and sl.elts:
            items = [hint_text(e) for e in sl.elts]
            if None in items:
                return None
            inner = ", ".join(i for i in items if i is not None)
            return f"{base}[{inner},]" if len(items) == 1 else f"{base}[{inner}]"
        one = hint_text(sl)
        return None if one is None else f"{base}[{one}]"
    return None


@functools.lru_cache(maxsize=_CACHE_MAX)
def _by_hint_text(text: str) -> Optional[str]:
    if "ndarray" in text or "NDArray" in text:
        return HOST
    if "Tensor" in text and _CONTAINER_HINT.search(text):
        # List[Tensor], Tensor | list[Tensor]: a container of tensors (its truth value is its
        # length) or either: the place of the value itself is unknown
        return None
    if "Tensor" in text:
        # Union[float, Tensor]: mostly a Python number, a tensor only for some callers
        return None if re.search(r"\b(?:float|int|bool|Number)\b", text) else TENSOR
    if _PY_HINTS.match(text.replace("Optional[", "")):
        return PY
    return None


def obj_key(v: str) -> Optional[str]:
    """The class key of an instance place, None for any other place."""
    return v[len(OBJ):] if v.startswith(OBJ) else None


def is_tensorish(v: str) -> bool:
    return v in _TENSORISH


def syncs_on(v: str) -> bool:
    """A sync is possible on a value in ``v`` (a device tensor or an unknown tensor)."""
    return v in (DEVICE, TENSOR)
