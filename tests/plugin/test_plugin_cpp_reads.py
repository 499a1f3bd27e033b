"""The plugin in cpu mode: the reads made in C++ that no Python entry point sees (a 0-d tensor
used as a number inside an op, TorchScript's ``bool()``/``.item()``) are counted, each once,
when ``exhaustive`` is asked for: by the marker, ``--syncguard-exhaustive``, the ini key
``syncguard_exhaustive`` or ``[tool.syncguard] exhaustive``; a Python ``.item()`` stays one."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

QUIET = ("-p", "no:cacheprovider", "-p", "no:benchmark", "-p", "no:hypothesispytest")

TESTS = '''
import warnings

import pytest
import torch

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)

    @torch.jit.script
    def scripted_bool(x: torch.Tensor) -> int:
        if bool(x):
            return 1
        return 0

    @torch.jit.script
    def scripted_item(x: torch.Tensor) -> float:
        return x.item()


@pytest.fixture
def t():
    return torch.tensor(3)


@pytest.fixture
def b():
    return torch.tensor(True)


@pytest.mark.syncguard(device="cpu"MARK)
def test_reads(t, b):
    torch.full((2,), t)
    torch.arange(t)
    scripted_bool(b)
    scripted_item(t)
    t.item()
'''


def _file(pytester: pytest.Pytester, mark: str = "") -> None:
    pytester.makepyfile(test_cpp=TESTS.replace("MARK", mark))


#: the line of each read in test_cpp.py (pytester strips the leading blank line)
FIRST = TESTS.strip("\n").splitlines().index("    torch.full((2,), t)") + 1
#: the section's site lines when every read is counted, each once (file:line in function)
ALL_SITES = [f"*test_cpp.py:{n} in test_reads: *x1*" for n in range(FIRST, FIRST + 5)]


def _saw(result: pytest.RunResult, n: int) -> None:
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([f"*syncguard: allowed 0 host syncs, saw {n} in the test body*"])


def test_without_exhaustive_only_the_python_read(pytester: pytest.Pytester) -> None:
    _file(pytester)
    _saw(pytester.runpytest(*QUIET), 1)


def test_the_marker_counts_each_read_once(pytester: pytest.Pytester) -> None:
    _file(pytester, ", exhaustive=True")
    result = pytester.runpytest(*QUIET)
    _saw(result, 5)
    result.stdout.fnmatch_lines(ALL_SITES, consecutive=False)
    result.stdout.fnmatch_lines([f"*test_cpp.py:{FIRST + 4} in test_reads: Tensor.item*x1*"])


def test_the_command_line_option(pytester: pytest.Pytester) -> None:
    _file(pytester)
    _saw(pytester.runpytest("--syncguard-exhaustive", *QUIET), 5)


def test_the_ini_key_and_the_marker_wins(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nsyncguard_exhaustive = true\n")
    _file(pytester)
    _saw(pytester.runpytest(*QUIET), 5)
    _file(pytester, ", exhaustive=False")
    _saw(pytester.runpytest(*QUIET), 1)


def test_the_pyproject_key(pytester: pytest.Pytester) -> None:
    pytester.makepyprojecttoml("[tool.syncguard]\nexhaustive = true\n")
    _file(pytester)
    _saw(pytester.runpytest(*QUIET), 5)


@pytest.mark.parametrize("where, setup", [
    ("ini syncguard_exhaustive: must be true or false, got 'maybe'",
     lambda p: p.makeini("[pytest]\nsyncguard_exhaustive = maybe\n")),
    ("exhaustive: must be true or false, got 'yes'",
     lambda p: p.makepyprojecttoml('[tool.syncguard]\nexhaustive = "yes"\n')),
])
def test_a_bad_setting_is_one_usage_error(pytester: pytest.Pytester, where: str,
                                          setup) -> None:
    setup(pytester)
    _file(pytester)
    result = pytester.runpytest(*QUIET)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    result.stderr.fnmatch_lines([f"*syncguard: *{where}*"])


def test_the_option_is_documented(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--help", *QUIET)
    result.stdout.fnmatch_lines(["*--syncguard-exhaustive*", "*syncguard_exhaustive*"])


def _sim_available() -> bool:
    if importlib.util.find_spec("syncguard.sim") is None:
        return False
    code = "import syncguard; syncguard.simulated_device('npu')"
    return subprocess.run([sys.executable, "-c", code], capture_output=True).returncode == 0


def test_the_simulated_npu_gets_no_net(pytester: pytest.Pytester) -> None:
    """On the simulated npu the backend already counts every read once; a dispatch net above
    it would break ``torch.tensor(..., device="npu")`` in the test body."""
    if not _sim_available():
        pytest.skip("syncguard's simulated npu cannot be set up here")
    pytester.makepyfile(test_sim='''
        import pytest
        import torch

        @pytest.mark.syncguard(device="npu", exhaustive=True, max_syncs=2)
        def test_sim():
            t = torch.tensor(3, device="npu")  # a host-to-device copy
            torch.arange(t)  # a read in C++
    ''')
    result = pytester.runpytest_subprocess(*QUIET)
    result.assert_outcomes(passed=1)
    pytester.makepyfile(test_sim2='''
        import pytest
        import torch

        @pytest.mark.syncguard(device="npu", exhaustive=True)
        def test_sim():
            torch.arange(torch.tensor(3, device="npu"))
    ''')
    result = pytester.runpytest_subprocess("test_sim2.py", *QUIET)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*saw 2 in the test body*"])


@pytest.mark.parametrize("kind, asked, net", [
    ("cuda", False, True), ("npu", False, True), ("sim", True, False),
    ("cpu", False, False), ("cpu", True, True), (None, True, True), (None, False, False)])
def test_the_test_guard_takes_the_one_decision(kind, asked, net) -> None:
    """The plugin's guard asks :func:`syncguard.driving.devices.exhaustive_for`, as exec and
    run do: a real device always has the net, the simulated npu never."""
    from syncguard.pytest_plugin.settings import Settings, _make_guard

    assert _make_guard(Settings(exhaustive=asked), kind).exhaustive is net
