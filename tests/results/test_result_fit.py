"""Every field the result writer writes, the loader reads: hostile events (no line number, a
name, path or thread name over the loader's 4,096 characters, a NUL in a file name) written
by the in-process writer and by the drain, then loaded."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, List

import pytest

from syncguard.core.events import Frame, Stack, SyncEvent
from syncguard.process.atomic import claim
from syncguard.results import drain, fit, loader
from syncguard.results import format as results
from syncguard.results.format import ExecStep, StepKey
from syncguard.results.writer import ResultWriter

LONG = "f" * 5000


def _ev(step: int, lineno: Any, function: str = "decode", filename: str = "/w/prog.py",
        thread: str = "MainThread", frame_line: Any = 7) -> SyncEvent:
    stack = Stack([Frame(filename, frame_line, function, "Model." + function),
                   Frame("/w/prog.py", None, "main")])
    return SyncEvent.make(kind="scalar_read", api="Tensor.item", op="aten::_local_scalar_dense",
                          filename=filename, lineno=lineno, function=function, stack=stack,
                          step=step, thread=thread, allowed=False, reason=None, warmup=False,
                          count=1, device="npu", source=None, wait_us=2.5, lineage=None)


def _hostile(step: int) -> List[SyncEvent]:
    return [_ev(step, None), _ev(step, 12, function=LONG), _ev(step, 13, thread=LONG),
            _ev(step, 14, filename="/w/" + "d" * 5000 + ".py", frame_line=None),
            _ev(step, 15, filename="/w/nul\x00.py")]


def _feed(w: Any) -> None:
    for i in range(3):
        w.exec_step(ExecStep(StepKey("p" * 5000, "s" * 5000, "exec"), step=i, warmup=False,
                             syncs=5, allowed=0, latency_ms=1.0, wait_us=1.0),
                             _hostile(i))
    w.events("p" * 5000, results.OUTSIDE_PATH, "exec", _hostile(0), None, [2] * 5)
    w.close(True, exit_code=0)


def _check(path: str) -> None:
    res = loader.load(path)  # refused before: lineno null, a string over 4096 characters
    assert [s.step for s in res.steps] == [0, 1, 2]
    assert all(len(s.path) <= fit.MAX and s.path.endswith(fit.CUT) for s in res.steps)
    evs = res.events
    assert evs, "the events are written"
    assert {e["lineno"] for e in evs} >= {fit.NO_LINE, 12}
    for e in evs:
        assert all(len(e[k]) <= fit.MAX for k in ("function", "thread", "filename", "path",
                                                   "scenario"))
        assert "\x00" not in e["filename"]
        assert all(type(fr["lineno"]) is int for fr in e["stack"])
    assert any(e["function"].endswith(fit.CUT) for e in evs)
    assert any(e["thread"].endswith(fit.CUT) for e in evs)


def test_the_loader_reads_the_in_process_writers_hostile_events(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    _feed(ResultWriter(str(path), {"argv": []}, events_per_site=2))
    _check(str(path))


@pytest.mark.skipif(os.name != "posix", reason="the drain is a POSIX process")
def test_the_loader_reads_the_drains_hostile_events(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    fd = claim(str(path), False)
    try:
        w = drain.start(str(path), fd, {"argv": []}, 2)
        assert isinstance(w, drain.DrainWriter)
        _feed(w)
        w.raise_error()
    finally:
        os.close(fd)
    _check(str(path))


def test_fit_cuts_with_a_mark_and_keeps_what_fits() -> None:
    assert fit.text("x" * fit.MAX) == "x" * fit.MAX
    cut = fit.text("x" * (fit.MAX + 1))
    assert len(cut) == fit.MAX and cut.endswith(fit.CUT)
    assert fit.line(None) == fit.NO_LINE and fit.line(-1) == fit.NO_LINE and fit.line(3) == 3
