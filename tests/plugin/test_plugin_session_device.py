"""``[tool.syncguard] device = "sim"`` (or ``--syncguard-device sim``): NPU test modules, which
``import torch_npu`` at their top, are collected and run on the simulated npu on a CPU-only
machine, with no conftest."""

from __future__ import annotations

import pytest

NPU_TESTS = '''
import pytest
import torch
import torch_npu  # a module written for the NPU: this import runs at collection


@pytest.fixture
def logits():
    return torch.randn(4, 32, device="npu")


@pytest.mark.syncguard(max_syncs=0, device="npu")
def test_clean(logits):
    assert torch_npu.npu.is_available()
    assert logits.softmax(-1).shape == (4, 32)


@pytest.mark.syncguard(max_syncs=0, device="npu")
def test_sync(logits):
    assert logits.max().item() > -100
'''


def test_npu_modules_run_on_the_simulated_npu_from_collection_on(pytester: pytest.Pytester):
    pytester.makepyfile(test_npu=NPU_TESTS)
    pytester.makefile(".toml", pyproject='[tool.syncguard]\ndevice = "sim"\n')
    result = pytester.runpytest_subprocess("-q", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*syncguard: allowed 0 host syncs, saw 1 in the test body*"])


def test_the_option_does_it_too_and_without_it_collection_fails(pytester: pytest.Pytester):
    pytester.makepyfile(test_npu=NPU_TESTS)
    result = pytester.runpytest_subprocess("-q", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.INTERRUPTED  # collection error: no torch_npu
    result.stdout.fnmatch_lines(["*No module named 'torch_npu'*"])
    result = pytester.runpytest_subprocess("-q", "-p", "no:cacheprovider",
                                           "--syncguard-device", "auto")
    result.assert_outcomes(passed=1, failed=1)


def test_a_bad_session_device_is_one_usage_error(pytester: pytest.Pytester):
    pytester.makepyfile(test_npu=NPU_TESTS)
    pytester.makefile(".toml", pyproject='[tool.syncguard]\ndevice = "gpu"\n')
    result = pytester.runpytest_subprocess("-q", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*device: must be one of 'sim', 'auto', got 'gpu'*"])
