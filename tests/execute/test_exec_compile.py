"""`syncguard exec` over a decode loop whose step calls a torch.compile'd function: one answer
per step, each read on the program's own line, on the simulated npu and on the CPU."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Dict, Iterator, List, Set, Tuple

import pytest
import torch
from _paths import TESTS

from syncguard.cli import main
from syncguard.results import format as results
from syncguard.results import loader

HERE = os.path.join(str(TESTS), "data", "exec")
PROGRAM = os.path.join(HERE, "compiled.py")
STEP = "compiled:decode_step"


def _line(tag: str) -> int:
    with open(PROGRAM) as f:
        return next(i for i, t in enumerate(f, 1) if f"# sync: {tag}" in t)


@pytest.fixture
def here(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.chdir(HERE)
    torch._dynamo.reset()
    # the program may turn capture_scalar_outputs on for itself: not for later tests
    with torch._dynamo.config.patch(capture_scalar_outputs=False):
        yield


def _run(tmp_path, device: str, args: List[str]) -> Tuple[int, str]:
    out = str(tmp_path / "o")
    rc = main(["exec", "--device", device, "--out", out, "--force", "--step", STEP,
               "--max-syncs-per-step", "2", "--", "python", "compiled.py", *args])
    return rc, os.path.join(out, "result.jsonl")


def _per_step(path: str) -> Dict[int, int]:
    return {s.step: s.syncs for s in loader.load(path).steps}


def _sites(path: str) -> Set[Tuple[int, str, int]]:
    res = loader.load(path)
    return {(e["lineno"], e["function"], e["step"]) for e in res.events
            if e["path"] != results.OUTSIDE_PATH}


@pytest.mark.parametrize("device,args", [
    ("sim", ["aot_eager"]),
    ("sim", ["eager", "--capture"]),
    ("sim", ["aot_eager", "--capture"]),
    ("sim", ["inductor", "--capture"]),
    ("cpu", ["aot_eager", "--capture", "--cpu"]),
])
def test_compiled_step_counts_each_read_on_its_line(here, tmp_path, capsys, device, args):
    rc, path = _run(tmp_path, device, args)
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    assert "decoded" in captured.out and "Traceback" not in captured.err
    assert _per_step(path) == {0: 2, 1: 2, 2: 2}
    inside, outside = _line("inside"), _line("outside")
    assert _sites(path) == {(inside, "forward", s) for s in range(3)} | {
        (outside, "decode_step", s) for s in range(3)}


def test_inductor_on_the_simulated_npu_in_a_real_process(tmp_path):
    """One real `syncguard exec` process: inductor runs (as aot_eager runs its graphs), one
    line says so, and no traceback."""
    out = str(tmp_path / "o")
    p = subprocess.run([sys.executable, "-m", "syncguard", "exec", "--device", "sim", "--out",
                        out, "--step", STEP, "--max-syncs-per-step", "1", "--", "python",
                        "compiled.py", "inductor"], cwd=HERE, capture_output=True, text=True,
                       timeout=600)
    assert p.returncode == 1, p.stderr  # 2 per step over a budget of 1
    assert "Traceback" not in p.stderr
    said = [ln for ln in p.stderr.splitlines() if "backend 'inductor'" in ln]
    assert len(said) == 1 and "aot_eager" in said[0], p.stderr
    assert _per_step(os.path.join(out, "result.jsonl")) == {0: 2, 1: 2, 2: 2}
