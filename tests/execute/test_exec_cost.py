"""What ``syncguard exec`` costs a long run: no fsync per step (each finished step written and
flushed; fsync at the end and at most about once a second), memory that does not grow with
the steps (counts per site and step, not events), and the same verdicts as when every event
was kept."""

from __future__ import annotations

import os
from typing import Any, Dict, List, Optional, Tuple

import pytest
from _paths import TESTS

import syncguard
from syncguard.cli import main
from syncguard.core import steps as steps_
from syncguard.core.events import SyncEvent
from syncguard.results import drain, loader
from syncguard.results import format as results
from syncguard.results.format import StepRecord
from syncguard.results.writer import ResultWriter

HERE = os.path.join(str(TESTS), "data", "exec")


def _run(tmp_path: Any, *opts: str, steps: int = 10) -> Tuple[int, str]:
    out = str(tmp_path / "o")
    rc = main(["exec", "--device", "cpu", "--step", "budgets:step", "--out", out, "--force",
               *opts, "--", "python", "budgets.py", "--steps", str(steps)])
    return rc, out


def _gate_text() -> Dict[str, str]:
    """The gate's text on budgets.py per option line, as syncguard wrote it while exec kept
    every event (``tests/data/exec/budgets_gate.txt``)."""
    out: Dict[str, str] = {}
    opts = ""
    with open(os.path.join(HERE, "budgets_gate.txt"), encoding="utf-8") as f:
        for line in f:
            if line.startswith("## "):
                opts = line[3:].strip()
                out[opts] = ""
            elif opts:
                out[opts] += line
    return out


GATE_TEXT = _gate_text()


@pytest.mark.parametrize("opts", list(GATE_TEXT))
def test_same_verdicts_as_when_every_event_was_kept(budgets: None, tmp_path: Any,
                                                    capsys: pytest.CaptureFixture,
                                                    opts: str) -> None:
    """--allow, --max-syncs, --max-syncs-per-step (a site named by its call path in the steps
    over budget) and --max-syncs-outside give the text they gave before exec kept counts."""
    rc, out = _run(tmp_path, *opts.split())
    assert rc == 1
    text = capsys.readouterr().out
    want = GATE_TEXT[opts]
    assert want in text, text
    res = loader.load(os.path.join(out, "result.jsonl"))
    outside = [(r["lineno"], r["count"]) for r in results.outside_sites(res)]
    assert outside == [(33, 5), (29, 1), (34, 1)]
    after = sorted((e["lineno"], e["after_step"]) for e in res.events
                   if e["path"] == results.OUTSIDE_PATH)
    assert after == [(29, None), *[(33, i) for i in (0, 2, 4, 6, 8)], (34, 9)]


class _FakeClock:
    """A clock that moves ``tick`` seconds each time it is read."""

    def __init__(self, tick: float) -> None:
        self.t, self.tick = 0.0, tick

    def __call__(self) -> float:
        self.t += self.tick
        return self.t


def test_no_fsync_per_step(budgets: None, tmp_path: Any, monkeypatch: pytest.MonkeyPatch,
                           capsys: pytest.CaptureFixture) -> None:
    """300 steps, the writer's clock moving 10 ms per read (3 s of steps): the result file is
    fsync'ed about once a second and at the end, not once per step."""
    synced: List[int] = []
    real = os.fsync

    def fsync(fd: int) -> None:
        synced.append(os.fstat(fd).st_ino)
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(ResultWriter, "clock", staticmethod(_FakeClock(0.01)),
                        raising=False)
    monkeypatch.setattr(drain, "ENABLED", False)  # the writer's schedule, seen in-process
    rc, out = _run(tmp_path, steps=300)
    assert rc == 0
    path = os.path.join(out, "result.jsonl")
    assert len(loader.load(path).steps) == 300
    n = synced.count(os.stat(path).st_ino)
    assert 1 <= n <= 5, n


def test_the_writer_flushes_every_step_and_fsyncs_about_once_a_second(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    synced: List[int] = []
    monkeypatch.setattr(os, "fsync", lambda fd: synced.append(fd))
    clock = _FakeClock(0.3)
    monkeypatch.setattr(ResultWriter, "clock", staticmethod(clock), raising=False)
    path = str(tmp_path / "result.jsonl")
    w = ResultWriter(path, {"test": True})
    for i in range(10):
        w.step(StepRecord("p", "s", "exec", i, False, 0, 0, 0, 1.0), [])
        # flushed: another reader (or what is left after a SIGKILL) has the step already
        with open(path, encoding="utf-8") as f:
            assert f.read().count('"type":"step"') == i + 1
    # the clock moved 0.3 s per read (a read per step, one more per fsync): 4.2 s in all, an
    # fsync when a second had passed since the last, at 1.5 s and 3.0 s
    assert len(synced) == 2
    w.close(True)
    assert len(synced) == 3 and loader.load(path).complete


class _Writer:
    """Records what a session writes (the steps and the outside events)."""

    def __init__(self) -> None:
        self.steps = 0
        self.outside: List[Tuple[SyncEvent, Optional[int]]] = []

    def exec_reads(self, *fields: Any) -> None:
        self.steps += 1

    def events(self, scenario: str, path: str, pass_: str, events: List[SyncEvent],
               rank: Optional[int] = None, after: Optional[List[Optional[int]]] = None) -> None:
        assert after is not None
        self.outside += list(zip(events, after))


def _ev(line: int, allowed: bool = False) -> SyncEvent:
    return SyncEvent("scalar_read", "Tensor.item", None, os.path.join(HERE, "budgets.py"),
                     line, "step", (), None, "MainThread", allowed=allowed)


@pytest.mark.parametrize("keep", [False, True])
def test_the_session_keeps_no_more_after_400_steps_than_after_20(
        keep: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each step: a hidden and an allowed sync, and one sync outside every step before it.
    The session's tallies, buffers and pending outside events are the same size after 400
    steps as after 20 (every event is in the writer); ``keep_events`` keeps them all."""
    from syncguard.driving.devices import resolve_target
    from syncguard.execute.session import ExecSession

    monkeypatch.setattr(ExecSession, "keep_events", keep, raising=False)

    def run(steps: int) -> Tuple[Any, ...]:
        w = _Writer()
        s = ExecSession("prog", w, resolve_target("cpu"), warmup=1)  # type: ignore[arg-type]
        prev = steps_.set_recorder(s)
        try:
            for _ in range(steps):
                s._on_event(_ev(33))
                with syncguard.step("step"):
                    s._on_event(_ev(16))
                    s._on_event(_ev(22, allowed=True))
        finally:
            steps_.set_recorder(prev)
        s.finish()
        tot = s.totals["step"]
        assert (w.steps, tot.steps, tot.syncs, s.outside.hidden) == (
            steps, steps, steps - 1, steps)
        assert [a for _, a in w.outside] == [None, *range(steps - 1)]
        if keep:
            assert tot.tally.events is not None and len(tot.tally.events) == steps - 1
            assert s.outside.events is not None and len(s.outside.events) == steps
            return ()
        return (tot.tally.kept(), s.outside.kept(), s.outside_after.kept(),
                len(s._unwritten), len(s._steps), len(s._loops), len(s._next))

    assert run(20) == run(400)


_SIGTERM_AT_50 = (
    "import os\nimport signal\nimport torch\nimport syncguard\n\n"
    "x = torch.ones(2)\n"
    "for i in range(100):\n"
    "    if i == 50:\n"
    "        os.kill(os.getpid(), signal.SIGTERM)\n"
    "    with syncguard.step('decode'):\n"
    "        x.sum().item()\n")


@pytest.mark.skipif(not hasattr(os, "kill") or os.name == "nt", reason="needs POSIX SIGTERM")
def test_a_stop_signal_fsyncs_the_finished_steps_before_the_reports(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    """SIGTERM at step 50, the writer's clock stopped (no fsync for time): the result is
    fsync'ed when the stop is caught, before the footer and reports, and once more when it is
    closed; not once per step."""
    (tmp_path / "term.py").write_text(_SIGTERM_AT_50)
    monkeypatch.chdir(tmp_path)
    synced: List[int] = []
    real = os.fsync

    def fsync(fd: int) -> None:
        synced.append(os.fstat(fd).st_ino)
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(ResultWriter, "clock", staticmethod(lambda: 0.0), raising=False)
    monkeypatch.setattr(drain, "ENABLED", False)  # the writer's schedule, seen in-process
    out = str(tmp_path / "o")
    assert main(["exec", "--device", "cpu", "--out", out, "--", "python", "term.py"]) == 143
    path = os.path.join(out, "result.jsonl")
    assert len(loader.load(path).steps) == 50
    assert synced.count(os.stat(path).st_ino) == 2
