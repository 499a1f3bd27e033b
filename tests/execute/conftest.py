"""Fixtures the exec tests share."""

from __future__ import annotations

import os
import sys
from typing import Iterator

import pytest
from _paths import TESTS

#: the exec test programs (budgets.py, decode.py...)
HERE = os.path.join(str(TESTS), "data", "exec")


@pytest.fixture
def budgets(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """In-process runs of ``tests/data/exec/budgets.py``: its folder the current one and first
    on its own copy of ``sys.path``, no torchrun rank, its modules imported afresh after."""
    monkeypatch.chdir(HERE)
    monkeypatch.setattr(sys, "path", sys.path[:])
    monkeypatch.delenv("RANK", raising=False)
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    yield
    for m in ("budgets", "budgets_helper"):
        sys.modules.pop(m, None)
