"""Switching the lineage tracker (:mod:`syncguard.core.lineage`) on for a target device: the
simulated device's own op observers (a dispatch mode must not run over it), a dispatch mode
on this thread elsewhere; in cpu mode, cpu tensors stand for device ones."""

from __future__ import annotations

import contextlib
from typing import Iterator, Optional

from ..core.hub import HUB
from ..core.lineage import LineageTracker
from ..sim.kernel import OP_OBSERVERS
from .devices import Target


def start(target: Target) -> LineageTracker:
    """A tracker switched on for ``target`` (stop it with :meth:`LineageTracker.stop`)."""
    return start_for(target.kind)


def start_for(kind: str) -> LineageTracker:
    """As :func:`start`, from a device kind (sim, cpu, cuda, npu)."""
    tracker = LineageTracker(host_devices=() if kind == "cpu" else ("cpu",))
    if kind == "sim":
        return tracker.start(observers=OP_OBSERVERS)
    return tracker.start()


def start_auto(cpu: bool = False) -> LineageTracker:
    """A tracker for code whose device is not known in advance (a guarded test): the
    simulated device's observers when it is set up in this process, else a dispatch mode on
    this thread; ``cpu``: cpu tensors stand for device ones (``devices=("cpu",)``)."""
    if cpu:  # cpu tensors stand for device ones: only a dispatch mode sees their ops
        return start_for("cpu")
    if HUB.backends:  # the simulated device's backend is registered: it sees every op
        return start_for("sim")
    return start_for("cuda")


@contextlib.contextmanager
def tracking(target: Target, on: bool = True) -> Iterator[Optional[LineageTracker]]:
    """:func:`start` for the block when ``on`` (else nothing: the default costs nothing)."""
    if not on:
        yield None
        return
    tracker = start(target)
    try:
        yield tracker
    finally:
        tracker.stop()
