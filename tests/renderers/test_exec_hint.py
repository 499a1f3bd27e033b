"""``exec`` with no --step, --loop or marker runs the whole program as one step: its headline
says so, counts a line that fired 20 times as 20 times (not "once"), and names a --step to
get per-token counts."""

from __future__ import annotations

from pathlib import Path

import pytest
from _cli import cli, forget, program_env

PROGRAM = """\
import torch

def decode_one(x):
    x = x + 1
    if x.sum() > 1e9:  # a read of device data, every token
        return None
    return x

x = torch.ones(3)
for _ in range(20):
    x = decode_one(x)
"""


def test_no_step_flag_says_per_token_counts_need_one(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    program_env(monkeypatch)
    (tmp_path / "gen.py").write_text(PROGRAM, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    forget("gen")
    rc, _, err = cli(capsys, "exec", "--device", "cpu", "--width", "400", "--out",
                     str(tmp_path / "o"), "--", "python", "gen.py")
    assert rc == 0, err
    head = next(ln for ln in err.splitlines() if "hidden sync" in ln)
    assert head.startswith("20 hidden syncs in the whole program, run as one step at "
                           "gen.py:5 in decode_one"), head
    assert "(Tensor.__bool__, 20 times)" in head and "once" not in head
    assert head.endswith("per-token counts need --loop or --step, e.g. --step "
                         "gen:decode_one (where the most syncs are)"), head


def test_with_a_step_the_headline_counts_per_step(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    program_env(monkeypatch)
    (tmp_path / "gen.py").write_text(PROGRAM, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    forget("gen")
    rc, _, err = cli(capsys, "exec", "--device", "cpu", "--width", "400", "--step",
                     "gen:decode_one", "--out", str(tmp_path / "o"), "--", "python", "gen.py")
    assert rc == 0, err
    head = next(ln for ln in err.splitlines() if "hidden sync" in ln)
    assert head.startswith("1 hidden sync per step at gen.py:5"), head
    assert "per-token counts need" not in err


OUTSIDE = """\
import torch

def advance(x):
    return x + 1

x = torch.ones(3)
for _ in range(6):
    x = advance(x)
    if x.sum() > 1e9:  # a read after each step, outside it
        break
"""


def test_reads_outside_every_step_say_the_step_has_none(
        tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    program_env(monkeypatch)
    (tmp_path / "gen.py").write_text(OUTSIDE, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    forget("gen")
    rc, _, err = cli(capsys, "exec", "--device", "cpu", "--width", "400", "--step",
                     "gen:advance", "--out", str(tmp_path / "o"), "--", "python", "gen.py")
    head = next(ln for ln in err.splitlines() if "hidden sync" in ln)
    assert head.startswith("1 hidden sync per step outside every step at gen.py:9"), head
    assert head.endswith("[gen.py: none inside advance]"), head  # not "0 in advance"
