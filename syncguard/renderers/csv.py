"""CSV of steps and events via pandas (``to_csv(index=False)``).

Columns and units: :data:`syncguard.results.STEP_COLUMNS` and
:data:`syncguard.results.EVENT_COLUMNS` (plus ``filename`` and ``lineno``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from ..results import RunResult


def render_steps(result: RunResult) -> str:
    """One row per step record (warm-up steps included, flagged in ``warmup``)."""
    return result.steps_df().to_csv(index=False, lineterminator="\n")


def render_events(result: RunResult) -> str:
    """One row per sync event (hidden and allowed, warm-up included)."""
    return result.events_df().to_csv(index=False, lineterminator="\n")


def render(result: RunResult, table: str = "steps") -> str:
    """``table`` is ``"steps"`` or ``"events"``."""
    if table == "steps":
        return render_steps(result)
    if table == "events":
        return render_events(result)
    raise ValueError(f"csv table must be 'steps' or 'events', not {table!r}")
