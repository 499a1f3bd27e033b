"""`syncguard exec --step/--loop` naming gpt-fast's `decode_one_token`, which the program
compiles with `torch.compile(..., fullgraph=True)` (tests/data/exec/gptfast/generate.py, its
shape read from gpt-fast's generate.py): the program runs to its end, the step stays one
compiled graph, and each token is one step with its read."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Dict, Iterator, List, Tuple

import pytest
import torch
from _paths import TESTS

from syncguard.cli import main
from syncguard.results import format as results
from syncguard.results import loader

HERE = os.path.join(str(TESTS), "data", "exec", "gptfast")
TOKENS = 5  # decode steps (the 6th token comes from prefill, outside the compiled step)


@pytest.fixture
def here(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.chdir(HERE)
    monkeypatch.setattr(sys, "path", sys.path[:])
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()  # the program prints the graphs it compiled
    yield
    torch._dynamo.reset()


def _exec(tmp_path, flag: str, target: str, args: List[str]) -> Tuple[int, str]:
    out = str(tmp_path / "o")
    rc = main(["exec", "--device", args[1] if args[1] == "cpu" else "sim", "--out", out,
               "--force", flag, target, "--", "python", "generate.py", *args])
    return rc, os.path.join(out, "result.jsonl")


def _steps(path: str) -> Dict[int, int]:
    return {s.step: s.syncs for s in loader.load(path).steps}


def _readbacks_outside(path: str) -> int:
    """The callback's readbacks (``x.tolist()``) made outside every step."""
    with open(os.path.join(HERE, "generate.py")) as f:
        line = next(i for i, t in enumerate(f, 1) if "buffer.append(x.tolist())" in t)
    res = loader.load(path)
    return sum(e.get("count", 1) for e in res.events
               if e["path"] == results.OUTSIDE_PATH and e["lineno"] == line)


@pytest.mark.parametrize("args", [["eager", "cpu"], ["aot_eager", "cpu"], ["eager", "npu"],
                                  ["aot_eager", "npu"],
                                  pytest.param(["inductor", "cpu"], marks=pytest.mark.slow)],
                         ids="-".join)
def test_loop_on_a_fullgraph_compiled_step_counts_each_token(here, tmp_path, capsys, args):
    rc, path = _exec(tmp_path, "--loop", "__main__:decode_one_token", args)
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    assert "generated 6 tokens, 5 streamed, 1 graph(s)" in captured.out, captured.err
    # each token's step holds the callback's readback (x.tolist()) made after the call
    assert _steps(path) == {i: 1 for i in range(TOKENS)}


@pytest.mark.parametrize("args", [["eager", "cpu"], ["aot_eager", "npu"]], ids="-".join)
def test_step_on_a_fullgraph_compiled_step_is_a_step_per_call(here, tmp_path, capsys, args):
    rc, path = _exec(tmp_path, "--step", "__main__:decode_one_token", args)
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    assert "1 graph(s)" in captured.out, captured.err
    assert _steps(path) == {i: 0 for i in range(TOKENS)}  # the step itself reads nothing
    assert _readbacks_outside(path) == TOKENS  # the readbacks, after each step


@pytest.mark.parametrize("fullgraph,steps", [(True, 1), (False, 1 + TOKENS)])
def test_step_inside_a_compiled_region(here, tmp_path, capsys, fullgraph, steps):
    """`sample` runs inside the compiled step: under fullgraph its wrapper is a plain call
    in the graph (only prefill's eager call is a step, and a note says so); without, each
    call is a step."""
    args = ["eager", "cpu"] + ([] if fullgraph else ["--no-fullgraph"])
    rc, path = _exec(tmp_path, "--step", "__main__:sample", args)
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    assert "generated 6 tokens" in captured.out, captured.err
    assert len(_steps(path)) == steps
    said = "--step __main__:sample: called inside a torch.compile(fullgraph=True) region"
    assert (said in " ".join(captured.err.split())) == fullgraph, captured.err


def test_inductor_fullgraph_loop_in_a_real_process(tmp_path):
    """A real process (torch._dynamo imported by the program's torch.compile, after exec
    started), inductor on the simulated npu."""
    out = str(tmp_path / "o")
    p = subprocess.run([sys.executable, "-m", "syncguard", "exec", "--device", "sim", "--out",
                        out, "--loop", "__main__:decode_one_token", "--", "python",
                        "generate.py", "inductor", "npu"], cwd=HERE, capture_output=True,
                       text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    assert "generated 6 tokens, 5 streamed, 1 graph(s)" in p.stdout
    assert _steps(os.path.join(out, "result.jsonl")) == {i: 1 for i in range(TOKENS)}
