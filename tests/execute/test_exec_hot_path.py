"""What ``exec`` does once per step, made cheap, still says the same: the step line formatted
straight from the session's counts loads as the record ``StepRecord.from_events`` makes; a
line goes whole into the file however the kernel splits the write; a user stack kept per
calling stack is the one a walk gives, one per call site; and the stacks of a program run
under ``exec`` end at the program (syncguard's launcher is no frame of the user's)."""

from __future__ import annotations

import copy
import os
import pickle
import sys
from typing import Any, List, Tuple

import pytest
from _cli import cli

from syncguard.core.events import Frame, Stack, SyncEvent
from syncguard.core.hub import HUB
from syncguard.results import format as results
from syncguard.results import loader
from syncguard.results import writer as result_writer
from syncguard.results.format import ExecStep, StepKey
from syncguard.results.writer import ResultWriter


def _event(step: int, wait: float, line: int = 12) -> SyncEvent:
    stack = Stack([Frame("/w/prog.py", line, "step"), Frame("/w/prog.py", 40, "main")])
    return SyncEvent("scalar_read", "Tensor.item", "aten::_local_scalar_dense", "/w/prog.py",
                     line, "step", stack, step, "MainThread", wait_us=wait, device="cpu")


@pytest.mark.parametrize("rank", [None, 3])
def test_the_exec_step_line_loads_as_the_record_from_events(tmp_path: Any,
                                                            rank: Any) -> None:
    """Twenty steps written both ways (the last four with a label, device time and an
    allowed read): the same records, reads and events, times equal to the nanosecond."""
    recs, lines = [], []
    for way in ("record", "fast"):
        path = str(tmp_path / f"{way}.jsonl")
        w = ResultWriter(path, {"scenarios": {}}, events_per_site=3)
        for i in range(20):
            evs = [_event(i, 1.23456789 + i), _event(i, 2.5, line=13)]
            labels = {"phase": "prefill"} if i >= 16 else None
            dev = 0.25 + i / 7 if i >= 16 else None
            if i >= 16:
                evs.append(SyncEvent("d2h_copy", "Tensor.tolist", None, "/w/prog.py", 20,
                                     "step", (), i, "MainThread", allowed=True, reason="ok"))
            latency = 1.0 / 3 + i
            warm = i < 2
            if warm:
                evs = [e.evolve(warmup=True) for e in evs]
            if way == "record":
                w.step(results.StepRecord.from_events(
                    "prog.py", "decode", "exec", i, 2, evs, latency, device_ms=dev, rank=rank,
                    labels=labels), evs)
            else:
                hidden = [e for e in evs if not e.allowed]
                w.exec_step(ExecStep(StepKey("prog.py", "decode", "exec", rank), step=i,
                                     warmup=warm, syncs=len(hidden),
                                     allowed=len(evs) - len(hidden), latency_ms=latency,
                                     device_ms=dev, wait_us=sum(e.wait_us or 0.0 for e in hidden),
                                     labels=labels), evs)
        w.close(True)
        res = loader.load(path)
        recs.append(res.steps)
        lines.append(list(res.iter_events()))
    a, b = recs
    assert len(a) == len(b) == 20
    for x, y in zip(a, b):
        dx, dy = x.to_dict(), y.to_dict()
        for k, ns in (("latency_ms", 1e-6), ("device_ms", 1e-6), ("sync_wait_us", 1e-3)):
            vx, vy = dx.pop(k), dy.pop(k)  # to the nanosecond: half of it, rounded
            assert (vx is None) == (vy is None) and (vx is None or abs(vx - vy) <= ns / 2), k
        assert dx == dy
    assert len(lines[0]) == len(lines[1]) == 44  # two a step, an allowed one in the last four
    for ex, ey in zip(*lines):
        wx, wy = ex.pop("wait_us"), ey.pop("wait_us")
        assert (wx is None) == (wy is None) and (wx is None or abs(wx - wy) <= 5e-4)
        assert ex == ey


def test_a_line_is_written_whole_through_short_writes(tmp_path: Any,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The kernel may write part of a buffer (a signal, a nearly full disk): the rest
    follows, so no line is cut short while the run goes on."""
    path = str(tmp_path / "r.jsonl")
    w = ResultWriter(path, {"scenarios": {}}, events_per_site=1)
    real = os.write
    calls: List[int] = []

    def short(fd: int, data: bytes) -> int:
        calls.append(len(data))
        return real(fd, bytes(data)[:7])

    monkeypatch.setattr(result_writer.os, "write", short)
    for i in range(5):
        w.exec_step(ExecStep(StepKey("prog.py", "decode", "exec"), step=i, warmup=False,
                             syncs=1, allowed=0, latency_ms=0.5, wait_us=1.0), [_event(i, 1.0)])
    monkeypatch.setattr(result_writer.os, "write", real)
    w.close(True)
    assert len(calls) > 50  # it was cut, many times
    res = loader.load(path)
    assert [s.step for s in res.steps] == list(range(5))
    assert len(res.reads) == 4 and w.error is None


def _read_here() -> Tuple[Frame, ...]:
    return HUB.user_stack()


def _two_sites() -> List[Tuple[Frame, ...]]:
    out = []
    for _ in range(3):
        out.append(_read_here())
        out.append(_read_here())
    return out


def test_a_kept_user_stack_is_the_walked_one_per_call_site() -> None:
    """The same stack from the same line each time (kept, so the very same object), the
    walk's answer, and another from the next line."""
    got = _two_sites()
    first, second = got[0], got[1]
    assert first is not second and first[1].lineno + 1 == second[1].lineno
    assert all(g is first for g in got[0::2]) and all(g is second for g in got[1::2])
    walked, _ = HUB._walk(sys._getframe(), 8)
    assert first[3:] == walked[1:len(first) - 2]
    assert first[0].function == "_read_here" and first[1].function == "_two_sites"


def test_a_stack_hashes_and_equals_as_its_tuple() -> None:
    s = Stack([Frame("a.py", 1, "f"), Frame("b.py", 2, "g", "C.g")])
    t = tuple(s)
    assert s == t and hash(s) == hash(t) and {t: 1}[s] == 1
    for back in (copy.deepcopy(s), pickle.loads(pickle.dumps(s))):
        assert back == t and hash(back) == hash(t)


def test_an_exec_stack_ends_at_the_program(capsys: pytest.CaptureFixture, tmp_path: Any,
                                           budgets: None) -> None:
    """Every frame of every event is the program's: the CLI and runpy frames that run it
    (``syncguard/cli/exec.py``, ``__main__.py``) were listed as the user's callers. And the
    header names the device as what it was: CPU tensors, their reads counted."""
    out = str(tmp_path / "o")
    cli(capsys, "exec", "--device", "cpu", "--step", "budgets:step", "--out", out, "--force",
        "--", "python", "budgets.py", "--steps", "3")
    res = loader.load(os.path.join(out, "result.jsonl"))
    events = list(res.iter_events())
    assert events
    files = {os.path.basename(f["filename"]) for e in events for f in e["stack"]}
    assert files <= {"budgets.py", "budgets_helper.py"}, files
    # the header says what cpu mode counted (it said "no syncs counted", over a count of them)
    assert "reads of CPU tensors counted" in res.header["env"]["device_name"]


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_a_time_json_cannot_hold_is_written_as_null(tmp_path: Any, bad: float) -> None:
    """A read's wait or a device time that is NaN or infinite (a broken device timer) goes
    into the step line as ``null``: the line stays JSON and the step loads."""
    path = str(tmp_path / "r.jsonl")
    w = ResultWriter(path, {"scenarios": {}}, events_per_site=1)
    for i in range(3):  # the first read is an event line, the later ones reads of the site
        w.exec_step(ExecStep(StepKey("prog.py", "decode", "exec"), step=i, warmup=False,
                             syncs=1, allowed=0, latency_ms=1.5, device_ms=bad, wait_us=0.0),
                    [_event(i, bad)])
    w.close(True)
    with open(path, encoding="utf-8") as f:
        text = f.read()
    assert "NaN" not in text and "Infinity" not in text
    res = loader.load(path)
    assert [s.device_ms for s in res.steps] == [None, None, None]
    assert [s.latency_ms for s in res.steps] == [1.5, 1.5, 1.5]
    assert [e.get("wait_us") for e in res.iter_events()] == [None, None, None]


def test_a_step_name_counts_its_reads_in_batches_and_loses_none() -> None:
    """The session's per-name totals hold at most a batch of reads between countings, and
    the tally they give counts every hidden read of every step, per site and step, as the
    tally fed each read's event at once does; allowed reads are not counted."""
    from syncguard.core.events import ReadSite
    from syncguard.execute.session import StepTotals
    from syncguard.gate.verdicts import Tally

    tot, direct = StepTotals("decode"), Tally()
    steps = 3 * StepTotals.BATCH + 5
    for i in range(steps):
        evs = [_event(i, 1.0), _event(i, 2.0, line=13)]
        if i % 7 == 0:
            evs.append(_event(i, 0.5, line=14).evolve(allowed=True, reason="ok"))
        tot.count(i, [(ReadSite(e), e.wait_us, None) for e in evs])
        direct.extend(evs)
        assert tot._n < StepTotals.BATCH + 3  # flat: never more than a batch
    t = tot.tally
    assert t.hidden == direct.hidden == 2 * steps
    assert [(s.count, s.steps) for s in t.sites()] == [
        (s.count, s.steps) for s in direct.sites()]
    assert t.per_step.runs() == direct.per_step.runs() == [(0, steps - 1, 2)]
    assert tot.tally is t and not tot._held  # asked again: nothing more to count


def _item_reads(x: Any) -> None:
    for _ in range(3):
        x.item()  # three reads from one line and call: one site
    x.item()  # another line: another site


def test_exec_s_guard_gets_a_read_as_its_site_not_an_event_each(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A guard with ``on_read`` (exec's, the only one) gets each read as ``(site, wait)``:
    one site object for every read from the same line and call, its event naming that line
    at no step, and ``site.at(step, wait)`` is the event the general path makes of the same
    read; counted as events are. A read with lineage comes as an event (``on_event``)."""
    import torch

    from syncguard.core.guard import SyncGuard

    line = _item_reads.__code__.co_firstlineno + 2
    x = torch.ones(1)
    got: List[Any] = []
    events: List[SyncEvent] = []
    g = SyncGuard(devices=("cpu",), keep_events=False, on_event=events.append,
                  on_read=lambda site, wait: got.append((site, wait)))
    plain = SyncGuard(devices=("cpu",))  # no on_read: an event per read
    for guard in (g, plain):  # from one line: the same stacks
        with guard:
            _item_reads(x)
    assert len(got) == 4 and not events and g.count == 4
    (a, b, c, d) = [site for site, _ in got]
    assert a is b is c and d is not a
    assert (a.event.lineno, a.event.step, d.event.lineno) == (line, None, line + 1)
    assert all(isinstance(w, float) for _, w in got)
    ev = plain.events[0]
    assert a.at(None, ev.wait_us) == ev and a.at(5, 1.0).step == 5

    monkeypatch.setattr(HUB, "lineage", lambda read: {"verdict": "host"})
    got.clear()
    with g:
        _item_reads(x)
    assert not got and [e.lineage for e in events] == [{"verdict": "host"}] * 4
