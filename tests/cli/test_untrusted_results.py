"""Result files are untrusted: the loader enforces one schema (nothing after it meets a missing
or mistyped field), ``check`` reads source lines at a result's file names only through the
safe reader, and every text from a result reaches each format through that format's escaper
(lone surrogates included)."""

from __future__ import annotations

import json
import os
import stat
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any, Dict, List

import pytest
from _cli import cli, one_error_line, write_result

from syncguard.cli import EXIT_USAGE

posix = pytest.mark.skipif(os.name == "nt", reason="FIFOs and devices need POSIX")


def _with_events(tmp_path: Path, events: List[Dict[str, Any]], drop: str = "") -> Path:
    p = write_result(tmp_path / "r.jsonl", events=events)
    if drop:
        lines = []
        for line in p.read_text().splitlines():
            obj = json.loads(line)
            if obj.get("type") == "event":
                obj.pop(drop, None)
            lines.append(json.dumps(obj))
        p.write_text("\n".join(lines) + "\n")
    return p


@pytest.mark.parametrize("field", ["filename", "lineno", "kind", "api", "function"])
def test_an_event_missing_a_required_field_is_one_line(
        field: str, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    res = _with_events(tmp_path, [{}], drop=field)
    for cmd in (("check", str(res)), ("show", str(res))):
        rc, _, err = cli(capsys, *cmd)
        assert rc == EXIT_USAGE, err
        line = one_error_line(err)
        assert "r.jsonl" in line and f"event.{field}: missing" in line


@pytest.mark.parametrize("field", ["op", "step", "thread", "count", "stack"])
def test_an_event_missing_an_optional_field_reads_as_null(
        field: str, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    res = _with_events(tmp_path, [{}], drop=field)
    rc, _, err = cli(capsys, "check", str(res), "--max-syncs", "5")
    assert rc == 0, err


@pytest.mark.parametrize("field", ["lineno", "filename", "stack", "count", "thread"])
def test_a_null_where_none_is_allowed_is_one_line(
        field: str, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    res = _with_events(tmp_path, [{field: None}])
    rc, _, err = cli(capsys, "check", str(res))
    assert rc == EXIT_USAGE, err
    assert f"event.{field}: must be" in one_error_line(err)


def test_a_nul_byte_in_a_file_name_is_one_line(tmp_path: Path,
                                               capsys: pytest.CaptureFixture) -> None:
    res = _with_events(tmp_path, [{"filename": "a\x00b.py"}])
    rc, _, err = cli(capsys, "check", str(res))
    assert rc == EXIT_USAGE and "event.filename" in one_error_line(err)


def _timeline(tmp_path: Path, **over: Any) -> Path:
    p = write_result(tmp_path / "r.jsonl")
    tl = {"type": "timeline", "scenario": "s", "path": "legacy", "step": 1, "warmup": False,
          "latency_us": 10.0, "busy_us": 5.0, "bubble_us": 5.0,
          "syncs": [{"host_us": 1.0, "drain_us": 2.0, "resume_us": 3.0, "stall_us": 2.0,
                     "bubble_us": 1.0, "op": "x", "site": "m.py:3", "api": "a",
                     "allowed": False}],
          "spans": [["op", 0.0, 1.0, 1.0, 2.0]]}
    for k, v in over.items():
        if k.startswith("sync_"):
            tl["syncs"][0][k[5:]] = v
        else:
            tl[k] = v
    lines = p.read_text().splitlines()
    lines.insert(-1, json.dumps(tl))
    p.write_text("\n".join(lines) + "\n")
    return p


@pytest.mark.parametrize("over", [{"sync_stall_us": "slow"}, {"sync_bubble_us": [1]},
                                  {"bubble_us": "x"}, {"sync_resume_us": None},
                                  {"spans": [["op", "a", 1, None, None]]}],
                         ids=["stall", "sync-bubble", "bubble", "resume", "span"])
def test_a_mistyped_timeline_is_one_line(over: Dict[str, Any], tmp_path: Path,
                                         capsys: pytest.CaptureFixture) -> None:
    res = _timeline(tmp_path, **over)
    rc, _, err = cli(capsys, "show", str(res))
    assert rc == EXIT_USAGE, err
    assert "timeline" in one_error_line(err)


def test_a_well_typed_timeline_shows(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    rc, _, err = cli(capsys, "show", str(_timeline(tmp_path)))
    assert rc == 0, err


@pytest.mark.parametrize("note", [{"executed": [1, 2]}, {"executed": {"a.py": "x"}},
                                  {"candidates": {"a\x00.py": [1]}},
                                  {"executed": {"a.py": [None]}}],
                         ids=["list", "not-lines", "nul", "null-line"])
def test_a_malformed_lines_note_is_one_line(note: Dict[str, Any], tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture) -> None:
    res = write_result(tmp_path / "r.jsonl")
    lines = res.read_text().splitlines()
    lines.insert(-1, json.dumps({"type": "note", "kind": "lines", **note}))
    res.write_text("\n".join(lines) + "\n")
    (tmp_path / "a.py").write_text("x = 1\n")
    monkeypatch.chdir(tmp_path)
    rc, _, err = cli(capsys, "lint", "a.py", "--with-run", str(res))
    assert rc == EXIT_USAGE, err
    assert "note." in one_error_line(err)


# --------------------------------------------------------------- source lines of a result
@posix
def test_check_never_opens_a_fifo_named_by_a_result(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture) -> None:
    fifo = tmp_path / "hang.py"
    os.mkfifo(fifo)
    res = _with_events(tmp_path, [{"filename": str(fifo)}])
    rc, _, err = cli(capsys, "check", str(res))
    assert rc == 1, err


@posix
def test_check_never_reads_a_device_named_by_a_result(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture) -> None:
    dev = tmp_path / "zero.py"
    try:
        os.mknod(dev, 0o666 | stat.S_IFCHR, os.makedev(1, 5))  # /dev/zero
    except (PermissionError, OSError):
        pytest.skip("mknod needs root")
    res = _with_events(tmp_path, [{"filename": str(dev)}])
    rc, _, err = cli(capsys, "check", str(res))
    assert rc == 1, err


def test_update_baseline_copies_no_line_of_other_files(tmp_path: Path,
                                                       capsys: pytest.CaptureFixture) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("password = hunter2\n" * 5)
    res = _with_events(tmp_path, [{"filename": str(secret), "lineno": 3}])
    base = tmp_path / "base.json"
    rc, _, err = cli(capsys, "check", str(res), "--update-baseline", str(base))
    assert rc == 0, err
    assert "hunter2" not in base.read_text()


def test_source_lines_of_a_python_file_still_key_the_site(tmp_path: Path,
                                                          capsys: pytest.CaptureFixture) -> None:
    src = tmp_path / "model.py"
    src.write_text("def f(x):\n    y = 1\n    return x.item()  # read\n")
    res = _with_events(tmp_path, [{"filename": str(src), "lineno": 3}])
    base = tmp_path / "base.json"
    assert cli(capsys, "check", str(res), "--update-baseline", str(base))[0] == 0
    assert "return x.item()" in base.read_text()


def test_a_full_disk_in_check_output_is_one_line(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture) -> None:
    res = _with_events(tmp_path, [{}])

    def enospc(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", enospc)
    for argv in (("--format", "junit", "-o", str(tmp_path / "j.xml")),
                 ("--format", "sarif", "-o", str(tmp_path / "s.sarif")),
                 ("--update-baseline", str(tmp_path / "b.json"))):
        rc, _, err = cli(capsys, "check", str(res), *argv)
        assert rc == EXIT_USAGE, err
        assert "No space left on device" in one_error_line(err)
    assert sorted(os.listdir(tmp_path)) == ["r.jsonl"]


# --------------------------------------------------------------- escaping
SURROGATE = "mod\ud800el.py"


@pytest.mark.parametrize("cmd", [("show",), ("check",), ("compare", "{res}"),
                                 ("check", "--format", "github"),
                                 ("check", "--format", "sarif"),
                                 ("check", "--format", "junit")])
def test_a_lone_surrogate_in_a_result_is_escaped(cmd: tuple, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture) -> None:
    res = write_result(tmp_path / "r.jsonl", scenario="sc\udc80",
                       events=[{"filename": SURROGATE, "function": "f\ud800"}])
    argv = [cmd[0], str(res), *(a.format(res=res) for a in cmd[1:])]
    rc, out, err = cli(capsys, *argv)
    assert rc in (0, 1), err
    (out + err).encode("utf-8")  # nothing unencodable reached the output


def test_junit_keeps_no_raw_newline_from_a_name(tmp_path: Path,
                                                capsys: pytest.CaptureFixture) -> None:
    res = write_result(tmp_path / "r.jsonl", scenario="s\n::error::x",
                       path_name="p\n::set-output name=a::b",
                       events=[{"filename": "m.py\n::error::y", "function": "f\r\n::warning::z"}])
    out = tmp_path / "j.xml"
    rc, _, err = cli(capsys, "check", str(res), "--format", "junit", "-o", str(out))
    assert rc == 1, err
    text = out.read_text()
    assert not [ln for ln in text.splitlines() if ln.lstrip().startswith("::")], text
    ET.fromstring(text.encode())  # still XML
