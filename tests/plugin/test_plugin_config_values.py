"""``[tool.syncguard]`` values TOML allows but a count is not (``inf``, ``nan``, ``2.5``): a
usage error naming the key, never an INTERNALERROR traceback."""

from __future__ import annotations

import pytest

QUIET = ("-p", "no:cacheprovider", "-p", "no:benchmark", "-p", "no:hypothesispytest")


@pytest.mark.parametrize("value", ["inf", "-inf", "nan", "2.5"])
def test_a_max_syncs_that_is_not_a_count_is_a_usage_error(value: str,
                                                           pytester: pytest.Pytester) -> None:
    pytester.makepyprojecttoml(f"[tool.syncguard]\nmax_syncs = {value}\n")
    pytester.makepyfile(test_x="def test_x():\n    pass\n")
    result = pytester.runpytest(*QUIET)
    text = result.stdout.str() + result.stderr.str()
    assert "INTERNALERROR" not in text
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "max_syncs: must be an integer >= 0" in text


def test_an_integral_float_still_reads() -> None:
    from syncguard.pytest_plugin.settings import _to_count

    assert _to_count(3.0, "max_syncs") == 3 and _to_count("4", "x") == 4
