"""A long ``exec`` run writes the first 16 events of each site whole and counts the later ones
on their step's line (``reads``): the file and the loaded result stay small, and every count,
step range, outside site and gate verdict is the one the run would give with every event
written (``--all-events``)."""

from __future__ import annotations

import json
import os
import sys
from typing import Any, Dict, List, Tuple

import pytest
from _cli import cli, one_error_line
from _paths import TESTS

import syncguard
from syncguard.execute.engine import EVENTS_PER_SITE
from syncguard.results import format as results
from syncguard.results import loader
from syncguard.results.merge import merge_ranks

HERE = os.path.join(str(TESTS), "data", "exec")
STEPS = 60  # budgets.py: its `item` site syncs once a step, `between` every other step


def _exec(capsys: pytest.CaptureFixture, out: str, *opts: str) -> Tuple[int, str]:
    for m in ("budgets", "budgets_helper"):
        sys.modules.pop(m, None)
    rc, stdout, _ = cli(capsys, "exec", "--device", "cpu", "--step", "budgets:step", "--out",
                        out, "--force", "--max-syncs-per-step", "2", *opts, "--", "python",
                        "budgets.py", "--steps", str(STEPS))
    return rc, stdout


def _lines(path: str) -> List[Dict[str, Any]]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def _sites(run: syncguard.Run) -> List[Tuple[Any, ...]]:
    return sorted((r.path, r.lineno, r.allowed, r.count, r.steps, r.per_step)
                  for r in run.sites.itertuples())


def test_a_long_run_writes_a_sample_per_site_and_counts_every_sync(
        budgets: None, tmp_path: Any, capsys: pytest.CaptureFixture) -> None:
    sampled, whole = str(tmp_path / "sampled"), str(tmp_path / "whole")
    rc_s, gate_s = _exec(capsys, sampled)
    rc_w, gate_w = _exec(capsys, whole, "--all-events")
    assert rc_s == rc_w == 1  # steps 3 and 7 make 3 hidden syncs
    assert gate_s.replace(sampled, whole) == gate_w

    lines = _lines(os.path.join(sampled, "result.jsonl"))
    per_site: Dict[Tuple[str, int], int] = {}
    for d in lines:
        if d["type"] == "event":
            key = (d["path"], d["lineno"])
            per_site[key] = per_site.get(key, 0) + 1
    assert max(per_site.values()) == EVENTS_PER_SITE  # `item`, `allowed`: 60 each
    assert per_site[(results.OUTSIDE_PATH, 33)] == EVENTS_PER_SITE  # `between`: 30
    assert sum(len(d.get("reads", ())) for d in lines if d["type"] == "step") == 2 * (
        STEPS - EVENTS_PER_SITE)
    assert [len(d["reads"]) for d in lines if d["type"] == "reads"] != []
    assert not any("reads" in d for d in _lines(os.path.join(whole, "result.jsonl")))

    run_s, run_w = syncguard.load(sampled), syncguard.load(whole)
    assert run_s.sampled and not run_w.sampled
    assert len(run_s.events) < len(run_w.events) == len(list(run_w.result.iter_events()))
    assert _sites(run_s) == _sites(run_w)
    item = next(r for r in run_s.sites.itertuples() if r.lineno == 16)
    assert (item.count, item.steps, item.per_step) == (STEPS, f"0-{STEPS - 1}", True)
    assert results.outside_sites(run_s.result) == results.outside_sites(run_w.result)
    assert [(r["lineno"], r["count"]) for r in results.outside_sites(run_s.result)] == [
        (33, STEPS // 2), (29, 1), (34, 1)]
    after = sorted(e["after_step"] for e in run_s.result.iter_events()
                   if e["path"] == results.OUTSIDE_PATH and e["lineno"] == 33)
    assert after == list(range(0, STEPS, 2))
    pd = pytest.importorskip("pandas")
    counts = ["scenario", "path", "steps", "syncs_mean", "syncs_max", "syncs_total",
              "allowed_mean", "sites"]
    pd.testing.assert_frame_equal(run_s.summary[counts], run_w.summary[counts])
    pd.testing.assert_frame_equal(run_s.steps[["step", "syncs", "allowed", "warmup"]],
                                  run_w.steps[["step", "syncs", "allowed", "warmup"]])

    # the result.json document exec writes beside it holds the same counts
    assert _sites(syncguard.load(os.path.join(sampled, "result.json"))) == _sites(run_s)
    # so does a check of the recorded result, and a merge of rank files
    for opts in ((), ("--max-syncs", "0")):
        rc_s, text_s, _ = cli(capsys, "check", sampled, *opts)
        rc_w, text_w, _ = cli(capsys, "check", whole, *opts)
        assert rc_s == rc_w == 1 and text_s == text_w.replace(whole, sampled)
    assert f"x{STEPS}, steps 0-{STEPS - 1}" in text_s
    merged = merge_ranks([(0, run_s.result), (1, run_s.result)], sampled)
    hidden = [e for e in merged.iter_events() if e["lineno"] == 16]
    assert sorted({e["scenario"] for e in hidden}) == ["budgets.py [rank 0]",
                                                        "budgets.py [rank 1]"]
    assert len(hidden) == 2 * STEPS


def test_sites_csv_holds_the_totals_events_csv_a_sample(
        budgets: None, tmp_path: Any, capsys: pytest.CaptureFixture) -> None:
    import csv

    out = str(tmp_path / "o")
    _exec(capsys, out)
    with open(os.path.join(out, "events.csv"), encoding="utf-8") as f:
        events = [r for r in csv.DictReader(f) if r["lineno"] == "16"]
    with open(os.path.join(out, "sites.csv"), encoding="utf-8") as f:
        sites = {(r["path"], r["lineno"]): r for r in csv.DictReader(f)}
    assert len(events) == EVENTS_PER_SITE  # the sample
    item = sites[("step", "16")]
    assert (item["count"], item["steps"], item["per_step"]) == (str(STEPS), f"0-{STEPS - 1}",
                                                               "True")
    assert sites[(results.OUTSIDE_PATH, "33")]["count"] == str(STEPS // 2)


def _result(tmp_path: Any, *lines: Dict[str, Any]) -> str:
    head = {"type": "header", "schema": 1, "env": {}, "scenarios": {}}
    step = {"type": "step", "scenario": "p", "path": "s", "pass": "exec", "step": 0,
            "warmup": False, "batch_size": 0, "syncs": 1, "allowed": 0, "latency_ms": 1.0}
    path = tmp_path / "result.jsonl"
    path.write_text("".join(json.dumps(d) + "\n" for d in (head, *lines, step)))
    return str(path)


EVENT = {"type": "event", "scenario": "p", "path": "s", "pass": "exec", "kind": "scalar_read",
         "api": "Tensor.item", "filename": "p.py", "lineno": 3, "function": "s", "step": 0,
         "thread": "MainThread", "ref": 0}


@pytest.mark.parametrize("line, said", [
    ({"type": "reads", "reads": [[1, 0, 1, None, False]]}, "reads[0]: ref 1 names no event"),
    ({"type": "reads", "reads": [[0, 0, 1, None]]}, "reads[0]: must be [ref, step, count"),
    ({"type": "reads", "reads": [[0, -1, 1, None, False]]}, "reads[0]: must be"),
    ({"type": "reads", "reads": {"0": 1}}, "reads: must be a list"),
    ({"type": "reads"}, "reads: must be a list"),
])
def test_a_crafted_read_is_one_line_naming_file_line_and_field(
        tmp_path: Any, capsys: pytest.CaptureFixture, line: Dict[str, Any], said: str) -> None:
    path = _result(tmp_path, EVENT, line)
    rc, _, err = cli(capsys, "show", path)
    assert rc == 2
    msg = one_error_line(err)
    assert f"{path}:3: " in msg and said in msg, msg


def test_a_read_before_its_sites_event_is_refused(tmp_path: Any) -> None:
    path = _result(tmp_path, {"type": "reads", "reads": [[0, 0, 1, None, False]]}, EVENT)
    with pytest.raises(results.ResultError, match="ref 0 names no event written above it"):
        loader.load(path)


def test_reads_keep_their_own_step_count_wait_and_warmup(tmp_path: Any) -> None:
    path = _result(tmp_path, EVENT, {"type": "reads", "reads": [[0, 5, 2, 7.5, True],
                                                                 [0, 6, 1, None, False]]})
    res = loader.load(path)
    first, *read = list(res.iter_events())
    assert first is res.events[0]
    assert [(e["step"], e["count"], e["wait_us"], e["warmup"]) for e in read] == [
        (5, 2, 7.5, True), (6, 1, None, False)]
    assert all("ref" not in e and e["lineno"] == 3 for e in read)


def test_a_long_runs_reports_are_written_as_the_whole_documents_would_be(
        budgets: None, tmp_path: Any, capsys: pytest.CaptureFixture) -> None:
    """trace.json and steps.csv are streamed into their files; they are the documents
    render() makes, and the trace says its sync slices are the events the result holds."""
    import io

    from syncguard import renderers
    from syncguard.renderers import trace

    out = str(tmp_path / "o")
    _exec(capsys, out)
    res = loader.load(out)
    for name, fmt in (("trace.json", "trace"), ("steps.csv", "csv-steps")):
        with open(os.path.join(out, name), encoding="utf-8", newline="") as f:
            assert f.read() == renderers.RENDERERS[fmt].render(res), name
    buf = io.StringIO()
    trace.write(res, buf)
    doc = json.loads(buf.getvalue())
    assert "the syncs drawn are the events the result holds" in doc["otherData"]["source"]
    steps = [e for e in doc["traceEvents"] if e.get("cat") == "step"]
    assert len(steps) == STEPS and steps[-1]["args"]["hidden_syncs"] == 2  # item, allowed
