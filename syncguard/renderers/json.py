"""The whole result as one JSON document (:meth:`syncguard.results.format.RunResult.to_json`)."""

from __future__ import annotations

from typing import IO, TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from ..results.format import RunResult


def render(result: RunResult) -> str:
    """``{"header": ..., "steps": [...], "events": [...], "notes": [...], "footer": ...}`` plus
    a newline; :func:`syncguard.results.format.load` reads it back."""
    return result.to_json() + "\n"


def write(result: RunResult, f: IO[str]) -> None:
    """:func:`render` streamed to ``f``: a long run's document is never held as one string."""
    result.write_json(f)
    f.write("\n")
