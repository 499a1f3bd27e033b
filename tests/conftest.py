from __future__ import annotations

import os
import tempfile
from typing import Iterator

import pytest

pytest_plugins = ["pytester"]

# Inductor's compiled graphs carry the source lines they were traced from, and its on-disk cache
# outlives the checkout that filled it: a cache shared with another checkout of these tests
# would name that checkout's files. Each test run gets its own.
os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", tempfile.mkdtemp(prefix="syncguard-inductor-"))


@pytest.fixture(autouse=True, scope="session")
def _dynamo_imported_once() -> None:
    """pytester's in-process runs drop the modules they imported when they end, but a C++
    operator registration stays: torch._dynamo (imported by a torch.compile test inside such a
    run) imports torch._inductor.test_operators, whose TORCH_LIBRARY then fails when a later
    test imports it again ("Only a single TORCH_LIBRARY ... _inductor_test"). Importing it once
    for the session keeps it out of every snapshot."""
    import torch._dynamo  # noqa: F401


@pytest.fixture(autouse=True, scope="session")
def _cpu_only_guards_are_deliberate() -> None:
    """Many tests guard CPU-only code on purpose: the once-per-process NoDeviceTensorsWarning
    is said up front (its own tests reset the flag)."""
    from syncguard.core.hub import HUB

    HUB.warned_no_device = True


@pytest.fixture(autouse=True)
def _torch_left_clean() -> Iterator[None]:
    """Every test must leave torch exactly as it found it: no patch, no active guard, no
    classification state (devices, op models) left behind by a guard."""
    import torch

    from syncguard.core.hub import HUB
    from syncguard.core.intercept import PATCHER, snapshot

    modes = torch._C._len_torch_dispatch_stack()
    before = snapshot()
    assert not HUB.guards and PATCHER.users == 0
    yield
    assert not HUB.guards, f"guards left active: {HUB.guards}"
    # everything that affects classification is recomputed from the active guards: none left
    state = HUB.classification_state
    assert state == {"guards": [], "devices": set(), "models": set()}, state
    assert PATCHER.users == 0 and not PATCHER.installed, "interceptors left installed"
    assert HUB.tls.busy == 0
    assert torch._C._len_torch_dispatch_stack() == modes, "dispatch net left on the stack"
    # patching __getitem__ must not leave tensors looking like Python sequences
    zero_d = torch.tensor(1.0)
    assert torch.tensor([zero_d, zero_d]).tolist() == [1.0, 1.0], "Tensor sequence slots"
    after = snapshot()
    # Owners may appear during a test (the simulated device's tensor class): compare the
    # shared keys, and no attribute anywhere may still be a syncguard wrapper.
    assert {k: after[k] for k in before if k in after} == before, "torch attributes changed"
    left = [k for k, v in after.items() if getattr(v, "__syncguard__", False)]
    assert not left, f"interceptors left installed on {left}"
    # the modeled timeline's op observer is unhooked with its pass, whatever ended it
    from syncguard.model import timeline
    from syncguard.sim import kernel as simkernel

    assert not simkernel.OP_OBSERVERS and not timeline._ACTIVE, "timeline observer left hooked"
