"""``syncguard lint --diff REF``: the lines changed since a git ref (the pull-request use)."""

from __future__ import annotations

import os
import re
import subprocess
from typing import Dict, List, Set

from ..errors import SyncguardError

_HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+(\d+)(?:,(\d+))? @@")


class DiffError(SyncguardError, ValueError):
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
            name = unquote(line[4:].rstrip("\t"))  # git may end the name with a tab
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
        out[os.path.realpath(os.path.join(top, unquote(name)))] = ALL
    return out


_ESCAPES = {"a": 7, "b": 8, "t": 9, "n": 10, "v": 11, "f": 12, "r": 13, '"': 34, "\\": 92}


def unquote(name: str) -> str:
    """A path as git prints it, unquoted: git puts a name with a tab, a newline, a quote, a
    backslash or (with ``core.quotePath``, the default) any byte over 0x7f in double quotes
    with C escapes and octal bytes (``"caf\\303\\251.py"``); the bytes are decoded as the
    file system names them (``os.fsdecode``)."""
    if len(name) < 2 or not (name.startswith('"') and name.endswith('"')):
        return name
    body, out, i = name[1:-1], bytearray(), 0
    while i < len(body):
        ch = body[i]
        if ch != "\\" or i + 1 == len(body):
            out += ch.encode("utf-8", "surrogateescape")
            i += 1
            continue
        nxt = body[i + 1]
        if nxt in "01234567":
            j = i + 1
            while j < min(i + 4, len(body)) and body[j] in "01234567":
                j += 1
            out.append(int(body[i + 1:j], 8) & 0xFF)
            i = j
        else:
            out.append(_ESCAPES.get(nxt, ord(nxt) if ord(nxt) < 0x80 else 0x3F))
            i += 2
    return os.fsdecode(bytes(out))


class _All(set):  # type: ignore[type-arg]
    def __contains__(self, item: object) -> bool:
        return True


#: every line of a file (an untracked file)
ALL: Set[int] = _All()
