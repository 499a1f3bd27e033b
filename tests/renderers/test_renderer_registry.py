"""The one renderer registry (issue 20): every format a :class:`syncguard.renderers.Renderer`,
picked by the CLI from there; cheap to import (the parser reads its format choices there);
one vocabulary of styles."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from _paths import ROOT
from test_renderers import _compare_df, make_result

from syncguard import renderers
from syncguard.core.events import SyncEvent
from syncguard.renderers import (
    GATE_RENDERERS,
    REGISTRY,
    RENDERERS,
    REPORT_FILES,
    compare_renderer_for_path,
    run_files,
)

ROOT = ROOT


@pytest.fixture(scope="module")
def result(tmp_path_factory: pytest.TempPathFactory) -> Any:
    return make_result(tmp_path_factory.mktemp("registry"))


def test_one_registry_of_renderers() -> None:
    names = [r.name for r in REGISTRY]
    assert len(names) == len(set(names))
    assert list(RENDERERS) + list(GATE_RENDERERS) == sorted(
        names, key=lambda n: (n in GATE_RENDERERS, names.index(n)))
    assert all(isinstance(r, renderers.Renderer) for r in REGISTRY)
    # the report folder is the reports with a file name, in order; a run adds its stream
    assert REPORT_FILES == {r.file_name: r.name for r in RENDERERS.values() if r.file_name}
    assert run_files() == ("result.jsonl", *REPORT_FILES)


def test_every_report_renderer_renders_and_compares_or_says_it_cannot(result: Any) -> None:
    df = _compare_df()
    for r in RENDERERS.values():
        assert r.render(result) == r(result), r.name
        if r.compares:
            text = r.render_compare(df, "a.jsonl", "b.jsonl", title="a vs b")
            assert isinstance(text, str) and text, r.name
        else:
            with pytest.raises(ValueError, match=f"the {r.name} format has no comparison"):
                r.render_compare(df)


def test_gate_renderers_are_the_ci_formats() -> None:
    from syncguard.gate.verdicts import judge
    from syncguard.renderers import ci

    assert tuple(GATE_RENDERERS) == ("text", "github", "sarif", "junit")

    ev = SyncEvent(kind="scalar_read", api="Tensor.item", op="aten::_local_scalar_dense",
                   filename="pkg/m.py", lineno=7, function="f", stack=(), step=2,
                   thread="MainThread")
    verdicts = [judge([ev, ev], max_syncs=0, scenario="s", path="p"),
                judge([], max_syncs=0, scenario="s", path="q")]
    assert verdicts[0].failed and not verdicts[1].failed
    direct = {"text": ci.render_text, "github": ci.render_github,
              "sarif": ci.render_sarif_json, "junit": ci.render_junit}
    for name in GATE_RENDERERS:
        assert renderers.render_gate(name, verdicts) == direct[name](verdicts), name
    with pytest.raises(ValueError, match="valid formats: text, github, sarif, junit"):
        renderers.render_gate("html", verdicts)


def test_written_json_is_the_rendered_json(tmp_path: Path, result: Any) -> None:
    path = renderers.write(result, str(tmp_path / "r.json"))  # streamed, never one string
    assert Path(path).read_text(encoding="utf-8") == RENDERERS["json"](result)


@pytest.mark.parametrize("name, fmt", [
    ("c.md", "markdown"), ("c.html", "html"), ("c.csv", "csv-steps"),
    ("events.csv", "csv-events"),
])
def test_compare_files_by_extension(name: str, fmt: str) -> None:
    assert compare_renderer_for_path(name) is RENDERERS[fmt]


@pytest.mark.parametrize("name", ["c.txt", "c.json", "c.pdf", "c"])
def test_compare_refuses_other_files(name: str) -> None:
    with pytest.raises(ValueError, match=r"the comparison is written as \.md, \.html or \.csv"):
        compare_renderer_for_path(name)
    written = {x for r in RENDERERS.values() if r.compare_file for x in r.extensions}
    assert written == {".md", ".markdown", ".html", ".htm", ".csv"}  # as the message says


def test_the_cli_takes_the_gate_formats_from_the_registry(capsys: pytest.CaptureFixture) -> None:
    from syncguard.cli import _parser
    from syncguard.cli.exec import gate_file_name

    p = _parser()
    for cmd in (["check", "s.toml"], ["exec", "--", "python", "x.py"]):
        for fmt in GATE_RENDERERS:
            assert p.parse_args([*cmd[:1], "--format", fmt, *cmd[1:]]).format == fmt
        assert p.parse_args(cmd).format == "text"
        with pytest.raises(SystemExit):
            p.parse_args([*cmd[:1], "--format", "html", *cmd[1:]])
        assert "invalid choice: 'html'" in capsys.readouterr().err
    assert gate_file_name("sarif", None) == GATE_RENDERERS["sarif"].file_name == "syncguard.sarif"
    assert gate_file_name("junit", 3) == "junit.rank3.xml"
    assert gate_file_name("text", None) is None and gate_file_name("github", 0) is None


def test_the_registry_and_the_parser_import_no_renderer() -> None:
    # the CLI reads its format choices from the registry while parsing: importing it must
    # not import a renderer, pandas, rich, matplotlib or torch
    code = textwrap.dedent("""
        import sys
        import syncguard.renderers
        from syncguard.cli import main
        for cmd in ("run", "exec", "check", "show", "compare"):
            assert main([cmd, "--help"]) == 0
        heavy = [m for m in sys.modules if m.split(".")[0] in
                 ("pandas", "rich", "matplotlib", "torch", "numpy")
                 or m.startswith("syncguard.renderers.") or m == "syncguard.renderers.trace"]
        assert not heavy, heavy
    """)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, cwd=str(ROOT))
    assert proc.returncode == 0, proc.stderr


def test_one_vocabulary_of_styles() -> None:
    from syncguard.renderers import _tables, html, markdown, terminal

    assert set(_tables.LOOKS) == set(_tables.STYLE_LEGEND)
    assert set(_tables.LOOKS.values()) == {"good", "bad", "changed", "note", "dim"}
    for style, look in _tables.LOOKS.items():
        # the styles of one look are drawn alike in every format
        alike = [s for s, lk in _tables.LOOKS.items() if lk == look]
        assert {terminal.STYLE_LOOK[s] for s in alike} == {terminal.STYLE_LOOK[style]}
        assert {html.STYLE_WORDS[s] for s in alike} == {html.STYLE_WORDS[style]}
        assert {s in markdown.BOLD for s in alike} == {style in markdown.BOLD}
        assert re.search(rf"\.{style}\b[^{{]*{{", html.CSS), f"no CSS rule draws {style}"
    assert set(_tables.BAD) == {"worst", "regressed"} and set(_tables.GOOD) == {
        "best", "improved"}
