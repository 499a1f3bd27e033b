"""A test module that imports torch_npu on a machine without it fails to collect; the summary
says the one setting that runs it on the simulated npu."""

from __future__ import annotations

import pytest

from syncguard.pytest_plugin import NPU_HINT

MODULE = """\
import torch
import torch_npu  # noqa: F401


def test_on_npu():
    assert torch.ones(2, device="npu").shape == (2,)
"""


def test_a_torch_npu_collection_error_suggests_the_setting(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_npu=MODULE)
    res = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    assert res.ret == pytest.ExitCode.INTERRUPTED  # a collection error stops the session
    res.stdout.fnmatch_lines(["*No module named 'torch_npu'*", NPU_HINT.replace("[", "[[]")])


def test_with_the_setting_the_module_runs_and_no_hint(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_npu=MODULE)
    pytester.makefile(".toml", pyproject='[tool.syncguard]\ndevice = "sim"\n')
    res = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    assert res.ret == 0, res.stdout.str()
    assert "torch_npu, which is not installed" not in res.stdout.str()
