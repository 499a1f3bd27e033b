"""The public way to read a run (``syncguard.load``): a file, a folder, per-rank files, an
interrupted run; its tables are the reports' own; a file that is not a result is one
``SyncguardError`` naming it; reading never imports torch."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import List, Optional

import pandas as pd
import pytest

import syncguard
from syncguard.core.events import Frame, SyncEvent
from syncguard.results.format import StepRecord
from syncguard.results.merge import rank_name
from syncguard.results.writer import ResultWriter


def _ev(step: int, line: int) -> SyncEvent:
    return SyncEvent(kind="scalar_read", api="Tensor.__bool__", op="aten::_local_scalar_dense",
                     filename="/src/sampler.py", lineno=line, function="sample",
                     stack=(Frame("/src/sampler.py", line, "sample"),), step=step,
                     thread="MainThread", allowed=False, count=1, device="npu")


def _write(path: Path, steps: int, close: bool = True, rank: Optional[int] = None) -> None:
    w = ResultWriter(str(path), {"env": {"device": "sim"}, "argv": ["run"]})
    for i in range(steps):
        evs: List[SyncEvent] = [_ev(i, 12)] + ([_ev(i, 30)] if i % 2 else [])
        w.step(StepRecord.from_events("sc", "legacy", "counted", i, 0, evs, 1.0 + i,
                                      batch_size=4, rank=rank), evs)
    if close:
        w.close(True)


def test_load_gives_the_header_steps_and_sites_as_dataframes(tmp_path: Path) -> None:
    _write(tmp_path / "result.jsonl", 4)
    run = syncguard.load(tmp_path)  # a folder, as a path object
    assert isinstance(run, syncguard.Run) and run.complete
    assert run.header["argv"] == ["run"]
    assert isinstance(run.steps, pd.DataFrame) and list(run.steps.step) == [0, 1, 2, 3]
    assert list(run.steps.syncs) == [1, 2, 1, 2]
    sites = run.sites
    assert isinstance(sites, pd.DataFrame)
    counts = dict(zip(sites.site, sites["count"]))
    assert counts == {"/src/sampler.py:12": 4, "/src/sampler.py:30": 2}
    assert len(run.events) == 6 and run.paths == ["legacy"] and run.scenarios == ["sc"]
    assert "4 step records" in repr(run)


def test_an_interrupted_run_loads_with_every_finished_step(tmp_path: Path) -> None:
    _write(tmp_path / "result.jsonl", 3, close=False)
    run = syncguard.load(str(tmp_path / "result.jsonl"))
    assert not run.complete and list(run.steps.step) == [0, 1, 2]


def test_rank_files_merge(tmp_path: Path) -> None:
    for r in (0, 1):
        _write(tmp_path / rank_name(r), 2, rank=r)
    run = syncguard.load(tmp_path)
    assert sorted(set(run.steps["rank"])) == [0, 1] and len(run.steps) == 4


def test_not_a_result_is_one_syncguard_error_naming_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "result.jsonl"
    bad.write_text("not json\n", encoding="utf-8")
    with pytest.raises(syncguard.SyncguardError) as err:
        syncguard.load(bad)
    assert isinstance(err.value, syncguard.ResultError) and str(bad) in str(err.value)
    assert err.value.exit_code == 2


def test_reading_a_run_never_imports_torch(tmp_path: Path) -> None:
    _write(tmp_path / "result.jsonl", 2)
    code = ("import sys, syncguard; r = syncguard.load(sys.argv[1]); r.steps; r.sites; "
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True,
                         text=True, check=True)
    assert out.stdout.strip() == "False"


def test_a_loaded_run_holds_each_call_path_and_name_once(tmp_path: Path) -> None:
    """A long run's events repeat a few call paths: loaded, equal stacks are one list and
    equal names one string, so memory grows with the steps' numbers, not their text."""
    from syncguard.results.loader import load

    _write(tmp_path / "result.jsonl", 6)
    res = load(str(tmp_path / "result.jsonl"))
    at12 = [e for e in res.events if e["lineno"] == 12]
    at30 = [e for e in res.events if e["lineno"] == 30]
    assert len(at12) == 6 and len(at30) == 3
    assert all(e["stack"] is at12[0]["stack"] for e in at12)
    assert at30[0]["stack"] is not at12[0]["stack"]
    assert at30[0]["stack"] == [{"filename": "/src/sampler.py", "lineno": 30,
                                 "function": "sample", "qualname": ""}]
    assert all(s.path is res.steps[0].path for s in res.steps)
    assert all(e["filename"] is at12[0]["filename"] for e in res.events)
