"""Op sync models: per-backend data on the host reads that happen inside kernels.

No Python hook sees a ``.item()`` that a C++ kernel calls itself (``torch.multinomial`` on
CUDA does two). Each backend has a JSON model in ``syncguard/core/opmodels/<backend>.json``: a list
of entries ``{op, reads, when, evidence, where}``; ``evidence`` is ``"source"`` (read from the
named source file) or ``"calibrated"`` (measured on hardware; then ``versions`` says where).
``when`` names a condition on the op's arguments (see ``CONDITIONS``).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
from typing import Any, Callable, Dict, List, Optional, Tuple

from ..errors import SyncguardError
from .events import KINDS
from .hub import HUB

_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "opmodels")


def _arg(args: Tuple[Any, ...], kwargs: Dict[str, Any], i: int, name: str, default: Any) -> Any:
    if len(args) > i:
        return args[i]
    return kwargs.get(name, default)


def _is_dev_tensor(x: Any) -> bool:
    if not (hasattr(x, "device") and hasattr(x, "dim")):
        return False
    return HUB.is_device_type(x.device.type)


def _no_replacement_or_one_sample(args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> bool:
    n = _arg(args, kwargs, 1, "num_samples", 1)
    repl = _arg(args, kwargs, 2, "replacement", False)
    return (not repl) or n == 1


def _value_on_device(args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> bool:
    v = _arg(args, kwargs, 2, "value", None)
    return _is_dev_tensor(v)


def _std_on_device(args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> bool:
    s = _arg(args, kwargs, 1, "std", None)
    return _is_dev_tensor(s)


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float, complex))  # bool is an int


def _index_items(args: Tuple[Any, ...]) -> Tuple[Any, ...]:
    index = args[1] if len(args) > 1 else ()
    return index if isinstance(index, tuple) else (index,)


def _scalar_into_0d(args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> bool:
    """``x[i] = 3`` (``Tensor.__setitem__``): a Python number written through a basic index
    (ints, int slices, None, Ellipsis) whose destination has no dimension left (x 1-d, or
    ``x[i, j]`` of a 2-d x...)."""
    if len(args) < 3 or not _is_number(args[2]) or not hasattr(args[0], "dim"):
        return False
    dims = args[0].dim()
    for it in _index_items(args):
        if it is None:
            dims += 1
        elif it is Ellipsis:
            continue
        elif isinstance(it, int) and not isinstance(it, bool):
            dims -= 1
        elif isinstance(it, slice) and all(b is None or (isinstance(b, int) and not isinstance(
                b, bool)) for b in (it.start, it.stop, it.step)):
            continue
        else:
            return False  # a tensor, a list, a bool: not basic indexing
    return dims == 0


def _is_mask(x: Any) -> bool:
    return str(getattr(x, "dtype", "")) in ("torch.bool", "torch.uint8")


def _scalar_through_int_tensor(args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> bool:
    """``x[idx] = 3``: a Python number written through device integer index tensors."""
    if len(args) < 3 or not _is_number(args[2]):
        return False
    tensors = [it for it in _index_items(args) if hasattr(it, "dim")]
    return bool(tensors) and all(_is_dev_tensor(t) and not _is_mask(t) for t in tensors)


def _scalar_through_mask(args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> bool:
    """``x[mask] = 3``: a Python number written through a device boolean mask."""
    if len(args) < 3 or not _is_number(args[2]):
        return False
    return any(_is_mask(it) and _is_dev_tensor(it) for it in _index_items(args))


CONDITIONS: Dict[str, Callable[[Tuple[Any, ...], Dict[str, Any]], bool]] = {
    "always": lambda a, k: True,
    "setitem_scalar_into_0d": _scalar_into_0d,
    "setitem_scalar_int_tensor_index": _scalar_through_int_tensor,
    "setitem_scalar_bool_mask": _scalar_through_mask,
    "no_replacement_or_one_sample": _no_replacement_or_one_sample,
    "replacement_many_samples": lambda a, k: not _no_replacement_or_one_sample(a, k),
    "value_on_device": _value_on_device,
    "std_on_device": _std_on_device,
}


@dataclasses.dataclass(frozen=True)
class ModelEntry:
    op: str
    reads: int
    when: str
    evidence: str
    where: str
    #: a Python entry point (``Tensor.__setitem__``) whose C++ path syncs: the entry applies
    #: to that call's arguments, not to an ATen op's ("" for an in-kernel read of ``op``)
    api: str = ""
    #: the event kind counted (an in-kernel read unless said otherwise)
    kind: str = "in_kernel"

    def applies(self, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> bool:
        return CONDITIONS[self.when](args, kwargs)


@dataclasses.dataclass(frozen=True)
class OpSyncModel:
    backend: str
    entries: Tuple[ModelEntry, ...]
    versions: Dict[str, str] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        # op (or api) -> (entry, condition) with reads > 0, in file order: one dict lookup
        by_op: Dict[str, List[Tuple[ModelEntry, Callable[..., bool]]]] = {}
        by_api: Dict[str, List[Tuple[ModelEntry, Callable[..., bool]]]] = {}
        for e in self.entries:
            if e.reads > 0:
                (by_api.setdefault(e.api, []) if e.api else by_op.setdefault(e.op, [])).append(
                    (e, CONDITIONS[e.when]))
        object.__setattr__(self, "_by_op", by_op)
        object.__setattr__(self, "_by_api", by_api)

    def reads(self, op: str, args: Tuple[Any, ...], kwargs: Dict[str, Any]
              ) -> Optional[ModelEntry]:
        """The entry that applies to ATen ``op`` with these arguments and reads > 0, else
        None."""
        for e, cond in self._by_op.get(op, ()):  # type: ignore[attr-defined]
            if cond(args, kwargs):
                return e
        return None

    def api_reads(self, api: str, args: Tuple[Any, ...], kwargs: Dict[str, Any]
                  ) -> Optional[ModelEntry]:
        """The entry that applies to a call of Python entry point ``api`` with these
        arguments and reads > 0, else None."""
        for e, cond in self._by_api.get(api, ()):  # type: ignore[attr-defined]
            if cond(args, kwargs):
                return e
        return None

    @property
    def ops(self) -> List[str]:
        """ATen ops with an entry (entries for a Python entry point are not ATen ops)."""
        return sorted({e.op for e in self.entries if not e.api})


class OpModelError(SyncguardError, ValueError):
    pass


def parse_model(data: Dict[str, Any], origin: str) -> OpSyncModel:
    try:
        entries = []
        for i, e in enumerate(data["entries"]):
            when = e.get("when", "always")
            if when not in CONDITIONS:
                raise OpModelError(f"{origin}: entries[{i}].when: unknown condition {when!r}")
            if e.get("evidence") not in ("source", "calibrated", "assumed"):
                raise OpModelError(
                    f"{origin}: entries[{i}].evidence must be source|calibrated|assumed")
            kind = str(e.get("kind", "in_kernel"))
            if kind not in KINDS:
                raise OpModelError(f"{origin}: entries[{i}].kind: unknown kind {kind!r}")
            entries.append(ModelEntry(str(e["op"]), int(e["reads"]), when, e["evidence"],
                                      str(e.get("where", "")), str(e.get("api", "")), kind))
        return OpSyncModel(str(data["backend"]), tuple(entries),
                           {str(k): str(v) for k, v in data.get("versions", {}).items()})
    except KeyError as exc:
        raise OpModelError(f"{origin}: missing field {exc.args[0]!r}") from None


@functools.cache
def load_model(backend: str) -> Optional[OpSyncModel]:
    """The committed op sync model for ``backend`` ("cuda", "npu"), or None if there is none."""
    path = os.path.join(_DIR, f"{backend}.json")
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as f:
        return parse_model(json.load(f), path)
