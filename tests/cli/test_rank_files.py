"""Rank files: one canonical name per rank; look-alike names, mixed forms, world-size and
program mismatches are one line naming the files (exit 2); ``exec --force`` on rank 0 clears
the stale rank files of a larger earlier world."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import pytest
from _cli import cli, one_error_line

from syncguard.cli import EXIT_USAGE
from syncguard.results import loader


def rank_result(path: Path, rank: int, world: Optional[int] = 2,
                program: str = "p.py") -> Path:
    lines = [{"type": "header", "schema": 1, "created": 0,
              "env": {"syncguard": "0.1.0", "device": "sim"},
              "exec": {"program": program, "rank": rank,
                       "world_size": None if world is None else str(world)},
              "scenarios": {}}]
    for i in range(2):
        lines.append({"type": "step", "scenario": program, "path": "decode", "pass": "exec",
                      "step": i, "warmup": False, "batch_size": 0, "branch": "", "syncs": 1,
                      "allowed": 0, "latency_ms": 1.0, "rank": rank})
    lines.append({"type": "footer", "complete": True})
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    return path


def test_canonical_rank_files_merge(tmp_path: Path) -> None:
    for r in (0, 1):
        rank_result(tmp_path / f"result.rank{r}.jsonl", r)
    res = loader.load(str(tmp_path))
    assert res.header["ranks"] == [0, 1] and len(res.steps) == 4


@pytest.mark.parametrize("name", ["result.rank00.jsonl", "result.rank\u0661.jsonl",
                                  "result.rank+1.jsonl", "result.rank.jsonl"])
def test_a_look_alike_rank_name_is_refused(name: str, tmp_path: Path,
                                           capsys: pytest.CaptureFixture) -> None:
    """``result.rank0.jsonl`` and ``result.rank00.jsonl`` (or an Arabic-Indic 1) used to merge
    as one rank, its counts doubled."""
    rank_result(tmp_path / "result.rank0.jsonl", 0, world=1)
    rank_result(tmp_path / name, 0, world=1)
    rc, _, err = cli(capsys, "show", str(tmp_path))
    assert rc == EXIT_USAGE and "not a rank file name" in one_error_line(err)


def test_result_jsonl_beside_rank_files_is_refused(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture) -> None:
    for r in (0, 1):
        rank_result(tmp_path / f"result.rank{r}.jsonl", r)
    rank_result(tmp_path / "result.jsonl", 0, world=None)
    rc, _, err = cli(capsys, "check", str(tmp_path))
    line = one_error_line(err)
    assert rc == EXIT_USAGE and "result.jsonl: beside rank files" in line


@pytest.mark.parametrize("kw,why", [({"world": 4}, "world size"),
                                    ({"program": "other.py"}, "program")])
def test_rank_files_of_two_runs_are_refused(kw: dict, why: str, tmp_path: Path,
                                            capsys: pytest.CaptureFixture) -> None:
    rank_result(tmp_path / "result.rank0.jsonl", 0)
    rank_result(tmp_path / "result.rank1.jsonl", 1, **kw)
    rc, _, err = cli(capsys, "show", str(tmp_path))
    line = one_error_line(err)
    assert rc == EXIT_USAGE and why in line and "result.rank1.jsonl" in line


def test_a_stale_rank_of_a_larger_world_is_refused(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture) -> None:
    for r in (0, 1):
        rank_result(tmp_path / f"result.rank{r}.jsonl", r, world=2)
    rank_result(tmp_path / "result.rank2.jsonl", 2, world=2)
    rc, _, err = cli(capsys, "show", str(tmp_path))
    assert rc == EXIT_USAGE and "result.rank2.jsonl: rank 2 in a world of 2" in \
        one_error_line(err)


def test_exec_force_on_rank_0_clears_stale_rank_files(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "o"
    out.mkdir()
    for r in range(4):  # an earlier run with 4 ranks
        rank_result(out / f"result.rank{r}.jsonl", r, world=4)
    prog = tmp_path / "p.py"
    prog.write_text("pass\n", encoding="utf-8")
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.chdir(tmp_path)
    rc, _, err = cli(capsys, "exec", "--device", "cpu", "--out", str(out), "--force", "--",
                     "python", "p.py")
    assert rc == 0, err
    assert sorted(p.name for p in out.iterdir()) == ["result.rank0.jsonl",
                                                     "result.rank1.jsonl"]
