"""Where users look for a site's lineage verdict (``--lineage``): the terminal and Markdown
reports (one line per per-step site) and the gate's GitHub/SARIF messages; nothing of it
without lineage."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict

import pytest
from _cli import cli, write_result

LIN: Dict[str, Any] = {"verdict": "hoistable", "roots": "host data at batch.py:7", "ops": "ge, all",
                       "uploads": "batch.py:7", "digest": "abc", "once": 0}
HOIST = ("hoistable: depends only on host data uploaded at batch.py:7 (and constants) via "
         "ge, all: compute it on the host where that data is built, as SGLang's fix did; "
         "the same value every step")


def _result(tmp_path: Path, lineage: bool) -> Path:
    extra = {"lineage": LIN} if lineage else {}
    return write_result(tmp_path / "result.jsonl",
                        events=[{"step": i, **extra} for i in (1, 2)])


def test_show_and_markdown_print_one_line_per_site(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture) -> None:
    rc, out, _ = cli(capsys, "show", str(_result(tmp_path, True)), "--width", "400")
    assert rc == 0
    flat = " ".join(out.split())
    assert "Why, and how to remove it (lineage)" in flat
    assert f"legacy: model.py:3 (Tensor.__bool__): {HOIST}" in flat
    from syncguard.renderers import markdown
    from syncguard.results import loader

    md = markdown.render(loader.load(str(tmp_path / "result.jsonl")))
    assert "Why, and how to remove it (lineage):" in md
    assert "- legacy: `model.py:3` (Tensor.\\_\\_bool\\_\\_): hoistable" in md or \
        "- legacy: `model.py:3` (Tensor.__bool__): hoistable" in md, md
    from syncguard.renderers import html

    page = html.render(loader.load(str(tmp_path / "result.jsonl")), plots=False)
    assert "<h3>Why, and how to remove it (lineage)</h3>" in page
    assert "<code>model.py:3</code> (Tensor.__bool__): hoistable" in page


def test_gate_messages_carry_the_hint(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    res = _result(tmp_path, True)
    out = tmp_path / "gh.txt"
    rc, _, _ = cli(capsys, "check", str(res), "--max-syncs", "0", "--format", "github",
                   "-o", str(out))
    assert rc == 1
    assert "Lineage: hoistable: depends only on host data uploaded at batch.py:7" in \
        out.read_text()
    sarif = tmp_path / "s.sarif"
    cli(capsys, "check", str(res), "--max-syncs", "0", "--format", "sarif", "-o", str(sarif))
    msg = json.loads(sarif.read_text())["runs"][0]["results"][0]["message"]["text"]
    assert "Lineage: hoistable" in msg


def test_nothing_of_lineage_without_it(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    res = _result(tmp_path, False)
    rc, out, _ = cli(capsys, "show", str(res), "--width", "400")
    assert "lineage" not in out.lower()
    gh = tmp_path / "gh.txt"
    cli(capsys, "check", str(res), "--max-syncs", "0", "--format", "github", "-o", str(gh))
    assert "Lineage" not in gh.read_text()


EVIL = '<script>alert("x")</script>&amp;'


def test_the_html_tree_escapes_every_name_and_stays_bounded(tmp_path: Path) -> None:
    """A crafted result: an op, a root kind, a label and a file named with markup, a chain
    25 levels deep (the loader's JSON policy refuses deeper lines), 500 children, values of
    the wrong type. The page shows the names as text (no tag of theirs), at most DRAW_DEPTH
    levels and DRAW_WIDTH children, and says how many it left out."""
    from _lineage_html import trees, walk

    from syncguard.core.lineage_words import DRAW_DEPTH, DRAW_NODES, DRAW_WIDTH
    from syncguard.renderers import html
    from syncguard.results import loader

    leaf = {"root": EVIL, "label": EVIL, "site": f"{EVIL}.py:3"}
    deep: Dict[str, Any] = leaf
    for _ in range(25):
        deep = {"op": "add", "in": [deep]}
    tree = [{"op": EVIL, "in": [leaf, deep, *[{"op": "mul", "in": [leaf]}] * 500,
                                   "not a node", 7, None], "more": "lots"},
            {"op": ["not", "text"], "in": {"a": 1}, "cut": 1}]
    lin = {**LIN, "tree": tree, "tree_id": "x"}
    path = write_result(tmp_path / "result.jsonl",
                        events=[{"step": i, "lineage": lin, "filename": f"{EVIL}.py"}
                                for i in (1, 2)])
    page = html.render(loader.load(str(path)), plots=False)
    assert "<script>" not in page and "&lt;script&gt;" in page
    assert "&amp;amp;" in page  # an entity in a name is shown as written, not decoded
    (root,) = trees(page)
    assert root["text"] == f"the value read at {EVIL}.py:3 (Tensor.__bool__)"
    top = root["kids"][0]
    assert top["text"] == EVIL
    nodes = list(walk(root))
    assert max(d for d, _ in nodes) <= DRAW_DEPTH + 1  # the read, then the op levels
    assert len(nodes) <= DRAW_NODES + 2 * DRAW_WIDTH
    assert all(len(n["kids"]) <= DRAW_WIDTH + 1 for _, n in nodes)  # "N more" the last
    assert top["kids"][0]["text"] == f"{EVIL} {EVIL} at {EVIL}.py:3"
    assert top["kids"][-1]["text"] == f"{500 + 5 - DRAW_WIDTH} more", top["kids"][-1]
    assert any(n["text"].endswith(" more") for _, n in nodes if n is not top)
