"""The one stop sequence of ``run`` and ``exec`` (``_signals.Stop``): the run's interrupt
kept, a signal while the footer and reports are written held until they are whole and then
the stop, the line saying what was kept, the exit code."""

from __future__ import annotations

import os
import signal

import pytest

from syncguard.process import signals as _signals

posix = pytest.mark.skipif(os.name == "nt", reason="POSIX signals")


def test_a_run_that_was_not_stopped() -> None:
    stop = _signals.Stop()
    with stop.finishing():
        assert not stop.stopped
    assert not stop.stopped and stop.exit_code == 0


@pytest.mark.parametrize("exc, code, said", [
    (KeyboardInterrupt(), 130, "interrupted"),
    (_signals.Terminated(), 143, "terminated (SIGTERM)"),
])
def test_the_runs_interrupt_is_the_stop(exc: KeyboardInterrupt, code: int, said: str) -> None:
    stop = _signals.Stop()
    stop.caught(exc)
    with stop.finishing():
        assert stop.stopped
    assert stop.exit_code == code and stop.describe() == said
    assert stop.reason() == ("terminated" if code == 143 else "interrupted")
    assert stop.kept(3, "out/result.jsonl") == f"{said}: kept 3 finished steps in " \
        "out/result.jsonl"
    assert stop.kept(1, "a\nb").endswith(" in a\\nb")  # a path is one line


@posix
def test_a_signal_while_finishing_waits_then_is_the_stop() -> None:
    stop = _signals.Stop()
    done = []
    with _signals.stop_on_signals(), stop.finishing():
        os.kill(os.getpid(), signal.SIGTERM)  # held: the block goes on
        assert stop.stopped  # and the block already knows
        done.append(True)
    assert done and stop.exit_code == 143 and stop.reason() == "terminated"


@posix
def test_a_signal_while_finishing_does_not_replace_the_runs_own() -> None:
    stop = _signals.Stop()
    stop.caught(KeyboardInterrupt())
    with _signals.stop_on_signals(), stop.finishing():
        os.kill(os.getpid(), signal.SIGTERM)
    assert stop.exit_code == 130
