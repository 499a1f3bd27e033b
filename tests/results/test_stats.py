"""syncguard.results.stats on synthetic samples: intervals cover what they should and verdicts
state a difference only when the interval, as printed, lies wholly beyond the margin."""

from __future__ import annotations

import math
from typing import List, Tuple

import numpy as np
import pytest

from syncguard.results import stats


def _lognormal(seed: int, n: int, median: float, sigma: float = 0.2) -> np.ndarray:
    return np.random.default_rng(seed).lognormal(math.log(median), sigma, n)


def _excludes_one(r: stats.Ratio) -> bool:
    """Whether the interval, as printed, excludes 1.0: what the interval's own error rates
    are about (a verdict asks for more, :attr:`stats.Ratio.differs`)."""
    lo, hi = r.shown
    return r.known and (lo > 1.0 or hi < 1.0)


def test_identical_distributions_give_no_difference_beyond_the_margin() -> None:
    a = _lognormal(1, 400, 10.0)
    b = _lognormal(2, 400, 10.0)
    r = stats.paired_ratio(a, b)
    assert r.known and r.lo < 1.0 < r.hi
    assert not r.differs and r.within  # 0.97-1.05x: within 0.95-1.05x
    text = stats.ratio_verdict(r)
    assert text.startswith("no difference beyond 5% (95% CI ")
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
    paired = stats.paired_ratio(a, b)
    assert _excludes_one(paired)
    # ... and, within the margin, is no claimed difference
    assert paired.within and not paired.differs
    # unpaired (pairs shuffled) the same samples cannot show it
    assert not _excludes_one(stats.paired_ratio(a, rng.permutation(b)))


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
    paired = [stats.paired_ratio(_lognormal(2 * i, 60, 3.0), _lognormal(2 * i + 1, 60, 3.0),
                                 n_boot=400) for i in range(trials)]
    unpaired = [stats.unpaired_ratio(_lognormal(2 * i, 60, 3.0),
                                     _lognormal(2 * i + 1, 80, 3.0), n_boot=400)
                for i in range(trials)]
    assert sum(map(_excludes_one, paired)) <= 12 and sum(map(_excludes_one, unpaired)) <= 12
    # a claimed difference also needs the interval beyond the margin: rarer still
    assert sum(r.differs for r in paired + unpaired) <= 2


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
    # identical paths: the interval excludes 1.0 at most 6% of the time (nominal 5%); the
    # step-level bootstrap on the same data does about 17% of the time
    rs = [stats.round_ratio(*_correlated_rounds(s)) for s in SEEDS]
    rate = sum(map(_excludes_one, rs)) / len(rs)
    print(f"false-positive rate, identical paths, {len(rs)} seeds: {rate:.3f}")
    assert rate <= 0.06
    assert not any(r.differs for r in rs)  # never a claimed difference (beyond the margin)


def test_round_ratio_detects_a_ten_percent_shift_and_covers_it() -> None:
    rs = [stats.round_ratio(*_correlated_rounds(s, shift=1.10)) for s in SEEDS]
    power = sum(_excludes_one(r) and r.ratio > 1.0 for r in rs) / len(rs)
    claimed = sum(r.differs and r.ratio > 1.0 for r in rs) / len(rs)
    cover = sum(r.lo <= 1.10 <= r.hi for r in rs) / len(rs)
    print(f"true 1.10x shift, 8 rounds x 40 steps, {len(rs)} seeds: interval excludes 1.0 in "
          f"{power:.3f}, beyond the margin (slower) in {claimed:.3f}, covers 1.10 in "
          f"{cover:.3f}")
    assert power >= 0.7  # about 0.80 with these parameters
    assert 0.1 <= claimed <= 0.4  # about 0.24: the interval must clear 1.05, not 1.0
    assert cover >= 0.92
    assert not any(r.differs and r.ratio < 1.0 for r in rs)  # never the wrong direction
    # a 20% shift in the same noise clears the margin nearly always
    big = [stats.round_ratio(*_correlated_rounds(s, shift=1.20)) for s in SEEDS]
    assert sum(r.differs and r.ratio > 1.0 for r in big) / len(big) >= 0.9  # about 0.97


def test_a_three_percent_shift_is_never_claimed_whatever_the_noise() -> None:
    # the case: a real 3% difference reads the same on every run (never "slower"),
    # whether the interval happens to exclude 1.0 or not
    rs = [stats.round_ratio(*_correlated_rounds(s, shift=1.03)) for s in SEEDS]
    assert any(map(_excludes_one, rs))  # some intervals exclude 1.0 (about 11%) ...
    assert not any(r.differs for r in rs)  # ... and none is a claim
    assert not any("slower" in stats.ratio_verdict(r) or "faster" in stats.ratio_verdict(r)
                   for r in rs)


def test_step_level_bootstrap_is_what_correlated_steps_break() -> None:
    # the reason for rounds: pooling the same data's steps as independent pairs over-reports
    seeds = range(40)
    pooled = sum(_excludes_one(stats.paired_ratio(np.concatenate(a), np.concatenate(b),
                                                  n_boot=300))
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
    # a real 10% shift in 4 noisy rounds: not resolved yet, the verdict names the rounds needed
    wobble = (1.05, 0.97, 1.04, 0.99)
    a = [[1.0] * 8 for _ in range(4)]  # 32 steps per path: enough to claim a difference
    b = [[1.10 * f] * 8 for f in wobble]
    r = stats.round_ratio(a, b)
    assert r.known and not r.differs and r.need is not None and r.need > 4
    text = stats.ratio_verdict(r)
    assert text.startswith("1.11x, a difference not shown beyond 5% (95% CI ") and (
        ", 4 rounds)" in text)
    assert f"1.11x, if real, would need about {r.need} rounds ({r.need - 4} more)" in text
    # that many rounds of the same spread take the interval past 1.05
    more = stats.round_ratio([[1.0] * 8] * r.need,
                             [[1.10 * wobble[i % 4]] * 8 for i in range(r.need)])
    assert more.differs and "slower" in stats.ratio_verdict(more)
    # the same noise around a 3%: no number of rounds would make it a claim, so none is named
    three = stats.round_ratio(a, [[1.03 * f] * 8 for f in wobble])
    assert three.known and not three.differs and three.need is None
    assert stats.ratio_verdict(three).startswith("no measurable difference (95% CI ")
    assert "if real" not in stats.ratio_verdict(three)
    assert stats.rounds_needed(0.0, 0.1) is None  # no difference: no number of rounds
    assert stats.rounds_needed(math.log(1.03), 0.001) is None  # within the margin: none
    assert stats.rounds_needed(math.log(1.10), 0.0) == stats.MIN_ROUNDS


def test_decision_and_print_use_the_same_rounded_interval() -> None:
    # 0.82-0.9496 prints as 0.82-0.95x: it cannot be "faster" beside a bound reading 0.95
    r = stats.Ratio(0.88, 0.82, 0.9496, 40)
    assert not r.differs and not r.within
    assert stats.ratio_verdict(r) == "0.88x, a difference not shown beyond 5% (95% CI 0.82-0.95x)"
    assert stats.Ratio(0.88, 0.82, 0.9449, 40).differs  # prints 0.94
    # the same at the upper bound: 1.0549 prints 1.05, not beyond; 1.0551 prints 1.06
    assert not stats.Ratio(1.10, 1.0549, 1.15, 40).differs
    assert stats.Ratio(1.10, 1.0551, 1.15, 40).differs
    # and at the edges of "within": 0.9451-1.0549 prints 0.95-1.05x, within (bounds
    # included); 0.9449 prints 0.94, reaching past the margin
    assert stats.Ratio(1.0, 0.9451, 1.0549, 40).within
    assert not stats.Ratio(1.0, 0.9449, 1.0549, 40).within


def test_ratio_change_between_two_runs() -> None:
    logs_a = np.log([1.20, 1.22, 1.18, 1.21, 1.19, 1.20, 1.23, 1.17])
    same = stats.ratio_change(logs_a, logs_a[::-1] + 0.001)
    assert same.known and not same.differs
    moved = stats.ratio_change(logs_a, logs_a + math.log(1.10))
    assert moved.differs and moved.ratio == pytest.approx(1.10)
    assert not stats.ratio_change(logs_a[:2], logs_a[:2]).known


def test_a_ratio_that_prints_as_one_asks_for_no_more_rounds() -> None:
    r = stats.Ratio(1.002, 0.90, 1.12, 40, rounds=8, need=900)
    assert stats.ratio_verdict(r) == "no measurable difference (95% CI 0.90-1.12x, 8 rounds)"
    # nor one within the margin (1.03x), nor one already settled within it
    r = stats.Ratio(1.03, 0.90, 1.18, 40, rounds=8, need=900)
    assert stats.ratio_verdict(r) == "no measurable difference (95% CI 0.90-1.18x, 8 rounds)"
    r = stats.Ratio(1.002, 0.98, 1.03, 40, rounds=8, need=900)
    assert stats.ratio_verdict(r) == "no difference beyond 5% (95% CI 0.98-1.03x, 8 rounds)"


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


# -- the margin --------------------------------------------------------------------------------
@pytest.mark.parametrize("lo, hi, differs, within, verdict", [
    # a 2-4% difference: within the margin whether or not the interval excludes 1.0
    (0.95, 0.99, False, True, "no difference beyond 5% (95% CI 0.95-0.99x, 8 rounds)"),
    (0.97, 1.02, False, True, "no difference beyond 5% (95% CI 0.97-1.02x, 8 rounds)"),
    (1.02, 1.04, False, True, "no difference beyond 5% (95% CI 1.02-1.04x, 8 rounds)"),
    # wholly beyond the margin: a difference
    (0.86, 0.89, True, False, "0.87x, faster (95% CI 0.86-0.89x, 8 rounds)"),
    (1.06, 1.10, True, False, "1.08x, slower (95% CI 1.06-1.10x, 8 rounds)"),
    # bounds printed exactly at the margin are not beyond it
    (0.90, 0.95, False, False,
     "0.92x, a difference not shown beyond 5% (95% CI 0.90-0.95x, 8 rounds)"),
    (1.05, 1.12, False, False,
     "1.08x, a difference not shown beyond 5% (95% CI 1.05-1.12x, 8 rounds)"),
    # reaching past the margin without lying beyond it: neither shown nor ruled out; an
    # interval that excludes 1.0 says it measured a difference, not one beyond the margin
    (0.93, 1.08, False, False, "no measurable difference (95% CI 0.93-1.08x, 8 rounds)"),
    (0.92, 0.97, False, False,
     "0.94x, a difference not shown beyond 5% (95% CI 0.92-0.97x, 8 rounds)"),
])
def test_the_margin_decides_every_verdict(lo: float, hi: float, differs: bool, within: bool,
                                          verdict: str) -> None:
    r = stats.Ratio(math.sqrt(lo * hi), lo, hi, 40, rounds=8)  # the centre in log terms
    assert (r.differs, r.within) == (differs, within)
    assert stats.ratio_verdict(r) == verdict


def test_the_margin_is_five_percent_and_named_where_the_rule_is_written() -> None:
    from syncguard.renderers import _common, _tables
    from syncguard.results import analysis

    assert stats.MARGIN == 0.05 and stats.margin_text() == "5%"
    assert stats.margin_bounds() == (0.95, 1.05)
    legend = dict(_common.LEGEND)
    assert "beyond 5% of 1.00x (below 0.95x or above 1.05x)" in legend["ratio"]
    for col in ("latency_changed", "host_changed", "changed"):
        assert "beyond the 5% margin" in analysis.COMPARE_COLUMNS[col]
    assert "5% margin" in analysis.SUMMARY_COLUMNS["saved_per_token_us"]
    assert "5% margin" in analysis.SUMMARY_COLUMNS["rounds_needed"]
    for style in ("improved", "regressed"):
        assert "beyond the 5% margin" in _tables.STYLE_LEGEND[style]


def test_a_thin_interval_beyond_the_margin_is_still_too_thin() -> None:
    r = stats.Ratio(0.88, 0.86, 0.89, 8, rounds=8, thin=True)
    assert not r.differs and not r.within
    assert stats.ratio_verdict(r).startswith("evidence too thin to tell (0.88x, 95% CI ")
    inside = stats.Ratio(0.98, 0.96, 0.99, 8, rounds=8, thin=True)
    assert not inside.within and stats.ratio_verdict(inside).startswith("evidence too thin")
