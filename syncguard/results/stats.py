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
- Ratio over rounds (:func:`round_ratio`, what verdicts use): decode steps are not
  independent (lag-1 autocorrelation ~0.8, drift within a round, an offset per round), so a
  step-level interval is far too narrow. The *round* is the unit: each round starts from fresh
  state, gives one log-ratio ``log(median(B_r) / median(A_r))`` over its paired steps, and the
  interval is Student's t on the mean of those per-round log-ratios (k - 1 degrees of freedom),
  exponentiated. Rounds are independent by construction, so the interval keeps its coverage
  whatever the correlation inside a round; the t quantile (not a bootstrap) keeps it with the
  8 or so rounds a budget allows. Two runs: Welch's t on the two runs' per-round log-ratios
  (:func:`ratio_change`).
- Decisions use the interval *as printed* (bounds rounded to 2 decimals): a sentence never
  says "faster" beside a bound that reads 1.00x.
- Practical equivalence (:data:`MARGIN`): a difference is claimed only when the printed
  interval lies wholly beyond ``1 - MARGIN`` or ``1 + MARGIN``, not merely beyond 1.0. On a
  shared machine intervals a few percent wide come and go with the load, so an interval that
  only just excludes 1.0 says "faster" on a quiet run and nothing on a loaded one. The margin
  moves that flip away from the 2-4% differences common between sampling paths to differences
  near the margin itself: one well beyond it is claimed run after run, one within it never.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Optional, Sequence, Tuple, Union

import numpy as np

#: Default confidence level of every interval.
CONFIDENCE = 0.95
#: Default bootstrap resamples.
N_BOOT = 2000
#: Default bootstrap seed.
SEED = 0
#: Fewer samples (or pairs) than this give no interval (NaN bounds).
MIN_SAMPLES = 5
#: Fewer rounds than this give no round-level interval (t with 1 degree of freedom is
#: 12.7 wide: it never resolves anything).
MIN_ROUNDS = 3
#: Decimals the ratio bounds are printed with, and decided on.
DECIMALS = 2
#: Practical-equivalence margin of every latency verdict (ratios within a run, and moves
#: between two runs): "faster" only when the interval, as printed, lies wholly below
#: ``1 - MARGIN``, "slower" only when it lies wholly above ``1 + MARGIN``, and "no difference
#: beyond the margin" when it lies wholly within ``[1 - MARGIN, 1 + MARGIN]`` (see
#: :func:`ratio_verdict` for every sentence). The bounds are
#: ``1 -/+ MARGIN`` rather than the ratio-symmetric ``1 / (1 + MARGIN)``: decisions are made on
#: bounds printed to :data:`DECIMALS` decimals, and the reader checks them against the margin
#: named in the sentence (5%: 0.95 and 1.05); 1 / 1.05 = 0.952 is no printable bound, and a
#: printed 0.95 would then count as beyond a 5% margin. The asymmetry in log terms
#: (ln 0.95 = -0.0513 against ln 1.05 = 0.0488) is about 0.25% of the ratio, half the printing
#: resolution, so taking the other path as the baseline changes a verdict only where a bound
#: sits within rounding of the margin anyway.
MARGIN = 0.05
#: Fewer paired timed steps per path than this behind a ratio over rounds: the verdict says
#: the evidence is too thin, never "faster" or "slower" (a handful of steps per path does
#: not reproduce from one run to the next on a shared machine).
MIN_CLAIM_SAMPLES = 30


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
    #: rounds (or runs) behind a round-level interval; 0 for a step-level one
    rounds: int = 0
    #: rounds in all that would resolve a difference of this size beyond the margin (None:
    #: not estimable, already resolved, or the ratio itself within the margin); see
    #: :func:`rounds_needed`
    need: Optional[int] = None
    #: fewer than :data:`MIN_CLAIM_SAMPLES` paired steps behind a ratio over rounds: no
    #: difference is claimed whatever the interval (see :func:`too_thin`)
    thin: bool = False

    @property
    def known(self) -> bool:
        """Whether the interval exists."""
        return math.isfinite(self.lo) and math.isfinite(self.hi)

    @property
    def shown(self) -> tuple:
        """The bounds as printed (rounded to :data:`DECIMALS`)."""
        return round(self.lo, DECIMALS), round(self.hi, DECIMALS)

    @property
    def differs(self) -> bool:
        """True only when the interval *as printed* lies wholly beyond the margin (printed
        ``hi < 1 - MARGIN``: faster; printed ``lo > 1 + MARGIN``: slower; a bound that reads
        exactly 0.95 or 1.05 is not beyond a 5% margin) and the evidence is not :attr:`thin`.
        Every "faster"/"slower" and every ``*_changed`` column is this decision."""
        if not self.known or self.thin:
            return False
        return _beyond(*self.shown)

    @property
    def within(self) -> bool:
        """True when the interval *as printed* lies wholly within ``[1 - MARGIN, 1 + MARGIN]``
        (bounds included) and the evidence is not :attr:`thin`: whatever the difference is, it
        is no bigger than the margin."""
        if not self.known or self.thin:
            return False
        lo, hi = self.shown
        low, high = margin_bounds()
        return low <= lo and hi <= high


def margin_bounds() -> Tuple[float, float]:
    """``(1 - MARGIN, 1 + MARGIN)``, each the double nearest its decimal value (so 0.95
    compares equal to a bound printed as 0.95)."""
    return round(1.0 - MARGIN, 9), round(1.0 + MARGIN, 9)


def margin_text() -> str:
    """The margin as the sentences name it: ``"5%"``."""
    return f"{100.0 * MARGIN:g}%"


def _beyond(lo: float, hi: float) -> bool:
    """Whether ``[lo, hi]`` (printed bounds) lies wholly beyond the margin."""
    low, high = margin_bounds()
    return hi < low or lo > high


def too_thin(pairs: int, rounds: int) -> bool:
    """Whether a ratio over ``rounds`` rounds (0: not a ratio over rounds) rests on fewer than
    :data:`MIN_CLAIM_SAMPLES` paired steps per path: too thin to claim a difference."""
    return rounds > 0 and pairs < MIN_CLAIM_SAMPLES


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


# -- rounds as the unit -----------------------------------------------------------------------
def _betacf(a: float, b: float, x: float) -> float:
    # continued fraction of the regularized incomplete beta (modified Lentz)
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-15:
            break
    return h


def _betai(a: float, b: float, x: float) -> float:
    """Regularized incomplete beta I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    lbt = (math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x)
           + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(lbt) * _betacf(a, b, x) / a
    return 1.0 - math.exp(lbt) * _betacf(b, a, 1.0 - x) / b


def t_cdf(t: float, df: float) -> float:
    """Student's t CDF with ``df`` (> 0, may be fractional) degrees of freedom."""
    x = df / (df + t * t)
    tail = 0.5 * _betai(df / 2.0, 0.5, x)
    return 1.0 - tail if t > 0 else tail


@functools.lru_cache(maxsize=4096)
def t_quantile(p: float, df: float) -> float:
    """The ``p`` quantile of Student's t (bisection on :func:`t_cdf`; no SciPy; cached)."""
    if not 0.0 < p < 1.0 or df <= 0:
        raise ValueError(f"t_quantile: p in (0, 1) and df > 0, got p={p}, df={df}")
    if p < 0.5:
        return -t_quantile(1.0 - p, df)
    lo, hi = 0.0, 1.0
    while t_cdf(hi, df) < p:
        hi *= 2.0
    for _ in range(60):
        mid = (lo + hi) / 2.0
        if t_cdf(mid, df) < p:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2.0


def _log_ratio(a: Sequence[float], b: Sequence[float]) -> float:
    x, y = _clean(a), _clean(b)
    if x.size == 0 or y.size == 0:
        return math.nan
    mx, my = float(np.median(x)), float(np.median(y))
    return math.log(my / mx) if mx > 0 and my > 0 else math.nan


def round_logs(rounds_a: Sequence[Sequence[float]], rounds_b: Sequence[Sequence[float]]
               ) -> np.ndarray:
    """Per-round ``log(median(B_r) / median(A_r))``; rounds where either side is empty (or
    a median is not positive) are left out."""
    if len(rounds_a) != len(rounds_b):
        raise ValueError(f"round_logs: {len(rounds_a)} baseline rounds but {len(rounds_b)}")
    logs = np.array([_log_ratio(a, b) for a, b in zip(rounds_a, rounds_b)], dtype=float)
    return logs[np.isfinite(logs)]


def rounds_needed(mean: float, sd: float, conf: float = CONFIDENCE, cap: int = 1000
                  ) -> Optional[int]:
    """The fewest rounds ``n`` whose t interval (``conf``) around a mean log-ratio ``mean``
    with per-round spread ``sd`` would lie wholly beyond the margin as printed
    (:attr:`Ratio.differs`): what a verdict asks for when the rounds it has do not resolve the
    difference. None when the ratio ``exp(mean)`` itself, as printed, is not beyond the margin
    (no number of rounds would claim it), or when no number up to ``cap`` would."""
    if not (math.isfinite(mean) and math.isfinite(sd)):
        return None
    est = math.exp(mean)
    if not Ratio(est, est, est, 0, conf).differs:
        return None
    q = 0.5 + conf / 2.0
    n = MIN_ROUNDS
    while n <= cap:
        half = t_quantile(q, n - 1) * sd / math.sqrt(n)
        if Ratio(est, math.exp(mean - half), math.exp(mean + half), 0, conf).differs:
            return n
        n += 1 if n < 64 else max(1, n // 16)
    return None


def ratio_from_logs(logs: Union[Sequence[float], np.ndarray], conf: float = CONFIDENCE,
                    method: str = "t interval over rounds of log(median(B)/median(A))",
                    n: int = 0) -> Ratio:
    """A :class:`Ratio` from per-round log-ratios: ``exp(mean)`` and the Student t
    ``conf`` interval on the mean (k - 1 degrees of freedom); no interval below
    :data:`MIN_ROUNDS` rounds. ``need`` says how many rounds would resolve the observed
    difference (beyond the margin) when this many do not. ``n`` (steps behind the rounds) is
    only reported."""
    x = _clean(logs)
    k = int(x.size)
    if k == 0:
        return Ratio(math.nan, math.nan, math.nan, n, conf, method, 0, None)
    m = float(np.mean(x))
    est = math.exp(m)
    if k < MIN_ROUNDS:
        return Ratio(est, math.nan, math.nan, n, conf, method, k, MIN_ROUNDS)
    sd = float(np.std(x, ddof=1))
    half = t_quantile(0.5 + conf / 2.0, k - 1) * sd / math.sqrt(k)
    r = Ratio(est, math.exp(m - half), math.exp(m + half), n, conf, method, k, None)
    if not r.differs:
        need = rounds_needed(m, sd, conf)
        r = dataclasses.replace(r, need=need if need is None or need > k else None)
    return r


def round_ratio(rounds_a: Sequence[Sequence[float]], rounds_b: Sequence[Sequence[float]],
                conf: float = CONFIDENCE) -> Ratio:
    """B/A over rounds: ``rounds_a[r]`` and ``rounds_b[r]`` are the two paths' step
    latencies in round ``r`` (paired steps of one interleaved round). One log-ratio per
    round; see :func:`ratio_from_logs`. ``a`` is the baseline."""
    n = sum(min(len(_clean(a)), len(_clean(b))) for a, b in zip(rounds_a, rounds_b))
    r = ratio_from_logs(round_logs(rounds_a, rounds_b), conf, n=n)
    return dataclasses.replace(r, thin=too_thin(n, r.rounds))


def ratio_change(logs_a: Union[Sequence[float], np.ndarray],
                 logs_b: Union[Sequence[float], np.ndarray], conf: float = CONFIDENCE,
                 method: str = "Welch t over rounds: run B's per-round log-ratios against "
                 "run A's") -> Ratio:
    """exp(mean(logs_b) - mean(logs_a)): how a ratio measured in run A moved in run B,
    with Welch's t ``conf`` interval (each run's rounds are its samples; the two runs are
    independent). No interval unless both runs have :data:`MIN_ROUNDS` rounds."""
    x, y = _clean(logs_a), _clean(logs_b)
    k = int(min(x.size, y.size))
    if k == 0:
        return Ratio(math.nan, math.nan, math.nan, 0, conf, method, k, None)
    d = float(np.mean(y) - np.mean(x))
    if k < MIN_ROUNDS:
        return Ratio(math.exp(d), math.nan, math.nan, 0, conf, method, k, MIN_ROUNDS)
    va, vb = float(np.var(x, ddof=1)) / x.size, float(np.var(y, ddof=1)) / y.size
    se = math.sqrt(va + vb)
    if se == 0.0:
        return Ratio(math.exp(d), math.exp(d), math.exp(d), 0, conf, method, k, None)
    df = (va + vb) ** 2 / ((va ** 2 / (x.size - 1) if va else 0.0)
                           + (vb ** 2 / (y.size - 1) if vb else 0.0))
    half = t_quantile(0.5 + conf / 2.0, df) * se
    return Ratio(math.exp(d), math.exp(d - half), math.exp(d + half), 0, conf, method, k,
                 None)


def fmt_interval(lo: float, hi: float, conf: float = CONFIDENCE) -> str:
    """``"95% CI 0.97-1.04x"``."""
    return f"{round(conf * 100):d}% CI {lo:.{DECIMALS}f}-{hi:.{DECIMALS}f}x"


def _rounds_text(r: Ratio) -> str:
    return f", {r.rounds} round{'s' if r.rounds != 1 else ''}" if r.rounds else ""


def ratio_verdict(r: Ratio, faster: str = "faster", slower: str = "slower") -> str:
    """The sentence for a ratio B/A. Each class is decided on the interval *as printed*
    (:attr:`Ratio.shown`) against the margin (:data:`MARGIN`, 5%: the bounds 0.95 and 1.05):

    - beyond the margin (:attr:`Ratio.differs`), a difference: ``"0.88x, faster (95% CI
      0.86-0.89x, 8 rounds)"`` when hi < 0.95, ``"1.08x, slower (95% CI 1.06-1.10x, 8
      rounds)"`` when lo > 1.05;
    - wholly within the margin, bounds included (:attr:`Ratio.within`): ``"no difference
      beyond 5% (95% CI 0.95-0.99x, 8 rounds)"``, whether or not the interval excludes 1.0:
      a real 2% difference reads 0.95-0.99x on a quiet run and 0.97-1.02x on a loaded one, and
      both say this;
    - otherwise the interval reaches past the margin on at least one side without lying
      beyond it: it neither shows a difference beyond the margin nor rules one out, and reads
      ``"no measurable difference (95% CI 0.93-1.08x, 8 rounds)"``, or, when it excludes 1.0,
      ``"0.94x, a difference not shown beyond 5% (95% CI 0.93-0.96x, 8 rounds)"``; when the
      observed ratio itself, as printed, lies beyond the margin, it adds
      how many rounds would resolve it if it is real (``"; 0.90x, if real, would need about
      14 rounds (6 more)"``, :attr:`Ratio.need`);
    - with too few rounds for an interval ``"too few rounds to tell (1 round, 1.12x): needs at
      least 3 rounds"``; with too few paired steps (:attr:`Ratio.thin`) ``"evidence too thin
      to tell (0.95x, 95% CI 0.93-0.97x, 8 rounds): 8 timed steps per path, at least 30
      needed"``, whatever the interval."""
    if not math.isfinite(r.ratio):
        return f"no latency to compare (n={r.n})"
    if not r.known:
        if r.rounds or r.need:
            return (f"too few rounds to tell ({r.rounds} round{'s' if r.rounds != 1 else ''}, "
                    f"{r.ratio:.2f}x): needs at least {r.need or MIN_ROUNDS} rounds")
        return f"too few samples to tell (n={r.n}, {r.ratio:.2f}x)"
    if r.thin:
        return (f"evidence too thin to tell ({r.ratio:.2f}x, {fmt_interval(r.lo, r.hi, r.conf)}"
                f"{_rounds_text(r)}): {r.n} timed step{'s' if r.n != 1 else ''} per path, "
                f"at least {MIN_CLAIM_SAMPLES} needed")
    ci = fmt_interval(r.lo, r.hi, r.conf) + _rounds_text(r)
    if r.within:
        return f"no difference beyond {margin_text()} ({ci})"
    if not r.differs:
        lo, hi = r.shown
        # an interval that excludes 1.0 measured a difference, but not one beyond the margin
        text = (f"{r.ratio:.2f}x, a difference not shown beyond {margin_text()} ({ci})"
                if lo > 1.0 or hi < 1.0 else f"no measurable difference ({ci})")
        shown = round(r.ratio, DECIMALS)
        if r.rounds and r.need is not None and _beyond(shown, shown):
            text += (f"; {r.ratio:.2f}x, if real, would need about {r.need} rounds "
                     f"({r.need - r.rounds} more)")
        return text
    word = slower if r.shown[0] > 1.0 else faster
    return f"{r.ratio:.2f}x, {word} ({ci})"
