"""No pass without evidence: ``exec`` passes only on steps it saw. A step target nothing
called, a device mode the program never used, threads still running when the main module
returns, and a Ctrl-C the program catches each either fail the run in one line or are
counted; never a green run on what was not seen."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import List, Tuple

import pytest
from _subprocess import env

from syncguard.results import format as results
from syncguard.results import loader


def _exec(tmp_path: Path, source: str, *flags: str, device: str = "sim",
          ) -> Tuple[subprocess.CompletedProcess, results.RunResult]:
    prog = tmp_path / "prog.py"
    prog.write_text(source)
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "syncguard", "exec", "--device", device,
                           *flags, "--out", str(out), "--", "python", str(prog)],
                          cwd=tmp_path, env=env(), capture_output=True, text=True, timeout=300)
    return proc, loader.load(str(out))


def _errors(err: str) -> List[str]:
    return [ln for ln in err.splitlines() if ln.startswith("syncguard: error:")]


RENAMED = (
    "import torch\n\n"
    "class Model:\n"
    "    def decode_step(self, x):  # the --step still names it\n"
    "        return x + 1\n\n"
    "    def decode_step_v2(self, x):  # what the loop calls since a refactor\n"
    "        return x + 1\n\n"
    "m, x = Model(), torch.ones(2, device='npu')\n"
    "for _ in range(4):\n"
    "    x = m.decode_step_v2(x)\n"
    "    if bool(x.sum() > 100):\n"
    "        break\n")


def test_a_step_target_nothing_calls_fails_in_one_line(tmp_path: Path) -> None:
    """A refactor renamed the decode path: the --step names a real function nothing calls
    any more. That run saw no step, so it cannot pass (it used to: exit 0 and a note)."""
    proc, res = _exec(tmp_path, RENAMED, "--step", "__main__:Model.decode_step",
                      "--max-syncs", "0")
    assert proc.returncode == 2, proc.stderr
    (line,) = _errors(proc.stderr)
    assert "--step __main__:Model.decode_step was never called" in line
    assert res.notes and any(n.get("no_step") for n in res.notes)


HOST_ONLY = (
    "import torch\n\n"
    "dev = 'cuda' if torch.cuda.is_available() else 'cpu'\n"
    "x = torch.zeros(4, device=dev)\n"
    "for _ in range(10):\n"
    "    x = x + 1\n"
    "    if bool(x.max() > 100):  # a per-token read, on the host here\n"
    "        break\n")


def test_a_program_that_stays_on_the_host_does_not_pass_a_device_mode(tmp_path: Path) -> None:
    proc, _ = _exec(tmp_path, HOST_ONLY, "--max-syncs", "0")
    assert proc.returncode == 2, proc.stderr
    (line,) = _errors(proc.stderr)
    assert "no process used the sim device" in line and "--device cpu" in line
    assert "--allow-host" in line


def test_allow_host_accepts_it_and_device_cpu_counts_the_reads(tmp_path: Path) -> None:
    proc, _ = _exec(tmp_path, HOST_ONLY, "--max-syncs", "0", "--allow-host")
    assert proc.returncode == 0, proc.stderr
    proc, res = _exec(tmp_path, HOST_ONLY, "--max-syncs", "0", "--force", device="cpu")
    assert proc.returncode == 1, proc.stderr  # host tensors counted: 10 reads over budget
    assert sum(s.syncs for s in res.steps) == 10


SERVER = (
    "import threading\n"
    "import torch\n"
    "import syncguard\n\n"
    "def serve():\n"
    "    x = torch.ones(2, device='npu')\n"
    "    for _ in range(10):\n"
    "        with syncguard.step('decode'):\n"
    "            x.sum().item()\n\n"
    "threading.Thread(target=serve).start()  # non-daemon: Python waits for it at exit\n")


def test_the_run_lasts_until_python_has_joined_the_programs_threads(tmp_path: Path) -> None:
    proc, res = _exec(tmp_path, SERVER, "--max-syncs", "0")
    assert proc.returncode == 1, proc.stderr
    assert [s.syncs for s in res.steps if s.path == "decode"] == [1] * 10
    assert res.complete


ATEXIT = (
    "import atexit\n"
    "import torch\n"
    "import syncguard\n\n"
    "x = torch.ones(2, device='npu')\n\n"
    "@atexit.register\n"
    "def drain():\n"
    "    for _ in range(3):\n"
    "        with syncguard.step('decode'):\n"
    "            x.sum().item()\n")


def test_exit_handlers_run_under_the_guard(tmp_path: Path) -> None:
    proc, res = _exec(tmp_path, ATEXIT, "--max-syncs", "0")
    assert proc.returncode == 1, proc.stderr
    assert [s.syncs for s in res.steps if s.path == "decode"] == [1] * 3


OWN_KEYBOARD_INTERRUPT = (
    "import torch\n"
    "import syncguard\n\n"
    "x = torch.ones(2, device='npu')\n"
    "for i in range(4):\n"
    "    try:\n"
    "        with syncguard.step('decode'):\n"
    "            x.sum().item()\n"
    "            if i == 1:\n"
    "                raise KeyboardInterrupt  # the program's own: cancel this generation\n"
    "    except KeyboardInterrupt:\n"
    "        print('cancelled', i)\n")


def test_a_keyboard_interrupt_the_program_raises_keeps_its_steps_syncs(tmp_path: Path) -> None:
    proc, res = _exec(tmp_path, OWN_KEYBOARD_INTERRUPT, "--max-syncs", "0")
    assert "cancelled 1" in proc.stdout
    assert proc.returncode == 1, proc.stderr  # over budget: every step's sync counted
    steps = [(s.step, s.syncs, (s.labels or {}).get("raised")) for s in res.steps]
    assert steps == [(0, 1, None), (1, 1, "KeyboardInterrupt"), (2, 1, None), (3, 1, None)]
    assert res.complete


CHAT = (
    "import sys, time\n"
    "import torch\n"
    "import syncguard\n\n"
    "x = torch.ones(2, device='npu')\n"
    "for turn in range(2):\n"
    "    try:\n"
    "        for i in range(400):\n"
    "            with syncguard.step('decode'):\n"
    "                x.sum().item()\n"
    "                time.sleep(0.005)\n"
    "            if turn == 0 and i == 5:\n"
    "                print('ready', flush=True)\n"
    "    except KeyboardInterrupt:  # Ctrl-C cancels this generation; the chat goes on\n"
    "        print('cancelled', turn, flush=True)\n"
    "print('done', flush=True)\n")


@pytest.mark.skipif(os.name != "posix", reason="signals")
def test_a_ctrl_c_the_program_catches_leaves_its_later_steps_running_and_counted(
        tmp_path: Path) -> None:
    prog = tmp_path / "chat.py"
    prog.write_text(CHAT)
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "syncguard", "exec", "--device", "sim",
                             "--out", str(out), "--", "python", str(prog)], cwd=tmp_path,
                            env=env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready"
    time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=300)
    assert "cancelled 0" in stdout and "done" in stdout, (stdout, stderr)
    assert proc.returncode == 0, stderr
    res = loader.load(str(out))
    decode = [s for s in res.steps if s.path == "decode"]
    assert len(decode) >= 400 + 6  # the second generation's 400 steps all ran and count
    assert all(s.syncs == 1 for s in decode)
    # the step Ctrl-C cut was not recorded: the run says it is not whole
    assert not res.complete
    assert "interrupted" in str((res.footer or {}).get("reason"))
