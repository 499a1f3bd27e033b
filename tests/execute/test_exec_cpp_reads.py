"""``syncguard exec --device cpu``: the reads made in C++ that no Python entry point sees (a
0-d tensor used as a number inside an op, TorchScript's ``bool()``/``.item()``) are counted
with ``--exhaustive`` (or ``[tool.syncguard] exhaustive``), each exactly once, and a Python
``.item()`` stays one read."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Tuple

import pytest
from _cli import one_error_line
from _subprocess import env

from syncguard.cli import main
from syncguard.results import format as results
from syncguard.results import loader

PROGRAM = '''\
import warnings

import torch

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)

    @torch.jit.script
    def scripted_bool(x: torch.Tensor) -> int:
        if bool(x):
            return 1
        return 0

    @torch.jit.script
    def scripted_item(x: torch.Tensor) -> float:
        return x.item()


def step(t, b):
    torch.full((2,), t)  # read: full
    torch.arange(t)  # read: arange
    scripted_bool(b)  # read: script-bool
    scripted_item(t)  # read: script-item
    return t.item()  # read: item


t, b = torch.tensor(3), torch.tensor(True)
for _ in range(3):
    step(t, b)
'''

#: the tag of each read's line: all but ``item`` are made in C++
CPP = ("full", "arange", "script-bool", "script-item")


def _lines() -> Dict[str, int]:
    return {ln.split("# read: ")[1]: i for i, ln in enumerate(PROGRAM.splitlines(), 1)
            if "# read: " in ln}


def _sites(out: str) -> List[Tuple[int, str, int]]:
    """(step, tag of the line, count) of every event of the run, in order."""
    tags = {n: tag for tag, n in _lines().items()}
    res = loader.load(os.path.join(out, "result.jsonl"))
    return sorted((e["step"], tags.get(e["lineno"], str(e["lineno"])), e["count"])
                  for e in res.events if e["path"] != results.OUTSIDE_PATH)


def _expected(tags: Tuple[str, ...]) -> List[Tuple[int, str, int]]:
    return sorted((s, tag, 1) for s in range(3) for tag in tags)


@pytest.fixture
def prog(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "prog.py").write_text(PROGRAM)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _exec(prog: Path, *opts: str) -> Tuple[int, str]:
    out = str(prog / "out")
    rc = main(["exec", "--device", "cpu", "--out", out, "--force", "--step", "__main__:step",
               *opts, "--", "python", "prog.py"])
    return rc, out


def test_without_the_flag_cpu_mode_sees_the_python_read_only(prog: Path) -> None:
    rc, out = _exec(prog)
    assert rc == 0
    assert _sites(out) == _expected(("item",))
    assert loader.load(os.path.join(out, "result.jsonl")).header["options"]["exhaustive"] \
        is False


def test_exhaustive_counts_each_cpp_read_once_and_the_python_one_once(prog: Path) -> None:
    rc, out = _exec(prog, "--exhaustive", "--max-syncs-per-step", "5")
    assert rc == 0
    assert _sites(out) == _expected(CPP + ("item",))
    res = loader.load(os.path.join(out, "result.jsonl"))
    assert [s.syncs for s in res.steps] == [5, 5, 5]
    assert res.header["options"]["exhaustive"] is True
    assert main(["exec", "--device", "cpu", "--out", out, "--force", "--step", "__main__:step",
                 "--exhaustive", "--max-syncs-per-step", "4", "--", "python", "prog.py"]) == 1


def test_the_config_turns_it_on_and_the_flag_still_wins(prog: Path) -> None:
    (prog / "pyproject.toml").write_text("[tool.syncguard]\nexhaustive = true\n")
    rc, out = _exec(prog)
    assert rc == 0 and _sites(out) == _expected(CPP + ("item",))
    (prog / "off.toml").write_text("[tool.syncguard]\nexhaustive = false\n")
    rc, out = _exec(prog, "--config", "off.toml")
    assert rc == 0 and _sites(out) == _expected(("item",))
    rc, out = _exec(prog, "--config", "off.toml", "--exhaustive")
    assert rc == 0 and _sites(out) == _expected(CPP + ("item",))


def test_a_bad_config_value_is_one_usage_error(prog: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    (prog / "pyproject.toml").write_text('[tool.syncguard]\nexhaustive = "yes"\n')
    capsys.readouterr()
    rc, _ = _exec(prog)
    assert rc == 2
    assert one_error_line(capsys.readouterr().err).endswith(
        "pyproject.toml: [tool.syncguard] exhaustive: must be true or false, got 'yes'")


def test_the_simulated_npu_needs_no_net_and_gets_none(prog: Path) -> None:
    """``--exhaustive`` on the simulated npu changes nothing (a dispatch mode there would break
    ``torch.tensor(..., device="npu")``): every read is counted once by its backend."""
    (prog / "sim.py").write_text(PROGRAM.replace(
        "t, b = torch.tensor(3), torch.tensor(True)",
        "t, b = torch.tensor(3, device='npu'), torch.tensor(True, device='npu')"))
    out = str(prog / "out")
    assert main(["exec", "--device", "sim", "--out", out, "--force", "--step", "__main__:step",
                 "--exhaustive", "--", "python", "sim.py"]) == 0
    assert _sites(out) == _expected(CPP + ("item",))


def test_subprocess(prog: Path) -> None:
    """One real process, as a user runs it."""
    out = str(prog / "o")
    p = subprocess.run([sys.executable, "-m", "syncguard", "exec", "--device", "cpu",
                        "--exhaustive", "--out", out, "--step", "__main__:step",
                        "--max-syncs-per-step", "0", "--", "python", "prog.py"],
                       cwd=str(prog), capture_output=True, text=True, env=env(), timeout=300)
    assert p.returncode == 1, p.stderr
    assert _sites(out) == _expected(CPP + ("item",))
