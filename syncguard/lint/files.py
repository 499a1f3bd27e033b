"""Which files the lint reads: the paths given, folders walked for ``*.py``, minus
``.gitignore``-style excludes (``--exclude``, ``[tool.syncguard.lint] exclude`` and the
``.gitignore`` at the root of each folder given), and the ``[tool.syncguard.lint]`` settings."""

from __future__ import annotations

import dataclasses
import io
import os
import tokenize
from typing import TYPE_CHECKING, Any, Dict, Iterator, List, Optional, Sequence

if TYPE_CHECKING:
    import pathspec

from ..driving.config import checked_table, load_tool_table
from ..process.untrusted import UntrustedError, read_bytes, read_text

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


def load_config(pyproject: Optional[str]) -> LintConfig:
    """``[tool.syncguard.lint]`` of ``pyproject`` (defaults when absent). Raises ValueError
    naming the file for an unknown key or a value of the wrong type."""
    if pyproject is None:
        return LintConfig()
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


#: a Python file larger than this is not linted but reported as an error (a 50 MB generated
#: file took minutes and gigabytes; the largest hand-written modules are well under 1 MiB)
MAX_SOURCE_BYTES = 4 << 20
#: a ``.gitignore`` larger than this is not read
_MAX_GITIGNORE_BYTES = 1 << 20


def read_source(path: str) -> str:
    """The text of the Python file ``path``, read through the project's one loader of
    untrusted files (a FIFO, device or folder named ``*.py`` refused without blocking, at most
    :data:`MAX_SOURCE_BYTES`) and decoded as Python decodes it (PEP 263: a ``coding:`` cookie
    or a BOM, else UTF-8). Raises :class:`~syncguard.process.untrusted.UntrustedError`,
    SyntaxError (a bad cookie) or UnicodeDecodeError."""
    raw = read_bytes(path, "Python source", MAX_SOURCE_BYTES)
    encoding, _ = tokenize.detect_encoding(io.BytesIO(raw).readline)
    return raw.decode(encoding)


def gitignore_spec(lines: Sequence[str]) -> pathspec.GitIgnoreSpec:
    """A gitignore spec of ``lines`` as git reads them: a line git cannot read (a lone ``!``,
    a pattern ending in ``\\``) is ignored as git ignores it, never an error; matched by
    RE2 when installed (linear time: a pattern like ``*a*a*a*a*a*a*azz`` against a long name
    backtracks exponentially in Python's ``re``)."""
    import pathspec  # excludes only: the command line's parser imports this module

    valid = []
    for line in lines:
        try:
            pathspec.GitIgnoreSpec.from_lines([line], backend="simple")
        except (ValueError, TypeError):  # GitIgnorePatternError is a ValueError
            continue
        valid.append(line)
    return pathspec.GitIgnoreSpec.from_lines(valid, backend=_BACKEND)


def _backend() -> str:
    try:
        import re2  # noqa: F401  (google-re2: pathspec's linear-time backend)
    except ImportError:  # pragma: no cover - a dependency; Python's re as the fallback
        return "simple"
    return "re2"


_BACKEND = _backend()


def _gitignore(root: str) -> List[str]:

    try:
        return read_text(os.path.join(root, ".gitignore"), ".gitignore",
                         _MAX_GITIGNORE_BYTES).splitlines()
    except UntrustedError:  # missing, not a file, not UTF-8: no patterns, nothing excluded
        return []


def iter_files(paths: Sequence[str], exclude: Sequence[str] = (),
               exclude_root: Optional[str] = None) -> Iterator[str]:
    """Python files under ``paths`` (files given by name always, folders walked for ``*.py``)
    minus ``exclude`` (gitignore patterns relative to ``exclude_root``, default the current
    directory) and each walked folder's own ``.gitignore``. Sorted, each file once."""
    root = os.path.abspath(exclude_root or os.getcwd())
    spec = gitignore_spec(exclude)
    seen: Dict[str, None] = {}
    for p in paths:
        if not os.path.isdir(p):  # a file given by name, even a FIFO: read_source says why
            seen.setdefault(p, None)
            continue
        own = gitignore_spec(_gitignore(p))
        for d, dirs, files in os.walk(p):
            rel_d = os.path.relpath(d, p)
            keep = []
            for name in sorted(dirs):
                if name in _SKIP_DIRS or name.startswith("."):
                    continue
                sub = os.path.join(d, name)
                if _excluded(spec, root, sub, True) or _match(
                        own, os.path.normpath(os.path.join(rel_d, name)) + "/"):
                    continue
                keep.append(name)
            dirs[:] = keep
            for name in sorted(files):
                if not name.endswith(".py"):
                    continue
                f = os.path.join(d, name)
                if _excluded(spec, root, f, False) or _match(
                        own, os.path.normpath(os.path.join(rel_d, name))):
                    continue
                seen.setdefault(f, None)
    yield from seen


def _excluded(spec: pathspec.GitIgnoreSpec, root: str, path: str, is_dir: bool) -> bool:
    if not len(spec):  # no pattern: nothing excluded
        return False
    rel = os.path.relpath(os.path.abspath(path), root).replace(os.sep, "/")
    if rel.startswith("../"):
        rel = os.path.abspath(path).replace(os.sep, "/").lstrip("/")
    return _match(spec, rel + "/" if is_dir else rel)


def _match(spec: pathspec.GitIgnoreSpec, rel: str) -> bool:
    # a file name that is not UTF-8 (lone surrogates from the file system) as valid text:
    # its UTF-8 parts kept, each other byte U+FFFD (RE2 matches UTF-8 text only)
    if not len(spec):
        return False
    try:
        return spec.match_file(rel)
    except UnicodeEncodeError:
        return spec.match_file(rel.encode("utf-8", "surrogateescape").decode("utf-8",
                                                                             "replace"))
