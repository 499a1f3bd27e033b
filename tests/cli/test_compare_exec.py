"""``compare`` of two ``exec`` runs on one machine compares their host times, or says how the
machine differs: an exec result records its machine as a run's does (it read "machine not
recorded")."""

from __future__ import annotations

from pathlib import Path

import pytest
from _cli import cli, forget, program_env

import syncguard

PROGRAM = """\
import torch

def step(x):
    return x * 2

x = torch.ones(3)
for _ in range(40):
    x = step(x)
"""


def test_two_exec_runs_record_their_machine(tmp_path: Path, capsys: pytest.CaptureFixture,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    program_env(monkeypatch)
    (tmp_path / "prog.py").write_text(PROGRAM, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    outs = []
    for name in ("a", "b"):
        forget("prog")
        rc, _, err = cli(capsys, "exec", "--device", "cpu", "--step", "prog:step", "--out",
                         str(tmp_path / name), "--", "python", "prog.py")
        assert rc == 0, err
        outs.append(str(tmp_path / name))
    for out in outs:
        machine = syncguard.load(out).header.get("machine")
        assert isinstance(machine, dict) and machine.get("reference_ms", 0) > 0, machine
    rc, out, err = cli(capsys, "compare", *outs, "--width", "200")
    assert rc == 0, err
    assert "machine not recorded" not in out
