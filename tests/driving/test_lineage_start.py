"""Switching lineage on for a device (:mod:`syncguard.driving.lineage`)."""

from __future__ import annotations

import torch

from syncguard.driving.lineage import start_auto, start_for
from syncguard.sim import kernel as simkernel
from syncguard.sim import simulated_device


def test_cpu_mode_uses_a_dispatch_mode_even_with_the_simulated_npu_set_up() -> None:
    simulated_device()  # process-lifetime, as another test may have left it
    tracker = start_auto(cpu=True)
    try:
        assert tracker._mode is not None and tracker.observe not in simkernel.OP_OBSERVERS
        t = torch.tensor([1, 2])
        assert t in tracker.records
    finally:
        tracker.stop()


def test_the_simulated_npu_uses_its_own_observers() -> None:
    dev = simulated_device()
    tracker = start_auto(cpu=False)
    try:
        assert tracker._mode is None and tracker.observe in simkernel.OP_OBSERVERS
        t = torch.tensor([1, 2], device=dev) + 1
        assert t in tracker.records
    finally:
        tracker.stop()
    assert tracker.observe not in simkernel.OP_OBSERVERS
    start_for("cpu").stop()  # stopping twice or at once leaves nothing behind
