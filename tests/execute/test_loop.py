"""``syncguard exec --loop``: each call begins a step that lasts until the next call, so the
per-token sync in the loop around a model's forward lands in that token's step."""

from __future__ import annotations

import os
from typing import Iterator, List, Tuple

import pytest
from _cli import forget, line_of, program_env
from _paths import ROOT

from syncguard.cli import main
from syncguard.results import format as results
from syncguard.results import loader

ROOT = str(ROOT)
EXAMPLE = os.path.join(ROOT, "examples", "token_loop")
GENERATE = os.path.join(EXAMPLE, "generate.py")
STOPPING = os.path.join(EXAMPLE, "stopping.py")
TOPLOOP = os.path.join(ROOT, "tests", "data", "exec", "toploop.py")
FORWARD = "model:TinyDecoder.forward"


_line = line_of


@pytest.fixture
def clean(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    program_env(monkeypatch)
    yield
    forget('model', 'stopping', 'toploop')


def _exec(tmp_path, opts: List[str], script: str = GENERATE,
          args: Tuple[str, ...] = ("--tokens", "5")) -> Tuple[int, results.RunResult]:
    out = str(tmp_path / "o")
    rc = main(["exec", "--device", "sim", "--out", out, "--force", "--width", "200", *opts,
               "--", "python", script, *args])
    name = "result.rank0.jsonl" if os.environ.get("RANK") else "result.jsonl"
    return rc, loader.load(os.path.join(out, name))


def test_loop_gives_one_step_per_token_with_its_sync(tmp_path, clean, capsys):
    rc, res = _exec(tmp_path, ["--loop", FORWARD])
    assert rc == 0
    fwd = [s for s in res.steps if s.path == "TinyDecoder.forward"]
    assert [(s.step, s.syncs) for s in fwd] == [(i, 1) for i in range(5)]
    # the first call has the whole prompt: prefill; the others one token each
    assert [s.labels for s in fwd] == [{"phase": "prefill"}] + [None] * 4
    stop = _line(STOPPING, "return bool(done)")
    inside = [e for e in res.events if e["path"] == "TinyDecoder.forward"]
    assert {(e["filename"], e["lineno"], e["step"]) for e in inside} == {
        (STOPPING, stop, i) for i in range(5)}
    # the caller of the helper is in each event's stack
    drive = _line(GENERATE, "if stop(next_ids):")
    assert all((e["stack"][1]["lineno"], e["stack"][1]["function"]) == (drive, "decode_loop")
               for e in inside)
    assert res.header["options"]["loops"] == [FORWARD]


def test_step_on_the_same_forward_sees_no_sync(tmp_path, clean):
    """Why --loop exists: the per-token sync is in the loop around forward, not in it."""
    rc, res = _exec(tmp_path, ["--step", FORWARD])
    assert rc == 0 and [s.syncs for s in res.steps] == [0] * 5


def test_last_step_ends_when_the_driving_call_returns(tmp_path, clean):
    """The readback after decode_loop returned is outside every step, not in the last one."""
    _, res = _exec(tmp_path, ["--loop", FORWARD])
    assert res.steps[-1].syncs == 1
    after = _line(GENERATE, "tokens.cpu()")
    assert any(after == e["lineno"] for e in res.events if e["path"] != "TinyDecoder.forward"
               ) or any(f"generate.py:{after}" in str(n) for n in res.notes)


def test_top_level_loop_ends_with_its_loop(tmp_path, clean, monkeypatch):
    """A loop at a script's top level: its driver is the module, which lives to the end; the
    readback after the loop is outside every step (after the last), not in the last step."""
    monkeypatch.chdir(os.path.dirname(TOPLOOP))
    _, res = _exec(tmp_path, ["--loop", "toploop:Model.forward"], TOPLOOP, ("--readback",))
    assert [s.syncs for s in res.steps] == [1, 1, 1, 1]
    assert [s.labels for s in res.steps] == [{"phase": "prefill"}, None, None, None]
    after = [(e["lineno"], e["after_step"]) for e in res.events
             if e["path"] == results.OUTSIDE_PATH]
    assert after == [(_line(TOPLOOP, "ids.cpu().tolist()"), 3)]


def test_loop_with_warmup_gate_and_step(tmp_path, clean):
    rc, res = _exec(tmp_path, ["--loop", FORWARD, "--step", "stopping:StopOnToken.__call__",
                               "--warmup", "2", "--max-syncs-per-step", "0"])
    assert rc == 1  # the stop check's step: 1 sync per call, budget 0
    by = {}
    for s in res.steps:
        by.setdefault(s.path, []).append((s.step, s.warmup, s.syncs))
    # a --step call inside a loop step is its own step: its syncs are not the loop step's
    assert by["TinyDecoder.forward"] == [(0, True, 0), (1, True, 0)] + [
        (i, False, 0) for i in range(2, 5)]
    assert by["StopOnToken.__call__"] == [(0, True, 1), (1, True, 1)] + [
        (i, False, 1) for i in range(2, 5)]


def test_loop_gate_per_step(tmp_path, clean):
    rc, _ = _exec(tmp_path, ["--loop", FORWARD, "--max-syncs-per-step", "1"])
    assert rc == 0
    rc, _ = _exec(tmp_path, ["--loop", FORWARD, "--max-syncs-per-step", "0"])
    assert rc == 1


def test_loop_under_a_rank(tmp_path, clean, monkeypatch):
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "1")
    rc, res = _exec(tmp_path, ["--loop", FORWARD])
    assert rc == 0 and [s.syncs for s in res.steps] == [1] * 5
    assert {s.rank for s in res.steps} == {0}


def test_names_must_be_distinct(tmp_path, clean, capsys):
    rc = main(["exec", "--device", "sim", "--out", str(tmp_path / "o"), "--loop", FORWARD,
               "--step", FORWARD, "--", "python", GENERATE])
    assert rc == 2
    assert "distinct name" in capsys.readouterr().err


def test_missing_loop_target_names_the_flag(tmp_path, clean, capsys):
    rc = main(["exec", "--device", "sim", "--out", str(tmp_path / "o"), "--loop",
               "model:TinyDecoder.nope", "--", "python", GENERATE])
    assert rc == 2
    assert "--loop model:TinyDecoder.nope" in capsys.readouterr().err


def test_syncs_outside_steps_per_site_and_gate(tmp_path, clean, capsys):
    """--step on the forward leaves the stop check outside every step: kept per site (kind,
    op, line, count) in result.jsonl, events.csv and the sites table, and gated on request."""
    rc, res = _exec(tmp_path, ["--step", FORWARD, "--max-syncs-outside", "3"])
    assert rc == 1
    cap = capsys.readouterr()
    assert "FAIL  generate.py [outside steps]: 12 hidden syncs, budget 3" in cap.out
    err = cap.err
    stop = _line(STOPPING, "return bool(done)")
    rows = {(os.path.basename(r["filename"]), r["lineno"]): r
            for r in results.outside_sites(res)}
    assert rows[("stopping.py", stop)]["count"] == 5
    assert rows[("stopping.py", stop)]["kind"] == "scalar_read"
    assert rows[("stopping.py", stop)]["op"] == "aten::_local_scalar_dense"
    after = sorted(e["after_step"] for e in res.events if e["lineno"] == stop)
    assert after == [0, 1, 2, 3, 4]  # one after each step: a per-step site
    with open(tmp_path / "o" / "events.csv") as f:
        csv = f.read()
    assert "(outside steps),exec,,scalar_read,Tensor.__bool__" in csv
    header, *rows = csv.splitlines()
    col = header.split(",").index("after_step")
    stop_rows = [r.split(",") for r in rows if f"stopping.py:{stop}" in r]
    assert sorted(int(r[col]) for r in stop_rows) == [0, 1, 2, 3, 4]
    assert "(outside steps)" in err  # the sites table
    # `check OUT` gates the recorded run again, outside syncs on their recorded budget
    assert main(["check", str(tmp_path / "o"), "--max-syncs", "99"]) == 0
    assert main(["check", str(tmp_path / "o")]) == 1
    assert "[outside steps]: 12 hidden syncs, budget 3" in capsys.readouterr().out
    rc, _ = _exec(tmp_path, ["--step", FORWARD, "--max-syncs-outside", "12"])
    assert rc == 0


def test_check_gates_recorded_outside_syncs_on_its_own_budget_and_allowlist(tmp_path, clean,
                                                                           capsys):
    """``check OUT --max-syncs-outside N`` gates a recorded run that was not gated there;
    ``--allow`` applies to the syncs outside every step as to the others."""
    rc, _ = _exec(tmp_path, ["--step", FORWARD])  # no outside gate when it ran
    assert rc == 0
    out = str(tmp_path / "o")
    capsys.readouterr()
    # no false pass: the stop check outside every step syncs once per step, so the default
    # budget (0) gates it like a sync in a step; only --allow or --max-syncs-outside pass it
    stop = _line(STOPPING, "return bool(done)")
    assert main(["check", out]) == 1
    assert "FAIL  generate.py [outside steps, per step]: 5 hidden syncs, budget 0" in (
        capsys.readouterr().out)
    assert main(["check", out, "--allow", f"stopping.py:{stop}"]) == 0
    assert main(["check", out, "--max-syncs-outside", "3"]) == 1
    assert "[outside steps]: 12 hidden syncs, budget 3" in capsys.readouterr().out
    assert main(["check", out, "--max-syncs-outside", "12"]) == 0
    # the stop check's 5 become allowed: 7 hidden syncs remain outside (the readback after
    # the loop and the prompt's upload)
    assert main(["check", out, "--max-syncs-outside", "7",
                 "--allow", f"stopping.py:{stop}"]) == 0
    assert main(["check", out, "--max-syncs-outside", "6",
                 "--allow", f"stopping.py:{stop}"]) == 1
    capsys.readouterr()
    assert main(["check", out, "--max-syncs-outside", "-1"]) == 2
    assert main(["check", "steady", "--device", "sim", "--max-syncs-outside", "0"]) == 2
    assert "recorded exec results" in capsys.readouterr().err


def test_old_results_outside_note_still_read(tmp_path):
    """A result from before outside syncs were events: its note's file:line list."""
    import json

    p = tmp_path / "old.jsonl"
    head = {"type": "header", "schema": 1, "env": {}}
    note = {"type": "note", "message": "2 hidden syncs outside every step (not gated): a.py:3",
            "outside_steps": 2, "sites": ["a.py:3"]}
    p.write_text("\n".join(json.dumps(x) for x in (head, note)) + "\n")
    res = loader.load(str(p))
    assert [(r["filename"], r["lineno"], r["count"]) for r in results.outside_sites(res)] == [
        ("a.py", 3, None)]


def test_report_leads_with_per_token_sync_and_its_caller(tmp_path, clean, capsys,
                                                          monkeypatch):
    monkeypatch.chdir(ROOT)  # sites relative to the repository
    rc, res = _exec(tmp_path, ["--loop", FORWARD, "--max-syncs-per-step", "0"])
    assert rc == 1
    cap = capsys.readouterr()
    stop, drive = _line(STOPPING, "return bool(done)"), _line(GENERATE, "if stop(next_ids):")
    site = (f"examples/token_loop/stopping.py:{stop} in StopOnToken.__call__, called from "
            f"examples/token_loop/generate.py:{drive} in decode_loop")
    first = cap.err.splitlines()[0]
    assert first.startswith(f"1 hidden sync per token at {site} (Tensor.__bool__)"), first
    # the verdict says per token; the sites table says per step or once, and the caller
    assert f"TinyDecoder.forward: 1 hidden sync per token at {site}" in " ".join(
        cap.err.split())
    assert "1.00/step" in cap.err and "once" in cap.err
    # the gate line names the same site, the same way; `check` on the result too
    assert f"      {site}: Tensor.__bool__ (aten::_local_scalar_dense) x5, steps 0-4" in (
        cap.out)
    assert main(["check", str(tmp_path / "o"), "--format", "github"]) == 1
    out = capsys.readouterr().out
    assert f"      {site}: Tensor.__bool__" in out
    assert ("hidden host sync in StopOnToken.__call__, called from "
            f"examples/token_loop/generate.py:{drive} in decode_loop:") in out
    with open(tmp_path / "o" / "report.md") as f:
        md = f.read()
    assert "1 hidden sync per token" in md and "called from" in md


def test_sites_per_step_or_once(tmp_path, clean):
    from syncguard.results import analysis

    _, res = _exec(tmp_path, ["--step", FORWARD])
    st = analysis.sites(res)
    by = {(os.path.basename(r["filename"]), r["lineno"]): r for r in st.to_dict("records")}
    stop = by[("stopping.py", _line(STOPPING, "return bool(done)"))]
    assert stop["path"] == results.OUTSIDE_PATH and stop["per_step"] and stop["rate"] == 1.0
    assert stop["steps"] == "after 0-4"
    setup = by[("generate.py", _line(GENERATE, "model = TinyDecoder()"))]
    assert not setup["per_step"] and setup["steps"] == "before any"
    # and the verdict has a clause for the per-step syncs outside every step
    from syncguard.renderers._common import verdict_options, verdicts

    (_, sentence), = verdicts(analysis.summary(res), analysis.merge_paths(st), code="",
                              **verdict_options(res))
    assert "outside every step: 1 hidden sync per step at " in sentence


def test_exec_report_shows_only_columns_that_apply(tmp_path, clean):
    """No batch column (not known), a phase column only where a step has one, no legend for
    modeled columns that are not shown, no "timed pass" in the plot of a run without one."""
    from syncguard.renderers import html, terminal

    _, res = _exec(tmp_path, ["--loop", FORWARD])
    text = terminal.render(res, width=160)
    table = text[text.index("Per step:"):text.index("Hidden sync sites")]
    assert "batch" not in table and "branch" not in table and "phase" in table
    assert "prefill" in table
    assert "\nmodeled " not in text and "counted pass" not in text
    _, res2 = _exec(tmp_path, ["--step", FORWARD])
    table2 = terminal.render(res2, width=160)
    table2 = table2[table2.index("Per step:"):table2.index("Hidden sync sites")]
    assert "phase" not in table2 and "branch" not in table2
    pytest.importorskip("matplotlib")
    fig = html.plot_figure(res, "generate.py")
    titles = [ax.get_title(loc="left") for ax in fig.axes]
    assert not any("timed pass" in t or "counted pass" in t for t in titles), titles
