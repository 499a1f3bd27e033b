"""Reads of device values made in C++ that no Python entry point sees, in cpu mode (CPU
tensors counted as device-resident): a 0-d tensor used as a number inside an op, and
TorchScript's ``aten::Bool``/``aten::item``. The dispatch-level net counts each once; a read a
Python-level interceptor saw is not counted again by it."""

from __future__ import annotations

import warnings
from typing import Any, Callable, Dict

import pytest
import torch

from syncguard import SyncGuard


def _scripted_bool(x: torch.Tensor) -> int:
    if bool(x):
        return 1
    return 0


def _scripted_item(x: torch.Tensor) -> float:
    return x.item()


with warnings.catch_warnings():  # torch.jit.script is deprecated, and still what engines run
    warnings.simplefilter("ignore", DeprecationWarning)
    _scripted_bool = torch.jit.script(_scripted_bool)
    _scripted_item = torch.jit.script(_scripted_item)


T = torch.tensor(3)
B = torch.tensor(True)

#: each makes one read of a 0-d tensor in C++ (the argument parser, or TorchScript)
CPP_READS: Dict[str, Callable[[], Any]] = {
    "torch.full((n,), t)": lambda: torch.full((2,), T),
    "torch.arange(t)": lambda: torch.arange(T),
    "a 0-d tensor in a size tuple": lambda: torch.zeros((T, 2)),
    "TorchScript bool()": lambda: _scripted_bool(B),
    "TorchScript .item()": lambda: _scripted_item(T),
}


@pytest.mark.parametrize("name", list(CPP_READS))
def test_a_cpp_read_is_the_python_layers_blind_spot_and_the_nets_one_read(name: str) -> None:
    with SyncGuard(devices=("cpu",)) as plain:
        CPP_READS[name]()
    assert plain.count == 0  # why cpu mode needs the net (docs/device-modes.md)
    with SyncGuard(devices=("cpu",), exhaustive=True) as g:
        CPP_READS[name]()
    assert g.count == 1, [e.describe() for e in g.events]
    ev, = g.events
    assert ev.op == "aten::_local_scalar_dense" and ev.source and "C++" in ev.source
    assert ev.filename == __file__  # the user's line that made the call


@pytest.mark.parametrize("read", [lambda: T.item(), lambda: bool(B), lambda: int(T),
                                  lambda: list(range(5))[T]],
                         ids=["item", "bool", "int", "index"])
def test_a_python_read_stays_one_with_the_net_on(read: Callable[[], Any]) -> None:
    with SyncGuard(devices=("cpu",), exhaustive=True) as g:
        read()
    assert g.count == 1, [e.describe() for e in g.events]
    assert g.events[0].api.startswith("Tensor.")  # the interceptor's, not the net's


def test_every_read_of_a_step_once() -> None:
    with SyncGuard(devices=("cpu",), exhaustive=True) as g:
        for _ in range(3):
            with g.step():
                for fn in CPP_READS.values():
                    fn()
                T.item()
    per_step = {s: sum(e.count for e in g.events if e.step == s) for s in range(3)}
    assert per_step == {0: 6, 1: 6, 2: 6}
