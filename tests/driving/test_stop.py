"""A Ctrl-C that the driven code swallows still stops a run at the next step boundary."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
from _paths import TESTS

from syncguard.driving import devices, runner
from syncguard.driving.scenario import load as load_scenario
from syncguard.process import signals as _signals
from syncguard.results import loader
from syncguard.results.writer import ResultWriter

LONG = str(TESTS / "data" / "scenarios" / "long.toml")


def _swallowed_sigint() -> None:
    try:
        os.kill(os.getpid(), signal.SIGINT)  # the handler runs before kill() returns
    except KeyboardInterrupt:
        pass  # what a __del__, a weakref callback or `except BaseException` does to it


def test_swallowed_interrupt_still_stops_the_run_at_the_next_step(tmp_path: Path) -> None:
    sc = load_scenario(LONG).with_steps(50, 1)
    target = devices.resolve_target("sim")
    out = tmp_path / "r.jsonl"
    writer = ResultWriter(str(out), {})
    seen = []

    def progress(name: str, path: str, pass_: str, step: int, n: int) -> None:
        seen.append(step)
        if step == 3:
            _swallowed_sigint()

    with _signals.stop_on_signals():
        with pytest.raises(KeyboardInterrupt):
            runner.run_pass(sc, "legacy", target, True, writer, progress, collect=False)
    writer.close(False, reason="interrupted")
    assert seen == [1, 2, 3]  # stopped right after the step that was running
    assert len(loader.load(str(out)).steps) == 3
    assert _signals.requested() is None  # the request does not outlive the block


def test_swallowed_sigterm_is_raised_again_as_terminated() -> None:
    with _signals.stop_on_signals():
        try:
            os.kill(os.getpid(), signal.SIGTERM)
        except KeyboardInterrupt:
            pass
        with pytest.raises(_signals.Terminated) as exc:
            _signals.check()
    assert exc.value.exit_code == 143


def test_without_a_request_check_is_a_no_op() -> None:
    with _signals.stop_on_signals():
        _signals.check()
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
