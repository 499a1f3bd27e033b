"""One escaping owner for every printed line: no line syncguard prints (tables, verdicts,
"Wrote" lines, warnings) can begin a GitHub workflow command or hold a control or bidi
character, whatever a result file or a user's path holds; CSV cells never start a formula.
Goldens for the terminal and the CSV of a hostile result."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import List

import pytest
from _cli import cli, write_result
from test_renderers import _golden

from syncguard import _escape

HOSTILE = {
    "scenario": "::error::pwned",
    "path_name": "=cmd|' /C calc'!A0",
    "events": [{"function": "::notice::f \u202eevil", "filename": "::error file=a::b.py"},
               {"function": "@SUM(1+1)", "filename": "+x.py", "reason": "a\x1b]0;title\x07"}],
}
# the control characters of the ECMA-48 and bidi ranges that must never be printed raw
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _starts_workflow(lines: List[str]) -> List[str]:
    strip = re.compile(r"^(?:\s|\x1b\[[0-9;]*m)*")
    return [ln for ln in lines if strip.sub("", ln).startswith("::")]


def _check(text: str) -> None:
    lines = text.splitlines()
    assert not _starts_workflow(lines), _starts_workflow(lines)
    assert not RAW.search(text.replace("\x1b[", "")), "raw control character printed"


@pytest.mark.parametrize("width", ["40", "60", "100", "160"])
def test_show_of_a_hostile_result_prints_no_workflow_command(
        width: str, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    res = write_result(tmp_path / "r.jsonl", **HOSTILE)  # type: ignore[arg-type]
    rc, out, err = cli(capsys, "show", str(res), "--width", width)
    assert rc == 0, err
    _check(out + err)


def test_folded_cells_cannot_start_a_line() -> None:
    """A cell folded mid-word by the table (no space before the ``::``) is caught by the
    stream every console prints through."""
    buf = io.StringIO()
    s = _escape.LineSafeStream(lambda: buf)
    s.write("abc")
    s.write("\n   ")
    s.write("::error::x\n\x1b[1m::warning::y\nok ::z\n")
    s.write("a")
    s.write("::not-at-line-start\n")
    assert buf.getvalue() == ("abc\n   \\x3a:error::x\n\x1b[1m\\x3a:warning::y\nok ::z\n"
                              "a::not-at-line-start\n")


def test_check_text_and_the_incomplete_warning_are_escaped(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    res = write_result(tmp_path / "r.jsonl", **HOSTILE)  # type: ignore[arg-type]
    lines = res.read_text(encoding="utf-8").splitlines()
    reason = "x\n::error file=a.py::boom \x1b[31mred\x1b]0;title\x07 \u202eevil"
    lines[-1] = json.dumps({"type": "footer", "complete": False, "reason": reason})
    res.write_text("\n".join(lines) + "\n", encoding="utf-8")
    rc, out, err = cli(capsys, "check", str(res))
    assert rc == 1
    _check(out + err)
    warn = [ln for ln in err.splitlines() if "INCOMPLETE" in ln]
    assert len(warn) == 1 and "x\\n::error" in warn[0] and "\\u202e" in warn[0]


def test_wrote_lines_escape_the_users_path(tmp_path: Path,
                                           capsys: pytest.CaptureFixture) -> None:
    res = write_result(tmp_path / "r.jsonl")
    target = tmp_path / "a\n::error::x\x1b[31m.md"
    rc, out, err = cli(capsys, "show", str(res), "-o", str(target))
    assert rc == 0, err
    assert target.exists()
    _check(err)
    assert len([ln for ln in err.splitlines() if ln.strip()]) == 1


def test_terminal_golden_of_a_hostile_result(tmp_path: Path,
                                             capsys: pytest.CaptureFixture) -> None:
    res = write_result(tmp_path / "r.jsonl", **HOSTILE)  # type: ignore[arg-type]
    rc, out, _ = cli(capsys, "show", str(res), "--width", "100")
    assert rc == 0
    _golden("hostile-terminal.txt", out)


@pytest.mark.parametrize("table", ["steps", "events"])
def test_csv_cells_never_start_a_formula(table: str, tmp_path: Path,
                                         capsys: pytest.CaptureFixture) -> None:
    import csv

    res = write_result(tmp_path / "r.jsonl", **HOSTILE)  # type: ignore[arg-type]
    target = tmp_path / f"{table}.csv" if table == "steps" else tmp_path / "events.csv"
    rc, _, err = cli(capsys, "show", str(res), "-o", str(target))
    assert rc == 0, err
    text = target.read_text(encoding="utf-8")
    assert not RAW.search(text) and "\x1b" not in text
    for row in csv.reader(io.StringIO(text)):
        for cell in row:
            assert cell[:1] not in ("=", "+", "@", "\t", "\r"), cell
            if cell.startswith("-"):
                float(cell)  # only numbers may start with a minus
    _golden(f"hostile-{table}.csv", text)


def test_compare_csv_is_neutralised(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    a = write_result(tmp_path / "a.jsonl", **HOSTILE)  # type: ignore[arg-type]
    b = write_result(tmp_path / "b.jsonl", **HOSTILE)  # type: ignore[arg-type]
    target = tmp_path / "c.csv"
    rc, out, err = cli(capsys, "compare", str(a), str(b), "-o", str(target))
    assert rc == 0, err
    _check(out + err)
    assert "\n=" not in target.read_text(encoding="utf-8")
    assert ",=" not in target.read_text(encoding="utf-8")
