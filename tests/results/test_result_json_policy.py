"""A result file is read under the one JSON policy of every file a user hands in
(:mod:`syncguard.process.untrusted`): a line nested deeper than it allows, or holding NaN,
Infinity or a number that overflows a double, is one error line naming the file and the line
(exit 2), never a traceback and never a value let through."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _cli import cli, one_error_line, write_result

from syncguard.cli import EXIT_USAGE

DEEP = "[" * 10_000 + "]" * 10_000


@pytest.mark.parametrize("bad, why", [
    ('{"type": "note", "kind": "x", "message": "m", "deep": ' + DEEP + "}", "nested deeper"),
    ('{"type": "note", "kind": "x", "message": "m", "v": NaN}', "NaN is not JSON"),
    ('{"type": "step", "scenario": "s", "path": "legacy", "pass": "counted", "step": 9, '
     '"warmup": false, "batch_size": 2, "syncs": 1, "allowed": 0, "latency_ms": 1.5, '
     '"labels": {"ratio": -Infinity}}', "-Infinity is not JSON"),
    ('{"type": "note", "kind": "x", "message": "m", "v": 1e999}', "overflows a double"),
])
def test_a_line_outside_the_json_policy_is_one_line_naming_it(
        bad: str, why: str, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    res = write_result(tmp_path / "r.jsonl")
    lines = res.read_text(encoding="utf-8").splitlines()
    lines.insert(2, bad)  # not the last line: no torn line of an interrupted run
    res.write_text("\n".join(lines) + "\n", encoding="utf-8")
    for cmd in (("show", str(res)), ("check", str(res))):
        rc, _, err = cli(capsys, *cmd)
        assert rc == EXIT_USAGE, err
        line = one_error_line(err)
        assert "r.jsonl:3: " in line and why in line, line


def test_a_result_document_nested_too_deeply_is_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """``result.json`` (one document) under the same policy."""
    doc = tmp_path / "result.json"
    doc.write_text('{"header": {"schema": 1}, "notes": [' + DEEP + "]}", encoding="utf-8")
    rc, _, err = cli(capsys, "show", str(doc))
    assert rc == EXIT_USAGE, err
    line = one_error_line(err)
    assert "result.json: nested deeper" in line, line
    doc.write_text(json.dumps({"header": {"schema": 1}})[:-1] + ', "footer": {"t": NaN}}',
                   encoding="utf-8")
    rc, _, err = cli(capsys, "show", str(doc))
    assert rc == EXIT_USAGE and "NaN is not JSON" in one_error_line(err), err
