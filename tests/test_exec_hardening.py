"""``syncguard exec`` under programs that do what servers do: steps on several threads at
once, their own signal handlers, forked workers, and a reader that goes away."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from syncguard import results
from syncguard.cli import main

THREADS = (
    "import threading\n"
    "import torch\n"
    "import syncguard\n\n"
    "x = torch.ones(2, device='npu')\n"
    "bar = threading.Barrier(4)\n\n\n"
    "def work():\n"
    "    for _ in range(5):\n"
    "        with syncguard.step('decode'):\n"
    "            bar.wait()\n"
    "            x.sum().item()\n"
    "            bar.wait()\n\n\n"
    "ts = [threading.Thread(target=work) for _ in range(4)]\n"
    "for t in ts:\n"
    "    t.start()\n"
    "for t in ts:\n"
    "    t.join()\n")


def test_steps_open_at_once_on_four_threads_are_each_gated(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    """Four threads, five steps each, one sync per step, all four steps open at once: 20
    steps of 1 sync, none outside a step, and --max-syncs 10 fails (as it does when the
    same work runs sequentially)."""
    (tmp_path / "threads.py").write_text(THREADS)
    monkeypatch.chdir(tmp_path)
    out = str(tmp_path / "o")
    rc = main(["exec", "--device", "sim", "--out", out, "--max-syncs", "10", "--", "python",
               "threads.py"])
    err = capsys.readouterr().err
    assert rc == 1, err
    assert "outside every step" not in err
    res = results.load(os.path.join(out, "result.jsonl"))
    assert sorted(s.step for s in res.steps) == list(range(20))
    assert [s.syncs for s in res.steps] == [1] * 20
    assert sorted(e["step"] for e in res.events) == list(range(20))


SWALLOWS = (
    "import os, signal, time\n"
    "import torch\n"
    "import syncguard\n\n"
    "seen = []\n"
    "signal.signal(signal.SIGTERM, lambda s, f: seen.append(s))  # a server's own handler\n"
    "signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
    "x = torch.ones(2, device='npu')\n"
    "for i in range({steps}):\n"
    "    if i == 3:\n"
    "        os.kill(os.getpid(), signal.SIGTERM)\n"
    "{hang}"
    "    with syncguard.step('decode'):\n"
    "        x.sum().item()\n")


@pytest.mark.skipif(not hasattr(os, "kill") or os.name == "nt", reason="needs POSIX SIGTERM")
def test_a_program_that_swallows_sigterm_still_stops_at_its_next_step(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    (tmp_path / "swallow.py").write_text(SWALLOWS.format(steps=200, hang=""))
    monkeypatch.chdir(tmp_path)
    out = str(tmp_path / "o")
    rc = main(["exec", "--device", "sim", "--out", out, "--", "python", "swallow.py"])
    assert rc == 143, capsys.readouterr().err
    res = results.load(os.path.join(out, "result.jsonl"))
    assert [s.step for s in res.steps] == [0, 1, 2]  # stopped at the next step boundary
    assert res.footer and res.footer["reason"] == "terminated"
    assert os.path.exists(os.path.join(out, "report.md"))
    import signal

    assert signal.getsignal(signal.SIGTERM) is not None  # restored; not the program's


@pytest.mark.skipif(not hasattr(os, "kill") or os.name == "nt", reason="needs POSIX SIGTERM")
def test_a_program_that_never_reaches_a_step_again_is_stopped_after_the_grace_period(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    hang = "        while True:\n            time.sleep(0.05)\n"
    (tmp_path / "hang.py").write_text(SWALLOWS.format(steps=10, hang=hang))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SYNCGUARD_STOP_GRACE_SECONDS", "0.3")
    out = str(tmp_path / "o")
    rc = main(["exec", "--device", "sim", "--out", out, "--", "python", "hang.py"])
    assert rc == 143, capsys.readouterr().err
    res = results.load(os.path.join(out, "result.jsonl"))
    assert [s.step for s in res.steps] == [0, 1, 2]
    assert os.path.exists(os.path.join(out, "report.html"))
