"""Runs that end cleanly: SIGTERM handled like Ctrl-C, a second Ctrl-C while the reports are
written, a closed pipe on stdout, and progress lines in CI logs."""

from __future__ import annotations

import io
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any, List, Tuple

import pytest
from _paths import TESTS
from _subprocess import env, run_stopped

from syncguard.cli import EXIT_INTERRUPTED, EXIT_OK, main
from syncguard.results import format as results

DATA = TESTS / "data" / "scenarios"
SMALL = str(DATA / "small.toml")
LONG = str(DATA / "long.toml")
REPORTS = ("result.jsonl", "result.json", "steps.csv", "events.csv", "report.md",
           "report.html")
posix = pytest.mark.skipif(os.name == "nt", reason="POSIX signals")


def cli(capsys: pytest.CaptureFixture, *argv: str) -> Tuple[int, str, str]:
    capsys.readouterr()
    rc = main(list(argv))
    cap = capsys.readouterr()
    return rc, cap.out, cap.err


def _send_at_step(monkeypatch: pytest.MonkeyPatch, sig: int, at: int) -> List[int]:
    """Deliver ``sig`` to this process inside decode step ``at`` (under the guard, with the
    interceptors installed)."""
    from syncguard.driving import decode

    real = decode.DecodeLoop.run_step
    sent: List[int] = []

    def run_step(self: Any, step: int) -> Any:
        if step == at and not sent:
            sent.append(step)
            os.kill(os.getpid(), sig)
        return real(self, step)

    monkeypatch.setattr(decode.DecodeLoop, "run_step", run_step)
    return sent


@posix
def test_sigterm_in_run_writes_reports_and_exits_143(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    # the conftest fixture then checks that every interceptor was uninstalled
    sent = _send_at_step(monkeypatch, signal.SIGTERM, 2)
    before = signal.getsignal(signal.SIGTERM)
    out = tmp_path / "out"
    rc, stdout, err = cli(capsys, "run", SMALL, "--device", "sim", "--out", str(out),
                          "--no-timed", "--width", "200")
    assert sent and rc == 143, err
    assert "Traceback" not in err
    stops = [ln for ln in err.splitlines() if "terminated" in ln]
    assert len(stops) == 1 and "SIGTERM" in stops[0] and "kept 2 finished steps" in stops[0]
    for name in REPORTS:
        assert (out / name).stat().st_size > 0, name
    res = results.load(str(out / "result.jsonl"))
    assert not res.complete and len(res.steps) == 2
    assert res.footer is not None and res.footer["reason"] == "terminated"
    assert "INTERRUPTED" in stdout
    assert signal.getsignal(signal.SIGTERM) == before  # handler removed again


@posix
def test_sigterm_in_check_is_one_line_and_143(capsys: pytest.CaptureFixture,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    _send_at_step(monkeypatch, signal.SIGTERM, 1)
    rc, out, err = cli(capsys, "check", SMALL, "--device", "sim", "--path", "legacy")
    assert rc == 143
    assert err.strip() == "syncguard: error: terminated (SIGTERM)", err


@posix
def test_sigterm_to_a_real_run(tmp_path: Path) -> None:
    out = tmp_path / "out"
    rc, _, err = run_stopped(tmp_path, LONG, signal.SIGTERM, 2, timeout=600, exit_timeout=600)
    assert rc == 143, err
    assert "Traceback" not in err
    assert sum("terminated (SIGTERM)" in ln for ln in err.splitlines()) == 1, err
    for name in REPORTS:
        assert (out / name).stat().st_size > 0, name


@posix
def test_second_ctrl_c_while_writing_reports_leaves_every_report_whole(
        tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    from syncguard import renderers

    _send_at_step(monkeypatch, signal.SIGINT, 2)  # the first Ctrl-C stops the run
    real_html = renderers.RENDERERS["html"]

    def html_then_ctrl_c(*a: Any, **k: Any) -> str:  # the second one lands mid-report
        os.kill(os.getpid(), signal.SIGINT)
        return str(real_html(*a, **k))

    monkeypatch.setitem(renderers.RENDERERS, "html", html_then_ctrl_c)
    before = signal.getsignal(signal.SIGINT)
    out = tmp_path / "out"
    rc, _, err = cli(capsys, "run", SMALL, "--device", "sim", "--out", str(out), "--no-timed")
    assert rc == EXIT_INTERRUPTED, err
    for name in REPORTS:
        assert (out / name).stat().st_size > 0, name
    assert "</html>" in (out / "report.html").read_text(encoding="utf-8")
    json.loads((out / "result.json").read_text(encoding="utf-8"))
    assert signal.getsignal(signal.SIGINT) == before


@posix
def test_deferred_delivers_a_held_ctrl_c_after_the_block() -> None:
    from syncguard.core import signals as _signals

    done = []
    with pytest.raises(KeyboardInterrupt):
        with _signals.deferred():
            os.kill(os.getpid(), signal.SIGINT)
            done.append("block finished")
    assert done == ["block finished"]
    with _signals.deferred(deliver=False) as got:
        os.kill(os.getpid(), signal.SIGTERM)
    assert got == [signal.SIGTERM]


def _big_result(path: Path, sites: int = 3000) -> Path:
    lines = [{"type": "header", "schema": 1, "env": {"syncguard": "0.1.0", "device": "sim"}}]
    for i in range(sites):
        lines.append({"type": "event", "scenario": "s", "path": "legacy", "pass": "counted",
                      "kind": "scalar_read", "api": "Tensor.item", "filename": f"m{i}.py",
                      "lineno": i + 1, "function": f"f{i}", "step": 1, "allowed": False,
                      "warmup": False, "count": 1})
    for i in range(3):
        lines.append({"type": "step", "scenario": "s", "path": "legacy", "pass": "counted",
                      "step": i, "warmup": False, "batch_size": 1, "branch": "simple",
                      "syncs": sites if i == 1 else 0, "allowed": 1, "latency_ms": 1.0})
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    return path


def _many_scenarios(path: Path, n: int = 1500) -> Path:
    lines = [{"type": "header", "schema": 1, "env": {"syncguard": "0.1.0", "device": "sim"}}]
    for k in range(n):
        for p in ("legacy", "flag"):
            lines.append({"type": "step", "scenario": f"s{k}", "path": p, "pass": "counted",
                          "step": 0, "warmup": False, "batch_size": 1, "branch": "simple",
                          "syncs": 1 if p == "legacy" else 0, "allowed": 0,
                          "latency_ms": 1.0})
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    return path


@posix
@pytest.mark.parametrize("command", ["show", "compare"])
def test_broken_pipe_is_quiet_and_not_exit_1(tmp_path: Path, command: str) -> None:
    # big enough that the report outgrows the pipe's buffer before the reader goes away
    res = _big_result(tmp_path / "r.jsonl") if command == "show" else _many_scenarios(
        tmp_path / "r.jsonl")
    args = [str(res)] if command == "show" else [str(res), str(res)]
    proc = subprocess.Popen([sys.executable, "-m", "syncguard", command, *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env())
    assert proc.stdout is not None and proc.stderr is not None
    first = proc.stdout.readline()  # like `| head -1`
    proc.stdout.close()
    err = proc.stderr.read().decode("utf-8", "replace")
    rc = proc.wait(timeout=300)
    assert first  # the report started
    assert rc == 141, err  # 128 + SIGPIPE, as a shell tool killed by it; never 1
    assert err == "", err  # no traceback, no "Exception ignored ... BrokenPipeError"


def test_progress_lines_on_stderr_when_not_a_terminal(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SYNCGUARD_PROGRESS_SECONDS", "0")  # every step: no timing in tests
    rc, out, err = cli(capsys, "run", SMALL, "--device", "sim", "--out", str(tmp_path / "o"),
                       "--steps", "3", "--warmup", "1", "--paths", "legacy,flag",
                       "--repeat", "1")
    assert rc == EXIT_OK, err
    lines = [ln for ln in err.splitlines() if ln.startswith("syncguard: progress: ")]
    assert len(lines) == 3 * 2 * 2  # steps x paths x passes
    assert lines[0].startswith("syncguard: progress: small legacy counted step 1/3, "
                               "1/12 steps done, ")
    assert lines[-1].startswith("syncguard: progress: small flag timed step 3/3, 12/12 ")
    assert all(ln.endswith(" steps/s") for ln in lines)
    assert "progress" not in out


def test_plain_progress_prints_at_most_every_interval() -> None:
    from syncguard.cli.run import PlainProgress

    now = [0.0]
    buf = io.StringIO()
    p = PlainProgress(10, 5.0, buf, clock=lambda: now[0])
    for i in range(10):
        now[0] = i * 2.0 + 2.0  # a step every 2 s: a line at the start, 8 s, 14 s and 20 s
        p("sc" if i < 9 else "sc2", "flag", "counted", i + 1, 10)
    lines = buf.getvalue().splitlines()
    # one when a scenario starts, then at most one per interval
    assert lines == ["syncguard: progress: sc flag counted step 1/10, 1/10 steps done, "
                     "0.5 steps/s",
                     "syncguard: progress: sc flag counted step 4/10, 4/10 steps done, "
                     "0.5 steps/s",
                     "syncguard: progress: sc flag counted step 7/10, 7/10 steps done, "
                     "0.5 steps/s",
                     "syncguard: progress: sc2 flag counted step 10/10, 10/10 steps done, "
                     "0.5 steps/s"]


def test_plain_progress_without_a_total_counts_in_the_singular_for_one() -> None:
    from syncguard.cli.run import PlainProgress

    buf = io.StringIO()
    p = PlainProgress(None, 0.0, buf, clock=lambda: 1.0)
    p("sc", "flag", "counted", 1, 4)
    p("sc", "flag", "counted", 2, 4)
    lines = buf.getvalue().splitlines()
    assert ", 1 step done, " in lines[0] and ", 2 steps done, " in lines[1]


def test_progress_without_repeat_does_not_claim_a_total(
        tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    # without --repeat the timed pass runs as many rounds as fit its budget: a fixed total
    # was soon overtaken ("1951/924 steps done")
    monkeypatch.setenv("SYNCGUARD_PROGRESS_SECONDS", "0")
    rc, _, err = cli(capsys, "run", SMALL, "--device", "sim", "--out", str(tmp_path / "o"),
                     "--steps", "3", "--warmup", "1", "--paths", "legacy,flag", "--budget",
                     "0.5")
    assert rc == EXIT_OK, err
    lines = [ln for ln in err.splitlines() if ln.startswith("syncguard: progress: ")]
    assert lines and all(re.search(r", \d+ steps? done, ", ln) for ln in lines), lines[-1]


def test_bad_progress_interval_is_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SYNCGUARD_PROGRESS_SECONDS", "soon")
    rc, _, err = cli(capsys, "run", SMALL, "--device", "sim", "--out", str(tmp_path / "o"))
    assert rc == 2 and "SYNCGUARD_PROGRESS_SECONDS" in err and len(err.splitlines()) == 1


@posix
def test_ctrl_c_while_the_guard_exits_still_uninstalls_the_interceptors(
        tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    from syncguard.core.guard import SyncGuard
    from syncguard.core.hub import HUB
    from syncguard.core.intercept import PATCHER

    real_exit = SyncGuard.__exit__
    sent: List[bool] = []

    def exit_after_ctrl_c(self: Any, *exc: Any) -> Any:
        if not sent:
            sent.append(True)
            os.kill(os.getpid(), signal.SIGINT)  # lands before the interceptors are removed
        return real_exit(self, *exc)

    monkeypatch.setattr(SyncGuard, "__exit__", exit_after_ctrl_c)
    rc, _, err = cli(capsys, "run", SMALL, "--device", "sim", "--out", str(tmp_path / "o"),
                     "--steps", "2", "--warmup", "0", "--no-timed", "--paths", "flag")
    assert sent and rc == EXIT_INTERRUPTED, err
    assert PATCHER.users == 0 and not PATCHER.installed and not HUB.guards


_ENDLESS = """\
import torch


def step(x, i):
    return int(x[i % 4].item())


x = torch.arange(4.0)
i = 0
while True:
    step(x, i)
    print(f"done {i}", flush=True)
    i += 1
"""


@posix
def test_sigkill_keeps_every_finished_step(tmp_path: Path) -> None:
    """``exec`` killed with SIGKILL (no handler runs, no footer, no fsync): every step the
    program saw finish is in result.jsonl, with its sync, since each finished step is written
    and flushed as it ends (the bytes are the operating system's, not the process's)."""
    import time

    (tmp_path / "endless.py").write_text(_ENDLESS)
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "syncguard", "exec", "--device", "cpu",
                             "--step", "endless:step", "--out", str(out), "--", "python",
                             "endless.py"], cwd=str(tmp_path), stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, env=env(), text=True,
                            start_new_session=True)
    done: List[int] = []
    deadline = time.monotonic() + 300
    try:
        assert proc.stdout is not None
        while len(done) < 30 and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            if line.startswith("done "):
                done.append(int(line.split()[1]))
        os.kill(proc.pid, signal.SIGKILL)  # this test's own child, by its pid
        rest, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    done += [int(ln.split()[1]) for ln in rest.splitlines() if ln.startswith("done ")]
    assert proc.returncode == -signal.SIGKILL and len(done) >= 30
    res = results.load(str(out / "result.jsonl"))
    assert not res.complete
    kept = {s.step: s.syncs for s in res.steps}
    assert all(kept.get(i) == 1 for i in done), (sorted(done)[-3:], sorted(kept)[-3:])
    assert len([e for e in res.events if e["path"] == "step"]) == len(res.steps)
