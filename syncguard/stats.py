"""Statistics for noisy latency samples: medians with confidence intervals, paired ratios,
outlier counts, and the sentence that states a difference only when the data support one.

Everything is plain numpy and deterministic: the bootstrap draws from
``numpy.random.default_rng(seed)``, so the same samples and seed give the same interval.

Methods (why these):

- Median CI: the distribution-free order-statistic interval (the binomial / sign-test
  interval). It assumes only independent samples from one distribution, no normality, and is
  exact rather than resampled.
- Paired ratio B/A: samples are paired by (round, step) of an interleaved timed pass (both
  paths ran the same step back to back), so a slow moment of the machine hits both. The
  statistic is median(B) / median(A); its interval is the percentile bootstrap that resamples
  *pairs* (the same indices for both sides), which keeps the pairing and needs no assumption
  about the shape of either distribution.
- Outliers: Tukey's fences, beyond 1.5 x IQR from the quartiles. They are counted and shown,
  never dropped (the median barely moves with them).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Optional, Sequence, Union

import numpy as np

#: Default confidence level of every interval.
CONFIDENCE = 0.95
#: Default bootstrap resamples.
N_BOOT = 2000
#: Default bootstrap seed.
SEED = 0
#: Fewer samples (or pairs) than this give no interval (NaN bounds).
MIN_SAMPLES = 5


def _clean(x: Union[Sequence[float], np.ndarray]) -> np.ndarray:
    a = np.asarray(x, dtype=float).ravel()
    return a[np.isfinite(a)]


@dataclasses.dataclass(frozen=True)
class MedianCI:
    """The median of ``n`` samples with its ``conf`` interval ``[lo, hi]`` (same unit as the
    samples; NaN bounds below :data:`MIN_SAMPLES` samples) and the outlier count."""

    median: float
    lo: float
    hi: float
    n: int
    outliers: int
    conf: float = CONFIDENCE


@dataclasses.dataclass(frozen=True)
class Ratio:
    """A ratio B/A with its ``conf`` interval ``[lo, hi]`` from ``n`` pairs (NaN bounds with
    fewer than :data:`MIN_SAMPLES` pairs); ``method`` names how the interval was made."""

    ratio: float
    lo: float
    hi: float
    n: int
    conf: float = CONFIDENCE
    method: str = "paired bootstrap of median(B)/median(A)"

    @property
    def known(self) -> bool:
        """Whether the interval exists."""
        return math.isfinite(self.lo) and math.isfinite(self.hi)

    @property
    def differs(self) -> bool:
        """True only when the interval excludes 1.0."""
        return self.known and (self.lo > 1.0 or self.hi < 1.0)


def outlier_count(x: Union[Sequence[float], np.ndarray], k: float = 1.5) -> int:
    """Samples beyond Tukey's fences (Q1 - k*IQR, Q3 + k*IQR); 0 below 4 samples."""
    a = _clean(x)
    if a.size < 4:
        return 0
    q1, q3 = np.percentile(a, [25, 75])
    iqr = q3 - q1
    return int(np.count_nonzero((a < q1 - k * iqr) | (a > q3 + k * iqr)))


def _binom_cdf(k: int, n: int) -> float:
    """P(X <= k) for X ~ Binomial(n, 1/2)."""
    if k < 0:
        return 0.0
    # log-space terms: exact enough for n up to millions
    logs = [math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1) - n * math.log(2)
            for i in range(0, min(k, n) + 1)]
    m = max(logs)
    return float(min(1.0, math.exp(m) * sum(math.exp(v - m) for v in logs)))


def _order_ranks(n: int, conf: float) -> Optional[tuple]:
    """0-based ranks (lo, hi) of the order-statistic interval for the median, or None when
    ``n`` is too small for the confidence asked."""
    alpha = 1.0 - conf
    if n < MIN_SAMPLES:
        return None
    if n > 2000:  # normal approximation of the binomial, plenty accurate here
        half = 0.5 * 1.959963984540054 * math.sqrt(n) if conf == CONFIDENCE else \
            0.5 * _z(conf) * math.sqrt(n)
        lo = max(0, int(math.floor(n / 2 - half)) - 1)
        hi = min(n - 1, int(math.ceil(n / 2 + half)))
        return lo, hi
    # largest j with P(X <= j - 1) <= alpha/2: the interval [x_(j), x_(n-j+1)] (1-based)
    j = 0
    while _binom_cdf(j, n) <= alpha / 2:
        j += 1
    if j == 0:
        return None
    return j - 1, n - j


def _z(conf: float) -> float:
    # inverse normal CDF by bisection on erf (no scipy needed)
    target = 0.5 + conf / 2
    lo, hi = 0.0, 10.0
    for _ in range(80):
        mid = (lo + hi) / 2
        if 0.5 * (1 + math.erf(mid / math.sqrt(2))) < target:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def median_ci(x: Sequence[float], conf: float = CONFIDENCE) -> MedianCI:
    """Median of ``x`` (NaN and inf dropped) with the order-statistic ``conf`` interval."""
    a = np.sort(_clean(x))
    n = int(a.size)
    if n == 0:
        return MedianCI(math.nan, math.nan, math.nan, 0, 0, conf)
    med = float(np.median(a))
    ranks = _order_ranks(n, conf)
    lo, hi = (math.nan, math.nan) if ranks is None else (float(a[ranks[0]]), float(a[ranks[1]]))
    return MedianCI(med, lo, hi, n, outlier_count(a), conf)


def paired_ratio(a: Sequence[float], b: Sequence[float], conf: float = CONFIDENCE,
                 n_boot: int = N_BOOT, seed: int = SEED) -> Ratio:
    """median(b) / median(a) over pairs ``(a[i], b[i])`` with a paired percentile bootstrap
    ``conf`` interval (``n_boot`` resamples of the pair indices, ``seed``). Pairs with a
    non-finite side are dropped. ``a`` is the baseline."""
    x = np.asarray(a, dtype=float).ravel()
    y = np.asarray(b, dtype=float).ravel()
    if x.size != y.size:
        raise ValueError(f"paired_ratio: {x.size} baseline samples but {y.size} others")
    keep = np.isfinite(x) & np.isfinite(y)
    x, y = x[keep], y[keep]
    n = int(x.size)
    if n == 0:
        return Ratio(math.nan, math.nan, math.nan, 0, conf)
    mx = float(np.median(x))
    est = float(np.median(y)) / mx if mx > 0 else math.nan
    if n < MIN_SAMPLES or not math.isfinite(est):
        return Ratio(est, math.nan, math.nan, n, conf)
    rng = np.random.default_rng(seed)
    out = np.empty(n_boot)
    chunk = max(1, min(n_boot, 4_000_000 // n))  # bounded memory for long runs
    done = 0
    while done < n_boot:
        m = min(chunk, n_boot - done)
        idx = rng.integers(0, n, size=(m, n))
        bx = np.median(x[idx], axis=1)
        by = np.median(y[idx], axis=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            out[done:done + m] = by / bx
        done += m
    out = out[np.isfinite(out)]
    if out.size < n_boot // 2:
        return Ratio(est, math.nan, math.nan, n, conf)
    lo, hi = np.percentile(out, [100 * (1 - conf) / 2, 100 * (1 + conf) / 2])
    return Ratio(est, float(lo), float(hi), n, conf)


def unpaired_ratio(a: Sequence[float], b: Sequence[float], conf: float = CONFIDENCE,
                   n_boot: int = N_BOOT, seed: int = SEED) -> Ratio:
    """median(b) / median(a) for two independent sample sets (two runs, made at different
    times: no pairing to exploit) with a percentile bootstrap interval resampling each side on
    its own (``n_boot`` resamples, ``seed``)."""
    x, y = _clean(a), _clean(b)
    n = int(min(x.size, y.size))
    method = "bootstrap of median(B)/median(A), unpaired"
    if n == 0:
        return Ratio(math.nan, math.nan, math.nan, 0, conf, method)
    mx = float(np.median(x))
    est = float(np.median(y)) / mx if mx > 0 else math.nan
    if n < MIN_SAMPLES or not math.isfinite(est):
        return Ratio(est, math.nan, math.nan, n, conf, method)
    rng = np.random.default_rng(seed)
    out = np.empty(n_boot)
    chunk = max(1, min(n_boot, 4_000_000 // max(x.size, y.size)))
    done = 0
    while done < n_boot:
        m = min(chunk, n_boot - done)
        bx = np.median(x[rng.integers(0, x.size, size=(m, x.size))], axis=1)
        by = np.median(y[rng.integers(0, y.size, size=(m, y.size))], axis=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            out[done:done + m] = by / bx
        done += m
    out = out[np.isfinite(out)]
    if out.size < n_boot // 2:
        return Ratio(est, math.nan, math.nan, n, conf, method)
    lo, hi = np.percentile(out, [100 * (1 - conf) / 2, 100 * (1 + conf) / 2])
    return Ratio(est, float(lo), float(hi), n, conf, method)


def fmt_interval(lo: float, hi: float, conf: float = CONFIDENCE) -> str:
    """``"95% CI 0.97-1.04x"``."""
    return f"{round(conf * 100):d}% CI {lo:.2f}-{hi:.2f}x"


def ratio_verdict(r: Ratio, faster: str = "faster", slower: str = "slower") -> str:
    """A difference only when the interval excludes 1.0: ``"1.12x, slower (95% CI
    1.05-1.20x)"``; otherwise ``"no measurable difference (95% CI 0.97-1.04x)"``; with no
    interval ``"too few samples to tell (n=3)"``."""
    if not math.isfinite(r.ratio):
        return f"no latency to compare (n={r.n})"
    if not r.known:
        return f"too few samples to tell (n={r.n}, {r.ratio:.2f}x)"
    ci = fmt_interval(r.lo, r.hi, r.conf)
    if not r.differs:
        return f"no measurable difference ({ci})"
    word = slower if r.lo > 1.0 else faster
    return f"{r.ratio:.2f}x, {word} ({ci})"
