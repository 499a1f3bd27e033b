"""compare of two runs does not mistake the machine for the code: syncs and modeled latency
exactly, each path's within-run ratio to its baseline across runs, absolute host time only on
the same recorded machine."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import math
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List

import pytest
from _paths import TESTS

from syncguard.cli import EXIT_OK, main
from syncguard.renderers import terminal
from syncguard.results import analysis, loader
from syncguard.results import format as results
from syncguard.results.machine import machine_differs

SMALL = str(TESTS / "data" / "scenarios" / "small.toml")
MACHINE: Dict[str, Any] = {"cpu_model": "X", "cpu_count": 8, "loadavg_1m": 0.5,
                           "torch_threads": 4, "reference_ms": 10.0}


def _run(out: Path) -> int:
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        return main(["run", SMALL, "--device", "sim", "--out", str(out), "--steps", "6",
                     "--warmup", "1", "--repeat", "8", "--paths", "legacy,flag"])


def test_identical_code_with_a_cpu_burner_beside_one_run_is_no_code_change(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """End to end, what holds whatever the machine did: counts and the modeled latency
    compare exactly, and absolute host time is never compared across machines. (Whether the
    within-run ratio moved is real timing here, noisy on a shared machine: its rule is
    tested on fixed latencies below.)"""
    assert _run(tmp_path / "a") == EXIT_OK
    burner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        assert _run(tmp_path / "b") == EXIT_OK
    finally:
        burner.kill()
        burner.wait()
    a = loader.load(str(tmp_path / "a" / "result.jsonl"))
    b = loader.load(str(tmp_path / "b" / "result.jsonl"))
    assert "reference_ms" in a.header["machine"] and "reference_ms" in b.header["machine"]
    df = analysis.compare(a, b)
    assert len(df) == 2
    assert (df["syncs_delta"] == 0).all()  # counts exactly
    assert (df["a_modeled_ms"] == df["b_modeled_ms"]).all()  # modeled latency exactly
    capsys.readouterr()
    rc = main(["compare", str(tmp_path / "a" / "result.jsonl"),
               str(tmp_path / "b" / "result.jsonl"), "--width", "200"])
    out = capsys.readouterr().out
    assert rc == EXIT_OK and "rows changed" in out
    for r in df.to_dict("records"):  # absolute host time: only on the same machine
        if r["machine"] != "same":
            assert math.isnan(r["host_ratio"]) and not r["host_changed"]


def _result(lat: Dict[str, List[List[float]]], machine: Any) -> results.RunResult:
    """A result with timed latencies per path and round (step i of round r); counted steps
    with no syncs."""
    steps = []
    for path, rounds in lat.items():
        for step in range(len(rounds[0])):
            steps.append(results.StepRecord(scenario="s", path=path, pass_="counted", step=step,
                                            warmup=False, batch_size=1, syncs=0, allowed=1,
                                            latency_ms=1.0, device_ms=None, tokens=[1]))
        for r, vals in enumerate(rounds):
            for step, v in enumerate(vals):
                steps.append(results.StepRecord(scenario="s", path=path, pass_="timed",
                                                step=step, warmup=False, batch_size=1,
                                                syncs=0, allowed=0, latency_ms=v,
                                                device_ms=None, tokens=[1], round=r))
    header = {"scenarios": {"s": {}}, **({"machine": machine} if machine else {})}
    return results.RunResult(header, steps, [], {"type": "footer", "complete": True})


def _rounds(scale: float, ratio: float) -> Dict[str, List[List[float]]]:
    wobble = [1.0, 1.02, 0.98, 1.01, 0.99, 1.03, 0.97, 1.0]
    return {"legacy": [[scale * w * (1 + 0.01 * i) for i in range(5)] for w in wobble],
            "flag": [[scale * ratio * w * (1 + 0.01 * i) * (1.01 if r % 2 else 0.99)
                      for i in range(5)] for r, w in enumerate(wobble)]}


def test_a_busier_machine_reads_machine_differs_never_better_or_worse() -> None:
    a = _result(_rounds(1.0, 0.8), MACHINE)
    busy = _result(_rounds(2.0, 0.8), {**MACHINE, "reference_ms": 19.0, "loadavg_1m": 6.0})
    df = analysis.compare(a, busy)
    assert not df["changed"].any() and not df["host_changed"].any()
    assert df["host_ratio"].isna().all()
    assert set(df["machine"]) == {"machine differs: reference loop 10.00 vs 19.00 ms; load "
                                  "average 0.50 vs 6.00"}
    text = terminal.render_compare(df, title="t", width=200)
    assert "machine differs" in text and "worse" not in text and "0 of 2 rows changed" in text
    # the same numbers on the same machine: a 2x host time is stated, on this machine only
    same = analysis.compare(a, _result(_rounds(2.0, 0.8), MACHINE))
    assert same["host_changed"].all() and not same["changed"].any()
    assert same["host_ratio"].tolist() == pytest.approx([2.0, 2.0])
    # an old result without a machine record still reads; host time is not compared
    old = analysis.compare(_result(_rounds(1.0, 0.8), None), a)
    assert set(old["machine"]) == {"machine not recorded"} and old["host_ratio"].isna().all()


def test_a_path_whose_ratio_to_its_baseline_moved_is_a_code_change() -> None:
    a = _result(_rounds(1.0, 0.8), MACHINE)
    b = _result(_rounds(2.0, 1.0), {**MACHINE, "reference_ms": 19.0})  # flag lost its lead
    row = analysis.compare(a, b).set_index("path").loc["flag"]
    assert row["changed"] and row["latency_changed"]
    assert row["latency_ratio"] == pytest.approx(1.25, rel=1e-3)
    assert row["a_ratio"] == pytest.approx(0.8, rel=1e-3)


def test_a_three_percent_move_is_no_change_on_any_machine() -> None:
    # flag's ratio to legacy moves 0.80 -> 0.824 (3%) between two runs on one machine, its
    # interval tight (about 1.02-1.04x): within the 5% margin, so no run-to-run noise of
    # that size turns into "worse"; the same for flag's 3% more host time on the same machine
    a = _result(_rounds(1.0, 0.8), MACHINE)
    b = _result(_rounds(1.0, 0.8 * 1.03), MACHINE)
    df = analysis.compare(a, b).set_index("path")
    flag = df.loc["flag"]
    assert flag["latency_ratio"] == pytest.approx(1.03, rel=1e-3)
    assert 1.0 < flag["ratio_lo"] and flag["ratio_hi"] < 1.05  # excludes 1.0, within 5%
    assert not flag["latency_changed"] and not flag["changed"]
    assert df["host_ratio"].tolist() == pytest.approx([1.0, 1.03], rel=1e-3)
    assert not df["host_changed"].any()
    text = terminal.render_compare(analysis.compare(a, b), title="t", width=200)
    assert "0 of 2 rows changed" in text and "worse" not in text
    # one run's two paths 3% apart: compare --paths marks no change either
    paths = analysis.compare_paths(_result(_rounds(1.0, 1.03), MACHINE), "legacy",
                                   "flag").iloc[0]
    assert paths["latency_ratio"] == pytest.approx(1.03, rel=1e-3) and paths["ratio_lo"] > 1.0
    assert not paths["latency_changed"] and not paths["changed"]
    # 10% apart, the same spread: a change
    moved = analysis.compare(a, _result(_rounds(1.0, 0.8 * 1.10), MACHINE)).set_index("path")
    assert moved.loc["flag", "latency_changed"] and moved.loc["flag", "changed"]


def test_the_reference_loop_is_time_boxed(monkeypatch: pytest.MonkeyPatch) -> None:
    from syncguard.results import machine

    calls: List[int] = []
    clock = iter(range(0, 1000))  # every reading one second later: a very busy machine
    monkeypatch.setattr(machine, "_reference_once", lambda: calls.append(1) or 5.0)
    monkeypatch.setattr(machine.time, "perf_counter", lambda: float(next(clock)))
    assert machine.reference_ms() == [5.0, 5.0, 5.0]  # the minimum, not 7
    assert len(calls) == 4  # with the warm-up


def test_machine_differs_names_what_differs() -> None:
    assert machine_differs(MACHINE, dict(MACHINE)) is None
    assert machine_differs(MACHINE, {**MACHINE, "reference_ms": 10.4}) is None  # within 5%
    assert machine_differs(MACHINE, {**MACHINE, "torch_threads": 1}) == (
        "machine differs: torch threads 4 vs 1")
    assert machine_differs(None, MACHINE) == "machine not recorded"
    # a result file is untrusted: odd values give a reason, never an exception
    odd = {"cpu_count": "x", "loadavg_1m": "high", "reference_ms": [1], "torch_threads": None}
    assert machine_differs(odd, odd) == "machine differs: reference loop not recorded"
    assert dataclasses.is_dataclass(results.StepRecord)
