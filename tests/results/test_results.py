"""Unit tests of the result format (:mod:`syncguard.results.format`): what the writer streams
is what the reader gives back, in both forms (``result.jsonl`` and the ``result.json``
document); an interrupted file keeps every finished step; events stay with their step; ranks
merge; and a file that is not a result is one line naming it."""

from __future__ import annotations

import io
import json
import warnings
from pathlib import Path
from typing import List

import pytest

from syncguard.core.events import Frame, SyncEvent
from syncguard.errors import ResultWarning
from syncguard.results.format import SCHEMA, ResultError, RunResult, StepRecord
from syncguard.results.loader import load
from syncguard.results.merge import rank_name
from syncguard.results.writer import ResultWriter


def _ev(step: int, line: int = 10, allowed: bool = False) -> SyncEvent:
    return SyncEvent(kind="d2h_copy", api="Tensor.item", op="aten::_local_scalar_dense",
                     filename="/src/model.py", lineno=line, function="forward",
                     stack=(Frame("/src/model.py", line, "forward"),), step=step,
                     thread="MainThread", allowed=allowed, count=1, device="npu",
                     wait_us=12.5)


def _write(path: Path, steps: int, close: bool = True, rank: int = None) -> None:  # type: ignore[assignment]
    w = ResultWriter(str(path), {"env": {"device": "sim"}, "argv": ["run"]})
    for i in range(steps):
        evs: List[SyncEvent] = [_ev(i)] + ([_ev(i, 20, allowed=True)] if i == 1 else [])
        rec = StepRecord.from_events("sc", "legacy", "counted", i, 1, evs, 1.0 + i,
                                     batch_size=4, tokens=[i, i + 1], rank=rank,
                                     labels={"branch": "fused"})
        w.step(rec, evs)
    if close:
        w.close(True)


def test_what_is_written_is_what_is_read(tmp_path: Path) -> None:
    f = tmp_path / "result.jsonl"
    _write(f, 3)
    res = load(str(f))
    assert res.complete and res.header["schema"] == SCHEMA and res.header["argv"] == ["run"]
    assert [(s.step, s.warmup, s.syncs, s.allowed, s.latency_ms) for s in res.steps] == [
        (0, True, 1, 0, 1.0), (1, False, 1, 1, 2.0), (2, False, 1, 0, 3.0)]
    assert res.steps[1].labels == {"branch": "fused"} and res.steps[2].tokens == [2, 3]
    assert res.steps[0].sync_wait_us == 12.5
    # every event, with its step and the fields a site is named from
    assert [(e["step"], e["lineno"], e["allowed"]) for e in res.events] == [
        (0, 10, False), (1, 10, False), (1, 20, True), (2, 10, False)]
    assert res.events[0]["filename"] == "/src/model.py" and res.events[0]["pass"] == "counted"


def test_the_document_form_reads_back_identically(tmp_path: Path) -> None:
    f = tmp_path / "result.jsonl"
    _write(f, 3)
    lines = load(str(f))
    doc = tmp_path / "result.json"
    doc.write_text(lines.to_json(), encoding="utf-8")
    again = load(str(doc))
    assert again.steps == lines.steps and again.events == lines.events
    assert again.header == lines.header and again.complete
    buf = io.StringIO()
    again.write_json(buf)
    assert json.loads(buf.getvalue()) == json.loads(lines.to_json())


def test_an_interrupted_file_keeps_every_finished_step(tmp_path: Path) -> None:
    f = tmp_path / "result.jsonl"
    _write(f, 3, close=False)
    with f.open("a", encoding="utf-8") as out:
        out.write('{"type": "event", "scenario": "sc", "pa')  # killed mid-line
    res = load(str(f))
    assert not res.complete and res.footer is None
    assert [s.step for s in res.steps] == [0, 1, 2]


def test_a_folder_reads_its_result_and_rank_files_merge(tmp_path: Path) -> None:
    one = tmp_path / "one"
    one.mkdir()
    _write(one / "result.jsonl", 2)
    assert [s.step for s in load(str(one)).steps] == [0, 1]
    ranks = tmp_path / "ranks"
    ranks.mkdir()
    for r in (0, 1):
        _write(ranks / rank_name(r), 2, rank=r)
    merged = load(str(ranks))
    assert sorted((s.rank, s.step) for s in merged.steps) == [(0, 0), (0, 1), (1, 0), (1, 1)]


@pytest.mark.parametrize("text,field", [
    ('{"type": "header", "schema": 99}\n', "header.schema"),
    ("\u00ff\u00fe garbage", "not"),
    ('[1, 2, 3]\n', "result"),
])
def test_a_file_that_is_not_a_result_is_one_line_naming_it(tmp_path: Path, text: str,
                                                           field: str) -> None:
    f = tmp_path / "bad.jsonl"
    f.write_text(text, encoding="utf-8")
    with pytest.raises(ResultError) as ei:
        load(str(f))
    msg = str(ei.value)
    assert msg.startswith(str(f)) and "\n" not in msg and field in msg


def test_a_result_from_a_newer_syncguard_is_read_with_a_warning(tmp_path: Path) -> None:
    f = tmp_path / "result.jsonl"
    _write(f, 1)
    lines = f.read_text(encoding="utf-8").splitlines()
    head = json.loads(lines[0])
    head["env"]["syncguard"] = "99.0"
    f.write_text("\n".join([json.dumps(head)] + lines[1:]) + "\n", encoding="utf-8")
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        res = load(str(f))
    assert [s.step for s in res.steps] == [0]
    assert any(issubclass(w.category, ResultWarning) and "99.0" in str(w.message) for w in got)


def test_step_records_round_trip_through_their_dicts() -> None:
    rec = StepRecord.from_events("sc", "flag", "timed", 5, 2, [], 3.0, batch_size=2,
                                 round=4, labels={"eligible": True})
    back = StepRecord.from_dict(json.loads(json.dumps(rec.to_dict())))
    assert back == rec and back.sync_wait_us is None  # the timed pass has no interceptors


def test_an_empty_run_result_has_no_scenarios() -> None:
    res = RunResult(header={"schema": SCHEMA}, steps=[], events=[], footer=None)
    assert res.scenarios == [] and res.paths == [] and not res.complete


def test_the_guard_and_the_report_group_the_same_sites(tmp_path: Path) -> None:
    """One decision of what makes syncs one site (core.sites.group_key): the guard's live
    grouping and the report's grouping of the recorded events give the same sites."""
    import torch

    from syncguard.core.guard import SyncGuard
    from syncguard.results.analysis import sites

    x = torch.arange(4)
    with SyncGuard(devices=("cpu",)) as g:
        for i in range(3):
            with g.step():
                x.sum().item()
                x.tolist(); x.tolist()  # noqa: E702  (one line, two reads: one site)
                bool(x[0]) if i else None
    f = tmp_path / "result.jsonl"
    w = ResultWriter(str(f), {"env": {}})
    for i in range(3):
        evs = [e for e in g.events if e.step == i]
        w.step(StepRecord.from_events("sc", "p", "counted", i, 0, evs, 1.0), evs)
    w.close(True)
    live = {(s["filename"], s["lineno"], s["api"], s["count"]) for s in g.sites()}
    df = sites(load(str(f)))
    recorded = {(r.filename, int(r.lineno), r.api, int(r["count"])) for _, r in df.iterrows()}
    assert live == recorded and len(live) == 3
