"""Patching torch.Tensor's dunders must leave no CPython type slot changed, on torch.Tensor and
on every subclass of it, made before, during or after a guard (issue 21, item 1)."""

from __future__ import annotations

import ctypes
import subprocess
import sys
from typing import Dict, List, Tuple

import pytest
import torch

from syncguard import SyncGuard, simulated_device

_WORD = ctypes.sizeof(ctypes.c_void_p)
# PyTypeObject words holding function pointers or slot tables (CPython 3.9-3.13 layout):
# tp_repr, tp_hash, tp_call, tp_str, tp_getattro, tp_setattro, tp_richcompare, tp_iter,
# tp_iternext; and the tables behind tp_as_number (36 words), tp_as_sequence (10) and
# tp_as_mapping (3).
_DIRECT = {"tp_repr": 11, "tp_hash": 15, "tp_call": 16, "tp_str": 17, "tp_getattro": 18,
           "tp_setattro": 19, "tp_richcompare": 25, "tp_iter": 27, "tp_iternext": 28}
_TABLES = {"as_number": (12, 36), "as_sequence": (13, 10), "as_mapping": (14, 3)}

needs_cpython = pytest.mark.skipif(
    sys.implementation.name != "cpython" or not getattr(sys, "_is_gil_enabled", lambda: True)(),
    reason="reads CPython's type layout")


def _tree() -> List[type]:
    out, todo = [], [torch.Tensor]
    while todo:
        tp = todo.pop()
        if tp not in out:
            out.append(tp)
            todo.extend(type.__subclasses__(tp))
    return out


def _slots(tp: type) -> Dict[str, object]:
    base = id(tp)
    assert ctypes.c_char_p.from_address(base + 3 * _WORD).value == tp.__name__.encode()
    out: Dict[str, object] = {}
    for name, i in _DIRECT.items():
        out[name] = ctypes.c_void_p.from_address(base + i * _WORD).value
    for name, (i, n) in _TABLES.items():
        table = ctypes.c_void_p.from_address(base + i * _WORD).value
        out[name] = None if not table else tuple(
            ctypes.c_void_p.from_address(table + j * _WORD).value for j in range(n))
    return out


def _all_slots() -> Dict[str, Dict[str, object]]:
    return {f"{tp.__module__}.{tp.__qualname__}@{id(tp):x}": _slots(tp) for tp in _tree()}


class _Before(torch.Tensor):
    pass


class _OwnGetitem(torch.Tensor):
    def __getitem__(self, index: object) -> object:  # a real sequence-like subclass
        return super().__getitem__(index)


def _zero_d_instances(dev: str) -> List[Tuple[str, torch.Tensor]]:
    return [
        ("Tensor", torch.tensor(1.0)),
        ("Parameter", torch.nn.Parameter(torch.tensor(1.0), requires_grad=False)),
        ("Buffer", torch.nn.Buffer(torch.tensor(1.0))),
        ("subclass made before", torch.tensor(1.0).as_subclass(_Before)),
        ("simulated npu", torch.tensor(1.0, device=dev)),
    ]


def _builds(xs: List[Tuple[str, torch.Tensor]], dev: str) -> List[str]:
    """The kinds whose 0-d tensors fail to build a tensor from a list (they look like
    sequences); the simulated ones also with device=."""
    bad = []
    for name, x in xs:
        try:
            torch.tensor([x, 1.0])
            if x.device.type != "cpu":
                torch.tensor([x, 1.0], device=dev)
        except TypeError:
            bad.append(name)
    return bad


@needs_cpython
def test_no_type_slot_of_any_tensor_subclass_changes_across_guards() -> None:
    simulated_device("npu", torch_npu=True)  # its tensor type is one of the subclasses
    before = _all_slots()
    with SyncGuard(devices=("cpu",)):
        class _During(torch.Tensor):
            pass
        during_inside = _slots(_During)
    # a subclass made while the guard is active ends with the slots one made outside has
    class _After(torch.Tensor):
        pass
    after = _all_slots()
    changed = {k: [s for s in v if v[s] != after[k][s]] for k, v in before.items()}
    assert {k: v for k, v in changed.items() if v} == {}
    reference = _slots(_After)
    assert _slots(_During) == reference, (during_inside, reference)
    assert _slots(_Before) == reference
    # a subclass with its own __getitem__ keeps what CPython gave it
    assert _slots(_OwnGetitem)["as_sequence"] != reference["as_sequence"]


def test_zero_d_subclass_tensors_build_lists_inside_and_after_the_guard() -> None:
    dev = str(simulated_device("npu", torch_npu=True))
    xs = _zero_d_instances(dev)
    assert _builds(xs, dev) == []
    with SyncGuard():
        assert _builds(xs, dev) == []
        class _During(torch.Tensor):
            pass
    xs.append(("subclass made during", torch.tensor(1.0).as_subclass(_During)))

    class _After(torch.Tensor):
        pass
    xs.append(("subclass made after", torch.tensor(1.0).as_subclass(_After)))
    assert _builds(xs, dev) == []
    with SyncGuard(), SyncGuard(devices=("cpu",)):  # nested: one install, one removal
        assert _builds(xs, dev) == []
    assert _builds(xs, dev) == []


_HEALTHY = """
import torch, syncguard
from syncguard.sim import simulated_device
dev = simulated_device()
h = torch.tensor(2.0, device=dev)
p = torch.nn.Parameter(torch.tensor(3.0), requires_grad=False)
class Mine(torch.Tensor):
    pass
m = torch.tensor(4.0).as_subclass(Mine)
with syncguard.SyncGuard():
    pass
class Later(torch.Tensor):
    pass
l = torch.tensor(5.0).as_subclass(Later)
print(torch.tensor([h, 1.0], device=dev).tolist(), torch.tensor([p, m, l]).tolist())
print(len(torch.arange(3)), list(torch.arange(2)), torch.arange(4)[1:3].tolist())
"""


def test_the_process_is_healthy_after_a_guard() -> None:
    """A fresh interpreter (nothing imported by other tests): after one guard, 0-d tensors of
    every kind build lists, and sequence behaviour of 1-d tensors is unchanged."""
    out = subprocess.run([sys.executable, "-c", _HEALTHY], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split("\n")[:2] == ["[2.0, 1.0] [3.0, 4.0, 5.0]",
                                          "3 [tensor(0), tensor(1)] [1, 2]"]
