"""Syncs outside every step are the step-less ``(outside steps)`` events only: a step someone
named so (a crafted result; ``syncguard.step`` now refuses the name) is not counted as
outside syncs."""

from __future__ import annotations

from pathlib import Path

import pytest
from _cli import write_result

from syncguard.results import format as results
from syncguard.results import loader


def test_a_step_named_like_the_outside_path_is_not_outside(tmp_path: Path) -> None:
    p = write_result(tmp_path / "r.jsonl", path_name=results.OUTSIDE_PATH, events=[{}])
    res = loader.load(str(p))
    assert results.outside_sites(res) == []


def test_step_refuses_the_reserved_name() -> None:
    import syncguard

    with pytest.raises(ValueError, match="outside every step"):
        syncguard.step(results.OUTSIDE_PATH)
    with pytest.raises(TypeError, match="must be a string"):
        syncguard.step(3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="at most 4096"):
        syncguard.step("x" * 4097)
    with syncguard.step("fine"):
        pass
