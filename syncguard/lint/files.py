"""Which files the lint reads: the paths given, folders walked for ``*.py``, minus
``.gitignore``-style excludes (``--exclude``, ``[tool.syncguard.lint] exclude`` and the
``.gitignore`` at the root of each folder given), and the ``[tool.syncguard.lint]`` settings."""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Dict, Iterator, List, Optional, Sequence

import pathspec

#: the keys ``[tool.syncguard.lint]`` may hold
KEYS = ("exclude", "fail-on", "baseline", "format", "backend", "include-tests")

#: folders never walked into (a file given by name is always read)
_SKIP_DIRS = frozenset({"__pycache__", ".git", ".hg", ".svn", ".tox", ".nox", ".venv",
                        "node_modules", ".mypy_cache", ".ruff_cache", ".pytest_cache"})


@dataclasses.dataclass
class LintConfig:
    """Settings from ``[tool.syncguard.lint]`` (CLI flags override them)."""

    exclude: List[str] = dataclasses.field(default_factory=list)
    fail_on: Optional[str] = None
    baseline: Optional[str] = None
    format: Optional[str] = None
    #: which backends' syncs fail CI (any, cuda, npu) and whether test, benchmark and
    #: script findings do (see :mod:`.backends`, :mod:`.context`)
    backend: Optional[str] = None
    include_tests: Optional[bool] = None
    #: the pyproject.toml read (None when none was found)
    source: Optional[str] = None


def find_pyproject(start: str) -> Optional[str]:
    """The nearest ``pyproject.toml`` at or above ``start``."""
    d = os.path.abspath(start if os.path.isdir(start) else os.path.dirname(start) or ".")
    while True:
        p = os.path.join(d, "pyproject.toml")
        if os.path.isfile(p):
            return p
        parent = os.path.dirname(d)
        if parent == d:
            return None
        d = parent


def load_config(pyproject: Optional[str]) -> LintConfig:
    """``[tool.syncguard.lint]`` of ``pyproject`` (defaults when absent). Raises ValueError
    naming the file for an unknown key or a value of the wrong type."""
    if pyproject is None:
        return LintConfig()
    from ..driving.config import checked_table, load_tool_table

    table = checked_table(load_tool_table(pyproject).get("lint", {}), pyproject,
                          "tool.syncguard.lint", KEYS)
    cfg = LintConfig(source=pyproject)
    exclude = table.get("exclude", [])
    if isinstance(exclude, str):
        exclude = [exclude]
    if not isinstance(exclude, list) or not all(isinstance(x, str) for x in exclude):
        raise ValueError(f"{pyproject}: [tool.syncguard.lint] exclude: a list of patterns")
    cfg.exclude = list(exclude)
    inc = table.get("include-tests")
    if inc is not None and not isinstance(inc, bool):
        raise ValueError(f"{pyproject}: [tool.syncguard.lint] include-tests: must be true or "
                         f"false")
    cfg.include_tests = inc
    for key in ("fail-on", "baseline", "format", "backend"):
        v: Any = table.get(key)
        if v is not None and not isinstance(v, str):
            raise ValueError(f"{pyproject}: [tool.syncguard.lint] {key}: must be a string")
        setattr(cfg, key.replace("-", "_"), v)
    if cfg.baseline is not None and not os.path.isabs(cfg.baseline):
        cfg.baseline = os.path.join(os.path.dirname(pyproject), cfg.baseline)
    return cfg


def _gitignore(root: str) -> List[str]:
    try:
        with open(os.path.join(root, ".gitignore"), encoding="utf-8") as f:
            return f.read().splitlines()
    except (OSError, UnicodeDecodeError):
        return []


def iter_files(paths: Sequence[str], exclude: Sequence[str] = (),
               exclude_root: Optional[str] = None) -> Iterator[str]:
    """Python files under ``paths`` (files given by name always, folders walked for ``*.py``)
    minus ``exclude`` (gitignore patterns relative to ``exclude_root``, default the current
    directory) and each walked folder's own ``.gitignore``. Sorted, each file once."""
    root = os.path.abspath(exclude_root or os.getcwd())
    spec = pathspec.GitIgnoreSpec.from_lines(exclude)
    seen: Dict[str, None] = {}
    for p in paths:
        if os.path.isfile(p):
            seen.setdefault(p, None)
            continue
        own = pathspec.GitIgnoreSpec.from_lines(_gitignore(p))
        for d, dirs, files in os.walk(p):
            rel_d = os.path.relpath(d, p)
            keep = []
            for name in sorted(dirs):
                if name in _SKIP_DIRS or name.startswith("."):
                    continue
                sub = os.path.join(d, name)
                if _excluded(spec, root, sub, True) or own.match_file(
                        os.path.normpath(os.path.join(rel_d, name)) + "/"):
                    continue
                keep.append(name)
            dirs[:] = keep
            for name in sorted(files):
                if not name.endswith(".py"):
                    continue
                f = os.path.join(d, name)
                if _excluded(spec, root, f, False) or own.match_file(
                        os.path.normpath(os.path.join(rel_d, name))):
                    continue
                seen.setdefault(f, None)
    yield from seen


def _excluded(spec: pathspec.GitIgnoreSpec, root: str, path: str, is_dir: bool) -> bool:
    rel = os.path.relpath(os.path.abspath(path), root).replace(os.sep, "/")
    if rel.startswith("../"):
        rel = os.path.abspath(path).replace(os.sep, "/").lstrip("/")
    return spec.match_file(rel + "/" if is_dir else rel)
