"""syncguard.results.stats on synthetic samples: intervals cover what they should and verdicts
state a difference only when the interval excludes 1.0."""

from __future__ import annotations

import math
from typing import List, Tuple

import numpy as np
import pytest

from syncguard.results import stats


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


# -- rounds as the unit of evidence -----------------------------------------------------------
def _correlated_rounds(seed: int, shift: float = 1.0, k: int = 8, steps: int = 40,
                       phi: float = 0.8) -> Tuple[List[np.ndarray], List[np.ndarray]]:
    """Two interleaved paths over ``k`` rounds as real decode loops give them: a shared
    machine factor per step that is AR(1) (``phi``) and drifts 2.7x within a round, a shared
    offset per round, an offset per (round, path) that does not cancel, and independent
    per-step noise; B is ``shift`` times A."""
    rng = np.random.default_rng(seed)
    sd_ar = 0.15
    e = np.empty((k, steps))
    e[:, 0] = rng.normal(0.0, sd_ar, k)
    innov = rng.normal(0.0, sd_ar * math.sqrt(1 - phi ** 2), (k, steps))
    for i in range(1, steps):
        e[:, i] = phi * e[:, i - 1] + innov[:, i]
    machine = np.exp(e + np.linspace(0.0, 1.0, steps) + rng.normal(0.0, 0.2, (k, 1)))
    off = rng.normal(0.0, 0.05, (2, k, 1))
    a = 5.0 * machine * np.exp(off[0] + rng.normal(0.0, 0.05, (k, steps)))
    b = 5.0 * shift * machine * np.exp(off[1] + rng.normal(0.0, 0.05, (k, steps)))
    return list(a), list(b)


SEEDS = range(400)


def test_round_ratio_false_positive_rate_under_correlated_steps() -> None:
    # identical paths: the verdict says "different" at most 6% of the time (nominal 5%);
    # the step-level bootstrap on the same data says it about 17% of the time
    found = [stats.round_ratio(*_correlated_rounds(s)).differs for s in SEEDS]
    rate = sum(found) / len(found)
    print(f"false-positive rate, identical paths, {len(found)} seeds: {rate:.3f}")
    assert rate <= 0.06


def test_round_ratio_detects_a_ten_percent_shift_and_covers_it() -> None:
    rs = [stats.round_ratio(*_correlated_rounds(s, shift=1.10)) for s in SEEDS]
    power = sum(r.differs and r.ratio > 1.0 for r in rs) / len(rs)
    cover = sum(r.lo <= 1.10 <= r.hi for r in rs) / len(rs)
    print(f"true 1.10x shift, 8 rounds x 40 steps, {len(rs)} seeds: detected {power:.3f}, "
          f"interval covers 1.10 in {cover:.3f}")
    assert power >= 0.7  # about 0.80 with these parameters
    assert cover >= 0.92
    assert not any(r.differs and r.ratio < 1.0 for r in rs)  # never the wrong direction


def test_step_level_bootstrap_is_what_correlated_steps_break() -> None:
    # the reason for rounds: pooling the same data's steps as independent pairs over-reports
    seeds = range(40)
    pooled = sum(stats.paired_ratio(np.concatenate(a), np.concatenate(b), n_boot=300).differs
                 for a, b in (_correlated_rounds(s) for s in seeds))
    assert pooled / len(seeds) > 0.06


def test_round_ratio_matches_hand_calculation() -> None:
    # per-round log-ratios log(2), log(1), log(4): mean log 2 -> 2.0x; sd ln2, t(0.975, 2)
    a = [[1.0, 1.0], [2.0, 2.0], [1.0, 1.0]]
    b = [[2.0, 2.0], [2.0, 2.0], [4.0, 4.0]]
    r = stats.round_ratio(a, b)
    half = stats.t_quantile(0.975, 2) * math.log(2.0) / math.sqrt(3)
    assert r.ratio == pytest.approx(2.0)
    assert (r.lo, r.hi) == pytest.approx((2.0 * math.exp(-half), 2.0 * math.exp(half)))
    assert r.rounds == 3 and r.n == 6
    assert stats.t_quantile(0.975, 7) == pytest.approx(2.364624, abs=1e-5)  # tables
    assert stats.t_cdf(-2.0, 5) == pytest.approx(0.050970, abs=1e-5)


def test_too_few_rounds_say_how_many_are_needed() -> None:
    one = stats.round_ratio([[1.0, 1.1, 1.2]], [[1.3, 1.4, 1.5]])
    assert not one.known and one.rounds == 1
    assert stats.ratio_verdict(one) == ("too few rounds to tell (1 round, 1.27x): needs at "
                                        "least 3 rounds")
    # a real 3% shift in 4 noisy rounds: not resolved yet, the verdict names the rounds needed
    a = [[1.0] * 8 for _ in range(4)]  # 32 steps per path: enough to claim a difference
    b = [[1.03 * f] * 8 for f in (1.05, 0.97, 1.04, 0.99)]
    r = stats.round_ratio(a, b)
    assert r.known and not r.differs and r.need is not None and r.need > 4
    text = stats.ratio_verdict(r)
    assert text.startswith("no measurable difference (95% CI ") and ", 4 rounds)" in text
    assert f"would need about {r.need} rounds ({r.need - 4} more)" in text
    assert stats.rounds_needed(0.0, 0.1) is None  # no difference: no number of rounds


def test_decision_and_print_use_the_same_rounded_interval() -> None:
    # 0.82-0.9996 prints as 0.82-1.00x: it cannot be "faster" beside a bound reading 1.00
    r = stats.Ratio(0.94, 0.82, 0.9996, 40)
    assert not r.differs
    assert stats.ratio_verdict(r) == "no measurable difference (95% CI 0.82-1.00x)"
    assert stats.Ratio(0.94, 0.82, 0.994, 40).differs


def test_ratio_change_between_two_runs() -> None:
    logs_a = np.log([1.20, 1.22, 1.18, 1.21, 1.19, 1.20, 1.23, 1.17])
    same = stats.ratio_change(logs_a, logs_a[::-1] + 0.001)
    assert same.known and not same.differs
    moved = stats.ratio_change(logs_a, logs_a + math.log(1.10))
    assert moved.differs and moved.ratio == pytest.approx(1.10)
    assert not stats.ratio_change(logs_a[:2], logs_a[:2]).known


def test_a_ratio_that_prints_as_one_asks_for_no_more_rounds() -> None:
    r = stats.Ratio(1.002, 0.98, 1.03, 40, rounds=8, need=900)
    assert stats.ratio_verdict(r) == "no measurable difference (95% CI 0.98-1.03x, 8 rounds)"


def test_fewer_than_30_steps_per_path_claim_no_difference() -> None:
    # a clear 20% slowdown, 8 rounds of one paired step each: 8 steps per path, too thin
    a = [[1.0 * f] for f in (1.0, 1.02, 0.98, 1.01, 0.99, 1.0, 1.03, 0.97)]
    b = [[1.2 * x[0] * g] for x, g in zip(a, (1.0, 0.99, 1.01, 1.0, 1.02, 0.98, 1.0, 1.01))]
    thin = stats.round_ratio(a, b)
    assert thin.known and thin.lo > 1.0 and thin.thin and not thin.differs
    assert stats.ratio_verdict(thin) == (
        f"evidence too thin to tell (1.20x, {stats.fmt_interval(thin.lo, thin.hi)}, 8 "
        f"rounds): 8 timed steps per path, at least {stats.MIN_CLAIM_SAMPLES} needed")
    # the same rounds with 4 paired steps each (32 per path): the slowdown is claimed
    r = stats.round_ratio([x * 4 for x in a], [y * 4 for y in b])
    assert r.n == 32 and not r.thin and r.differs
    assert stats.ratio_verdict(r).startswith("1.20x, slower (95% CI ")
    assert stats.too_thin(29, 8) and not stats.too_thin(30, 8)
    assert not stats.too_thin(5, 0)  # not a ratio over rounds (a step-level interval)
