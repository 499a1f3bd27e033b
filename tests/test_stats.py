"""syncguard.stats on synthetic samples: intervals cover what they should and verdicts state a
difference only when the interval excludes 1.0."""

from __future__ import annotations

import math

import numpy as np
import pytest

from syncguard import stats


def _lognormal(seed: int, n: int, median: float, sigma: float = 0.2) -> np.ndarray:
    return np.random.default_rng(seed).lognormal(math.log(median), sigma, n)


def test_identical_distributions_give_no_measurable_difference() -> None:
    a = _lognormal(1, 400, 10.0)
    b = _lognormal(2, 400, 10.0)
    r = stats.paired_ratio(a, b)
    assert r.known and r.lo < 1.0 < r.hi
    assert not r.differs
    text = stats.ratio_verdict(r)
    assert text.startswith("no measurable difference (95% CI ")
    assert text.endswith("x)")


def test_shifted_distribution_gives_interval_around_the_shift() -> None:
    a = _lognormal(3, 400, 10.0)
    b = _lognormal(4, 400, 12.0)  # true ratio of medians 1.2
    r = stats.paired_ratio(a, b)
    assert r.differs
    assert 1.0 < r.lo < 1.2 < r.hi < 1.4
    assert stats.ratio_verdict(r).startswith(f"{r.ratio:.2f}x, slower (95% CI ")
    faster = stats.paired_ratio(b, a)
    assert faster.hi < 1.0 and "faster" in stats.ratio_verdict(faster)


def test_pairing_removes_shared_noise() -> None:
    # a machine-wide slowdown hits both sides of a pair: a 2% shift is visible paired
    rng = np.random.default_rng(5)
    machine = rng.lognormal(0.0, 0.5, 300)
    a = 10.0 * machine
    b = 10.2 * machine * rng.lognormal(0.0, 0.005, 300)
    assert stats.paired_ratio(a, b).differs
    # unpaired (pairs shuffled) the same samples cannot show it
    assert not stats.paired_ratio(a, rng.permutation(b)).differs


def test_bootstrap_is_deterministic_given_a_seed() -> None:
    a, b = _lognormal(6, 100, 5.0), _lognormal(7, 100, 5.5)
    assert stats.paired_ratio(a, b, seed=3) == stats.paired_ratio(a, b, seed=3)
    assert stats.paired_ratio(a, b, seed=3) != stats.paired_ratio(a, b, seed=4)


def test_too_few_samples_say_so() -> None:
    r = stats.paired_ratio([1.0, 2.0], [1.0, 2.0])
    assert not r.known and not r.differs
    assert stats.ratio_verdict(r).startswith("too few samples to tell (n=2")
    assert math.isnan(stats.median_ci([1.0, 2.0]).lo)


def test_median_ci_covers_the_true_median_and_counts_outliers() -> None:
    x = np.concatenate([_lognormal(8, 199, 4.0, 0.1), [500.0]])
    m = stats.median_ci(x)
    assert m.n == 200 and m.lo <= m.median <= m.hi
    assert m.lo < 4.0 < m.hi
    assert m.outliers >= 1
    # the order-statistic interval for n=10 at 95% is [x(2), x(9)] (1-based)
    ten = stats.median_ci(np.arange(1.0, 11.0))
    assert (ten.lo, ten.hi) == (2.0, 9.0)


def test_outliers_use_tukey_fences() -> None:
    assert stats.outlier_count([1, 2, 3, 4, 5, 6, 7, 8]) == 0
    assert stats.outlier_count([1, 2, 3, 4, 5, 6, 7, 100]) == 1
    assert stats.outlier_count([1, 1, 1]) == 0


def test_mismatched_pairs_are_an_error() -> None:
    with pytest.raises(ValueError, match="3 baseline samples but 2"):
        stats.paired_ratio([1, 2, 3], [1, 2])


def test_nan_pairs_are_dropped() -> None:
    a = [1.0] * 10 + [math.nan]
    b = [1.0] * 10 + [5.0]
    assert stats.paired_ratio(a, b).n == 10


def test_false_positive_rate_is_near_the_nominal_five_percent() -> None:
    # identical distributions: an interval excluding 1.0 is a false finding; at 95% it
    # should happen about 5 times in 100 (binomial: more than 12 of 100 is p < 0.001)
    trials = 100
    paired = sum(stats.paired_ratio(_lognormal(2 * i, 60, 3.0), _lognormal(2 * i + 1, 60, 3.0),
                                    n_boot=400).differs for i in range(trials))
    unpaired = sum(stats.unpaired_ratio(_lognormal(2 * i, 60, 3.0),
                                        _lognormal(2 * i + 1, 80, 3.0), n_boot=400).differs
                   for i in range(trials))
    assert paired <= 12 and unpaired <= 12


def test_unpaired_ratio_for_two_runs() -> None:
    same = stats.unpaired_ratio(_lognormal(13, 200, 3.0), _lognormal(14, 300, 3.0))
    assert same.known and not same.differs
    shifted = stats.unpaired_ratio(_lognormal(11, 200, 3.0), _lognormal(12, 300, 2.4))
    assert shifted.hi < 1.0 and shifted.lo < 0.8 < shifted.hi
    assert "unpaired" in shifted.method
