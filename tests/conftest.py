from __future__ import annotations

from typing import Iterator

import pytest

pytest_plugins = ["pytester"]


@pytest.fixture(autouse=True)
def _torch_left_clean() -> Iterator[None]:
    """Every test must leave torch exactly as it found it: no patch, no active guard."""
    from syncguard._hub import HUB
    from syncguard.intercept import PATCHER, snapshot

    before = snapshot()
    assert not HUB.guards and PATCHER.users == 0
    yield
    assert not HUB.guards, f"guards left active: {HUB.guards}"
    assert PATCHER.users == 0 and not PATCHER.installed, "interceptors left installed"
    assert HUB.tls.busy == 0
    assert snapshot() == before, "torch attributes differ from before the test"
