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
    from syncguard.results import format as results

    md = markdown.render(results.load(str(tmp_path / "result.jsonl")))
    assert "Why, and how to remove it (lineage):" in md
    assert "- legacy: `model.py:3` (Tensor.\\_\\_bool\\_\\_): hoistable" in md or \
        "- legacy: `model.py:3` (Tensor.__bool__): hoistable" in md, md
    from syncguard.renderers import html

    page = html.render(results.load(str(tmp_path / "result.jsonl")), plots=False)
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
