"""``exec`` follows every process of the program: engine-shaped launchers whose decode loop
runs only in child processes (tests/data/exec/follow/launch.py), each with a per-token read
(the gate fails, the line named, every token counted in its process) and clean (the gate
passes while every token is still counted: a pass by seeing, not by blindness)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Tuple

import pytest
from _paths import TESTS
from _subprocess import env

from syncguard.results import format as results
from syncguard.results import loader

HERE = TESTS / "data" / "exec" / "follow"
LOOP_LINE = next(i for i, ln in enumerate((HERE / "tinyloop.py").read_text().splitlines(), 1)
                 if "the per-token stop check" in ln)
TOKENS = 12

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="POSIX start methods")


def _exec(tmp_path: Path, *program: str, extra: Tuple[str, ...] = ()
          ) -> Tuple[subprocess.CompletedProcess, results.RunResult]:
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "syncguard", "exec", "--device", "sim",
                           "--loop", "tinyloop:Dec.forward", "--max-syncs", "0", *extra,
                           "--out", str(out), "--", "python", *program], cwd=HERE, env=env(),
                          capture_output=True, text=True, timeout=300)
    return proc, loader.load(str(out))


def _decoders(res: results.RunResult) -> Dict[str, List[int]]:
    """Per process that ran the loop, by its target (or script): the syncs of each of its
    Dec.forward steps (processes of one target listed together)."""
    by: Dict[str, List[List[int]]] = {}
    rows: Dict[str, List[int]] = {}
    for s in res.steps:
        if s.path == "Dec.forward":
            rows.setdefault(s.scenario, []).append(s.syncs)
    for scenario, syncs in rows.items():
        target = scenario.split("[", 1)[1].split(" pid ")[0].split(": ")[-1]
        by.setdefault(target, []).append(syncs)
    return {t: [x for one in v for x in one] for t, v in by.items()}


#: every shape of launch.py and the number of processes that run the loop in it (SHAPES there
#: names the process by its target): spawn, fork and forkserver children, two
#: torch.multiprocessing.spawn ranks, a subprocess Python worker, a process pool's worker, a
#: grandchild, an SGLang-shaped launcher (forced spawn; a scheduler process sending tokens
#: through a Pipe to a detokenizer process)
SHAPES = {"spawn_decoder": 1, "fork_decoder": 1, "forkserver_decoder": 1, "rank": 2,
          "child.py": 1, "_process_worker": 1, "grandchild_decoder": 1, "scheduler": 1}


def test_a_per_token_read_in_children_fails_the_gate_and_counts_every_token(
        tmp_path: Path) -> None:
    """All shapes in one run (one process row each): each child's every token counted, one
    sync each; the gate fails and the first line names the loop's line and a process."""
    proc, res = _exec(tmp_path, "launch.py", "all")
    assert proc.returncode == 1, proc.stderr
    first = proc.stderr.splitlines()[0]
    assert first.startswith(f"1 hidden sync per token at tinyloop.py:{LOOP_LINE} "), first
    assert " pid " in first  # the process named
    got = _decoders(res)
    assert got == {t: [1] * TOKENS * n for t, n in SHAPES.items()}, got
    assert res.complete, res.header.get("processes")
    assert all(p["complete"] for p in res.header["processes"])
    # each over-budget process is its own verdict
    fails = [ln for ln in proc.stdout.splitlines() + proc.stderr.splitlines()
             if "Dec.forward" in ln and "FAIL" in ln]
    assert len(fails) == sum(SHAPES.values()), fails


def test_clean_children_pass_by_seeing_every_token(tmp_path: Path) -> None:
    proc, res = _exec(tmp_path, "launch.py", "all", "--clean")
    assert proc.returncode == 0, proc.stderr
    got = _decoders(res)
    assert got == {t: [0] * TOKENS * n for t, n in SHAPES.items()}, got
    assert res.complete


def test_no_follow_sees_the_starting_process_only_and_says_no_step_matched(
        tmp_path: Path) -> None:
    proc, res = _exec(tmp_path, "launch.py", "fork", extra=("--no-follow",))
    assert proc.returncode == 2, proc.stderr
    assert "syncguard: error: --loop tinyloop:Dec.forward was never called" in proc.stderr
    assert _decoders(res) == {}


KILLED = (
    "import multiprocessing as mp, os, signal\n"
    "import tinyloop\n\n"
    "def worker():\n"
    "    import torch_npu\n"
    "    d = tinyloop.Dec('npu')\n"
    "    x = __import__('torch').ones(1, 8, device='npu')\n"
    "    for i in range(5):\n"
    "        d.forward(x)\n"
    "        if i == 3:\n"
    "            os.kill(os.getpid(), signal.SIGKILL)\n\n"
    "if __name__ == '__main__':\n"
    "    p = mp.get_context('spawn').Process(target=worker, name='doomed')\n"
    "    p.start(); p.join()\n"
    "    print('child exit', p.exitcode)\n")


def test_a_killed_child_marks_the_run_incomplete_for_it_in_one_line(tmp_path: Path) -> None:
    prog = tmp_path / "killed.py"
    prog.write_text(KILLED)
    proc, res = _exec(tmp_path, str(prog))
    assert "child exit -9" in proc.stdout  # the program's own output, unchanged
    lines = [ln for ln in proc.stderr.splitlines() if "INCOMPLETE" in ln]
    assert len(lines) == 1 and "worker pid" in lines[0], proc.stderr
    assert not res.complete
    (p,) = res.header["processes"]
    assert not p["complete"] and p["label"].startswith("doomed: worker pid")
    # the steps it finished before the kill were written (the drain had them)
    assert [s.step for s in res.steps if s.path == "Dec.forward"] == [0, 1, 2]
    # nothing of syncguard's left behind: no drain of the dead child still running
    assert not _drains_of(str(tmp_path / "out"))


def _drains_of(out: str) -> List[str]:
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                cmd = (Path("/proc") / pid / "cmdline").read_bytes()
            except OSError:
                continue
            if b"syncguard.results.drain" in cmd and out.encode() in cmd:
                found.append(pid)
    return found


MAIN_STEP = (
    "import multiprocessing as mp\n"
    "import torch\n\n"
    "def decode_step(x):\n"
    "    return bool((x * 2).sum() > 1e9)  # a read in the step\n\n"
    "def worker():\n"
    "    import torch_npu\n"
    "    x = torch.ones(4, device='npu')\n"
    "    for _ in range(5):\n"
    "        decode_step(x)\n\n"
    "if __name__ == '__main__':\n"
    "    p = mp.get_context('spawn').Process(target=worker)\n"
    "    p.start(); p.join()\n")


def test_a_step_in_the_programs_own_code_counts_in_a_spawn_child(tmp_path: Path) -> None:
    """The script's own function, named as a step, in a spawn child, which runs the script
    again as __mp_main__ (runpy: no import a hook sees)."""
    prog = tmp_path / "mainstep.py"
    prog.write_text(MAIN_STEP)
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "syncguard", "exec", "--device", "sim",
                           "--step", "mainstep:decode_step", "--max-syncs", "0", "--out",
                           str(out), "--", "python", str(prog)], cwd=tmp_path, env=env(),
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stderr
    res = loader.load(str(out))
    assert [(s.path, s.syncs) for s in res.steps] == [("decode_step", 1)] * 5
