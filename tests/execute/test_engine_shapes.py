"""``syncguard exec`` on engine-shaped programs nobody here wrote the loop of: a loop driven
through helpers, a prefill helper, reads after the loop, Hugging Face ``generate()``, threads
and asyncio. Each step must hold exactly its own reads, and the gate must never pass a loop
whose per-token read lands outside the steps."""

from __future__ import annotations

import os
from typing import Iterator, List, Tuple

import pytest
from _cli import forget, line_of, program_env
from _paths import ROOT

from syncguard.cli import main
from syncguard.results import format as results
from syncguard.results import loader

ENGINE = os.path.join(str(ROOT), "tests", "data", "exec", "engine")
HELPER = os.path.join(ENGINE, "helper_loop.py")
THREADS = os.path.join(ENGINE, "threads.py")
ASYNC = os.path.join(ENGINE, "asyncsteps.py")
HF = os.path.join(ENGINE, "hf_generate.py")
LLAMA = "transformers.models.llama.modeling_llama:LlamaForCausalLM.forward"


_line = line_of


@pytest.fixture
def clean(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    program_env(monkeypatch)
    yield
    forget('helper_loop', 'threads', 'asyncsteps', 'hf_generate')


def _exec(tmp_path, opts: List[str], script: str, *args: str
          ) -> Tuple[int, results.RunResult]:
    out = str(tmp_path / "o")
    rc = main(["exec", "--device", "sim", "--out", out, "--force", "--width", "200", *opts,
               "--", "python", script, *args])
    return rc, loader.load(os.path.join(out, "result.jsonl"))


def _steps(res: results.RunResult, path: str) -> List[Tuple[int, int]]:
    return [(s.step, s.syncs) for s in res.steps if s.path == path]


def _outside(res: results.RunResult) -> List[Tuple[int, object]]:
    return [(e["lineno"], e.get("after_step")) for e in res.events
            if e["path"] == results.OUTSIDE_PATH]


def test_loop_driven_through_helpers_is_one_step_per_token_and_fails_the_gate(
        tmp_path, clean, capsys):
    """generate() calls prefill() and decode_step(), which call the model and return at once:
    neither is the loop's driver. Each token's step holds its stop check; the gate fails."""
    rc, res = _exec(tmp_path, ["--loop", "helper_loop:Model.forward", "--max-syncs", "0"],
                    HELPER, "--tokens", "6")
    assert rc == 1
    assert _steps(res, "Model.forward") == [(i, 1) for i in range(6)]
    assert [s.labels for s in res.steps] == [{"phase": "prefill"}] + [None] * 5
    stop = _line(HELPER, "the stop check: one read per token")
    assert {(e["lineno"], e["step"]) for e in res.events if e["path"] == "Model.forward"} == {
        (stop, i) for i in range(6)}
    # the readback after the loop, in the driver itself, is outside every step, after the last
    assert (_line(HELPER, "result.cpu().tolist()"), 5) in _outside(res)
    err = capsys.readouterr().err
    assert err.startswith(f"1 hidden sync per token at tests/data/exec/engine/helper_loop.py:"
                          f"{stop}") or err.startswith(
        f"1 hidden sync per token at {HELPER}:{stop}"), err.splitlines()[0]


def test_a_per_step_site_outside_every_step_is_gated_with_the_steps(tmp_path, clean, capsys):
    """--step on the forward leaves the stop check outside every step, once per step: it is
    gated like a sync in a step, and the report's first line names it (no "0 per step")."""
    stop = _line(HELPER, "the stop check: one read per token")
    rc, _ = _exec(tmp_path, ["--step", "helper_loop:Model.forward", "--max-syncs", "0"],
                  HELPER, "--tokens", "6")
    assert rc == 1
    cap = capsys.readouterr()
    assert "FAIL  helper_loop.py [outside steps, per step]: 6 hidden syncs, budget 0" in cap.out
    # the gate speaks exec's words: its budget checks (the reads outside every step are
    # one, not a step), not scenario paths
    assert "syncguard exec: 1 of 2 budget checks failed (gate: budget)" in cap.out, cap.out
    assert "scenario path" not in cap.out
    first = cap.err.splitlines()[0]
    assert first.startswith("1 hidden sync per step outside every step at ") and (
        f"helper_loop.py:{stop}" in first), first
    rc, _ = _exec(tmp_path, ["--step", "helper_loop:Model.forward", "--max-syncs-per-step",
                             "0"], HELPER, "--tokens", "6")
    assert rc == 1
    # only an allowed site or an explicit outside budget lets it pass
    rc, _ = _exec(tmp_path, ["--step", "helper_loop:Model.forward", "--max-syncs", "0",
                             "--allow", f"helper_loop.py:{stop}"], HELPER, "--tokens", "6")
    assert rc == 0
    rc, _ = _exec(tmp_path, ["--step", "helper_loop:Model.forward", "--max-syncs", "0",
                             "--max-syncs-outside", "10"], HELPER, "--tokens", "6")
    assert rc == 0


def test_threads_each_count_their_own_reads(tmp_path, clean):
    """A scheduler thread's steps and the main thread's steps, reading at the same moment:
    each step holds its own read; a thread with no step reads outside every step; a thread
    started inside a step reads for it."""
    rc, res = _exec(tmp_path, [], THREADS, "--steps", "5")
    assert rc == 0
    assert _steps(res, "schedule") == [(i, 1) for i in range(5)]
    assert _steps(res, "decode") == [(0, 2)] + [(i, 1) for i in range(1, 5)]
    worker = _line(THREADS, "sync: worker")
    assert any(e["lineno"] == worker and e["path"] == "decode" and e["step"] == 0
               for e in res.events)
    stray = _line(THREADS, "sync: stray")
    assert [n for n, _ in _outside(res)].count(stray) == 5


def test_step_on_an_async_def_counts_its_task_across_awaits(tmp_path, clean):
    """--step on an ``async def``: from its first resume to its return, across awaits; two
    such steps interleaving each count their own two reads; another coroutine's read is
    outside every step."""
    rc, res = _exec(tmp_path, ["--step", "asyncsteps:decode"], ASYNC, "--steps", "3")
    assert rc == 0
    assert _steps(res, "decode") == [(i, 2) for i in range(6)]
    stray = _line(ASYNC, "sync: stray")
    assert [n for n, _ in _outside(res)].count(stray) == 3


def test_a_step_module_nobody_can_find_exits_2_before_the_run(tmp_path, clean, capsys):
    rc = main(["exec", "--device", "sim", "--out", str(tmp_path / "o"), "--loop",
               "helper_lop:Model.forward", "--", "python", HELPER])
    assert rc == 2
    cap = capsys.readouterr()
    assert "--loop helper_lop:Model.forward: no module 'helper_lop'" in cap.err
    assert cap.out == ""  # the program never ran
    assert not os.path.exists(tmp_path / "o" / "result.jsonl")


def test_a_step_never_imported_says_no_step_matched(tmp_path, clean, capsys):
    """asyncsteps is found (beside the program) but the program never imports it."""
    rc, res = _exec(tmp_path, ["--step", "asyncsteps:decode"], HELPER, "--tokens", "2")
    assert rc == 2
    err = capsys.readouterr().err
    assert err.startswith("no step matched: --step asyncsteps:decode was never installed")
    assert "hidden syncs per step" not in err.splitlines()[0]


@pytest.mark.parametrize("mode", ["greedy", "sample", "beam"])
def test_hugging_face_generate_one_step_per_token(tmp_path, clean, mode):
    """transformers' generate() on a tiny Llama built from a config: the prefill helper makes
    the first forward, the decoding loop the others; each token's step holds exactly the stop
    check's one read; beam search's reads after its loop are outside every step."""
    pytest.importorskip("transformers")  # a dev dependency: installed by .ci/run
    rc, res = _exec(tmp_path, ["--loop", LLAMA], HF, mode, "--tokens", "12")
    assert rc == 0
    fwd = [s for s in res.steps if s.path == "LlamaForCausalLM.forward"]
    assert [(s.step, s.syncs) for s in fwd] == [(i, 1) for i in range(12)]
    assert [s.labels for s in fwd] == [{"phase": "prefill"}] + [None] * 11
    inside = {(os.path.basename(e["filename"]), e["function"]) for e in res.events
              if e["path"] == "LlamaForCausalLM.forward"}
    assert len(inside) == 1 and next(iter(inside))[0] == "utils.py", inside
    # "called from" names the user's line, not a library's decorator wrapper in between
    from syncguard.results import analysis

    site = analysis.sites(res).to_dict("records")[0]
    assert (os.path.basename(site["caller_filename"]), site["caller_function"]) == (
        "hf_generate.py", "main"), site
    after = [a for _, a in _outside(res)]
    if mode == "beam":
        assert after.count(11) >= 1  # read after the loop: outside, after the last step
    assert all(a is None or a == 11 for a in after), after
