"""First contact with a 910B host: device resolution against torch_npu as it really loads.

Two kinds of torch_npu, each in subprocesses (torch's backend autoload happens once, at
``import torch``, so every state needs a fresh process):

- the **real wheel** (``torch_npu==2.13.0``, installed ``--no-deps`` by CI into the folder named
  by ``SYNCGUARD_TORCH_NPU_TARGET``): on a machine without CANN it is exactly a host whose CANN
  is missing (``libhccl.so: cannot open shared object file``), and its import fails inside
  torch's autoload;
- a **double** (``tests/_npu_double.py``) installed as a distribution with the real wheel's
  ``torch.backends`` entry point, for the healthy and the no-device states.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Tuple

import _npu_double
import pytest
from _paths import ROOT
from _subprocess import env as clean_env

REPO = ROOT
TINY = str(REPO / "sglang_ascend_sampling" / "scenarios" / "tiny_vocab.toml")
CANN_LINE = "libhccl.so: cannot open shared object file"
NO_NPU_LINE = "no NPU is visible: torch.npu.is_available() is False"

PROGRAM = 'import torch\nx = torch.ones(3, device="npu")\nprint("sum", float(x.sum()))\n'
PLUGIN_TEST = '''
import pytest, torch

@pytest.mark.syncguard(max_syncs=0, device="npu")
def test_npu():
    x = torch.ones(2, device="npu")
    name = torch.npu.get_device_name() if hasattr(torch.npu, "get_device_name") else "-"
    print("DEVICE", x.device, name)
    assert (x + 1).shape == (2,)
'''


def _sg(env: Dict[str, str], cwd: Path, *args: str, timeout: float = 300) -> Tuple[int, str, str]:
    p = subprocess.run([sys.executable, "-m", "syncguard", *args], cwd=cwd, env=env,
                       capture_output=True, text=True, timeout=timeout)
    return p.returncode, p.stdout, p.stderr


def _no_traceback(out: str, err: str) -> None:
    assert "Traceback" not in out + err and "internal error" not in err, err[-2000:]


def _one_error_line(err: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.startswith("syncguard: error:")]
    assert len(lines) == 1, err
    return lines[0]


@pytest.fixture(scope="module")
def double(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _npu_double.install(tmp_path_factory.mktemp("npu-double"))


def _double_env(root: Path, state: str) -> Dict[str, str]:
    return _npu_double.environ(root, state, clean_env())


# -- the double: torch's own autoload path ----------------------------------------------------
def test_double_is_autoloaded_by_import_torch(double: Path, tmp_path: Path) -> None:
    """The double loads as the real wheel does: by ``import torch``, with no import of ours."""
    code = ("import sys, torch; print('torch_npu' in sys.modules, torch.npu.is_available(), "
            "torch._C._get_privateuse1_backend_name())")
    for state, want in (("healthy", "True True npu"), ("no-device", "True False npu")):
        p = subprocess.run([sys.executable, "-c", code], env=_double_env(double, state),
                           cwd=tmp_path, capture_output=True, text=True, timeout=120)
        assert p.stdout.strip() == want, p.stderr


@pytest.mark.parametrize("cmd", [["selftest"], ["run", TINY, "--no-timed"],
                                 ["exec", "--", "python", "prog.py"]])
def test_healthy_auto_is_the_npu(double: Path, tmp_path: Path, cmd: List[str]) -> None:
    (tmp_path / "prog.py").write_text(PROGRAM, encoding="utf-8")
    extra = [] if cmd[0] == "selftest" else ["--out", str(tmp_path / "out")]
    args = [cmd[0], *extra, *cmd[1:]]
    rc, out, err = _sg(_double_env(double, "healthy"), tmp_path, *args)
    _no_traceback(out, err)
    assert rc == 0, err
    both = out + err  # exec writes its report on stderr: stdout is the program's
    assert f"npu ({_npu_double.DEVICE_NAME})" in both  # the header (selftest: its device line)
    assert "device sim" not in both and "note:" not in err


def test_healthy_plugin_uses_the_npu(double: Path, tmp_path: Path) -> None:
    (tmp_path / "test_n.py").write_text(PLUGIN_TEST, encoding="utf-8")
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-s", "-rs", "-p",
                        "no:cacheprovider", "test_n.py"], env=_double_env(double, "healthy"),
                       cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert "1 passed" in p.stdout, p.stdout + p.stderr
    assert f"DEVICE npu:0 {_npu_double.DEVICE_NAME}" in p.stdout


def test_no_device_auto_falls_back_and_says_why(double: Path, tmp_path: Path) -> None:
    env = _double_env(double, "no-device")
    rc, out, err = _sg(env, tmp_path, "selftest")
    _no_traceback(out, err)
    assert rc == 0, err
    assert "device: sim" in out and NO_NPU_LINE in err and "syncguard: note:" in err
    (tmp_path / "prog.py").write_text(PROGRAM, encoding="utf-8")
    rc, out, err = _sg(env, tmp_path, "exec", "--out", str(tmp_path / "o"), "--", "python",
                       "prog.py")
    assert rc == 0 and "device sim" in out + err and NO_NPU_LINE in err, err


def test_no_device_npu_refused_with_advice_that_works(double: Path, tmp_path: Path) -> None:
    env = _double_env(double, "no-device")
    rc, out, err = _sg(env, tmp_path, "selftest", "--device", "npu")
    assert rc == 2
    line = _one_error_line(err)
    assert NO_NPU_LINE in line and "ASCEND_RT_VISIBLE_DEVICES" in line and "--device sim" in line
    rc, out, err = _sg(env, tmp_path, "selftest", "--device", "sim")  # the advice works
    _no_traceback(out, err)
    assert rc == 0 and "device: sim" in out, err


def test_no_device_plugin_skips_with_the_reason(double: Path, tmp_path: Path) -> None:
    (tmp_path / "test_n.py").write_text(PLUGIN_TEST, encoding="utf-8")
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider",
                        "test_n.py"], env=_double_env(double, "no-device"), cwd=tmp_path,
                       capture_output=True, text=True, timeout=300)
    assert "1 skipped" in p.stdout and NO_NPU_LINE in p.stdout, p.stdout + p.stderr


def test_broken_double_plugin_runs_on_the_simulated_npu(double: Path, tmp_path: Path) -> None:
    """A torch_npu that cannot load no longer crashes ``import torch`` in the test session:
    the plugin loads torch first with the autoload made safe."""
    (tmp_path / "test_n.py").write_text(PLUGIN_TEST, encoding="utf-8")
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider",
                        "test_n.py"], env=_double_env(double, "broken"), cwd=tmp_path,
                       capture_output=True, text=True, timeout=300)
    assert "1 passed" in p.stdout and "DEVICE npu:0" in p.stdout, p.stdout + p.stderr


# -- the real wheel, no CANN: a misconfigured host exactly ---------------------------------
def _real_wheel() -> Path:
    target = os.environ.get("SYNCGUARD_TORCH_NPU_TARGET")
    if not target:
        pytest.skip("the real torch_npu wheel is not installed for this run (.ci/run installs "
                    "it and sets SYNCGUARD_TORCH_NPU_TARGET)")
    path = Path(target)
    assert (path / "torch_npu" / "__init__.py").is_file(), \
        f"SYNCGUARD_TORCH_NPU_TARGET={target} holds no torch_npu"
    return path


def _real_env() -> Dict[str, str]:
    env = clean_env()
    env["PYTHONPATH"] = os.pathsep.join([str(_real_wheel()), str(REPO)])
    env.pop("TORCH_DEVICE_BACKEND_AUTOLOAD", None)
    return env


def test_real_wheel_breaks_plain_import_torch(tmp_path: Path) -> None:
    """The premise: without CANN, the real wheel makes ``import torch`` itself fail."""
    p = subprocess.run([sys.executable, "-c", "import torch"], env=_real_env(), cwd=tmp_path,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode != 0 and "Failed to load the backend extension: torch_npu" in p.stderr


@pytest.mark.parametrize("args", [["selftest", "--device", "sim"], ["selftest"],
                                  ["run", TINY, "--device", "sim", "--no-timed"],
                                  ["run", TINY, "--no-timed"]])
def test_real_wheel_no_cann_runs_on_the_simulated_npu(tmp_path: Path, args: List[str]) -> None:
    if args[0] == "run":
        args = [*args, "--out", str(tmp_path / "out")]
    rc, out, err = _sg(_real_env(), tmp_path, *args)
    _no_traceback(out, err)
    assert rc == 0, err
    if "--device" not in args:  # auto: one line naming the missing library and the fix
        notes = [ln for ln in err.splitlines() if ln.startswith("syncguard: note:")]
        assert len(notes) == 1 and CANN_LINE in notes[0] and "set_env.sh" in notes[0], err
    else:
        assert CANN_LINE not in err  # sim never touches the broken torch_npu


def test_real_wheel_no_cann_show_and_check_a_recorded_run(tmp_path: Path) -> None:
    """Commands without a device read results without touching the broken torch_npu."""
    rc, out, err = _sg(_real_env(), tmp_path, "run", TINY, "--device", "sim", "--no-timed",
                       "--paths", "flag", "--out", str(tmp_path / "out"))
    assert rc == 0, err
    for args in (["show", "out"], ["check", "out/result.jsonl"]):
        rc, out, err = _sg(_real_env(), tmp_path, *args)
        _no_traceback(out, err)
        assert rc == 0 and "flag" in out, (args, err)


@pytest.mark.parametrize("args", [["selftest", "--device", "npu"],
                                  ["run", TINY, "--device", "npu", "--no-timed"],
                                  ["exec", "--device", "npu", "--", "python", "prog.py"]])
def test_real_wheel_no_cann_npu_exits_2_in_one_line(tmp_path: Path, args: List[str]) -> None:
    (tmp_path / "prog.py").write_text(PROGRAM, encoding="utf-8")
    rc, out, err = _sg(_real_env(), tmp_path, *args)
    _no_traceback(out, err)
    assert rc == 2
    line = _one_error_line(err)
    assert CANN_LINE in line and "set_env.sh" in line and "torch_npu 2.13.0" in line
    assert "sum" not in out  # the program never started


def test_real_wheel_plugin_runs_npu_test_on_the_simulated_npu(tmp_path: Path) -> None:
    (tmp_path / "test_n.py").write_text(PLUGIN_TEST, encoding="utf-8")
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider",
                        "test_n.py"], env=_real_env(), cwd=tmp_path, capture_output=True,
                       text=True, timeout=300)
    assert "1 passed" in p.stdout and "DEVICE npu:0" in p.stdout, p.stdout + p.stderr
