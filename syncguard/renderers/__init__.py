"""Every output format syncguard writes, in one registry of :class:`Renderer` objects.

A renderer is one format: its ``name``, the ``file_name`` it has in a report folder (None when
it is not written there), the ``extensions`` that pick it for an output file, ``render`` and,
where the format has one, ``render_compare`` (a comparison for ``syncguard compare``). Each
lives in its own module, as before: ``terminal``, ``markdown``, ``html``, ``json``, ``csv``,
``trace``, and the gate's formats in ``ci``. The registry names them as
``"module:function"`` and imports a module on first use, so this package imports nothing but
the standard library: the command line reads its format choices and report file names here
while it parses arguments.

Two kinds of renderer:

- ``report``: a run's reports, ``render(result, **options) -> str`` of a
  :class:`syncguard.results.format.RunResult` (:data:`RENDERERS`; ``show -o`` picks one by
  extension, :func:`write_reports` writes the report folder);
- ``gate``: the gate's output, ``render(verdicts) -> str``
  (:data:`GATE_RENDERERS`; ``check --format`` and ``exec --format``).

To add a format: a module with its ``render`` (built on the table model of
``renderers/_tables.py``; every text taken from a result goes through ``_escape``), and one
:class:`Renderer` line in :data:`REGISTRY`.
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import IO, TYPE_CHECKING, Any, Callable, Dict, List, Optional, Sequence, Tuple

from ..core.atomic import atomic_open

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from ..results.format import RunResult

REPORT, GATE = "report", "gate"


def _load(spec: str) -> Callable[..., Any]:
    """The function a ``"module:function"`` spec names (module relative to this package)."""
    module, _, attr = spec.partition(":")
    return getattr(importlib.import_module(module, __name__), attr)  # type: ignore[no-any-return]


class Renderer:
    """One output format (see the module's docstring). ``render`` and ``compare`` are
    ``"module:function"`` specs, imported when first called; ``stream`` optionally names a
    ``write(result, file)`` that writes the document without holding it as one string (used
    by :func:`write`). ``compare_file``: whether ``compare -o`` writes the comparison in this
    format (the terminal's is printed, not written). Calling a renderer is ``render``."""

    __slots__ = ("name", "kind", "file_name", "extensions", "_render", "_compare", "_stream",
                 "compare_file")

    def __init__(self, name: str, render: str, *, kind: str = REPORT,
                 file_name: Optional[str] = None, extensions: Sequence[str] = (),
                 compare: Optional[str] = None, compare_file: bool = True,
                 stream: Optional[str] = None) -> None:
        self.name, self.kind, self.file_name = name, kind, file_name
        self.extensions: Tuple[str, ...] = tuple(extensions)
        self._render, self._compare, self._stream = render, compare, stream
        self.compare_file = compare_file and compare is not None

    @property
    def compares(self) -> bool:
        """Whether the format has a comparison (:meth:`render_compare`)."""
        return self._compare is not None

    def render(self, *args: Any, **options: Any) -> str:
        """The document as text: ``render(result, **options)`` for a report,
        ``render(verdicts)`` for a gate format."""
        return str(_load(self._render)(*args, **options))

    __call__ = render

    def render_compare(self, df: pd.DataFrame, label_a: str = "A", label_b: str = "B", *,
                       title: Optional[str] = None, **options: Any) -> str:
        """A comparison (:func:`syncguard.results.analysis.compare` / ``compare_paths``) in this
        format; ValueError for a format without one."""
        if self._compare is None:
            raise ValueError(f"the {self.name} format has no comparison")
        if title is not None:
            options["title"] = title
        return str(_load(self._compare)(df, label_a=label_a, label_b=label_b, **options))

    def write_to(self, f: IO[str], result: RunResult, **options: Any) -> None:
        """Write the report of ``result`` to the open file ``f``."""
        if self._stream is not None:
            _load(self._stream)(result, f)
        else:
            f.write(self.render(result, **options))

    def __repr__(self) -> str:
        return f"Renderer({self.name!r}, kind={self.kind!r})"


#: Every format, in the order a report folder is written (terminal first: never written).
REGISTRY: Tuple[Renderer, ...] = (
    Renderer("terminal", ".terminal:render", extensions=(".txt",),
             compare=".terminal:render_compare", compare_file=False),
    Renderer("csv-steps", ".csv:render_steps", file_name="steps.csv", extensions=(".csv",),
             compare=".csv:render_compare", stream=".csv:write_steps"),
    Renderer("csv-events", ".csv:render_events", file_name="events.csv",
             compare=".csv:render_compare"),
    Renderer("csv-sites", ".csv:render_sites", file_name="sites.csv"),
    Renderer("markdown", ".markdown:render", file_name="report.md",
             extensions=(".md", ".markdown"), compare=".markdown:render_compare"),
    Renderer("html", ".html:render", file_name="report.html", extensions=(".html", ".htm"),
             compare=".html:render_compare"),
    Renderer("json", ".json:render", file_name="result.json", extensions=(".json",),
             stream=".json:write"),
    Renderer("trace", ".trace:render", file_name="trace.json", stream=".trace:write"),
    # the gate's formats (syncguard check/exec --format); sarif and junit have a file of
    # their own under an exec run's folder
    Renderer("text", ".ci:render_text", kind=GATE),
    Renderer("github", ".ci:render_github", kind=GATE),
    Renderer("sarif", ".ci:render_sarif_json", kind=GATE, file_name="syncguard.sarif"),
    Renderer("junit", ".ci:render_junit", kind=GATE, file_name="junit.xml"),
)

#: Report format name -> its :class:`Renderer` (callable as ``render(result, **options)``).
RENDERERS: Dict[str, Renderer] = {r.name: r for r in REGISTRY if r.kind == REPORT}

#: Gate format name -> its :class:`Renderer`, as ``--format`` lists them.
GATE_RENDERERS: Dict[str, Renderer] = {r.name: r for r in REGISTRY if r.kind == GATE}

#: File extension -> report format name (``.csv`` is steps unless the name says events).
EXTENSIONS: Dict[str, str] = {e: r.name for r in RENDERERS.values() for e in r.extensions}

#: File name -> report format name written by :func:`write_reports`, in order.
REPORT_FILES: Dict[str, str] = {r.file_name: r.name for r in RENDERERS.values()
                                if r.file_name is not None}

#: The streamed result a run writes step by step (the runner's, not a renderer's).
RESULT_STREAM = "result.jsonl"


def gate_formats() -> Tuple[str, ...]:
    """The gate's format names (``--format`` of check and exec), ``text`` first."""
    return tuple(GATE_RENDERERS)


def gate_file_name(fmt: str) -> Optional[str]:
    """The file a gate format is written to under a run's folder (None: stdout only)."""
    r = GATE_RENDERERS.get(fmt)
    return None if r is None else r.file_name


def render_gate(fmt: str, verdicts: Sequence[Any], command: str = "check") -> str:
    """The gate's report on ``verdicts`` (:class:`syncguard.gate.verdicts.Verdict`) in gate
    format ``fmt`` (one of :func:`gate_formats`); the text of ``text`` and ``github`` speaks
    as ``syncguard <command>``."""
    r = GATE_RENDERERS.get(fmt)
    if r is None:
        raise ValueError(f"unknown format {fmt!r}; valid formats: {', '.join(GATE_RENDERERS)}")
    if fmt in ("text", "github"):
        return r.render(verdicts, command=command)
    return r.render(verdicts)


def emit_gate(fmt: str, verdicts: Sequence[Any], output: Optional[str],
              command: str = "check") -> None:
    """Write the gate's report in ``fmt`` to ``output`` (None or ``"-"``: stdout; else a file,
    replaced atomically). When a format with a file of its own (sarif, junit) goes to a file,
    the text summary is also printed on stdout, so the CI log still says what failed."""
    text = render_gate(fmt, verdicts, command)
    if output in (None, "-"):
        sys.stdout.write(text)
        return
    os.makedirs(os.path.dirname(os.path.abspath(output)), exist_ok=True)
    with atomic_open(output, newline="\n") as f:  # temp file + rename, never via a link
        f.write(text)
    if GATE_RENDERERS[fmt].file_name is not None:
        sys.stdout.write(render_gate("text", verdicts, command))


def run_files() -> Tuple[str, ...]:
    """Every file a run writes in its folder: :data:`RESULT_STREAM`, then the reports."""
    return (RESULT_STREAM, *REPORT_FILES)


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


def compare_renderer_for_path(path: str) -> Renderer:
    """The renderer that writes a comparison to ``path``, by extension (``.md``, ``.html``,
    ``.csv``); ValueError for any other."""
    try:
        r: Optional[Renderer] = renderer_for_path(path)
    except ValueError:
        r = None
    if r is None or not r.compare_file:
        raise ValueError(f"{path}: the comparison is written as .md, .html or .csv")
    return r


def render(result: RunResult, fmt: str, **options: Any) -> str:
    """Render ``result`` in format ``fmt`` (a key of :data:`RENDERERS`)."""
    try:
        fn = RENDERERS[fmt]
    except KeyError:
        raise ValueError(f"unknown format {fmt!r}; known: {', '.join(RENDERERS)}") from None
    return fn(result, **options)


def write(result: RunResult, path: str, fmt: Optional[str] = None, **options: Any) -> str:
    """Render ``result`` to the file ``path`` (format from the extension unless ``fmt``);
    returns ``path``. The file is written atomically, never through a symbolic link."""
    fmt = fmt or format_for_path(path)
    if fmt not in RENDERERS:
        raise ValueError(f"unknown format {fmt!r}; known: {', '.join(RENDERERS)}")
    parent = os.path.dirname(os.path.abspath(path))
    os.makedirs(parent, exist_ok=True)
    r = RENDERERS[fmt]
    with atomic_open(path, newline="") as f:  # temp file + rename; never via a symlink
        if isinstance(r, Renderer):
            r.write_to(f, result, **options)
        else:  # any render(result, **options) -> str put in the registry's place
            f.write(r(result, **options))
    return path


def write_reports(result: RunResult, out_dir: str) -> List[str]:
    """Write every report with a file name (:data:`REPORT_FILES`: ``steps.csv``,
    ``events.csv``, ``sites.csv``, ``report.md``, ``report.html``, ``result.json``,
    ``trace.json``) into ``out_dir`` (created if needed); returns their paths in that order.
    (``result.jsonl`` is the runner's, not written here.)"""
    os.makedirs(out_dir, exist_ok=True)
    # no steps, no trace.json (and report.html links none); the parser loads no renderer
    traced = _load(".trace:has_steps")(result)
    return [write(result, os.path.join(out_dir, name), fmt)
            for name, fmt in REPORT_FILES.items() if traced or fmt != "trace"]


__all__ = [
    "EXTENSIONS", "GATE", "GATE_RENDERERS", "REGISTRY", "RENDERERS", "REPORT", "REPORT_FILES",
    "RESULT_STREAM", "Renderer", "compare_renderer_for_path", "emit_gate", "format_for_path",
    "gate_file_name", "gate_formats", "render", "render_gate", "renderer_for_path", "run_files",
    "write", "write_reports",
]
