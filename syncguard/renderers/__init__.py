"""Renderers of a :class:`syncguard.results.RunResult`: terminal, Markdown, HTML, JSON, CSV.

Every renderer is a function ``render(result, **options) -> str``; :data:`RENDERERS` maps a
format name to it, :func:`renderer_for_path` picks one by file extension and
:func:`write_reports` writes the standard set of files of a run. The numbers behind every
report come from :mod:`syncguard.analysis` (pandas DataFrames); the CI formats of
``syncguard check`` are in :mod:`syncguard.renderers.ci`.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional

from .. import analysis
from .. import trace as _trace_mod
from .._atomic import atomic_open
from ..analysis import compare, compare_paths, per_step, sites, summary
from . import csv as _csv_mod
from . import html as _html_mod
from . import json as _json_mod
from . import markdown as _markdown_mod
from . import terminal as _terminal_mod

if TYPE_CHECKING:  # pragma: no cover
    from ..results import RunResult

Renderer = Callable[..., str]

#: Format name -> ``render(result, **options) -> str``.
RENDERERS: Dict[str, Renderer] = {
    "terminal": _terminal_mod.render,
    "markdown": _markdown_mod.render,
    "html": _html_mod.render,
    "json": _json_mod.render,
    "csv-steps": _csv_mod.render_steps,
    "csv-events": _csv_mod.render_events,
    "trace": _trace_mod.render,
}

#: File extension -> format name (``.csv`` is steps unless the name says events).
EXTENSIONS: Dict[str, str] = {
    ".md": "markdown", ".markdown": "markdown", ".html": "html", ".htm": "html",
    ".json": "json", ".csv": "csv-steps", ".txt": "terminal",
}


def format_for_path(path: str) -> str:
    """The format name for ``path`` by extension: ``.md`` markdown, ``.html`` html, ``.json``
    json, ``.txt`` terminal (plain text), ``.csv`` csv-steps, or csv-events when the file
    name contains ``event``. Raises ValueError for anything else."""
    base = os.path.basename(path).lower()
    ext = os.path.splitext(base)[1]
    if ext not in EXTENSIONS:
        known = ", ".join(sorted(EXTENSIONS))
        raise ValueError(f"{path}: no renderer for extension {ext or '(none)'!r} "
                         f"(known: {known})")
    if ext == ".csv" and "event" in base:
        return "csv-events"
    return EXTENSIONS[ext]


def renderer_for_path(path: str) -> Renderer:
    """The renderer for ``path`` (see :func:`format_for_path`)."""
    return RENDERERS[format_for_path(path)]


#: Format name -> ``render_compare(df, label_a, label_b, title=...) -> str``: the files
#: ``syncguard compare -o`` writes (the terminal's is printed, not written).
COMPARE_RENDERERS: Dict[str, Callable[..., str]] = {
    "markdown": _markdown_mod.render_compare,
    "html": _html_mod.render_compare,
    "csv-steps": lambda df, a="A", b="B", title="": _csv_mod.render_compare(df),
}
COMPARE_RENDERERS["csv-events"] = COMPARE_RENDERERS["csv-steps"]


def compare_renderer_for_path(path: str) -> Callable[..., str]:
    """The comparison renderer for ``path`` by extension (``.md``, ``.html``, ``.csv``);
    ValueError for any other."""
    try:
        fmt = format_for_path(path)
    except ValueError:
        fmt = ""
    if fmt not in COMPARE_RENDERERS:
        raise ValueError(f"{path}: the comparison is written as .md, .html or .csv")
    return COMPARE_RENDERERS[fmt]


def render(result: RunResult, fmt: str, **options: Any) -> str:
    """Render ``result`` in format ``fmt`` (a key of :data:`RENDERERS`)."""
    try:
        fn = RENDERERS[fmt]
    except KeyError:
        raise ValueError(f"unknown format {fmt!r}; known: {', '.join(RENDERERS)}") from None
    return fn(result, **options)


def write(result: RunResult, path: str, fmt: Optional[str] = None, **options: Any) -> str:
    """Render ``result`` to the file ``path`` (format from the extension unless ``fmt``);
    returns ``path``."""
    fmt = fmt or format_for_path(path)
    if fmt not in RENDERERS:
        raise ValueError(f"unknown format {fmt!r}; known: {', '.join(RENDERERS)}")
    parent = os.path.dirname(os.path.abspath(path))
    os.makedirs(parent, exist_ok=True)
    with atomic_open(path, newline="") as f:  # temp file + rename; never via a symlink
        if fmt == "json":  # streamed: a long run's document is never held as one string
            result.write_json(f)
            f.write("\n")
        else:
            f.write(render(result, fmt, **options))
    return path


#: File name -> format name written by :func:`write_reports`, in order.
REPORT_FILES: Dict[str, str] = {
    "steps.csv": "csv-steps", "events.csv": "csv-events", "report.md": "markdown",
    "report.html": "html", "result.json": "json", "trace.json": "trace",
}


def write_reports(result: RunResult, out_dir: str) -> List[str]:
    """Write ``steps.csv``, ``events.csv``, ``report.md``, ``report.html``,
    ``result.json`` and ``trace.json`` (:mod:`syncguard.trace`) into ``out_dir`` (created
    if needed); returns their paths in that order. (``result.jsonl`` is the runner's, not
    written here.)"""
    os.makedirs(out_dir, exist_ok=True)
    return [write(result, os.path.join(out_dir, name), fmt)
            for name, fmt in REPORT_FILES.items()]


__all__ = [
    "COMPARE_RENDERERS", "EXTENSIONS", "RENDERERS", "REPORT_FILES", "Renderer", "analysis",
    "compare", "compare_renderer_for_path",
    "compare_paths", "format_for_path", "per_step", "render", "renderer_for_path", "sites",
    "summary", "write", "write_reports",
]
