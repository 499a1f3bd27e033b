"""The drain (syncguard.results.drain): the process that writes ``exec``'s result file from
what the program's process sends it. Its file is the in-process writer's, line for line; a
drain that ends early, or cannot write, is one write error after the program; where none can
start, ``exec`` writes in-process."""

from __future__ import annotations

import json
import os
import re
import signal
import sys
from pathlib import Path
from typing import Any, Dict, List

import pytest

from syncguard.cli import main
from syncguard.core.events import Frame, ReadSite, Stack, SyncEvent
from syncguard.process.atomic import OutputError, claim
from syncguard.results import drain, loader
from syncguard.results import format as results
from syncguard.results.format import ExecStep, StepKey
from syncguard.results.writer import ResultWriter

posix = pytest.mark.skipif(os.name != "posix", reason="the drain is a POSIX process")


def _ev(line: int, step: Any, wait: Any = 2.5, lineage: Any = None, thread: str = "MainThread",
        count: int = 1, warmup: bool = False) -> SyncEvent:
    stack = Stack([Frame("/w/prog.py", line, "decode", "Model.decode"),
                   Frame("/w/prog.py", 90, "main")])
    return SyncEvent.make(kind="scalar_read", api="Tensor.item", op="aten::_local_scalar_dense",
                          filename="/w/prog.py", lineno=line, function="decode", stack=stack,
                          step=step, thread=thread, allowed=False, reason=None, warmup=warmup,
                          count=count, device="npu", source=None, wait_us=wait, lineage=lineage)


def _feed(w: Any, reads: bool = False) -> None:
    """The calls an exec run makes: steps past the per-site cap, a lineage, labels, a rank,
    a warm-up step, waits that are None or not finite, outside events, notes. ``reads``:
    each step's reads given as exec gives them (``exec_reads``: one site object per line,
    each read its site, wait and lineage), not as events."""
    sites: Dict[int, ReadSite] = {}
    for i in range(40):
        evs = [_ev(12, i, wait=0.001 * i), _ev(14, i, wait=None if i % 5 else float("nan"))]
        if i % 7 == 0:
            evs.append(_ev(20, i, lineage={"verdict": "host", "source": "top_k", "n": i}))
        labels = {"phase": "prefill"} if i == 0 else None
        if reads:
            rs = [(sites.setdefault(e.lineno, ReadSite(e.evolve(step=None, wait_us=None,
                                                                   lineage=None))),
                   e.wait_us, e.lineage) for e in evs]
            w.exec_reads(ExecStep(StepKey("prog.py", "decode", "exec"), step=i, warmup=i < 2,
                                  syncs=len(evs), allowed=0, latency_ms=1.25 + i,
                                  device_ms=None if i % 2 else 0.5, wait_us=3.0, labels=labels),
                                  rs)
        else:
            w.exec_step(ExecStep(StepKey("prog.py", "decode", "exec"), step=i, warmup=i < 2,
                                 syncs=len(evs), allowed=0, latency_ms=1.25 + i,
                                 device_ms=None if i % 2 else 0.5, wait_us=3.0, labels=labels),
                                 evs)
        if i % 10 == 3:
            w.events("prog.py", results.OUTSIDE_PATH, "exec",
                     [_ev(30, None, thread="sched"), _ev(31, None, count=2)], None, [i, i])
    w.exec_step(ExecStep(StepKey("prog.py", "decode", "exec", 3), step=0, warmup=False,
                         syncs=1, allowed=0, latency_ms=1.0, wait_us=1.0),
                [_ev(12, 0)])  # another rank: sites of its own
    w.note(message="a note", n=3, nested={"a": [1, 2]})
    w.close(True, exit_code=0)


def _lines(path: Path) -> List[str]:
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        out.append(re.sub(r'"(created|finished)":[0-9.e+]+', '"T":0', line))
    return out


@posix
@pytest.mark.parametrize("reads", [False, True], ids=["events", "reads"])
def test_the_drain_writes_the_in_process_writers_file_line_for_line(tmp_path: Path,
                                                                    reads: bool) -> None:
    here, there = tmp_path / "here.jsonl", tmp_path / "there.jsonl"
    header = {"argv": ["exec", "x"], "env": {"python": sys.version}}
    _feed(ResultWriter(str(here), header, events_per_site=4), reads)
    fd = claim(str(there), False)
    try:
        w = drain.start(str(there), fd, header, 4)
        assert isinstance(w, drain.DrainWriter), "no drain started"
        _feed(w, reads)
        w.raise_error()
    finally:
        os.close(fd)
    assert _lines(there) == _lines(here)
    res = loader.load(str(there))
    assert res.complete and len(res.steps) == 41
    if reads:  # the step's warm-up flag is its reads' (events given alone carry their own)
        assert {(e["step"], e["warmup"]) for e in res.events
                if e["step"] in (0, 1, 2) and e.get("rank") is None} == {
            (0, True), (1, True), (2, False)}
        assert sum(1 for e in res.events if e.get("lineage")) >= 4


@posix
def test_a_drain_that_ends_early_is_one_write_error_and_keeps_its_lines(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    fd = claim(str(path), False)
    try:
        w = drain.start(str(path), fd, {}, 2)
        assert isinstance(w, drain.DrainWriter)
        for i in range(5):
            w.exec_step(ExecStep(StepKey("p", "s", "exec"), step=i, warmup=False, syncs=1,
                                 allowed=0, latency_ms=1.0, wait_us=1.0), [_ev(12, i)])
        w.sync()
        for _ in range(200):  # the drain wrote them (it looks every POLL_S)
            if _lines(path)[-1:] and '"step":4' in _lines(path)[-1]:
                break
            import time
            time.sleep(0.02)
        os.kill(w._proc.pid, signal.SIGKILL)
        w._proc.wait()
        for i in range(5, 400):  # the pipe breaks: no exception into the program
            w.exec_step(ExecStep(StepKey("p", "s", "exec"), step=i, warmup=False, syncs=1,
                                 allowed=0, latency_ms=1.0, wait_us=1.0), [_ev(12, i)])
        w.close(True)
        with pytest.raises(OutputError, match="r.jsonl.*ended early|r.jsonl.*exited"):
            w.raise_error()
    finally:
        os.close(fd)
    assert [s.step for s in loader.load(str(path)).steps] == [0, 1, 2, 3, 4]


@posix
def test_a_drain_that_cannot_write_reports_the_error_after_the_run(tmp_path: Path) -> None:
    if not os.path.exists("/dev/full"):
        pytest.skip("needs /dev/full")
    fd = os.open("/dev/full", os.O_WRONLY)
    try:
        w = drain.start(str(tmp_path / "r.jsonl"), fd, {}, 2)
        assert isinstance(w, drain.DrainWriter)
        w.exec_step(ExecStep(StepKey("p", "s", "exec"), step=0, warmup=False, syncs=1, allowed=0,
                             latency_ms=1.0, wait_us=1.0), [_ev(12, 0)])
        w.close(True)
        with pytest.raises(OutputError, match="No space left on device"):
            w.raise_error()
    finally:
        os.close(fd)


def test_without_a_drain_exec_writes_in_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture) -> None:
    """A drain that cannot start (here: no Python to start it with): the run writes its file
    itself, as it did before drains."""
    started: List[Any] = []
    real = drain.start

    def start(*a: Any) -> Any:
        monkeypatch.setattr(sys, "executable", str(tmp_path / "no-python"))
        got = real(*a)
        started.append(got)
        return got

    monkeypatch.setattr(drain, "start", start)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "prog.py").write_text("import torch\nfor i in range(5):\n"
                                      "    with __import__('syncguard').step():\n"
                                      "        torch.ones(1).item()\n")
    rc = main(["exec", "--device", "cpu", "--out", "o", "--", "python", "prog.py"])
    assert started == [None]
    assert rc == 0, capsys.readouterr().err
    res = loader.load(str(tmp_path / "o" / "result.jsonl"))
    assert res.complete and [s.syncs for s in res.steps] == [1] * 5


@posix
def test_the_drain_is_what_exec_writes_with(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture) -> None:
    made: List[Any] = []
    real = drain.start
    monkeypatch.setattr(drain, "start", lambda *a: made.append(real(*a)) or made[-1])
    monkeypatch.chdir(tmp_path)
    (tmp_path / "prog.py").write_text("import torch\nfor i in range(30):\n"
                                      "    with __import__('syncguard').step():\n"
                                      "        torch.ones(1).item()\n")
    rc = main(["exec", "--device", "cpu", "--out", "o", "--", "python", "prog.py"])
    assert rc == 0, capsys.readouterr().err
    assert len(made) == 1 and isinstance(made[0], drain.DrainWriter)
    assert made[0]._proc.returncode == 0  # the drain finished before the reports
    lines = (tmp_path / "o" / "result.jsonl").read_text().splitlines()
    assert json.loads(lines[-1])["type"] == "footer"
    assert sum('"type":"step"' in ln for ln in lines) == 30


def test_the_drain_reads_messages_however_the_pipe_splits_them(tmp_path: Path) -> None:
    """Whole messages are acted on, a partial one waits for its rest, and the buffer keeps
    only what is left: fed in pieces of every size, the drain writes what it writes fed
    all at once."""
    import marshal

    def msg(m: Any) -> bytes:
        return marshal.dumps(m, drain._MARSHAL)

    site = drain._site_fields(SyncEvent("scalar_read", "Tensor.item", "aten::x", "/w/a.py", 3,
                                        "f", (Frame("/w/a.py", 3, "f"),), None, "MainThread",
                                        device="npu"))
    stream = msg(("open", "r.jsonl", "{}", 2)) + msg(("site", 0, site)) + b"".join(
        msg(drain._step_message(ExecStep(StepKey("p", "s", "exec"), step=i, warmup=False,
                                         syncs=1, allowed=0, latency_ms=1.0 + i, wait_us=1.5),
                                ((0, i, 1, 1.5, False, None),)))
        for i in range(6)) + msg(("close", True, "{}"))

    def written(piece: int) -> List[str]:
        path = tmp_path / f"r{piece}.jsonl"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        _, status = os.pipe()
        d = drain._Drain(fd, status)
        buf = bytearray()
        for at in range(0, len(stream), piece):
            buf += stream[at:at + piece]
            del buf[:d.feed(buf)]
            assert len(buf) < len(stream)
        assert d.closed and not buf
        return _lines(path)

    whole = written(len(stream))
    assert sum('"type":"step"' in ln for ln in whole) == 6
    for piece in (1, 3, 4, 7, 50):
        assert written(piece) == whole


@posix
def test_a_drain_that_exits_at_once_leaves_no_descriptor_open(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A drain that never comes up (its interpreter exits at once): :func:`drain.start` gives
    None, for the run to write in-process, with every pipe it made closed."""
    if not os.path.exists("/proc/self/fd") or not os.path.exists("/bin/false"):
        pytest.skip("needs /proc and /bin/false")
    monkeypatch.setattr(sys, "executable", "/bin/false")
    fd = claim(str(tmp_path / "r.jsonl"), False)
    try:
        before = sorted(os.listdir("/proc/self/fd"))
        for _ in range(5):
            assert drain.start(str(tmp_path / "r.jsonl"), fd, {}, 2) is None
        assert sorted(os.listdir("/proc/self/fd")) == before
        assert not drain._OPEN_FDS
    finally:
        os.close(fd)


@posix
def test_the_drain_outlives_the_signals_a_program_or_scheduler_sends(tmp_path: Path) -> None:
    """SIGUSR1 (SLURM's --signal=USR1), SIGUSR2, SIGHUP, SIGALRM, SIGQUIT sent to the drain
    itself: it writes on, every step kept and the footer written."""
    path = tmp_path / "r.jsonl"
    fd = claim(str(path), False)
    try:
        w = drain.start(str(path), fd, {}, 2)
        assert isinstance(w, drain.DrainWriter)
        assert os.getsid(w._proc.pid) != os.getsid(0), "the drain left the program's session"
        for i, sig in enumerate([signal.SIGUSR1, signal.SIGUSR2, signal.SIGHUP, signal.SIGALRM,
                                 signal.SIGQUIT]):
            os.kill(w._proc.pid, sig)
            w.exec_step(ExecStep(StepKey("p", "s", "exec"), step=i, warmup=False, syncs=1,
                                 allowed=0, latency_ms=1.0, wait_us=1.0), [_ev(12, i)])
            w.sync()
        w.close(True)
        w.raise_error()
    finally:
        os.close(fd)
    res = loader.load(str(path))
    assert [s.step for s in res.steps] == [0, 1, 2, 3, 4]
    assert res.complete


@posix
def test_a_drain_killed_outright_says_how_many_steps_are_not_in_the_file(
        tmp_path: Path) -> None:
    """A drain killed with SIGKILL (no signal the program sends reaches it now; the OOM
    killer, an operator's kill -9 may): the error line counts the steps sent to it that the
    file lacks."""
    path = tmp_path / "r.jsonl"
    fd = claim(str(path), False)
    try:
        w = drain.start(str(path), fd, {}, 2)
        assert isinstance(w, drain.DrainWriter)
        os.kill(w._proc.pid, signal.SIGKILL)
        w._proc.wait()
        for i in range(7):
            w.exec_step(ExecStep(StepKey("p", "s", "exec"), step=i, warmup=False, syncs=1,
                                 allowed=0, latency_ms=1.0, wait_us=1.0), [_ev(12, i)])
        w.close(True)
        with pytest.raises(OutputError, match="r.jsonl: .* 7 of 7 steps sent to it are not "
                                              "in the file"):
            w.raise_error()
    finally:
        os.close(fd)


@posix
def test_a_signal_handlers_read_landing_as_a_site_is_numbered_keeps_the_drain_whole(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A handler that reads (and ends a step) while the writer numbers that same site: its
    step never names a template the drain has not been sent (the drain died of a KeyError,
    the run lost every step after)."""
    path = tmp_path / "r.jsonl"
    fd = claim(str(path), False)
    fields = drain._site_fields
    nested: List[int] = []

    def handler_lands_here(ev: SyncEvent) -> Any:
        if not nested:  # as a signal handler would, once: a step with the same read
            nested.append(1)
            w.exec_step(ExecStep(StepKey("p", "s", "exec"), step=0, warmup=False, syncs=1,
                                 allowed=0, latency_ms=1.0, wait_us=1.0), [_ev(12, 0)])
        return fields(ev)

    monkeypatch.setattr(drain, "_site_fields", handler_lands_here)
    try:
        w = drain.start(str(path), fd, {}, 4)
        assert isinstance(w, drain.DrainWriter)
        w.exec_step(ExecStep(StepKey("p", "s", "exec"), step=1, warmup=False, syncs=1, allowed=0,
                             latency_ms=1.0, wait_us=1.0), [_ev(12, 1)])
        w.close(True)
        w.raise_error()
    finally:
        os.close(fd)
    res = loader.load(str(path))
    assert [s.step for s in res.steps] == [0, 1]
    assert res.complete
