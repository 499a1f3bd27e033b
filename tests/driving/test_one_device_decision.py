"""``syncguard run`` decides its device once, in the command, and hands the resolved target to
the runner, which runs the scenarios the command prepared once: nothing below decides again."""

from __future__ import annotations

from pathlib import Path
from typing import Any, List

import pytest

from syncguard.driving import devices, runner, scenario
from syncguard.results import loader


def test_the_runner_runs_on_the_target_it_is_given(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    target = devices.resolve_target("sim")
    asked: List[Any] = []

    def again(*a: Any, **k: Any) -> Any:
        asked.append(a)
        raise AssertionError("the device was resolved a second time")

    prepared: List[Any] = []
    real_prepare = runner.prepare

    def prepare(*a: Any, **k: Any) -> Any:
        prepared.append(a)
        return real_prepare(*a, **k)

    opts = runner.RunOptions(device="sim", paths=["flag"], steps=3, warmup=1, timed=False)
    scs = runner.prepare(scenario.resolve(["steady"]), opts)
    monkeypatch.setattr(runner, "resolve_target", again)
    monkeypatch.setattr(runner, "prepare", prepare)
    out = tmp_path / "result.jsonl"
    runner.run(scs, opts, str(out), target=target)
    assert asked == [] and prepared == []
    res = loader.load(str(out))
    assert res.header["env"]["device"] == "sim"
    assert len(res.steps) == 3
