"""``syncguard lint`` sure of what it flags, silent on what does not sync, and no line lost
(issue 57): Python's own line numbers and character columns, allow markers only in comments,
types of methods and parameters inside a class, masks made by casts, helpers that always
sync, builtins over tensors, host values whatever a hint says, the NPU's mask writes."""

from __future__ import annotations

import json
import textwrap
from typing import Dict, List

import pytest

from syncguard.cli import main
from syncguard.lint.checker import CERTAIN, LIKELY, Finding, check_source  # noqa: F401


def _check(src: str, path: str = "m.py") -> List[Finding]:
    return [f for f in check_source(textwrap.dedent(src), path) if f.reported]


def _by_line(src: str, path: str = "m.py") -> Dict[int, Finding]:
    return {f.line: f for f in _check(src, path)}


# -- lines and columns as Python and editors count them ----------------------------------
@pytest.mark.parametrize("brk", ["\f", "\v", "\x1c", "\x1d", "\x1e", "\x85", "\u2028",
                                 "\u2029"])
def test_only_newlines_break_lines(brk: str) -> None:
    # a form feed (a ^L page break) or another character str.splitlines() breaks at is no
    # line break for Python: the allow comment on line 4 must not hide line 5's finding
    src = ("import torch\n\ndef f(x_gpu):\n"
           f"    a = 1  # note {brk} syncguard: allow[unrelated]\n"
           "    return x_gpu.item()\n")
    found = {f.line: f for f in check_source(src, "m.py")}
    assert found[5].reported and found[5].text == "return x_gpu.item()"


def test_carriage_returns_count_as_python_counts_them() -> None:
    src = "import torch\r\rdef f(x_gpu):\r\n    return x_gpu.item()\r"
    (f,) = check_source(src, "m.py")
    assert f.line == 4 and f.text == "return x_gpu.item()"


def test_columns_are_characters_not_bytes() -> None:
    src = 'import torch\n\ndef f(x_gpu):\n    s = "éé"; return x_gpu.item()\n'
    (f,) = check_source(src, "m.py")
    line = src.splitlines()[3]
    assert f.col == line.index("x_gpu.item")


def test_sarif_says_its_columns_are_code_points(tmp_path, monkeypatch, capsys) -> None:
    (tmp_path / "m.py").write_text('import torch\n\ndef f(x_gpu):\n    s = "\U0001F600"; '
                                   'return x_gpu.item()\n', encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    assert main(["lint", "m.py", "--format", "sarif", "-o", "out.sarif"]) == 1
    run = json.loads((tmp_path / "out.sarif").read_text())["runs"][0]
    assert run["columnKind"] == "unicodeCodePoints"
    region = run["results"][0]["locations"][0]["physicalLocation"]["region"]
    assert region["startColumn"] == 1 + len('    s = "\U0001F600"; return ')


def test_an_allow_marker_inside_a_string_allows_nothing() -> None:
    src = textwrap.dedent("""\
        import torch

        def f(x_gpu, log):
            log("use '# syncguard: allow[reason]' to allow a line", x_gpu.item())
            y = x_gpu.item()  # syncguard: allow[read once per request]
            return y
        """)
    found = {f.line: f for f in check_source(src, "m.py")}
    assert found[4].reported
    assert found[5].allowed == "read once per request"
