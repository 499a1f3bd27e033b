"""``--syncguard-lineage``: a guarded test's report section says, per site, where the value
read came from and whether the read can be hoisted to the host."""

from __future__ import annotations

import pytest

QUIET = ("-p", "no:cacheprovider", "-p", "no:benchmark", "-p", "no:hypothesispytest")

TESTS = '''
import pytest
import torch


@pytest.mark.syncguard(devices=("cpu",), max_syncs=0)
def test_range_check():
    top_ks = torch.tensor([1, 20, 1024], dtype=torch.int32)  # the upload
    for _ in range(2):
        if torch.all((top_ks >= 1) & (top_ks <= 1024)):
            pass
'''


def test_lineage_line_in_the_report_section(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_lineage_demo=TESTS)
    result = pytester.runpytest("-v", "--syncguard-lineage", *QUIET)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "why, and how to remove it (lineage):",
        "  test_lineage_demo.py:9: hoistable: depends only on host data uploaded at "
        "test_lineage_demo.py:7 (and constants)*the same value every step"])


def test_no_lineage_without_the_flag(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_lineage_demo=TESTS)
    result = pytester.runpytest("-v", *QUIET)
    result.assert_outcomes(failed=1)
    assert "hoistable" not in result.stdout.str()
