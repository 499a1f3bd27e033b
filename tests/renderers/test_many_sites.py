"""Many sync sites: the terminal shows the sites with the most syncs and counts the rest in
one line; the file reports keep every site."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from _cli import cli, write_result

from syncguard.cli import main

N = 2000


def test_exec_of_a_program_with_many_sites_prints_a_summary(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    lines = ["import torch", "import syncguard", "x = torch.ones(1, device='npu')",
             "with syncguard.step('decode'):"] + ["    x.item()"] * N
    (tmp_path / "many.py").write_text("\n".join(lines) + "\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "o"
    rc = main(["exec", "--device", "sim", "--out", str(out), "--max-syncs", "0", "--", "python",
               "many.py"])
    cap = capsys.readouterr()
    assert rc == 1
    assert len(cap.err.splitlines()) < 200, len(cap.err.splitlines())
    assert len(cap.out.splitlines()) < 40, len(cap.out.splitlines())
    assert f"and {N - 20} more hidden sync sites" in cap.err
    assert f"and {N - 20} more failing sites" in cap.out
    md = (out / "report.md").read_text(encoding="utf-8")
    assert all(f"many.py:{i}" in md for i in (5, N // 2, N + 4))  # every site in the file


def test_the_top_sites_are_the_ones_with_the_most_syncs(tmp_path: Path,
                                                         capsys: pytest.CaptureFixture) -> None:
    events = [{"lineno": i + 1, "count": 1} for i in range(30)]
    events.append({"lineno": 999, "count": 50})
    res = write_result(tmp_path / "r.jsonl", events=events)
    rc, out, _ = cli(capsys, "show", str(res), "--width", "160")
    assert rc == 0
    assert "model.py:999" in out and "and 11 more hidden sync sites (11 syncs)" in out
    rc, out, _ = cli(capsys, "check", str(res))
    assert rc == 1 and "model.py:999" in out and "and 11 more failing sites" in out
    assert os.path.exists(res)


def test_loaded_events_share_their_repeated_strings(tmp_path: Path) -> None:
    """Per-site memory: 200,000 events of one file hold one copy of its name, not 200,000."""
    from syncguard.results import loader

    res = loader.load(str(write_result(tmp_path / "r.jsonl", events=[
        {"lineno": i + 1, "stack": [{"filename": "model.py", "lineno": i + 1,
                                     "function": "f"}]} for i in range(3)])))
    a, b = res.events[0], res.events[2]
    assert a["filename"] is b["filename"] and a["api"] is b["api"]
    assert a["stack"][0]["filename"] is b["stack"][0]["filename"]
