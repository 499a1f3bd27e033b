"""``syncguard exec`` under a program that treats the process as its own: it closes or reuses
descriptors, signals its process group, removes its working folder, closes its streams. Each
test runs a real ``python -m syncguard exec`` doing what the program did; syncguard never
writes into the program's files, never raises into it, and keeps or names what it lost."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any, List, Optional, Tuple

import pytest
from _subprocess import env

from syncguard.results import loader

posix = pytest.mark.skipif(os.name != "posix", reason="POSIX descriptors and signals")

#: four steps, the program's own file opened after the first: ``{attack}`` runs between them
STEPS = (
    "import os, resource, signal, sys\n"
    "import torch\n"
    "import syncguard\n\n"
    "x = torch.ones(2, device='npu')\n"
    "with syncguard.step('decode'):\n"
    "    x.sum().item()\n"
    "{attack}\n"
    "for i in range(3):\n"
    "    with syncguard.step('decode'):\n"
    "        x.sum().item()\n"
    "{after}\n"
    "print('program done', flush=True)\n")


def _exec(tmp_path: Path, attack: str, after: str = "", nofile: Optional[int] = None,
          extra: Tuple[str, ...] = (), program: Optional[str] = None,
          **kw: Any) -> Tuple[int, str, str]:
    """``exec --device sim --out tmp_path/o -- python p.py``, ``p.py`` :data:`STEPS` with
    ``attack`` and ``after`` (or ``program``); (exit code, stdout, stderr)."""
    (tmp_path / "p.py").write_text(program if program is not None else
                                   STEPS.replace("{attack}", attack).replace("{after}", after))

    def limit() -> None:
        if nofile is not None:
            import resource

            resource.setrlimit(resource.RLIMIT_NOFILE,
                               (nofile, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))

    proc = subprocess.run([sys.executable, "-m", "syncguard", "exec", "--device", "sim",
                           *extra, "--out", str(tmp_path / "o"), "--", "python", "p.py"],
                          cwd=tmp_path, env=env(), capture_output=True, text=True,
                          timeout=180, preexec_fn=limit, **kw)
    return proc.returncode, proc.stdout, proc.stderr


def _steps(tmp_path: Path) -> List[int]:
    return [s.step for s in loader.load(str(tmp_path / "o")).steps]


def _errors(err: str) -> List[str]:
    assert "Traceback" not in err, err[-3000:]
    return [ln for ln in err.splitlines() if ln.startswith("syncguard: error:")]


MINE = ("os.closerange(3, {top})\n"
        "mine = open('mine.txt', 'w')\n")
MINE_AFTER = "mine.write('mine\\n')\nmine.close()"


@posix
def test_a_program_that_closes_descriptors_and_opens_a_file_keeps_both(tmp_path: Path) -> None:
    """``os.closerange(3, 1024)`` then ``open``: syncguard's descriptors are above 1024 (the
    limit allows it here), the program's file is its own, and every step is kept."""
    rc, out, err = _exec(tmp_path, MINE.replace("{top}", "1024"), MINE_AFTER)
    assert rc == 0, err[-3000:]
    assert not _errors(err)
    assert "program done" in out
    assert (tmp_path / "mine.txt").read_text() == "mine\n"
    assert _steps(tmp_path) == [0, 1, 2, 3]
    assert loader.load(str(tmp_path / "o")).complete


@posix
def test_a_program_that_closes_syncguards_descriptors_runs_on_and_is_told_in_one_line(
        tmp_path: Path) -> None:
    """Open files limited to 1024: the same close takes syncguard's pipe too. The program runs
    to its end with its own file intact; the run keeps the step before the close and says in
    one line that the rest are not in the file (exit 2, its reports written)."""
    rc, out, err = _exec(tmp_path, MINE.replace("{top}", "1024"), MINE_AFTER, nofile=1024)
    errors = _errors(err)
    assert rc == 2, err[-3000:]
    assert "program done" in out
    assert (tmp_path / "mine.txt").read_text() == "mine\n"
    assert len(errors) == 1 and "closed or reused syncguard's pipe" in errors[0], errors
    assert _steps(tmp_path) == [0]
    assert not loader.load(str(tmp_path / "o")).complete
    assert (tmp_path / "o" / "report.md").is_file()


REUSE = ("soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]\n"
         "mine = open('mine.txt', 'w')\n"
         "for fd in range(3, soft):\n"
         "    if fd != mine.fileno():\n"
         "        os.dup2(mine.fileno(), fd)\n")
REUSE_AFTER = ("for fd in range(3, soft):\n"
               "    if fd != mine.fileno():\n"
               "        os.close(fd)\n" + MINE_AFTER)


@posix
def test_a_descriptor_the_program_reuses_is_never_written_into(tmp_path: Path) -> None:
    """Every descriptor number made the program's file (``dup2``): syncguard writes nothing
    into it, and the run says in one line what it lost."""
    rc, out, err = _exec(tmp_path, REUSE, REUSE_AFTER, nofile=2048)
    errors = _errors(err)
    assert (tmp_path / "mine.txt").read_text() == "mine\n"
    assert rc == 2, err[-3000:]
    assert "program done" in out
    assert len(errors) == 1 and "closed or reused syncguard's pipe" in errors[0], errors
    assert _steps(tmp_path) == [0]


USR1 = ("got = []\n"
        "signal.signal(signal.SIGUSR1, lambda *a: got.append(1))\n"
        "os.killpg(os.getpgrp(), signal.SIGUSR1)\n")


@posix
def test_a_signal_the_program_sends_its_group_leaves_the_run_whole(tmp_path: Path) -> None:
    """SIGUSR1 to the process group (a reload or pre-emption notice, as SLURM's
    ``--signal=USR1`` sends it), which the program handles: the run is the plain program's,
    exit 0, every step kept."""
    rc, out, err = _exec(tmp_path, USR1, "assert got", start_new_session=True)
    assert rc == 0, err[-3000:]
    assert not _errors(err)
    assert "program done" in out
    assert _steps(tmp_path) == [0, 1, 2, 3]
    assert loader.load(str(tmp_path / "o")).complete


HANDLER = (
    "import os, signal, sys\n"
    "import torch\n"
    "import syncguard\n\n"
    "imported = []\n\n\n"
    "class Finder:\n"
    "    def find_spec(self, name, path, target=None):\n"
    "        imported.append(name)\n"
    "        return None\n\n\n"
    "x = torch.ones(2, device='npu')\n"
    "sys.meta_path.insert(0, Finder())\n\n\n"
    "def handler(signum, frame):\n"
    "    with syncguard.step('tick'):\n"
    "        x.sum().item()\n\n\n"
    "signal.signal(signal.SIGUSR2, handler)\n"
    "for i in range(3):\n"
    "    with syncguard.step('decode'):\n"
    "        x.sum().item()\n"
    "        signal.raise_signal(signal.SIGUSR2)\n"
    "        bool(x.sum() > 0)\n"
    "x.sum().item()\n"
    "sys.meta_path.pop(0)\n"
    "ours = [m for m in imported if m.split('.')[0] == 'syncguard']\n"
    "assert not ours, f'imported while the program ran: {ours}'\n"
    "print('program done', flush=True)\n")


@posix
def test_no_syncguard_module_is_imported_where_a_signal_handler_can_enter(
        tmp_path: Path) -> None:
    """Reads at new sites, in steps, outside them and in a signal handler that opens a step:
    syncguard imports nothing while the program runs (an import a handler interrupts and
    enters again raises ImportError, a partly initialised module, into the program)."""
    (tmp_path / "p.py").write_text(HANDLER)
    proc = subprocess.run([sys.executable, "-m", "syncguard", "exec", "--device", "sim",
                           "--max-syncs", "100", "--out", str(tmp_path / "o"), "--", "python",
                           "p.py"], cwd=tmp_path, env=env(), capture_output=True, text=True,
                          timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "program done" in proc.stdout
    res = loader.load(str(tmp_path / "o"))  # the handler's step is inside the decode step
    assert [(s.path, s.syncs) for s in res.steps] == [("decode", 3)] * 3


@posix
def test_a_function_name_longer_than_the_loader_reads_is_cut_not_refused(
        tmp_path: Path) -> None:
    """A read in a function whose name is 5,000 characters long: the result loads (the name
    cut with a mark), the reports are written, exit 0."""
    from syncguard.results import fit

    name = "f" * 5000
    (tmp_path / "longmod.py").write_text(
        f"import torch\nx = torch.ones(2, device='npu')\n\n\ndef {name}():\n"
        f"    return x.sum().item()\n")
    rc, out, err = _exec(tmp_path, f"import longmod\nfn = getattr(longmod, {name!r})",
                         "fn()")
    assert rc == 0, err[-3000:]
    assert not _errors(err)
    res = loader.load(str(tmp_path / "o"))
    assert any(e["function"].endswith(fit.CUT) for e in res.events)
    assert (tmp_path / "o" / "report.html").is_file()


@posix
@pytest.mark.parametrize("removed", ["a temporary folder", "the folder it started in"])
def test_a_program_that_removes_its_working_folder_gets_its_reports(removed: str,
                                                                    tmp_path: Path) -> None:
    """The program changes into a folder and removes it (or removes the folder it was
    started in): every report is written, exit 0, as the plain program exits."""
    from syncguard.renderers import REPORT_FILES

    work = tmp_path / "work"
    work.mkdir()
    attack = ("import shutil, tempfile\n"
              + ("d = tempfile.mkdtemp()\nos.chdir(d)\n" if removed.startswith("a temp")
                 else "d = os.getcwd()\n")
              + "shutil.rmtree(d)\n")
    (work / "p.py").write_text(STEPS.replace("{attack}", attack).replace("{after}", ""))
    proc = subprocess.run([sys.executable, "-m", "syncguard", "exec", "--device", "sim",
                           "--out", str(tmp_path / "o"), "--", "python", "p.py"], cwd=work,
                          env=env(), capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert not _errors(proc.stderr)
    assert "program done" in proc.stdout
    for name in [*REPORT_FILES, "result.jsonl"]:
        assert (tmp_path / "o" / name).is_file(), name
    assert _steps(tmp_path) == [0, 1, 2, 3]


@posix
@pytest.mark.parametrize("close, verdict_on", [
    ("sys.stdout.close()", "stdout"),
    ("sys.stdout.close()\nsys.stderr.close()", "stdout"),
    ("sys.stdout.close()\nos.close(1)", "stderr"),
], ids=["stdout", "stdout-and-stderr", "stdout-and-its-descriptor"])
def test_a_program_that_closes_its_streams_at_exit_still_passes(close: str, verdict_on: str,
                                                                tmp_path: Path) -> None:
    """Within budget, the program closes ``sys.stdout`` (and ``sys.stderr``, or descriptor 1
    itself) at its end: exit 0, never an internal error or a fatal Python error; the verdict
    goes to a stream still open and every report is written."""
    from syncguard.renderers import REPORT_FILES

    rc, out, err = _exec(tmp_path, "", "", extra=("--max-syncs", "10"),
                         program=STEPS.replace("{attack}", "").replace("{after}", "")
                         + close + "\n")
    assert "program done" in out
    assert rc == 0, err[-3000:]
    assert "Fatal Python error" not in err and "internal error" not in err, err[-3000:]
    assert "1 budget check OK" in (out if verdict_on == "stdout" else err)
    for name in [*REPORT_FILES, "result.jsonl"]:
        assert (tmp_path / "o" / name).is_file(), name


def test_a_result_file_with_a_second_run_appended_is_one_error_naming_the_line(
        tmp_path: Path) -> None:
    """A run's result.jsonl appended to itself (``cat r >> r``, a second run's lines after the
    first's): ``check`` refuses it in one line naming the second header's line, exit 2,
    never gating every step counted twice."""
    rc, _, err = _exec(tmp_path, "", "")
    assert rc == 0, err[-3000:]
    result = tmp_path / "o" / "result.jsonl"
    one = result.read_text(encoding="utf-8")
    with open(result, "a", encoding="utf-8") as f:
        f.write(one)
    second = one.count("\n") + 1
    proc = subprocess.run([sys.executable, "-m", "syncguard", "check", str(tmp_path / "o"),
                           "--max-syncs", "5"], cwd=tmp_path, env=env(), capture_output=True,
                          text=True, timeout=120)
    errors = _errors(proc.stderr)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert len(errors) == 1, proc.stderr
    assert f"result.jsonl:{second}: a second header line" in errors[0]


@posix
def test_a_run_killed_with_its_group_keeps_the_steps_sent_to_the_drain(tmp_path: Path) -> None:
    """The program kills its whole process group with SIGKILL right after its steps (a job
    scheduler's cancel does that): the drain, in a session of its own, is not killed with
    it; it writes every step the pipe holds, the file without a footer."""
    import time

    rc, _, err = _exec(tmp_path, "", "os.killpg(os.getpgrp(), signal.SIGKILL)",
                       start_new_session=True)
    assert rc == -signal.SIGKILL, err[-3000:]
    result = tmp_path / "o" / "result.jsonl"
    deadline = time.monotonic() + 60  # the drain writes on after the group is gone
    while time.monotonic() < deadline:
        if result.read_text(encoding="utf-8").count('{"type":"step"') == 4:
            break
        time.sleep(0.05)
    assert _steps(tmp_path) == [0, 1, 2, 3]
    assert not loader.load(str(tmp_path / "o")).complete
