"""``syncguard lint --diff REF``: the lines changed since a git ref (the pull-request use)."""

from __future__ import annotations

import os
import re
import subprocess
from typing import Dict, List, Set

_HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+(\d+)(?:,(\d+))? @@")


class DiffError(ValueError):
    """git could not give the changed lines (not a repository, unknown ref)."""


def _git(args: List[str], cwd: str) -> str:
    try:
        out = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True,
                             timeout=60)
    except (OSError, subprocess.SubprocessError) as exc:
        raise DiffError(f"git {' '.join(args)}: {exc}") from None
    if out.returncode != 0:
        raise DiffError(f"git {' '.join(args[:2])}: {out.stderr.strip().splitlines()[-1:]}")
    return out.stdout


def changed_lines(ref: str, cwd: str = ".") -> Dict[str, Set[int]]:
    """``{absolute real path: changed line numbers}`` in the working tree against ``ref``
    (added or modified lines; untracked files count whole, as ``ALL``)."""
    top = _git(["rev-parse", "--show-toplevel"], cwd).strip()
    _git(["rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"], cwd)
    out: Dict[str, Set[int]] = {}
    current = None
    for line in _git(["diff", "--unified=0", "--no-color", "--no-ext-diff", ref, "--"],
                     top).splitlines():
        if line.startswith("+++ "):
            name = line[4:]
            current = None if name == "/dev/null" else os.path.realpath(
                os.path.join(top, name[2:] if name.startswith("b/") else name))
            if current is not None:
                out.setdefault(current, set())
            continue
        m = _HUNK.match(line)
        if m and current is not None:
            start, n = int(m.group(1)), int(m.group(2) or 1)
            out[current].update(range(start, start + n))
    for name in _git(["ls-files", "--others", "--exclude-standard"], top).splitlines():
        out[os.path.realpath(os.path.join(top, name))] = ALL
    return out


class _All(set):  # type: ignore[type-arg]
    def __contains__(self, item: object) -> bool:
        return True


#: every line of a file (an untracked file)
ALL: Set[int] = _All()
