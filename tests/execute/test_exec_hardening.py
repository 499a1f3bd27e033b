"""``syncguard exec`` under programs that do what servers do: steps on several threads at
once, their own signal handlers, forked workers, and a reader that goes away."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from syncguard.cli import main
from syncguard.results import loader

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
    res = loader.load(os.path.join(out, "result.jsonl"))
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
    res = loader.load(os.path.join(out, "result.jsonl"))
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
    res = loader.load(os.path.join(out, "result.jsonl"))
    assert [s.step for s in res.steps] == [0, 1, 2]
    assert os.path.exists(os.path.join(out, "report.html"))


FORK_ENDS_NORMALLY = (
    "import os, sys\n"
    "import torch\n"
    "import syncguard\n\n"
    "x = torch.ones(2, device='npu')\n"
    "child = False\n"
    "for i in range(3):\n"
    "    with syncguard.step('decode'):\n"
    "        x.sum().item()\n"
    "    if i == 1 and not child:\n"
    "        pid = os.fork()\n"
    "        child = pid == 0\n"
    "        if child:\n"
    "            with syncguard.step('child'):\n"
    "                x.sum().item()\n"
    "            {end}\n"
    "        os.waitpid(pid, 0)\n")


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
@pytest.mark.parametrize("end", ["sys.exit(0)", "break", "raise ValueError('child')"])
def test_a_forked_child_never_finalises_the_run(end: str, tmp_path: Path) -> None:
    """A child that exits through Python (sys.exit, falling off the end, an exception) does
    not print the report, write files or a second footer: only the starting process does."""
    import subprocess
    import sys

    from _subprocess import env

    (tmp_path / "forky.py").write_text(FORK_ENDS_NORMALLY.replace("{end}", end))
    out = tmp_path / "o"
    proc = subprocess.run([sys.executable, "-m", "syncguard", "exec", "--device", "sim",
                           "--out", str(out), "--", "python", "forky.py"], cwd=tmp_path,
                          env=env(), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    from syncguard.renderers import REPORT_FILES

    # the reports and result.jsonl, once
    assert proc.stderr.count("Wrote ") == len(REPORT_FILES) + 1, proc.stderr
    assert proc.stderr.count("Summary") == 1  # one report: the child prints none
    lines = (out / "result.jsonl").read_text(encoding="utf-8").splitlines()
    footers = [i for i, ln in enumerate(lines) if '"type":"footer"' in ln]
    assert footers == [len(lines) - 1], "a second footer, or one mid-file"
    res = loader.load(str(out))
    assert [(s.path, s.step) for s in res.steps if s.scenario == "forky.py"] == [
        ("decode", i) for i in range(3)]
    # the child's step is its own process's row, from its own part
    (child,) = res.header["processes"]
    assert [(s.scenario, s.path) for s in res.steps if s.scenario != "forky.py"] == [
        (f"forky.py [{child['label']}]", "child")]


PRINTS = (
    "import torch\n"
    "import syncguard\n\n"
    "x = torch.ones(2, device='npu')\n"
    "for i in range(50):\n"
    "    with syncguard.step('decode'):\n"
    "        x.sum().item()\n"
    "    print('line', i, 'x' * 2000, flush=True)\n")


@pytest.mark.skipif(os.name == "nt", reason="needs POSIX pipes")
@pytest.mark.parametrize("merged", [True, False])
def test_a_reader_that_goes_away_gives_141_after_every_report(merged: bool,
                                                             tmp_path: Path) -> None:
    """`exec ... 2>&1 | head -1` (and `exec ... | head -1`): all reports written, then 141,
    as `run` does; never 1, the over-budget code."""
    import subprocess
    import sys

    from _subprocess import env

    from syncguard.renderers import REPORT_FILES

    (tmp_path / "p.py").write_text(PRINTS)
    out = tmp_path / "o"
    proc = subprocess.Popen([sys.executable, "-m", "syncguard", "exec", "--device", "sim",
                             "--out", str(out), "--", "python", "p.py"], cwd=tmp_path,
                            env=env(), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT if merged else subprocess.DEVNULL)
    assert proc.stdout is not None
    proc.stdout.readline()
    proc.stdout.close()  # `head -1` is done
    rc = proc.wait(timeout=120)
    assert rc == 141
    for name in [*REPORT_FILES, "result.jsonl"]:
        assert (out / name).is_file(), name
