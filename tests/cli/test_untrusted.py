"""Untrusted files (scenarios, result files) never break out of an output, never write outside
the report folder, and bad ones are one line and exit 2.

Crafted result files are written by hand here: they stand for files a syncguard never wrote."""

from __future__ import annotations

import json
import os
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest
from _cli import SMALL, cli, one_error_line, scenario_text, write_result
from _paths import TESTS
from markdown_it import MarkdownIt

from syncguard import _escape
from syncguard.cli import EXIT_OK, EXIT_USAGE

DATA = TESTS / "data" / "scenarios"
INJECT = "x\n::error file=README.md,line=1::pwned"
IMG = "<img src=x onerror=alert(1)>"




# -- names and ids: a safe character set in the schema ---------------------------------------
@pytest.mark.parametrize("field,kw", [
    ("name", {"name": INJECT}),
    ("name", {"name": "x\n::add-mask::secret"}),
    ("name", {"name": "a\x1b[31mred"}),
    ("name", {"name": "nul\x00"}),
    ("name", {"name": "two words"}),
    ("name", {"name": "x" * 65}),
    ("requests[0].id", {"rid": INJECT}),
    ("requests[0].id", {"rid": "r\x1b]0;title\x07"}),
    ("requests[0].id", {"rid": "-r"}),
])
def test_unsafe_names_and_ids_are_refused(field: str, kw: Dict[str, str], tmp_path: Path,
                                          capsys: pytest.CaptureFixture) -> None:
    p = tmp_path / "s.toml"
    p.write_text(scenario_text(**kw), encoding="utf-8")
    rc, out, err = cli(capsys, "check", str(p), "--device", "sim")
    assert rc == EXIT_USAGE
    line = one_error_line(err)
    assert f"{p}: {field}: " in line
    assert "\x1b" not in line and "\x00" not in line
    assert out == ""


def test_safe_names_still_load(tmp_path: Path) -> None:
    from syncguard.driving.scenario import parse

    sc = parse(scenario_text(name="Llama-3.1_8B+spec", rid="req_0.a"), "s.toml")
    assert sc.name == "Llama-3.1_8B+spec" and sc.requests[0].id == "req_0.a"


# -- every output escapes on its own --------------------------------------------------------
def _finding(scenario: str, filename: str, function: str = "f", api: str = "Tensor.__bool__"
             ) -> Tuple[List[Any], List[Any]]:
    from syncguard.core.events import SyncEvent
    from syncguard.gate.baseline import Finding

    ev = SyncEvent("scalar_read", api, None, filename, 7, function, (), 2, "MainThread")
    totals = [(scenario, "legacy", 1, 0, True)]
    return totals, [Finding(scenario, "legacy", ev, 1, [2], None, "1 hidden sync, budget 0")]


def _verdicts(totals: List[Any], findings: List[Any]) -> List[Any]:
    from syncguard.gate.verdicts import Verdict

    return [Verdict(s, p, n, b, None, bad, tuple(findings), ()) for s, p, n, b, bad in totals]


def test_github_format_cannot_inject_workflow_commands() -> None:
    from syncguard.renderers.ci import render_github

    totals, findings = _finding(INJECT + "\r\n::add-mask::x",
                                "a,b:c%0A\n::warning::x.py", function="g\n::debug::y")
    out = render_github(_verdicts(totals, findings))
    commands = [ln for ln in out.splitlines() if ln.startswith("::")]
    assert len(commands) == 1, out  # the one annotation, nothing injected
    assert commands[0].startswith("::error file=a%2Cb%3Ac%250A%0A%3A%3Awarning%3A%3Ax.py,")
    assert "\r" not in out
    props, _, msg = commands[0][len("::error "):].partition("::")
    assert props.count(",") == 2 and "%0A" in msg


def test_escape_helpers() -> None:
    assert _escape.gh_data("50% a\r\nb") == "50%25 a%0D%0Ab"
    assert _escape.gh_property("a:b,c%") == "a%3Ab%2Cc%25"
    assert _escape.terminal("a\x1b[2Jb\x00\n\u202e") == "a\\x1b[2Jb\\x00\\n\\u202e"
    assert _escape.xml_text("ok\tline\n\x00\x1b\ufffe") == "ok\tline\n\\x00\\x1b\\ufffe"
    assert _escape.one_line("bad\nthing\r") == "bad\\nthing"


def test_junit_is_well_formed_xml_with_control_characters() -> None:
    from syncguard.renderers.ci import render_junit

    totals, findings = _finding("s\x00\x1b[31m", "m\x01.py", function="f\x0b")
    xml = render_junit(_verdicts(totals, findings))
    root = ET.fromstring(xml.encode("utf-8"))  # raises on NUL/ESC before the fix
    case = root.find("./testsuite/testcase")
    assert case is not None and "\\x1b" in case.get("classname", "")


def test_text_format_keeps_one_line_per_item() -> None:
    from syncguard.renderers.ci import render_text

    totals, findings = _finding(INJECT, "m.py\n::error::x", function="\x1b[2Jf")
    out = render_text(_verdicts(totals, findings))
    assert not any(ln.startswith("::") for ln in out.splitlines()), out
    assert "\x1b" not in out and len(out.splitlines()) == 3


def _md_html(md: str) -> str:
    return MarkdownIt("commonmark", {"html": True}).enable("table").render(md)


@pytest.mark.parametrize("s", [
    f"``{IMG}``.py", f"`{IMG}", f"a``` {IMG} ```b", f"x|{IMG}|y", f"``\n{IMG}", "``",
])
def test_markdown_code_span_cannot_be_broken_out_of(s: str) -> None:
    html = _md_html(f"| a |\n| --- |\n| {_escape.md_code(s)} |\n\n- {_escape.md_code(s)}\n")
    assert "<img" not in html, html
    html_text = _md_html(f"- **{_escape.md_text(s)}**\n")
    assert "<img" not in html_text, html_text


def test_show_markdown_of_a_crafted_result_holds_no_raw_html(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture
                                                             ) -> None:
    res = write_result(tmp_path / "r.jsonl", events=[
        {"filename": f"``{IMG}``.py", "function": f"`{IMG}`", "api": f"a``{IMG}"}])
    out = tmp_path / "report.md"
    rc, _, err = cli(capsys, "show", str(res), "-o", str(out))
    assert rc == EXIT_OK, err
    md = out.read_text(encoding="utf-8")
    assert "onerror" in md  # the data is there, as text
    html = _md_html(md)
    assert "<img" not in html, [ln for ln in html.splitlines() if "<img" in ln]


def test_show_in_the_terminal_prints_no_control_characters(tmp_path: Path,
                                                           capsys: pytest.CaptureFixture
                                                           ) -> None:
    res = write_result(tmp_path / "r.jsonl", scenario="s\x1b[2J", path_name="legacy\x1b]0;t",
                       events=[{"filename": "m\x1b[31m.py", "function": "f\x00\x07",
                                "op": "aten::x\x1b[0m"}])
    rc, out, err = cli(capsys, "show", str(res), "--width", "200")
    assert rc == EXIT_OK, err
    assert not re.search("[\x00-\x08\x0b-\x1f\x7f]", out), repr(out[:400])
    assert "m\\x1b[31m.py" in out


def test_html_plots_show_dollar_signs_literally(tmp_path: Path,
                                                capsys: pytest.CaptureFixture) -> None:
    pytest.importorskip("matplotlib")
    res = write_result(tmp_path / "r.jsonl", scenario="s$\\frac{$", path_name="p$\\sqrt{$")
    rc, _, err = cli(capsys, "show", str(res), "-o", str(tmp_path / "r.html"))
    assert rc == EXIT_OK, err
    html = (tmp_path / "r.html").read_text(encoding="utf-8")
    assert "<svg" in html and "Plot failed" not in html


# -- never through a symlink; atomic -------------------------------------------------------
@pytest.mark.skipif(os.name == "nt", reason="symbolic links need POSIX")
def test_run_force_replaces_links_in_out_and_writes_nothing_outside(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "out"
    out.mkdir()
    outside = {n: tmp_path / f"victim-{n}" for n in ("report.html", "result.jsonl",
                                                     "steps.csv")}
    for name, victim in outside.items():
        victim.write_text("precious\n", encoding="utf-8")
        (out / name).symlink_to(victim)
    (out / "report.md").symlink_to(tmp_path / "dangling")
    rc, _, err = cli(capsys, "run", SMALL, "--device", "sim", "--out", str(out), "--steps",
                     "2", "--warmup", "0", "--no-timed")
    assert rc == EXIT_USAGE and "--force" in one_error_line(err)  # a link is a clash too
    rc, _, err = cli(capsys, "run", SMALL, "--device", "sim", "--out", str(out), "--steps",
                     "2", "--warmup", "0", "--no-timed", "--force")
    assert rc == EXIT_OK, err
    for name, victim in outside.items():
        assert victim.read_text(encoding="utf-8") == "precious\n", name
        assert not (out / name).is_symlink() and (out / name).stat().st_size > 0, name
    assert not (tmp_path / "dangling").exists()
    assert not (out / "report.md").is_symlink()
    assert not [p for p in os.listdir(out) if p.endswith(".tmp")]


@pytest.mark.skipif(os.name == "nt", reason="symbolic links need POSIX")
def test_show_output_link_is_replaced_not_followed(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture) -> None:
    res = write_result(tmp_path / "r.jsonl")
    victim = tmp_path / "victim.md"
    victim.write_text("precious\n", encoding="utf-8")
    link = tmp_path / "report.md"
    link.symlink_to(victim)
    rc, _, err = cli(capsys, "show", str(res), "-o", str(link))
    assert rc == EXIT_USAGE and "--force" in one_error_line(err)
    rc, _, err = cli(capsys, "show", str(res), "-o", str(link), "--force")
    assert rc == EXIT_OK, err
    assert victim.read_text(encoding="utf-8") == "precious\n"
    assert not link.is_symlink() and "syncguard" in link.read_text(encoding="utf-8")


def test_a_failing_render_leaves_the_old_report_whole(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from syncguard import renderers
    from syncguard.results import loader

    res = loader.load(str(write_result(tmp_path / "r.jsonl")))
    target = tmp_path / "report.html"
    target.write_text("old report\n", encoding="utf-8")

    def boom(*a: Any, **k: Any) -> str:
        raise KeyboardInterrupt

    monkeypatch.setitem(renderers.RENDERERS, "html", boom)
    with pytest.raises(KeyboardInterrupt):
        renderers.write(res, str(target))
    assert target.read_text(encoding="utf-8") == "old report\n"
    assert sorted(os.listdir(tmp_path)) == ["r.jsonl", "report.html"]  # no temp file left


# -- exit 2, not 3 -----------------------------------------------------------------------------
@pytest.mark.parametrize("what,content,field", [
    ("latin-1", scenario_text(top='description = "cafX"\n').encode().replace(b"X", b"\xe9"),
     "UTF-8"),
    ("nested 100k deep", (scenario_text() + "x = " + "[" * 100_000 + "]" * 100_000 + "\n"
                          ).encode(), "nested"),
    ("scale 1e308", scenario_text(extra="[logits]\nscale = 1e308\n").encode(),
     "logits.scale"),
    ("float16 scale 1e5", scenario_text(top='dtype = "float16"\n',
                                        extra="[logits]\nscale = 1e5\n").encode(),
     "logits.scale"),
    ("top_k int64 max", scenario_text(req="top_k = 9223372036854775807\n").encode(),
     "requests[0].top_k"),
])
def test_bad_scenarios_are_exit_2(what: str, content: bytes, field: str, tmp_path: Path,
                                  capsys: pytest.CaptureFixture) -> None:
    p = tmp_path / "s.toml"
    p.write_bytes(content)
    rc, out, err = cli(capsys, "check", str(p), "--device", "sim")
    assert rc == EXIT_USAGE, err
    line = one_error_line(err)
    assert str(p) in line and field in line, line


def _step_line(**kw: Any) -> str:
    step = {"type": "step", "scenario": "s", "path": "legacy", "pass": "counted", "step": 0,
            "warmup": False, "batch_size": 1, "branch": "simple", "syncs": 0, "allowed": 1,
            "latency_ms": 1.0, **kw}
    return json.dumps(step)


@pytest.mark.parametrize("what,content,field", [
    ("random bytes", bytes(range(256)) * 8, "not"),
    ("UTF-16", '{"type": "header", "schema": 1}\n'.encode("utf-16"), "UTF-16"),
    ("syncs many", ('{"type": "header", "schema": 1}\n' + _step_line(syncs="many") + "\n"
                    ).encode(), "step.syncs"),
    ("step [1, 2]", ('{"type": "header", "schema": 1}\n' + _step_line(step=[1, 2]) + "\n"
                     ).encode(), "step.step"),
])
def test_bad_result_files_are_exit_2(what: str, content: bytes, field: str, tmp_path: Path,
                                     capsys: pytest.CaptureFixture) -> None:
    p = tmp_path / "r.jsonl"
    p.write_bytes(content)
    for argv in (["show", str(p)], ["show", str(p), "-o", str(tmp_path / "r.md")]):
        rc, out, err = cli(capsys, *argv)
        assert rc == EXIT_USAGE, err
        line = one_error_line(err)
        assert str(p) in line and field in line, line
        assert out == ""


# -- resource bounds ------------------------------------------------------------------------
@pytest.mark.parametrize("content,env", [
    (scenario_text(req="count = 4096\n").replace("vocab_size = 64", "vocab_size = 4194304"),
     "SYNCGUARD_MAX_MEMORY_GB"),
    (scenario_text(extra="[logits]\nworkload = 16384\n"), "SYNCGUARD_MAX_STEP_GFLOP"),
])
def test_resource_bounds_are_refused_up_front(content: str, env: str, tmp_path: Path,
                                              capsys: pytest.CaptureFixture,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    def no_alloc(*a: Any, **k: Any) -> Any:
        raise AssertionError("allocated before refusing")

    monkeypatch.setattr(torch, "randn", no_alloc)
    p = tmp_path / "big.toml"
    p.write_text(content, encoding="utf-8")
    for cmd in ("run", "check"):
        out = tmp_path / f"out-{cmd}"
        extra = ["--out", str(out)] if cmd == "run" else []
        rc, _, err = cli(capsys, cmd, str(p), "--device", "sim", *extra)
        assert rc == EXIT_USAGE, err
        line = one_error_line(err)
        assert env in line and "raise it" in line and str(p) in line, line
        assert not out.exists()


def test_resource_limits_can_be_raised_on_purpose(monkeypatch: pytest.MonkeyPatch) -> None:
    from syncguard.driving.scenario import ScenarioError, check_resources, parse

    sc = parse(scenario_text(extra="[logits]\nworkload = 16384\n"), "big.toml")
    with pytest.raises(ScenarioError):
        check_resources([sc])
    monkeypatch.setenv("SYNCGUARD_MAX_STEP_GFLOP", "1e6")
    check_resources([sc])  # raised on purpose: accepted
    monkeypatch.setenv("SYNCGUARD_MAX_STEP_GFLOP", "lots")
    with pytest.raises(ScenarioError, match="SYNCGUARD_MAX_STEP_GFLOP"):
        check_resources([sc])


def test_builtin_scenarios_are_within_the_default_limits() -> None:
    from syncguard.driving.scenario import builtin_paths, check_resources, load

    check_resources([load(p) for p in builtin_paths()])


# -- versions ------------------------------------------------------------------------------
def test_a_result_from_a_newer_syncguard_warns(tmp_path: Path,
                                               capsys: pytest.CaptureFixture) -> None:
    newer = write_result(tmp_path / "new.jsonl", version="99.1.0")
    same = write_result(tmp_path / "same.jsonl")
    for _ in range(2):  # every time, not once per process
        rc, out, err = cli(capsys, "show", str(newer))
        assert rc == EXIT_OK and "Summary" in out
        warn = [ln for ln in err.splitlines() if ln.strip()]
        assert len(warn) == 1 and warn[0].startswith("syncguard: warning: "), err
        assert "99.1.0" in warn[0] and "newer" in warn[0] and str(newer) in warn[0]
    rc, _, err = cli(capsys, "show", str(same))
    assert rc == EXIT_OK and err == ""
