"""The whole result as one JSON document (:meth:`syncguard.results.RunResult.to_json`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from ..results import RunResult


def render(result: RunResult) -> str:
    """``{"header": ..., "steps": [...], "events": [...], "footer": ...}`` plus a newline."""
    return result.to_json() + "\n"
