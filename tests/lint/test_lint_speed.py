"""What the lint's speed work must leave unchanged (no timing here: ``benchmarks/bench_lint.py``
measures). Each shortcut is checked against the slower code it replaced, on this repository's
own sources (about 250 files, some 450 candidate lines):

- the parts listed by exact node class (``checker._EV``/``_STMT``): a node of a subclass is
  read by its base's part;
- the join of branches that copies nothing for an empty body, against the join that copied
  every state;
- the answers ``by_name``/``by_annotation`` keep, against computing them each time, and the
  hint text made without ``ast.unparse`` against ``ast.unparse``;
- the garbage collector's settings, restored after a lint;
- ``--jobs``: the findings of 2 and 3 workers against one process, a stale lookup read again,
  a dead worker's files read here, an import the line scan misses;
- absolute and display paths made once per file against ``os.path.abspath`` and
  ``display_path``; the import scan by lines against the pattern over the whole source.
"""

from __future__ import annotations

import ast
import dataclasses
import gc
from typing import Any, Dict, List, Set

import pytest
from _paths import ROOT

from syncguard.lint import checker, infer, lint_paths, statements
from syncguard.lint.files import iter_files, read_source

CORPUS = [str(ROOT / d) for d in ("syncguard", "tests", "examples", "benchmarks",
                                  "sglang_ascend_sampling")]


def _findings() -> List[Dict[str, Any]]:
    rep = lint_paths(CORPUS, root=str(ROOT))
    assert rep.files > 100 and not rep.errors
    return [dataclasses.asdict(f) for f in rep.findings]


@pytest.fixture(scope="module")
def reference() -> List[Dict[str, Any]]:
    found = _findings()
    assert len(found) > 300
    return found


SUBCLASSED = """\
import torch

async def f(x, device):
    y = x.to(device)
    if y.sum():
        raise ValueError(f"{y}")
    await y
    return y.item()
"""


def test_a_node_of_a_subclass_is_read_by_its_base_part():
    """The parts are listed by exact node class; a node of a subclass (a tool's, never
    ``ast.parse``'s) is read by the part of its nearest listed base, and a class no table
    lists (``raise``, ``await``) by the part of ``ast.AST``."""
    want = [dataclasses.asdict(f) for f in checker.check_source(SUBCLASSED, "s.py")]
    assert [f["line"] for f in want] == [5, 6, 8]
    tree = ast.parse(SUBCLASSED)
    made: Dict[type, type] = {}
    for node in ast.walk(tree):
        if isinstance(node, (ast.Call, ast.If, ast.Return, ast.Raise, ast.Await,
                             ast.JoinedStr, ast.Assign, ast.AsyncFunctionDef)):
            cls = node.__class__
            node.__class__ = made.setdefault(cls, type(f"My{cls.__name__}", (cls,), {}))
    got = [dataclasses.asdict(f) for f in checker.check_tree(tree, SUBCLASSED, "s.py")]
    assert got == want


def _branch_copying(self: Any, *bodies: Any) -> None:
    """``statements.branch`` as first written: each body from a copy of the start state."""
    start = dict(self.env)
    start_shapes = dict(self.shapes)
    start_synced = self.synced
    ends = []
    end_shapes = []
    synced = []
    for b in bodies:
        self.env = dict(start)
        self.shapes = dict(start_shapes)
        self.synced = start_synced
        self.body(b)
        ends.append(self.env)
        end_shapes.append(self.shapes)
        synced.append(self.synced)
    self.synced = all(synced)
    self.shapes = {k: r for k, r in end_shapes[0].items()
                   if all(e.get(k) == r for e in end_shapes[1:])}
    changed: Set[str] = set()
    get = start.get
    start_items = start.items()
    for e in ends:
        changed.update(k for k, _ in e.items() - start_items)
    merged = start
    for k in changed:
        vs = [e.get(k, get(k, infer.UNKNOWN)) for e in ends]
        v = vs[0]
        for w in vs[1:]:
            v = infer.join(v, w)
        merged[k] = v
    self.env = merged


def test_join_without_copies_equals_the_copying_join(reference, monkeypatch):
    monkeypatch.setattr(statements, "branch", _branch_copying)
    assert _findings() == reference


BRANCHY = """\
import torch

def f(x, flag, items, device):
    y = torch.zeros(4, device=device)
    h = torch.zeros(4)
    if flag:
        y = h
    if y.sum():
        pass
    for i in items:
        if i:
            z = torch.ones(2, device=device)
        else:
            z = torch.ones(2)
    else:
        w = torch.ones(3, device=device)
    if z.any():
        pass
    while flag:
        pass
    else:
        v = y
    if isinstance(x, float):
        pass
    else:
        x = torch.ones(1, device=device)
    if x:
        pass
    if w.item() and v.item():
        pass
    s = torch.zeros((2, 2), device=device)
    if flag:
        s = torch.zeros(4, device=device)
    s[0] = 1
"""


def test_branchy_function_same_both_ways(monkeypatch):
    fast = [dataclasses.asdict(f) for f in checker.check_source(BRANCHY, "b.py")]
    monkeypatch.setattr(statements, "branch", _branch_copying)
    slow = [dataclasses.asdict(f) for f in checker.check_source(BRANCHY, "b.py")]
    assert fast == slow
    # joined: y host or device, z and w tensors, x a Python value or a device tensor
    assert [(f["line"], f["severity"]) for f in fast] == [
        (8, "likely"), (17, "likely"), (29, "likely"), (34, "likely")]


def _corpus_trees() -> List[ast.Module]:
    trees = []
    for p in iter_files(CORPUS):
        try:
            trees.append(ast.parse(read_source(p)))
        except (SyntaxError, ValueError):  # pragma: no cover - the corpus parses
            continue
    return trees


def test_kept_answers_equal_computed_ones():
    names: Set[str] = set()
    hints: List[ast.expr] = []
    for tree in _corpus_trees():
        for node in ast.walk(tree):
            if isinstance(node, ast.Name):
                names.add(node.id)
            elif isinstance(node, ast.Attribute):
                names.add(node.attr)
            elif isinstance(node, ast.arg) and node.annotation is not None:
                hints.append(node.annotation)
            elif isinstance(node, ast.AnnAssign):
                hints.append(node.annotation)
    assert len(names) > 1000 and len(hints) > 500
    for n in sorted(names):
        assert infer.by_name(n) == infer.by_name.__wrapped__(n) == infer.by_name(n), n
    made = 0
    for h in hints:
        for sub in ast.walk(h):
            if isinstance(sub, ast.expr):
                text = infer.hint_text(sub)
                if text is not None:
                    made += 1
                    assert text == ast.unparse(sub)
        said = h.value if isinstance(h, ast.Constant) and isinstance(h.value, str) else (
            ast.unparse(h))
        want = infer._by_hint_text.__wrapped__(said)
        assert infer.by_annotation(h) == want == infer.by_annotation(h), ast.unparse(h)
    assert made > 500


@pytest.mark.parametrize("hint", ["a", "a.b.C", "None", "X[a]", "X[a,]", "X[a, b.c]",
                                  "Optional[Dict[str, torch.Tensor]]", "Tuple[int, ...]",
                                  "X[()]", "(1).real", "x[1:2]", "'a'", "a | None",
                                  "a | b.c | None", "a | (b | c)", "(a | b) | c",
                                  "X[a | None, Y[b] | c]", "(a | b).c", "a | b[c | d]",
                                  "a | 1", "a or None",
                                  "Callable[[int], str]", "X[*ts]"])
def test_hint_text_is_unparse_or_nothing(hint):
    node = ast.parse(hint, mode="eval").body
    text = infer.hint_text(node)
    assert text is None or text == ast.unparse(node)


def test_collector_settings_restored(tmp_path):
    (tmp_path / "m.py").write_text("import torch\nx = torch.ones(2).cuda()\nif x:\n    pass\n")
    old = gc.get_threshold()
    try:
        gc.set_threshold(700, 10, 10)
        lint_paths([str(tmp_path)])
        assert gc.get_threshold() == (700, 10, 10)
        gc.set_threshold(0, 10, 10)  # collection off: left off
        lint_paths([str(tmp_path)])
        assert gc.get_threshold() == (0, 10, 10)
    finally:
        gc.set_threshold(*old)


# -- several processes (--jobs): the same findings --------------------------------------------
@pytest.fixture()
def stats(monkeypatch) -> List[Dict[str, int]]:
    """Every tree forks workers, however small; the counts of each parallel lint."""
    from syncguard.lint import parallel

    seen: List[Dict[str, int]] = []
    real = parallel.lint_ordered

    def counted(*a: Any, **k: Any) -> Any:
        out = real(*a, **k)
        seen.append(out[1])
        return out

    monkeypatch.setattr(parallel, "MIN_CHARS", 0)
    monkeypatch.setattr(parallel, "lint_ordered", counted)
    return seen


def _jobs_findings(paths: List[str], jobs: int) -> List[Dict[str, Any]]:
    rep = lint_paths(paths, root=str(ROOT), jobs=jobs)
    return [dataclasses.asdict(f) for f in rep.findings] + [{"errors": rep.errors}]


def test_jobs_same_findings(reference, stats):
    if not __import__("syncguard.lint.parallel", fromlist=["x"]).can_fork():
        pytest.skip("no fork here: --jobs runs in one process")
    for jobs in (2, 3):
        assert _jobs_findings(CORPUS, jobs)[:-1] == reference
    assert [s["workers"] for s in stats] == [2, 3]
    assert all(s["kept"] > 0 and s["kept"] + s["again"] > 200 for s in stats)


def test_jobs_a_stale_lookup_is_read_again(reference, stats, monkeypatch):
    from syncguard.lint import parallel

    if not parallel.can_fork():
        pytest.skip("no fork here")
    real = parallel._run_workers

    def stale(*a: Any, **k: Any) -> Any:
        results = real(*a, **k)
        for _, _, reads, _ in results.values():
            if reads:  # the first file that looked anything up saw another file's write
                reads[next(iter(reads))] = len(results) + 1
                break
        return results

    monkeypatch.setattr(parallel, "_run_workers", stale)
    assert _jobs_findings(CORPUS, 2)[:-1] == reference
    assert stats[0]["again"] >= 1


def test_jobs_a_dead_worker_leaves_its_files_here(reference, stats, monkeypatch):
    from syncguard.lint import parallel

    if not parallel.can_fork():
        pytest.skip("no fork here")

    def dies(conn: Any, *a: Any) -> None:
        conn.recv()
        raise SystemExit(3)

    monkeypatch.setattr(parallel, "_serve", dies)
    assert _jobs_findings(CORPUS, 2)[:-1] == reference
    assert stats[0]["kept"] == 0 and stats[0]["again"] > 200


def test_jobs_imports_the_line_scan_misses(tmp_path, stats):
    """``from pkg import (sub)`` and a module read before the module it imports: the one-process
    lint does not know ``sub`` yet where a worker may; the findings follow the one-process
    lint."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a_slow.py").write_text("import torch\n\n" + "".join(
        f"def f{i}(x):\n    y = x.cuda()\n    if y.sum():\n        return y\n    return x\n\n"
        for i in range(400)))
    (pkg / "b.py").write_text("import torch\nimport pkg.a_slow\nfrom pkg import (\n"
                              "    c_fast,\n)\n\ndef g():\n    t = c_fast.make()\n"
                              "    if t:\n        pass\n    return t\n")
    (pkg / "c_fast.py").write_text("import torch\n\ndef make():\n"
                                   "    return torch.ones(2, device='cuda')\n")
    one = _jobs_findings([str(tmp_path)], 1)
    assert _jobs_findings([str(tmp_path)], 2) == one
    # one process: b.py is read before c_fast.py, whose make() is not known there yet
    assert not any(f.get("path", "").endswith("b.py") for f in one)
    assert any(f.get("path", "").endswith("a_slow.py") for f in one)
    assert stats[-1]["workers"] == 2


def test_jobs_option(tmp_path, capsys):
    from syncguard.cli import main

    (tmp_path / "m.py").write_text("import torch\nx = torch.ones(2).cuda()\nif x:\n    pass\n")
    assert main(["lint", str(tmp_path), "--jobs", "0"]) == 2
    assert "--jobs: must be 1 or more" in capsys.readouterr().err
    outs = []
    for j in ("1", "2"):
        assert main(["lint", str(tmp_path), "-j", j, "--format", "json"]) == 1
        got = __import__("json").loads(capsys.readouterr().out)
        got["summary"].pop("seconds", None)
        outs.append(got)
    assert outs[0] == outs[1]


def test_shown_paths_are_display_paths(tmp_path, monkeypatch):
    """The display path of each file, computed once under the root, is ``display_path``."""
    from syncguard.core.sites import display_path
    from syncguard.lint import _shown

    (tmp_path / "a" / "b").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "a")
    files = ["x.py", "./x.py", "b/../x.py", "b/y.py", str(tmp_path / "a" / "b" / "y.py"),
             str(tmp_path / "z.py"), "../z.py", "<stdin>", "/x.py", "..x/y.py"]
    for root in (None, str(tmp_path), "b", "/", "..", str(tmp_path / "a" / "b")):
        assert _shown(files, root, display_path) == {p: display_path(p, root) for p in files}


def test_project_paths_are_abspaths(tmp_path, monkeypatch):
    from syncguard.lint.project import Project

    (tmp_path / "pkg" / "sub").mkdir(parents=True)
    for f in ("pkg/__init__.py", "pkg/sub/__init__.py", "pkg/sub/m.py", "loose.py"):
        (tmp_path / f).write_text("")
    monkeypatch.chdir(tmp_path / "pkg")
    files = ["sub/m.py", "./sub/../sub/m.py", "__init__.py", "../loose.py",
             str(tmp_path / "pkg" / "sub" / "__init__.py")]
    project = Project(files, [".", str(tmp_path)])
    import os

    for f in files:
        assert project.abspath(f) == os.path.abspath(f)
    assert project.module_of("sub/m.py") == "pkg.sub.m"
    assert project.modules["sub.m"] == project.modules["pkg.sub.m"]
    assert project.module_of("../loose.py") == "loose"


@pytest.mark.parametrize("src", [
    "", "import", "import a", "x\nimport a\nfrom . import b", "importx\n  from a import b",
    "from a import (b,\n c)", "\nimport a.b as c, d", "x = 'import'\nimport os",
    "from . import x\r\nimport y", "\t from ..a.b import c # import d\n", "s = 'a'; import b"])
def test_import_lines_are_the_pattern_matches(src):
    from syncguard.lint.project import _IMPORT, _import_lines

    want = [(m.start(), m.end(), m.groups()) for m in _IMPORT.finditer(src)]
    assert [(m.start(), m.end(), m.groups()) for m in _import_lines(src)] == want


def test_import_lines_on_the_corpus():
    from syncguard.lint.project import _IMPORT, _import_lines

    for p in iter_files(CORPUS):
        src = read_source(p)
        assert [m.span() for m in _import_lines(src)] == [m.span() for m in
                                                           _IMPORT.finditer(src)], p
