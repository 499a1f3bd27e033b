"""Counted nouns in messages: ``1 hidden sync``, ``3 hidden syncs``, ``step 3``, ``steps 2-4``.
Torch- and pandas-free."""

from __future__ import annotations

from typing import Iterable, Optional


def plural(n: int, noun: str, many: Optional[str] = None) -> str:
    """``n`` and ``noun``, the noun plural unless ``n`` is 1: ``plural(1, "hidden sync")`` ->
    ``"1 hidden sync"``; ``many`` for an irregular plural (``plural(2, "copy", "copies")``)."""
    return f"{n} {noun if n == 1 else (many or noun + 's')}"


def steps_phrase(steps: Iterable[Optional[int]]) -> str:
    """``"step 3"`` for one step, ``"steps 2-4, 7"`` for more (ranges), ``""`` for none
    (``None`` entries, outside any step, are left out)."""
    from .analysis import step_ranges  # torch- and pandas-free at import

    nums = sorted({int(s) for s in steps if s is not None})
    if not nums:
        return ""
    return f"step {nums[0]}" if len(nums) == 1 else f"steps {step_ranges(nums)}"
