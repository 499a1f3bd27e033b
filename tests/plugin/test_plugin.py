"""The pytest plugin, run through pytester.

The heart of it: upstream's dispatch test (sglang #39404: ``torch.all`` patched to raise)
against the plugin, on four versions of the sampler's condition. Upstream's check catches only
the ``torch.all`` version; the plugin catches every version that reads the device, by line.
"""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
import textwrap
from typing import List, Tuple

import pytest

# Four versions of the Ascend sampler's "may I use the fused operator?" condition. (a) and (b)
# are syncguard's re-implementation of the code after and before the fix; (c) and (d) are
# plausible future edits that read the device in another way.
VARIANTS_SRC = '''
import torch

from sglang_ascend_sampling import top_k_top_p_min_p_sampling_from_logits_ascend as _ascend


def _sample(logits, top_ks, eligible, torch_npu, path="flag"):
    bs = top_ks.shape[0]
    top_ps = torch.ones(bs, device=logits.device)
    min_ps = torch.zeros(bs, device=logits.device)
    return _ascend(logits, top_ks, top_ps, min_ps, False, None, None,
                   npu_top_k_top_p_eligible=eligible, path=path, torch_npu=torch_npu)


def flag_path(logits, top_ks, host_eligible, torch_npu):
    # (a) the fix: a host bool computed from request parameters
    return _sample(logits, top_ks, host_eligible, torch_npu, path="flag")


def legacy_all(logits, top_ks, host_eligible, torch_npu):
    # (b) before the fix: hasattr(...) and torch.all((top_ks <= 1024) & (top_ks >= 1))
    return _sample(logits, top_ks, False, torch_npu, path="legacy")


def item_max(logits, top_ks, host_eligible, torch_npu):
    # (c) a device read through .item()
    if hasattr(torch_npu, "npu_top_k_top_p") and top_ks.max().item() <= 1024:
        return _sample(logits, top_ks, True, torch_npu)
    return _sample(logits, top_ks, False, torch_npu)


def any_out_of_range(logits, top_ks, host_eligible, torch_npu):
    # (d) a device read through torch.any
    if hasattr(torch_npu, "npu_top_k_top_p") and not torch.any((top_ks > 1024) | (top_ks < 1)):
        return _sample(logits, top_ks, True, torch_npu)
    return _sample(logits, top_ks, False, torch_npu)


VARIANTS = [flag_path, legacy_all, item_max, any_out_of_range]
'''

CONFTEST_SRC = '''
import types
from unittest import mock

import pytest
import torch

DEVICE = "{device}"


@pytest.fixture
def fake_torch_npu():
    # Upstream's fake namespace: npu_top_k_top_p mocked (returns the logits unchanged).
    return types.SimpleNamespace(npu_top_k_top_p=mock.MagicMock(side_effect=lambda l, p, k: l))


@pytest.fixture(params=[True, False], ids=["eligible", "ineligible"])
def inputs(request):
    # Built in a fixture: the plugin measures the test body only.
    eligible = request.param
    ks = [5] if eligible else [2000]
    logits = torch.randn(1, 32).to(DEVICE)
    top_ks = torch.tensor(ks, dtype=torch.int32).to(DEVICE)
    return logits, top_ks, all(1 <= k <= 1024 for k in ks), eligible
'''

# Upstream's test (the PR's): torch.all patched to raise.
UPSTREAM_TEST = '''
import pytest
import torch

from dispatch_variants import VARIANTS


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda f: f.__name__)
def test_dispatch(variant, inputs, fake_torch_npu, monkeypatch):
    def _raise(*args, **kwargs):
        raise AssertionError("torch.all would sync the device")

    monkeypatch.setattr(torch, "all", _raise)
    logits, top_ks, host_eligible, eligible = inputs
    out = variant(logits, top_ks, host_eligible, fake_torch_npu)
    assert out.shape == (1,)
    assert fake_torch_npu.npu_top_k_top_p.called == eligible
'''

# The same test with the plugin: no patching, a marker instead.
SYNCGUARD_TEST = '''
import pytest

from dispatch_variants import VARIANTS


@pytest.mark.syncguard({mark})
@pytest.mark.parametrize("variant", VARIANTS, ids=lambda f: f.__name__)
def test_dispatch(variant, inputs, fake_torch_npu):
    logits, top_ks, host_eligible, eligible = inputs
    out = variant(logits, top_ks, host_eligible, fake_torch_npu)
    assert out.shape == (1,)
    assert fake_torch_npu.npu_top_k_top_p.called == eligible
'''

#: For the inner runs: no cache files, and none of the heavy unrelated plugins that may be
#: installed here (re-imported by every in-process run).
def torch_cuda_available() -> bool:
    import torch

    return bool(torch.cuda.is_available())


QUIET = ("-p", "no:cacheprovider", "-p", "no:benchmark", "-p", "no:hypothesispytest")

CPU_MARK = 'devices=("cpu",)'
NPU_MARK = 'device="npu"'


def _line_of(src: str, needle: str) -> int:
    for i, line in enumerate(src.splitlines(), 1):
        if needle in line:
            return i
    raise AssertionError(f"{needle!r} not in source")


def _sampler_line() -> int:
    from sglang_ascend_sampling import sampler

    with open(sampler.__file__, encoding="utf-8") as f:
        return _line_of(f.read(), 'if hasattr(torch_npu, "npu_top_k_top_p") and torch.all(')


def _variant_files(pytester: pytest.Pytester, device: str, mark: str) -> None:
    # makepyfile dedents; the first line of VARIANTS_SRC is empty, so lines count from 1 on
    # the text after it.
    pytester.makepyfile(dispatch_variants=VARIANTS_SRC)
    pytester.makeconftest(CONFTEST_SRC.format(device=device))
    pytester.makepyfile(test_upstream=UPSTREAM_TEST,
                        test_syncguard=SYNCGUARD_TEST.format(mark=mark))


def _variants_line(pytester: pytest.Pytester, needle: str) -> int:
    return _line_of((pytester.path / "dispatch_variants.py").read_text(), needle)


def _outcomes(stdout: List[str], test_file: str) -> dict:
    """``{"variant-eligible": "PASSED" | "FAILED" | "SYNCS"}`` from ``-v`` output."""
    out = {}
    pat = re.compile(re.escape(test_file) + r"::test_dispatch\[(\S+)\] (PASSED|FAILED|SYNCS)")
    for line in stdout:
        m = pat.search(line)
        if m:
            out[m.group(1)] = m.group(2)
    return out


def _check_side_by_side(result: pytest.RunResult, pytester: pytest.Pytester) -> None:
    lines = result.outlines
    upstream = _outcomes(lines, "test_upstream.py")
    guarded = _outcomes(lines, "test_syncguard.py")
    assert len(upstream) == len(guarded) == 8, "\n".join(lines)
    for elig in ("eligible", "ineligible"):
        # Upstream's torch.all trap: catches (b) only; (c) and (d) read the device and pass.
        assert upstream[f"{elig}-flag_path"] == "PASSED"
        assert upstream[f"{elig}-legacy_all"] == "FAILED"
        assert upstream[f"{elig}-item_max"] == "PASSED"
        assert upstream[f"{elig}-any_out_of_range"] == "PASSED"
        # The plugin: fails (b), (c), (d) on their syncs alone, passes (a).
        assert guarded[f"{elig}-flag_path"] == "PASSED"
        assert guarded[f"{elig}-legacy_all"] == "SYNCS"
        assert guarded[f"{elig}-item_max"] == "SYNCS"
        assert guarded[f"{elig}-any_out_of_range"] == "SYNCS"
    # ... naming the line that syncs.
    item = _variants_line(pytester, "top_ks.max().item()")
    anyl = _variants_line(pytester, "torch.any(")
    for expected in (
        "syncguard: allowed 0 host syncs, saw 1 in the test body",
        f"  dispatch_variants.py:{item} in item_max: Tensor.item (aten::_local_scalar_dense) x1",
        f"  dispatch_variants.py:{anyl} in any_out_of_range: Tensor.__bool__ "
        "(aten::_local_scalar_dense) x1",
        f"  *sglang_ascend_sampling/sampler.py:{_sampler_line()} in "
        "top_k_top_p_min_p_sampling_from_logits_ascend_with_branch: Tensor.__bool__ "
        "(aten::_local_scalar_dense) x1",
    ):
        result.stdout.fnmatch_lines([expected])
    result.assert_outcomes(passed=8, failed=8)


def test_side_by_side_upstream_trap_vs_plugin_cpu_as_device(pytester: pytest.Pytester) -> None:
    _variant_files(pytester, "cpu", CPU_MARK)
    result = pytester.runpytest("-v", *QUIET)
    _check_side_by_side(result, pytester)


def _sim_available() -> bool:
    if importlib.util.find_spec("syncguard.sim") is None:
        return False
    code = "import syncguard; syncguard.simulated_device('npu')"
    return subprocess.run([sys.executable, "-c", code], capture_output=True).returncode == 0


def test_side_by_side_on_the_simulated_npu(pytester: pytest.Pytester) -> None:
    # device="npu" sets up the simulated npu (no torch_npu here); in a subprocess, because the
    # simulated device stays set up for the life of the process.
    if not _sim_available():
        pytest.skip("syncguard's simulated npu cannot be set up here")
    _variant_files(pytester, "npu", NPU_MARK)
    result = pytester.runpytest_subprocess("-v", *QUIET)
    _check_side_by_side(result, pytester)


# ---------------------------------------------------------------------------- allow
BODY_WITH_TWO_SITES = '''
import pytest
import torch

import syncguard


def readback(x):
    return x.tolist()


def peek(x):
    return x.sum().item()


{mark}
def test_it():
    x = torch.arange(4)
    readback(x)
    peek(x)
'''


def _two_sites(pytester: pytest.Pytester, mark: str) -> Tuple[int, int]:
    """Write test_sites.py; return the lines of its two syncs (tolist, item)."""
    path = pytester.makepyfile(test_sites=BODY_WITH_TWO_SITES.format(mark="# mark"))
    text = path.read_text()
    lines = _line_of(text, "x.tolist()"), _line_of(text, "x.sum().item()")
    mark = mark.format(tolist=lines[0], item=lines[1])
    path.write_text(text.replace("# mark", mark))  # below both sites: their lines stay
    return lines


def test_marker_allow_by_line_function_and_reason(pytester: pytest.Pytester) -> None:
    tolist, item = _two_sites(pytester, "@pytest.mark.syncguard(devices=('cpu',), allow=["
                              "'test_sites.py:{tolist}', ('peek', 'a scalar for the log')])")
    result = pytester.runpytest("-rA", *QUIET)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["syncguard: allowed 0 host syncs, saw 0",
                                 "allowed host syncs (2, not counted):"])
    result.stdout.fnmatch_lines([f"*test_sites.py:{tolist} in readback*-- allowed call site*"])
    result.stdout.fnmatch_lines([f"*test_sites.py:{item} in peek*-- a scalar for the log"])


def test_marker_allow_covers_only_the_named_site(pytester: pytest.Pytester) -> None:
    _, item = _two_sites(pytester, "@pytest.mark.syncguard(devices=('cpu',), "
                         "allow=['test_sites.py:{tolist}'])")
    result = pytester.runpytest(*QUIET)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*syncguard: allowed 0 host syncs, saw 1 in the test body",
                                 f"*test_sites.py:{item} in peek: Tensor.item*x1"])


def test_pyproject_allow_and_devices(pytester: pytest.Pytester) -> None:
    tolist, item = _two_sites(pytester, "@pytest.mark.syncguard")
    pytester.makepyprojecttoml(f'''
        [tool.syncguard]
        devices = ["cpu"]
        allow = [
            "test_sites.py:{tolist}",
            {{site = "test_sites.py:{item}", reason = "logged once per test"}},
        ]
    ''')
    result = pytester.runpytest("-rA", *QUIET)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([f"*test_sites.py:{item} in peek*-- logged once per test"])


def test_pyproject_max_syncs_and_marker_override(pytester: pytest.Pytester) -> None:
    pytester.makepyprojecttoml('''
        [tool.syncguard]
        devices = ["cpu"]
        max_syncs = 2
    ''')
    pytester.makepyfile(test_budget='''
        import pytest
        import torch

        @pytest.mark.syncguard
        def test_default_budget():
            torch.arange(3).tolist(); torch.arange(3).tolist()

        @pytest.mark.syncguard(max_syncs=1)
        def test_marker_wins():
            torch.arange(3).tolist(); torch.arange(3).tolist()
    ''')
    result = pytester.runpytest("-v", *QUIET)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*test_default_budget PASSED*", "*test_marker_wins SYNCS*",
                                 "*syncguard: allowed 1 host sync, saw 2 in the test body"])


def test_allow_in_code_module_and_fixture(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_code='''
        import pytest
        import torch

        import syncguard as sg

        @pytest.mark.syncguard(devices=("cpu",))
        def test_module_allow():
            x = torch.arange(4)
            with sg.allow("the one token readback per step"):
                x.tolist()

        @pytest.mark.syncguard(devices=("cpu",))
        def test_fixture_allow_and_steps(syncguard):
            x = torch.arange(4)
            for _ in range(3):
                with syncguard.step():
                    with syncguard.allow("token readback"):
                        x.tolist()
            assert syncguard.count == 0 and syncguard.allowed_count == 3
            assert syncguard.max_syncs == 0 and isinstance(syncguard, sg.SyncGuard)
    ''')
    result = pytester.runpytest(*QUIET)
    result.assert_outcomes(passed=2)


# ---------------------------------------------------------------------------- options
MANY_SYNCS = '''
import torch

def test_three():
    x = torch.arange(4)
    for _ in range(3):
        x.tolist()

def test_none():
    torch.arange(4) + 1
'''


def test_syncguard_option_guards_every_test(pytester: pytest.Pytester) -> None:
    pytester.makepyprojecttoml('[tool.syncguard]\ndevices = ["cpu"]\n')
    pytester.makepyfile(test_many=MANY_SYNCS)
    pytester.runpytest(*QUIET).assert_outcomes(passed=2)  # not guarded
    result = pytester.runpytest("--syncguard", *QUIET)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*syncguard: allowed 0 host syncs, saw 3 in the test body"])
    result = pytester.runpytest("--syncguard", "--syncguard-max-syncs=3", *QUIET)
    result.assert_outcomes(passed=2)


def test_ini_keys(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nsyncguard = true\nsyncguard_max_syncs = 2\n")
    pytester.makepyfile(test_many=MANY_SYNCS.replace("def test_three():",
                                                     "import pytest\n\n"
                                                     "@pytest.mark.syncguard(devices=['cpu'])\n"
                                                     "def test_three():"))
    result = pytester.runpytest(*QUIET)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*syncguard: allowed 2 host syncs, saw 3 in the test body"])
    # the command line wins over the ini file
    pytester.runpytest("--syncguard-max-syncs=3", *QUIET).assert_outcomes(
        passed=2)


def test_marker_is_registered_with_help(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--markers", *QUIET)
    result.stdout.fnmatch_lines(["@pytest.mark.syncguard(max_syncs=None, device=None, allow=(),"
                                 " devices=(), warmup=0, model=None, exhaustive=None): Guard this"
                                 " test*"])
    result = pytester.runpytest("--help", *QUIET)
    result.stdout.fnmatch_lines(["*--syncguard *guard every test*",
                                 "*--syncguard-max-syncs=N*", "*syncguard_max_syncs*"])


def test_bad_marker_arguments_are_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_bad='''
        import pytest

        @pytest.mark.syncguard(max_sync=1)
        def test_typo():
            pass
    ''')
    result = pytester.runpytest(*QUIET)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: @pytest.mark.syncguard on test_bad.py::test_typo: *"
                                 "unexpected keyword argument 'max_sync'"])


def test_bad_pyproject_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makepyprojecttoml('[tool.syncguard]\nmax_syncs = -1\n')
    pytester.makepyfile(test_x="def test_x():\n    pass\n")
    result = pytester.runpytest(*QUIET)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*syncguard: [[]tool.syncguard[]] in *max_syncs*>= 0*"])


# ---------------------------------------------------------------------------- what is measured
def test_fixtures_are_not_measured_only_the_body(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_fix='''
        import pytest
        import torch

        @pytest.fixture
        def ready():
            x = torch.arange(4)
            x.tolist()  # setup reads the device: not the test's business
            yield x
            x.tolist()  # and so does teardown

        @pytest.mark.syncguard(devices=("cpu",))
        def test_body_is_clean(ready):
            ready + 1

        @pytest.mark.syncguard(devices=("cpu",))
        def test_body_syncs(ready):
            ready.sum().item()
    ''')
    line = _line_of(pytester.path.joinpath("test_fix.py").read_text(), "ready.sum().item()")
    result = pytester.runpytest(*QUIET)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*syncguard: allowed 0 host syncs, saw 1 in the test body",
                                 f"*test_fix.py:{line} in test_body_syncs: Tensor.item*"])


def test_steps_in_verdict(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_steps='''
        import pytest
        import torch

        @pytest.mark.syncguard(devices=("cpu",))
        def test_decode(syncguard):
            x = torch.arange(4)
            for i in range(6):
                with syncguard.step():
                    if i in (2, 3, 4):
                        x.tolist()
    ''')
    line = _line_of(pytester.path.joinpath("test_steps.py").read_text(), "x.tolist()")
    result = pytester.runpytest(*QUIET)
    result.stdout.fnmatch_lines(["*syncguard: allowed 0 host syncs, saw 3 in steps 2-4",
                                 f"*test_steps.py:{line} in test_decode: Tensor.tolist "
                                 "(aten::_to_copy) x3, steps 2-4"])


def test_own_failure_keeps_its_error_and_adds_the_verdict(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_own='''
        import pytest
        import torch

        @pytest.mark.syncguard(devices=("cpu",))
        def test_raises():
            torch.arange(4).tolist()
            raise ValueError("the test's own failure")
    ''')
    line = _line_of(pytester.path.joinpath("test_own.py").read_text(), ".tolist()")
    result = pytester.runpytest("-v", *QUIET)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*test_raises FAILED*",
        "E       ValueError: the test's own failure",
        "*- syncguard -*",
        "syncguard: allowed 0 host syncs, saw 1 in the test body",
        f"*test_own.py:{line} in test_raises: Tensor.tolist (aten::_to_copy) x1",
    ])
    result.stdout.no_fnmatch_line("*SYNCS*")


def test_xfail_and_skip_are_left_alone(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_x='''
        import pytest
        import torch

        @pytest.mark.xfail(reason="known")
        @pytest.mark.syncguard(devices=("cpu",))
        def test_xfail():
            torch.arange(4).tolist()
            assert False

        @pytest.mark.syncguard(devices=("cpu",))
        def test_skip():
            torch.arange(4).tolist()
            pytest.skip("later")
    ''')
    pytester.runpytest(*QUIET).assert_outcomes(xfailed=1, skipped=1)


def test_hidden_syncs_are_the_expected_failure_of_an_xfail_test(
        pytester: pytest.Pytester) -> None:
    # a test kept as "known to sync" with xfail: the syncs make it XFAIL; once fixed it XPASSes
    # (strict: fails, so the marker gets removed); xfail(raises=...) expects another failure
    pytester.makepyfile(test_xf='''
        import pytest
        import torch

        @pytest.mark.xfail(reason="legacy syncs")
        @pytest.mark.syncguard(devices=("cpu",))
        def test_known():
            torch.arange(4).tolist()

        @pytest.mark.xfail(strict=True, reason="legacy syncs")
        @pytest.mark.syncguard(devices=("cpu",))
        def test_known_strict():
            torch.arange(4).tolist()

        @pytest.mark.xfail(strict=True, reason="legacy syncs")
        @pytest.mark.syncguard(devices=("cpu",))
        def test_fixed_strict():
            torch.arange(4) + 1

        @pytest.mark.xfail(raises=ValueError, reason="expects a ValueError")
        @pytest.mark.syncguard(devices=("cpu",))
        def test_other_expectation():
            torch.arange(4).tolist()
    ''')
    result = pytester.runpytest(*QUIET, "-rxXf")
    result.assert_outcomes(xfailed=2, failed=2)
    result.stdout.fnmatch_lines([
        "XFAIL test_xf.py::test_known - legacy syncs",
        "XFAIL test_xf.py::test_known_strict - legacy syncs",
        "FAILED test_xf.py::test_fixed_strict - [[]XPASS(strict)[]] legacy syncs",
        "SYNCS test_xf.py::test_other_expectation - syncguard: allowed 0 host syncs*",
    ])


def test_exhaustive_marker_counts_a_0d_tensor_passed_as_an_int(
        pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_ex='''
        import pytest
        import torch

        @pytest.mark.syncguard(devices=("cpu",))
        def test_python_layer_only():
            torch.arange(torch.tensor(3))

        @pytest.mark.syncguard(devices=("cpu",), exhaustive=True)
        def test_exhaustive():
            torch.arange(torch.tensor(3))
    ''')
    result = pytester.runpytest(*QUIET, "-rf")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines([
        "*test_ex.py:10 in test_exhaustive: aten::_local_scalar_dense*x1",
        "SYNCS test_ex.py::test_exhaustive - syncguard: allowed 0 host syncs, saw 1*",
    ])


# ---------------------------------------------------------------------------- process-level
def test_loading_the_plugin_does_not_import_torch() -> None:
    code = "import syncguard.pytest_plugin, sys; assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_a_pytest_run_without_guarded_tests_does_not_import_torch(
        pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_plain='''
        import sys

        def test_no_torch():
            assert "syncguard.pytest_plugin" in sys.modules
            assert "torch" not in sys.modules
    ''')
    # the plugin comes in through its pytest11 entry point, as for any user
    result = pytester.runpytest_subprocess(*QUIET)
    result.assert_outcomes(passed=1)


def test_xdist(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_par=textwrap.dedent('''
        import pytest
        import torch

        @pytest.mark.syncguard(devices=("cpu",))
        @pytest.mark.parametrize("n", [0, 1, 2, 3])
        def test_n(n):
            x = torch.arange(4)
            for _ in range(n):
                x.tolist()

        @pytest.mark.syncguard(devices=("cpu",))
        def test_own_error():
            torch.arange(4).tolist()
            raise RuntimeError("mine")
    '''))
    line = _line_of(pytester.path.joinpath("test_par.py").read_text(), "x.tolist()")
    result = pytester.runpytest_subprocess("-p", "xdist", "-n", "2", "-v", "-rf", *QUIET)
    result.assert_outcomes(passed=1, failed=4)
    result.stdout.fnmatch_lines(["*SYNCS*test_par.py::test_n?1?*"])
    result.stdout.fnmatch_lines(["*syncguard: allowed 0 host syncs, saw 3 in the test body",
                                 f"*test_par.py:{line} in test_n: Tensor.tolist "
                                 "(aten::_to_copy) x3"])
    result.stdout.fnmatch_lines(["E       RuntimeError: mine", "*- syncguard -*",
                                 "syncguard: allowed 0 host syncs, saw 1 in the test body"])
    result.stdout.fnmatch_lines(["FAILED test_par.py::test_own_error - RuntimeError: mine"])


# ---------------------------------------------------------------------------- baselines
BASELINE_TESTS = '''
import pytest
import torch

pytestmark = pytest.mark.syncguard(devices=("cpu",))


def test_reads():
    x = torch.arange(4)
    x.tolist()


def test_clean():
    torch.arange(4) + 1
'''


def test_baseline_known_site_passes_moved_line_passes_new_site_fails(
        pytester: pytest.Pytester) -> None:
    path = pytester.makepyfile(test_b=BASELINE_TESTS)
    pytester.runpytest(*QUIET).assert_outcomes(passed=1, failed=1)  # budget 0: reads fails
    result = pytester.runpytest("--syncguard-baseline", "base.json",
                                "--syncguard-update-baseline", *QUIET)
    result.assert_outcomes(passed=2)  # recording gates nothing
    result.stdout.fnmatch_lines(["syncguard: wrote baseline base.json (1 sites)"])
    (site,) = json.loads((pytester.path / "base.json").read_text())["sites"]
    assert (site["scenario"], site["path"], site["count"]) == ("test_b.py::test_reads", "test", 1)

    # the known site passes, over the budget of 0 or not
    pytester.runpytest("--syncguard-baseline", "base.json", *QUIET).assert_outcomes(passed=2)
    # lines moved down (code added above the site): still the same site
    path.write_text(BASELINE_TESTS.replace("def test_reads():",
                                           "# a comment\n\n\ndef test_reads():"))
    pytester.runpytest("--syncguard-baseline", "base.json", *QUIET).assert_outcomes(passed=2)
    # a new site fails, and says why
    path.write_text(BASELINE_TESTS.replace("    x.tolist()\n",
                                           "    x.tolist()\n    x.sum().item()\n"))
    line = _line_of(path.read_text(), "x.sum().item()")
    result = pytester.runpytest("--syncguard-baseline", "base.json", *QUIET)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines([
        "*syncguard: 1 site new or above baseline base.json, saw 2 host syncs in the test body",
        f"  test_b.py:{line} in test_reads: Tensor.item (aten::_local_scalar_dense) x1  "
        "(new site, not in the baseline)"])
    # a run of one test updates its entries and keeps the others'
    result = pytester.runpytest("--syncguard-baseline", "base.json",
                                "--syncguard-update-baseline", "-k", "clean", *QUIET)
    result.stdout.fnmatch_lines(["syncguard: wrote baseline base.json (1 sites)"])


def test_baseline_leaves_xfail_tests_to_their_budget(pytester: pytest.Pytester) -> None:
    """A test marked xfail whose syncs are its expected failure keeps XFAIL with
    --syncguard-baseline, recording or gating: it is judged on its budget, left out of the
    baseline (recording it would make its known syncs pass and the strict xfail XPASS)."""
    pytester.makepyfile(test_b=BASELINE_TESTS + '''

@pytest.mark.xfail(strict=True, reason="legacy syncs")
def test_known_strict():
    torch.arange(4).tolist()
''')
    result = pytester.runpytest("--syncguard-baseline", "base.json",
                                "--syncguard-update-baseline", "-rxXf", *QUIET)
    result.assert_outcomes(passed=2, xfailed=1)
    sites = json.loads((pytester.path / "base.json").read_text())["sites"]
    assert {s["scenario"] for s in sites} == {"test_b.py::test_reads"}
    result = pytester.runpytest("--syncguard-baseline", "base.json", "-rxXf", *QUIET)
    result.assert_outcomes(passed=2, xfailed=1)
    result.stdout.fnmatch_lines(["XFAIL test_b.py::test_known_strict - legacy syncs"])


def test_baseline_options_are_checked(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_b=BASELINE_TESTS)
    result = pytester.runpytest("--syncguard-update-baseline", *QUIET)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--syncguard-update-baseline needs --syncguard-baseline FILE*"])
    result = pytester.runpytest("--syncguard-baseline", "missing.json", *QUIET)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*syncguard: --syncguard-baseline: cannot read baseline "
                                 "missing.json*"])
    (pytester.path / "bad.json").write_text("{}")
    result = pytester.runpytest("--syncguard-baseline", "bad.json", *QUIET)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*baseline bad.json is not a syncguard baseline*"])


def test_status_letter_is_not_the_skip_letter(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_b=BASELINE_TESTS)
    result = pytester.runpytest(*QUIET)
    result.stdout.fnmatch_lines(["test_b.py H. *"])
    result = pytester.runpytest("-v", *QUIET)
    result.stdout.fnmatch_lines(["test_b.py::test_reads SYNCS *"])


# ---------------------------------------------------------------------------- marker arguments
@pytest.mark.parametrize("args, fragment", [
    ('device="gpu"', "device: must be one of 'cpu', 'cuda', 'npu', got 'gpu'"),
    ("devices=None", "devices: must be a list of device type names such as ('cpu',), got None"),
    ("allow=None", "allow must be a list of call sites such as ['file.py:12'], got None"),
    ('model="tpu"', "model: must be one of 'cuda', 'npu', got 'tpu'"),
    ('exhaustive="yes"', "exhaustive: must be true or false, got 'yes'"),
    ("warmup=-1", "warmup: must be an integer >= 0, got -1"),
])
def test_bad_marker_values_are_one_usage_error(pytester: pytest.Pytester, args: str,
                                               fragment: str) -> None:
    pytester.makepyfile(test_bad=f'''
        import pytest

        @pytest.mark.syncguard({args})
        def test_x():
            if __import__("torch").arange(2).any():
                pass
    ''')
    result = pytester.runpytest(*QUIET)
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    pattern = "".join(f"[{c}]" if c in "[]*?" else c for c in fragment)  # fnmatch-literal
    result.stderr.fnmatch_lines([f"ERROR: @pytest.mark.syncguard on test_bad.py::test_x: *"
                                 f"{pattern}*", "usage: @pytest.mark.syncguard(max_syncs=0, *"])


@pytest.mark.skipif(torch_cuda_available(), reason="checks the behaviour without CUDA")
def test_cuda_marker_without_cuda_skips_with_the_reason(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_cuda='''
        import pytest

        @pytest.mark.syncguard(device="cuda")
        def test_x():
            pass
    ''')
    result = pytester.runpytest("-rs", *QUIET)
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*syncguard: device='cuda' but CUDA is not available here"])


def test_inputs_built_in_the_body_get_the_fixture_hint(pytester: pytest.Pytester) -> None:
    if not _sim_available():
        pytest.skip("syncguard's simulated npu cannot be set up here")
    pytester.makepyfile(test_h2d='''
        import pytest
        import torch

        @pytest.mark.syncguard(device="npu")
        def test_x():
            x = torch.tensor([1.0, 2.0], device="npu")
            x + 1
    ''')
    result = pytester.runpytest_subprocess(*QUIET)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*syncguard: allowed 0 host syncs, saw 1 in the test body (1 host-to-device copy: "
        "build inputs such as torch.tensor(..., device=...) in a fixture, which is not "
        "measured)"])


def test_baseline_update_under_xdist_collects_every_worker(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_b=BASELINE_TESTS.replace("def test_clean():\n    torch.arange(4) + 1",
                                                      "def test_other():\n"
                                                      "    torch.arange(4).sum().item()"))
    result = pytester.runpytest_subprocess("-p", "xdist", "-n", "2", "--syncguard-baseline",
                                           "base.json", "--syncguard-update-baseline", *QUIET)
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["syncguard: wrote baseline base.json (2 sites)"])
    sites = json.loads((pytester.path / "base.json").read_text())["sites"]
    assert sorted(s["scenario"] for s in sites) == ["test_b.py::test_other",
                                                    "test_b.py::test_reads"]
    result = pytester.runpytest_subprocess("-p", "xdist", "-n", "2", "--syncguard-baseline",
                                           "base.json", *QUIET)
    result.assert_outcomes(passed=2)
