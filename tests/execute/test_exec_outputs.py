"""``syncguard exec`` and its output folder: a result file belongs to the run writing it (a
second run into the same ``--out`` is refused in one line, with ``--force`` too), a full disk
is one line and exit 2 after the program ran to its end (never an error inside it, never the
lines already written lost), step names the result could not hold are refused at the
``step()`` call, and the environment torchrun sets is checked before the program runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from _subprocess import env

from syncguard.cli import main
from syncguard.process import atomic as _atomic
from syncguard.results import drain, loader

posix = pytest.mark.skipif(os.name == "nt", reason="flock and tmpfs need POSIX")

STEPS = ("import syncguard\n"
         "for i in range({n}):\n"
         "    with syncguard.step('decode'):\n"
         "        pass\n"
         "open('finished', 'w').close()\n")


def _exec(tmp_path: Path, capsys: pytest.CaptureFixture, program: str, *opts: str,
          out: str = "o") -> tuple:
    (tmp_path / "prog.py").write_text(program)
    capsys.readouterr()
    rc = main(["exec", "--device", "cpu", "--out", str(tmp_path / out), *opts, "--",
               "python", "prog.py"])
    cap = capsys.readouterr()
    return rc, cap.out, cap.err


@posix
@pytest.mark.parametrize("force", [False, True])
def test_a_second_run_into_a_claimed_folder_is_one_line(
        force: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "o").mkdir()
    held = _atomic.claim(str(tmp_path / "o" / "result.jsonl"), force=True)  # a run writing
    try:
        os.write(held, b"the first run's lines\n")
        rc, _, err = _exec(tmp_path, capsys, STEPS.format(n=2),
                           *(["--force"] if force else []))
    finally:
        os.close(held)
    assert rc == 2, err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("syncguard: error: "), err
    assert (tmp_path / "o" / "result.jsonl").read_text() == "the first run's lines\n"
    assert not (tmp_path / "finished").exists(), "the program ran"


@posix
def test_two_concurrent_runs_into_one_out(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                          capsys: pytest.CaptureFixture) -> None:
    """A real first run (a child process) holds the folder while its program waits; a second
    run into the same --out with --force is refused; the first run's result is whole."""
    monkeypatch.chdir(tmp_path)
    first = tmp_path / "first.py"
    first.write_text("import os, time, syncguard\n"
                     "with syncguard.step('a'):\n"
                     "    open('started', 'w').close()\n"
                     "    deadline = time.time() + 120\n"
                     "    while not os.path.exists('go') and time.time() < deadline:\n"
                     "        time.sleep(0.05)\n")
    proc = subprocess.Popen([sys.executable, "-m", "syncguard", "exec", "--device", "cpu",
                             "--out", str(tmp_path / "o"), "--", "python", str(first)],
                            cwd=tmp_path, env={**env(), "PYTHONPATH": os.pathsep.join(
                                sys.path)}, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.time() + 120
        while not (tmp_path / "started").exists():
            assert proc.poll() is None, proc.communicate()
            assert time.time() < deadline, "the first run did not start"
            time.sleep(0.1)
        rc, _, err = _exec(tmp_path, capsys, STEPS.format(n=2), "--force")
        assert rc == 2 and "another syncguard run" in err, err
    finally:
        (tmp_path / "go").write_text("")
        _, ferr = proc.communicate(timeout=120)
    assert proc.returncode == 0, ferr
    res = loader.load(str(tmp_path / "o" / "result.jsonl"))
    assert [s.path for s in res.steps] == ["a"] and res.complete


@pytest.fixture
def tiny_tmpfs(tmp_path: Path) -> Path:
    mnt = tmp_path / "full"
    mnt.mkdir()
    if os.name == "nt" or os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    got = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=32k", "tmpfs", str(mnt)],
                         capture_output=True)
    if got.returncode != 0:
        pytest.skip("cannot mount a tmpfs here")
    yield mnt
    subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def test_a_full_disk_under_exec_is_one_line_after_the_program(
        tmp_path: Path, tiny_tmpfs: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture) -> None:
    monkeypatch.chdir(tmp_path)
    rc, _, err = _exec(tmp_path, capsys, STEPS.format(n=400), out=str(tiny_tmpfs / "o"))
    assert (tmp_path / "finished").exists(), "the error was raised inside the program"
    assert rc == 2, err
    assert "No space left on device" in err and "Traceback" not in err
    assert "prog.py" not in err.split("No space")[0].split("error:")[0]
    kept = (tiny_tmpfs / "o" / "result.jsonl").read_text().splitlines()
    assert json.loads(kept[0])["type"] == "header"
    assert sum('"type":"step"' in ln for ln in kept) > 10, "the lines written were lost"


def test_enospc_under_exec_never_reaches_the_program(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    """ENOSPC simulated at the result file's fsync (each finished step's): the program's
    ``with syncguard.step():`` never sees it."""
    monkeypatch.chdir(tmp_path)
    real = os.fsync

    def fsync(fd: int) -> None:
        if os.path.basename(os.readlink(f"/proc/self/fd/{fd}")) == "result.jsonl":
            raise OSError(28, "No space left on device")
        real(fd)

    if not os.path.exists("/proc/self/fd"):
        pytest.skip("needs /proc")
    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(drain, "ENABLED", False)  # os.fsync patched here: write in-process
    rc, _, err = _exec(tmp_path, capsys, STEPS.format(n=3))
    assert (tmp_path / "finished").exists(), err
    assert rc == 2 and "No space left on device" in err and "Traceback" not in err


@pytest.mark.parametrize("name, why", [("123", "must be a string"),
                                       ("'x' * 5000", "at most 4096"),
                                       ("'(outside steps)'", "outside every step")])
def test_a_step_name_the_result_cannot_hold_is_refused_at_the_call(
        name: str, why: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture) -> None:
    monkeypatch.chdir(tmp_path)
    rc, _, err = _exec(tmp_path, capsys, "import syncguard\n"
                       "with syncguard.step('ok'):\n    pass\n"
                       f"with syncguard.step({name}):\n    pass\n")
    assert rc == 1, err  # the program's own error, with its traceback, as a plain run
    assert why in err
    res = loader.load(str(tmp_path / "o"))  # the run's own result still reads
    assert [s.path for s in res.steps] == ["ok"]
    assert (tmp_path / "o" / "report.html").exists()


def test_a_program_at_a_non_utf8_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                      capsys: pytest.CaptureFixture) -> None:
    if sys.platform == "darwin":
        pytest.skip("macOS file names must be UTF-8")
    monkeypatch.chdir(tmp_path)
    folder = os.fsdecode(b"d\xff")
    os.mkdir(folder)
    prog = os.path.join(folder, os.fsdecode(b"p\xfe.py"))
    Path(prog).write_text(STEPS.format(n=2))
    capsys.readouterr()
    rc = main(["exec", "--device", "cpu", "--out", "o", "--", "python", prog])
    cap = capsys.readouterr()
    assert rc == 0, cap.err
    (cap.out + cap.err).encode("utf-8")
    assert (tmp_path / "o" / "report.html").exists()


@pytest.mark.parametrize("rank, world", [("-1", "2"), ("2", "2"), ("01", "2"), ("0", "x")])
def test_rank_is_checked_before_the_program_runs(
        rank: str, world: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("RANK", rank)
    monkeypatch.setenv("WORLD_SIZE", world)
    rc, _, err = _exec(tmp_path, capsys, STEPS.format(n=1))
    assert rc == 2, err
    assert not (tmp_path / "finished").exists()


def test_a_run_id_cannot_move_the_report_folder(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture) -> None:
    work = tmp_path / "a" / "b"
    work.mkdir(parents=True)
    monkeypatch.chdir(work)
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "x/../../..")
    (work / "prog.py").write_text(STEPS.format(n=1))
    capsys.readouterr()
    rc = main(["exec", "--device", "cpu", "--", "python", "prog.py"])
    assert rc == 2, capsys.readouterr().err
    assert sorted(os.listdir(tmp_path)) == ["a"] and sorted(os.listdir(work)) == ["prog.py"]


def test_exec_trace_holds_its_steps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                    capsys: pytest.CaptureFixture) -> None:
    monkeypatch.chdir(tmp_path)
    rc, _, err = _exec(tmp_path, capsys, STEPS.format(n=3))
    assert rc == 0, err
    trace = json.loads((tmp_path / "o" / "trace.json").read_text())
    assert [e["name"] for e in trace["traceEvents"] if e.get("cat") == "step"] == [
        "step 0", "step 1", "step 2"]
    assert 'href="trace.json"' in (tmp_path / "o" / "report.html").read_text()


def test_no_trace_and_no_link_without_steps(tmp_path: Path) -> None:
    from _cli import write_result

    from syncguard.renderers import write_reports

    res = loader.load(str(write_result(tmp_path / "r.jsonl", steps=0)))
    written = [os.path.basename(p) for p in write_reports(res, str(tmp_path / "o"))]
    assert "trace.json" not in written and not (tmp_path / "o" / "trace.json").exists()
    assert "trace.json" not in (tmp_path / "o" / "report.html").read_text()
