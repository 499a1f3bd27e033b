"""A notebook reads a run right: a plain mean of ``syncs`` over a path's step rows is its count
per step (timed rows, which ran without interceptors, have no count rather than 0), and sites
read as the reports print them (relative paths)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import syncguard
from syncguard.renderers import terminal


def _result(path: Path, site_file: str) -> Path:
    lines = [{"type": "header", "schema": 1, "created": 0,
              "env": {"syncguard": "0.1.0", "torch": "2.13.0", "device": "sim"},
              "scenarios": {}}]
    for i in range(5):  # counted: one hidden sync in every step after the warm-up
        if i:
            lines.append({"type": "event", "scenario": "s", "path": "legacy", "pass": "counted",
                          "kind": "scalar_read", "api": "Tensor.__bool__", "op": None,
                          "filename": site_file, "lineno": 219, "function": "sample",
                          "stack": [], "step": i, "thread": "MainThread", "allowed": False,
                          "reason": None, "warmup": False, "count": 1})
        lines.append({"type": "step", "scenario": "s", "path": "legacy", "pass": "counted",
                      "step": i, "warmup": i == 0, "batch_size": 2, "syncs": int(i > 0),
                      "allowed": 1, "latency_ms": 1.0})
    for rnd in range(8):  # timed: 8 rounds of 5 steps, no interceptors
        for i in range(5):
            lines.append({"type": "step", "scenario": "s", "path": "legacy", "pass": "timed",
                          "step": i, "warmup": i == 0, "batch_size": 2, "syncs": 0,
                          "allowed": 0, "latency_ms": 2.0, "round": rnd})
    lines.append({"type": "footer", "complete": True})
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    return path


def test_a_plain_mean_of_syncs_is_the_count_per_step(tmp_path: Path) -> None:
    run = syncguard.load(_result(tmp_path / "result.jsonl", "/src/sampler.py"))
    steps = run.steps[~run.steps.warmup]
    mean = steps.groupby(["scenario", "path"]).syncs.mean()
    assert float(mean[("s", "legacy")]) == 1.0  # not 4 of 36 rows (0.11)
    assert float(mean[("s", "legacy")]) == float(run.summary.syncs_mean.iloc[0])
    timed = run.steps[run.steps["pass"] == "timed"]
    assert len(timed) == 40 and timed.syncs.isna().all() and timed.allowed.isna().all()
    counted = run.steps[run.steps["pass"] == "counted"]
    assert list(counted.syncs) == [0, 1, 1, 1, 1]  # whole numbers, not floats
    assert timed.latency_ms.mean() == pytest.approx(2.0)


def test_sites_read_as_the_reports_print_them(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    src = tmp_path / "pkg" / "sampler.py"
    run = syncguard.load(_result(tmp_path / "result.jsonl", str(src)))
    assert list(run.sites.site) == ["pkg/sampler.py:219"]
    assert run.sites.filename.iloc[0] == str(src)  # the file as recorded
    assert set(run.events.site) == {"pkg/sampler.py:219"}
    report = terminal.render(run.result, width=200)
    assert "pkg/sampler.py:219" in report and str(src) not in report
