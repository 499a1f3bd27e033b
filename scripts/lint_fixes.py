"""Recall of `syncguard lint` on real sync-removal fixes of a project's history.

For each COMMIT of a git repository (a bare mirror is enough): the Python lines the commit
removed that read device data on the host by their text (the candidates: ``.item()``,
``.cpu()``, ``.tolist()``, ``int(``/``bool(`` of a tensor, ``nonzero``, ``if`` on a reduction,
``synchronize``...; judge them yourself, the script lists them), whether the lint flags each
one in the parent commit, with which severity, and whether the lines the commit added in its
place are silent. Each side is linted as a tree: the files of the changed file's folder and
the folder above it (so imports between neighbouring modules are resolved), never the whole
repository. Sources are read from git objects into a temporary folder, never kept.

    python scripts/lint_fixes.py --git-dir REPO.git COMMIT [COMMIT ...] [--json OUT]
    python scripts/lint_fixes.py --git-dir REPO.git --keep "c1:path:12" ...  (only those lines)
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from typing import Any, Dict, List, Optional, Set, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from syncguard.lint import lint_paths  # noqa: E402

#: lines that read device data on the host by their text (a grep a reviewer would run)
SYNC_TEXT = re.compile(
    r"\.item\(\)|\.cpu\(\)|\.tolist\(\)|\.numpy\(\)|nonzero|synchronize\(|\bbool\(|\bint\(|"
    r"\bfloat\(|repeat_interleave|\.unique\(|masked_select|torch\.where\([^,]*\)$|"
    r"\.to\(['\"]cpu|\.max\(\)\.|\bif\b.*\.(any|all|sum|max|min)\(|torch\.tensor\(|"
    r"non_blocking|\.copy_\(|\bmax\(\s*\w+\s*\)|range\(|\[\s*\w*mask\w*\s*\]")
_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
_CAP = 400


def git(git_dir: str, *args: str) -> str:
    return subprocess.run(["git", f"--git-dir={git_dir}", *args], check=True,
                          capture_output=True, text=True, errors="replace").stdout


def changed_lines(git_dir: str, commit: str
                  ) -> Dict[str, Tuple[Dict[int, str], Dict[int, str]]]:
    """{file: ({old line: text removed}, {new line: text added})} of ``commit``."""
    diff = git(git_dir, "diff", "-U0", f"{commit}^", commit, "--", "*.py")
    out: Dict[str, Tuple[Dict[int, str], Dict[int, str]]] = {}
    path: Optional[str] = None
    old = new = 0
    for ln in diff.splitlines():
        if ln.startswith("+++ "):
            path = ln[6:] if ln.startswith("+++ b/") else None
            continue
        if ln.startswith("--- "):
            if ln.startswith("--- a/"):
                path = ln[6:]
            continue
        m = _HUNK.match(ln)
        if m:
            old, new = int(m.group(1)), int(m.group(3))
            continue
        if path is None:
            continue
        rem, add = out.setdefault(path, ({}, {}))
        if ln.startswith("-"):
            rem[old] = ln[1:]
            old += 1
        elif ln.startswith("+"):
            add[new] = ln[1:]
            new += 1
    return out


def snapshot(git_dir: str, rev: str, path: str, dest: str) -> str:
    """The .py files of ``path``'s folder and the folder above it at ``rev``, written under
    ``dest``; returns where ``path`` is."""
    folder = os.path.dirname(os.path.dirname(path))
    names = git(git_dir, "ls-tree", "-r", "--name-only", rev, "--", folder or ".").splitlines()
    here = os.path.dirname(path)
    near = [n for n in names if n.endswith(".py") and (os.path.dirname(n) in (here, folder)
                                                      or n.startswith(here + "/"))]
    wanted: Set[str] = set(near[:_CAP]) | {path}
    for n in sorted(wanted):
        try:
            blob = subprocess.run(["git", f"--git-dir={git_dir}", "show", f"{rev}:{n}"],
                                  check=True, capture_output=True).stdout
        except subprocess.CalledProcessError:
            continue
        target = os.path.join(dest, n)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "wb") as f:
            f.write(blob)
    return os.path.join(dest, path)


def findings_at(root: str, path: str) -> Dict[int, Any]:
    rep = lint_paths([os.path.join(root, os.path.dirname(os.path.dirname(path)) or ".")],
                     root=root)
    return {f.line: f for f in rep.findings if f.path == path and f.reported}


def evaluate(git_dir: str, commit: str, keep: Optional[Set[Tuple[str, int]]] = None
             ) -> List[Dict[str, Any]]:
    rows: List[Dict[str, Any]] = []
    for path, (rem, add) in changed_lines(git_dir, commit).items():
        cands = {n: t for n, t in rem.items() if (keep is not None and (path, n) in keep) or (
            keep is None and SYNC_TEXT.search(t) and not t.strip().startswith("#"))}
        if not cands:
            continue
        with tempfile.TemporaryDirectory() as d_old, tempfile.TemporaryDirectory() as d_new:
            snapshot(git_dir, f"{commit}^", path, d_old)
            before = findings_at(d_old, path)
            after: Dict[int, Any] = {}
            if add:
                snapshot(git_dir, commit, path, d_new)
                after = findings_at(d_new, path)
        new_flags = sorted(n for n in add if n in after)
        for n, text in sorted(cands.items()):
            f = before.get(n)
            rows.append({
                "commit": commit, "file": path, "line": n, "text": text.strip(),
                "flagged": f is not None, "severity": f.severity if f else None,
                "api": f.api if f else None, "context": getattr(f, "context", None),
                "backend": getattr(f, "backend", None),
                "added_lines_flagged": [f"{k}: {after[k].api} {after[k].severity}"
                                        for k in new_flags],
            })
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--git-dir", required=True)
    ap.add_argument("commits", nargs="*")
    ap.add_argument("--keep", action="append", default=[], metavar="COMMIT:PATH:LINE",
                    help="judge only these removed lines (repeatable)")
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    keep: Dict[str, Set[Tuple[str, int]]] = {}
    for k in a.keep:
        c, p, n = k.rsplit(":", 2)
        keep.setdefault(c, set()).add((p, int(n)))
    rows: List[Dict[str, Any]] = []
    for c in a.commits or list(keep):
        rows += evaluate(a.git_dir, c, keep.get(c) if keep else None)
    for r in rows:
        mark = f"{r['severity']:7s} {r['api']}" if r["flagged"] else "MISS"
        after = "silent after" if not r["added_lines_flagged"] else \
            f"added lines flagged: {r['added_lines_flagged']}"
        print(f"{r['commit'][:10]} {r['file']}:{r['line']}: {mark} | {r['text'][:90]} | {after}")
    flagged = sum(r["flagged"] for r in rows)
    print(f"{flagged}/{len(rows)} removed candidate lines flagged in the parent; "
          f"{sum(r['severity'] == 'certain' for r in rows)} certain")
    if a.json:
        with open(a.json, "w", encoding="utf-8") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
