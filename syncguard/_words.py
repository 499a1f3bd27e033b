"""Counted nouns in messages: ``1 hidden sync``, ``3 hidden syncs``, ``step 3``, ``steps 2-4``.
Torch- and pandas-free."""

from __future__ import annotations

from typing import Iterable, List, Optional


def plural(n: int, noun: str, many: Optional[str] = None) -> str:
    """``n`` and ``noun``, the noun plural unless ``n`` is 1: ``plural(1, "hidden sync")`` ->
    ``"1 hidden sync"``; ``many`` for an irregular plural (``plural(2, "copy", "copies")``)."""
    return f"{n} {noun if n == 1 else (many or noun + 's')}"


def steps_phrase(steps: Iterable[Optional[int]]) -> str:
    """``"step 3"`` for one step, ``"steps 2-4, 7"`` for more (ranges), ``""`` for none
    (``None`` entries, outside any step, are left out)."""
    nums = sorted({int(s) for s in steps if s is not None})
    if not nums:
        return ""
    return f"step {nums[0]}" if len(nums) == 1 else f"steps {step_ranges(nums)}"


def step_ranges(steps: Iterable[Optional[int]], max_parts: Optional[int] = None) -> str:
    """Compact ranges of step indices: ``[2, 3, 4, 7] -> "2-4, 7"``; ``""`` if none.

    ``None`` steps (outside any step) are ignored. With ``max_parts`` the list is cut after
    that many ranges and ``", ... (+N)"`` says how many ranges were left out.
    """
    nums = sorted({int(s) for s in steps if s is not None and s == s})
    parts: List[str] = []
    i = 0
    while i < len(nums):
        j = i
        while j + 1 < len(nums) and nums[j + 1] == nums[j] + 1:
            j += 1
        parts.append(str(nums[i]) if i == j else f"{nums[i]}-{nums[j]}")
        i = j + 1
    if max_parts is not None and len(parts) > max_parts:
        return ", ".join(parts[:max_parts]) + f", ... (+{len(parts) - max_parts})"
    return ", ".join(parts)
