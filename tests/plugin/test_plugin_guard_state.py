"""The plugin and the guard's own failures (issue 12, items 8 and 9): pytest's reporting of a
failed assertion is not the test's sync, and a HostSyncError the code swallows still fails."""

from __future__ import annotations

import pytest

QUIET = ("-p", "no:cacheprovider", "-p", "no:benchmark", "-p", "no:hypothesispytest")


def test_pytest_assertion_report_reads_are_not_counted(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_assert='''
        import pytest
        import torch

        @pytest.mark.syncguard(devices=("cpu",), max_syncs=1)
        def test_fails_its_assert():
            x = torch.arange(4)
            assert x.sum() == 100  # one read (bool); pytest then prints x.sum() on failure
    ''')
    result = pytester.runpytest("-v", *QUIET)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*AssertionError*", "*- syncguard -*",
                                 "syncguard: allowed 1 host sync, saw 1 in the test body"])
    result.stdout.no_fnmatch_line("*saferepr*")
    result.stdout.no_fnmatch_line("*SYNCS*")


def test_swallowed_host_sync_error_fails_the_test(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_swallow='''
        import pytest
        import torch
        from syncguard import SyncGuard

        @pytest.mark.syncguard(devices=("cpu",), max_syncs=5)
        def test_sampler_swallows():
            x = torch.arange(4)
            try:
                with SyncGuard(devices=("cpu",), on_sync="raise"):
                    try:
                        x.sum().item()
                    except RuntimeError:
                        pass  # logged and ignored, as an old sampler did
            except RuntimeError:
                pass  # and the guard's re-raise at exit too

        def test_expected_error_is_fine():
            with pytest.raises(RuntimeError):
                with SyncGuard(devices=("cpu",), on_sync="raise"):
                    torch.arange(4).sum().item()
    ''')
    result = pytester.runpytest("-v", *QUIET)
    result.assert_outcomes(failed=1, passed=1)
    result.stdout.fnmatch_lines([
        "*test_sampler_swallows FAILED*",
        "*syncguard: 1 HostSyncError(s) raised and caught by the code under test, first at "
        "*test_swallow.py:* in test_sampler_swallows(): Tensor.item",
    ])
