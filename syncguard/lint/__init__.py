"""``syncguard lint``: find the lines that can make a hidden host-device sync, statically.

:func:`lint_paths` reads the files, :mod:`.checker` finds the candidate lines and ranks them
(certain / likely / silent) with a small dataflow over each function (:mod:`.infer`), the
APIs come from :mod:`syncguard.core.syncapis` (the interceptors' table). :mod:`.runs` marks findings
confirmed / cleared / unexercised from result folders, :mod:`.lines` records which candidate
lines a run executed, :mod:`.render` writes text, GitHub annotations, SARIF and JSON.
Torch-free.
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import gc
import os
import time
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple, Union

from ..core.sites import display_path
from ..process.untrusted import UntrustedError
from . import parallel
from .checker import CERTAIN, LIKELY, SEVERITIES, SILENT, Finding, check_source, check_tree
from .files import iter_files, read_source
from .notebook import cell_error, is_notebook, notebook_source, to_cells
from .project import Project

__all__ = ["CERTAIN", "LIKELY", "SILENT", "SEVERITIES", "Finding", "LintReport", "lint_paths",
           "candidates"]


@dataclasses.dataclass
class LintReport:
    """What one lint found: every candidate line (``findings``, silent ones included) of
    ``files`` files, the files that did not parse (``errors``: ``path: message``) and the
    time it took (``seconds``)."""

    findings: List[Finding]
    files: int
    errors: List[str]
    seconds: float
    #: the files read, as shown in findings
    paths: List[str] = dataclasses.field(default_factory=list)
    #: ``errors`` as ``{"path", "line", "message"}`` (line 0 when the file has none): each
    #: is an error in every output format and fails the lint (as a linter's syntax error)
    error_items: List[Dict[str, Any]] = dataclasses.field(default_factory=list)

    @property
    def reported(self) -> List[Finding]:
        """Findings to show: certain or likely and not allowed inline."""
        return [f for f in self.findings if f.reported]

    def counts(self) -> Dict[str, int]:
        out = {s: 0 for s in SEVERITIES}
        out["allowed"] = 0
        for f in self.findings:
            if f.allowed is not None and f.severity != SILENT:
                out["allowed"] += 1
            else:
                out[f.severity] += 1
        return out


def lint_file(path: str, display: Optional[str] = None,
              project: Optional[Project] = None, source: Optional[str] = None
              ) -> List[Finding]:
    """Candidate lines of one file (raises OSError, SyntaxError, UnicodeDecodeError, and
    ValueError for a file it will not read: a FIFO, a device, one over the size cap); with
    ``project``, read as one module of that tree (:mod:`.project`)."""
    if source is None:
        source = read_source(path)
    shown = display or path
    with _few_collections():
        if is_notebook(path):  # code cells, one source, lines mapped back to cells
            py, where = notebook_source(source)
            try:
                return to_cells(check_source(py, shown), where)
            except SyntaxError as exc:
                raise cell_error(exc, where) from None
        if project is None:
            return check_source(source, shown)
        return check_tree(ast.parse(source, filename=shown), source, shown, project, path)


def lint_paths(paths: Sequence[str], exclude: Sequence[str] = (),
               exclude_root: Optional[str] = None, root: Optional[str] = None,
               jobs: int = 1) -> LintReport:
    """Lint ``paths`` (files and folders, see :func:`.files.iter_files`); finding paths are
    shown relative to ``root`` (default: the current directory) when under it. ``jobs``:
    processes to read a large tree in (the same findings, :mod:`.parallel`)."""
    t0 = time.perf_counter()
    with _few_collections():
        return _lint_paths(paths, exclude, exclude_root, root, t0, jobs)


@contextlib.contextmanager
def _few_collections() -> Iterator[None]:
    """The garbage collector's young generation collected every 100,000 allocations instead
    of every 700 while the lint runs (restored after): a parsed module is tens of thousands
    of objects with no cycle among them, and the collections ``ast.parse`` triggers walk
    them for nothing (a tenth of the lint's time)."""
    old = gc.get_threshold()
    if 0 < old[0] < 100_000:  # 0: collection is off, left so
        gc.set_threshold(100_000, *old[1:])
    try:
        yield
    finally:
        gc.set_threshold(*old)


def _lint_paths(paths: Sequence[str], exclude: Sequence[str], exclude_root: Optional[str],
                root: Optional[str], t0: float, jobs: int) -> LintReport:
    findings: List[Finding] = []
    errors: List[str] = []
    items: List[Dict[str, Any]] = []
    shown_paths: List[str] = []
    files = list(iter_files(paths, exclude, exclude_root))
    # the whole tree first: each module is read after the modules it imports, so what they
    # export (device tensors, host values) is known where it is used
    sources: Dict[str, str] = {}
    read_errors: Dict[str, BaseException] = {}
    for p in files:
        try:  # the safe reader: no FIFO, no device, a size cap, PEP 263 encodings
            sources[p] = read_source(p)
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            read_errors[p] = exc
    project = Project(files, paths)
    order = {p: i for i, p in enumerate(files)}
    shown_of = _shown(files, root, display_path)
    deps = project.deps(files, sources)
    ordered = project.order(files, sources, deps)

    def one(p: str) -> Union[List[Finding], Tuple[int, str]]:
        return _lint_one(p, shown_of[p], project, sources.get(p), read_errors.get(p))

    if jobs > 1:
        outcomes, _ = parallel.lint_ordered(ordered, project, deps,
                                            {p: len(s) for p, s in sources.items()}, jobs, one)
    else:
        outcomes = {}
        for p in ordered:
            outcomes[p] = one(p)
            sources.pop(p, None)
    for p in sorted(files, key=order.__getitem__):
        shown = shown_of[p]
        shown_paths.append(shown)
        got = outcomes.get(p, [])
        if isinstance(got, list):
            findings += got
        else:
            line, msg = got
            items.append({"path": shown, "line": line, "message": msg})
            errors.append(f"{shown}:{line}: {msg}" if line else f"{shown}: {msg}")
    return LintReport(findings, len(shown_paths), errors, time.perf_counter() - t0,
                      shown_paths, items)


def _shown(files: List[str], root: Optional[str], display_path: Any) -> Dict[str, str]:
    """``display_path(p, root)`` of each file; a file under the root without asking the
    working folder for each (its normalised absolute path, less the root's)."""
    cwd = os.getcwd()
    base = os.path.abspath(root if root is not None else cwd)
    out: Dict[str, str] = {}
    for p in files:
        path = os.path.normpath(os.path.join(cwd, p))  # os.path.abspath(p)
        if not p.startswith("<") and base != os.sep and path.startswith(base + os.sep):
            out[p] = path[len(base) + 1:].replace(os.sep, "/")
        else:
            out[p] = display_path(p, root)
    return out


def _lint_one(p: str, shown: str, project: Project, source: Optional[str],
              read_error: Optional[BaseException]) -> Union[List[Finding], Tuple[int, str]]:
    """The findings of file ``p`` in ``project``, or (line, message) of why it was not read."""
    line, msg = 0, ""
    try:
        if read_error is not None:
            raise read_error
        return lint_file(p, shown, project, source)
    except SyntaxError as exc:
        line, msg = exc.lineno or 0, f"does not parse: {exc.msg}"
    except UntrustedError as exc:  # its message names the file: said once, shown
        msg = f"not read: {str(exc).rpartition(f'{p}: ')[2] or exc}"
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        msg = f"cannot read: {exc}"
    except (RecursionError, MemoryError):
        msg = "nested too deeply to analyse"
    except Exception as exc:  # a bug of the lint must not hide the other files
        msg = f"internal error of the lint: {type(exc).__name__}: {exc}"
    return line, msg


def candidates(paths: Sequence[str]) -> Dict[str, List[int]]:
    """Every candidate line (silent ones included) under ``paths``, by absolute real path:
    the lines a run records for ``syncguard lint --with-run`` (:mod:`.lines`)."""
    out: Dict[str, List[int]] = {}
    rep = lint_paths(paths, root="/")
    for f in rep.findings:
        real = os.path.realpath(os.path.join("/", f.path))
        out.setdefault(real, []).append(f.line)
    return out
