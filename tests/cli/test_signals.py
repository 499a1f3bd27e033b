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
from syncguard.results import loader

DATA = TESTS / "data" / "scenarios"
SMALL = str(DATA / "small.toml")
SMALL2 = str(DATA / "small_budget.toml")
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
    res = loader.load(str(out / "result.jsonl"))
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
    from syncguard.process import signals as _signals

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
    monkeypatch.delenv("SYNCGUARD_PROGRESS", raising=False)
    monkeypatch.setenv("SYNCGUARD_PROGRESS_SECONDS", "1e9")  # only the scenario lines
    out_dir = tmp_path / "o"
    rc, out, err = cli(capsys, "run", SMALL, SMALL2, "--device", "sim", "--out", str(out_dir),
                       "--steps", "3", "--warmup", "1", "--paths", "legacy,flag",
                       "--repeat", "1")
    assert rc == EXIT_OK, err
    lines = [ln for ln in err.splitlines() if ln.startswith("syncguard: progress: ")]
    # one line per scenario finished: (3 counted + 3 timed steps) x 2 paths each
    assert len(lines) == 2, err
    assert re.fullmatch(r"syncguard: progress: scenario 1/2 small done \(12 steps in \d+ s\), "
                        r"12/24 steps done, about \d+ s left", lines[0]), lines
    assert lines[1].startswith("syncguard: progress: scenario 2/2 small_budget done (12 steps ")
    assert "\x1b" not in err  # no terminal codes in a log
    assert "progress" not in out
    for f in out_dir.iterdir():  # nor in the report files
        if f.is_file():
            assert "syncguard: progress" not in f.read_text("utf-8", "replace"), f


def test_progress_bar_when_forced_and_never_on_stdout_or_in_the_files(
        tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SYNCGUARD_PROGRESS", "bar")  # as a terminal would get it
    out_dir = tmp_path / "o"
    rc, out, err = cli(capsys, "run", SMALL, "--device", "sim", "--out", str(out_dir),
                       "--steps", "3", "--warmup", "1", "--paths", "legacy,flag",
                       "--repeat", "1")
    assert rc == EXIT_OK, err
    assert "\x1b[" in err and "━" in err  # rich's bar, drawn with terminal codes
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", err)
    assert "12/12 steps, about " in text and "scenario 1/1 small flag timed" in text
    assert "syncguard: progress:" not in err  # the bar instead of the lines
    assert "\x1b[" not in out and "steps, about" not in out
    for f in out_dir.iterdir():
        if f.is_file():
            assert "steps, about" not in f.read_text("utf-8", "replace"), f
    monkeypatch.setenv("SYNCGUARD_PROGRESS", "none")
    rc, out, err = cli(capsys, "run", SMALL, "--device", "sim", "--out", str(tmp_path / "n"),
                       "--steps", "3", "--warmup", "1", "--paths", "flag", "--repeat", "1")
    assert rc == EXIT_OK and "━" not in err and "progress:" not in err
    monkeypatch.setenv("SYNCGUARD_PROGRESS", "fancy")
    rc, out, err = cli(capsys, "run", SMALL, "--device", "sim", "--out", str(tmp_path / "f"))
    assert rc == 2 and "SYNCGUARD_PROGRESS: one of bar, lines, none, got 'fancy'" in err


class _Plan:
    """What PlainProgress reads of a plan: two scenarios of 4 and 6 steps, 1 s a step."""

    def __init__(self) -> None:
        from syncguard.driving.plan import Plan, Probe, ScenarioPlan

        self.plan = Plan([ScenarioPlan("sc", 1, 4, 0, True, 0, 0, Probe(4, 0, (1.0,))),
                          ScenarioPlan("sc2", 1, 6, 0, True, 0, 0, Probe(6, 0, (1.0,)))],
                         0.0, None)


def test_plain_progress_prints_a_line_per_scenario_and_at_most_every_interval() -> None:
    from syncguard.driving.run import PlainProgress

    now = [0.0]
    buf = io.StringIO()
    p = PlainProgress(_Plan().plan, 5.0, buf, clock=lambda: now[0])
    for i in range(10):
        now[0] = i * 2.0 + 2.0  # a step every 2 s
        p("sc" if i < 4 else "sc2", "flag", "counted", (i if i < 4 else i - 4) + 1,
          4 if i < 4 else 6)
    lines = buf.getvalue().splitlines()
    # within sc, a line 5 s or more after the start (6 s); sc ends at 8 s; within sc2, a line
    # 5 s or more after the previous one (14 s); sc2 ends at 20 s. Time left: the plan's
    # (counted steps 1.15 s each, the reports 3 s) scaled by the time the finished scenarios
    # took over their plan's (2 s a step where it planned 1.15 s)
    # (every line says the time left: a scenario that is most of the run counts down, it
    # does not jump at its end)
    assert lines == ["syncguard: progress: sc flag counted step 3/4, 3/10 steps done, "
                     "0.5 steps/s, about 19 s left",
                     "syncguard: progress: scenario 1/2 sc done (4 steps in 8 s), 4/10 steps "
                     "done, about 17 s left",
                     "syncguard: progress: sc2 flag counted step 3/6, 7/10 steps done, "
                     "0.5 steps/s, about 11 s left",
                     "syncguard: progress: scenario 2/2 sc2 done (6 steps in 12 s), 10/10 "
                     "steps done, about 5 s left"]


def test_progress_without_repeat_counts_to_the_plans_total(
        tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    # the plan fixes the rounds before the first step: the total is known and never overtaken
    # (an open-ended timed pass once printed "1951/924 steps done")
    monkeypatch.delenv("SYNCGUARD_PROGRESS", raising=False)
    monkeypatch.setenv("SYNCGUARD_PROGRESS_SECONDS", "0")
    rc, _, err = cli(capsys, "run", SMALL, "--device", "sim", "--out", str(tmp_path / "o"),
                     "--steps", "3", "--warmup", "1", "--paths", "legacy,flag", "--budget",
                     "0.5")
    assert rc == EXIT_OK, err
    lines = [ln for ln in err.splitlines() if ln.startswith("syncguard: progress: ")]
    done = [tuple(map(int, m.groups())) for m in
            (re.search(r", (\d+)/(\d+) steps done", ln) for ln in lines) if m]
    assert len(done) == len(lines) and done[-1][0] == done[-1][1]
    assert all(d <= t for d, t in done) and len({t for _, t in done}) == 1


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


def _wait_unlocked(path: Path, timeout: float = 60.0) -> None:
    """Wait until no process holds ``path``'s run lock (the drain, done writing)."""
    import fcntl
    import time

    deadline = time.monotonic() + timeout
    with open(path, "rb") as f:
        while True:
            try:
                fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                assert time.monotonic() < deadline, "the result file stayed locked"
                time.sleep(0.02)


@posix
def test_sigkill_keeps_every_finished_step(tmp_path: Path) -> None:
    """``exec`` killed with SIGKILL (no handler runs, no footer, no fsync): every step the
    program saw finish is in result.jsonl, with its sync, since each finished step is handed
    to the drain's pipe as it ends (the bytes are the operating system's, not the process's),
    and the drain writes all of them once the pipe's writer is gone."""
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
    _wait_unlocked(out / "result.jsonl")  # the drain writes what the pipe holds, then lets go
    res = loader.load(str(out / "result.jsonl"))
    assert not res.complete
    kept = {s.step: s.syncs for s in res.steps}
    assert all(kept.get(i) == 1 for i in done), (sorted(done)[-3:], sorted(kept)[-3:])
    # every finished step's sync: the first ones as events, the later ones as its reads
    assert sorted(e["step"] for e in res.iter_events() if e["path"] == "step") == sorted(kept)
