"""Interleaved A/B comparisons: paired bootstrap CI, sign test, A/A floor, Welch.

An A/B run alternates the baseline A and the candidate B in short slices on one host, so
neighbouring slices share the host's drift; pairing them cancels it. This module gives
the paired interval (one that holds at small n, :func:`mean_interval`) with its sign-test
cross-check and the sign-test interval of the median difference, the host's A/A noise floor, the
four-number result line of seed 002, and Welch's interval for unpaired runs (seed 004).
Holm's correction for several metrics is :func:`deviations.stats.multiple.holm`.

Sign convention, as everywhere in the package: differences are candidate − baseline,
``b - a`` (seed 002 wrote ``deltas = A - B``; we do not). For a latency a negative
difference means B is faster; ``direction`` says which sign is better.

References
----------
Seed 002, "A/B testing for performance": interleaved slices, paired-difference bootstrap,
    A/A control, sign test, the four-number result line.
Seed 004, "Continuous benchmarking, done right": CI of the difference of means (Welch),
    widening the CIs when several metrics are checked.
Efron, B. & Tibshirani, R. (1993). An Introduction to the Bootstrap, ch. 12
    (bootstrap-t) and ch. 13 (percentile interval).
Student (1908). The probable error of a mean. Biometrika 6, 1-25 (t interval).
Hall, P. (1988). Theoretical comparison of bootstrap confidence intervals. Ann. Statist.
    16, 927-953 (the bootstrap-t is second-order accurate under skewness).
Waudby-Smith, I., Arnold, D., Wu, J. J., Howard, S. R. & Ramdas, A. (2024). Time-uniform
    central limit theory and asymptotic confidence sequences. Ann. Statist. 52(6)
    (the anytime-valid interval of "how many more samples?").
Welch, B. L. (1947). Biometrika 34, 28-35; Satterthwaite, F. E. (1946). Biometrics
    Bull. 2, 110-114.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt
from scipy import stats  # type: ignore[import-untyped]  # no scipy-stubs in the venv

from ._checks import as_sample, check_confidence
from ._typing import DIRECTIONS, Direction, FloatArray
from .intervals import Interval

Verdict = Literal[
    "faster", "slower", "tentatively faster", "tentatively slower", "within floor", "no difference"
]


def _sample(x: npt.ArrayLike, name: str, minimum: int = 2) -> FloatArray:
    return as_sample(x, name, minimum=minimum)


def bonferroni_confidence(confidence: float = 0.95, comparisons: int = 1) -> float:
    """Per-comparison confidence level for ``comparisons`` simultaneous intervals.

    .. math:: 1 - \\frac{1 - \\text{confidence}}{m}

    so that all ``m`` intervals hold together with probability at least ``confidence``
    (Bonferroni inequality). Seed 002: 3 builds compared pairwise give 98.3 % per interval.

    Seed 004 instead says to multiply the CI widths by the number of metrics; that is
    cruder and much wider (for m = 3 and normal errors: x3 versus z(0.9917)/z(0.975) =
    1.22), so this module widens by Bonferroni.

    Parameters
    ----------
    confidence : float, default 0.95
        Family-wise level.
    comparisons : int, default 1
        Number of intervals (metrics, builds) judged together.
    """
    check_confidence(confidence)
    if comparisons < 1 or int(comparisons) != comparisons:
        raise ValueError("comparisons must be a positive integer")
    return 1.0 - (1.0 - confidence) / comparisons


# ---------------------------------------------------------------------------------------
# Sign test
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SignTest:
    """Exact two-sided sign test of the paired differences (ties dropped)."""

    p_value: float
    n_positive: int
    n_negative: int
    n_ties: int


def sign_test(differences: npt.ArrayLike) -> SignTest:
    """Exact binomial sign test of ``H0: P(d > 0) = P(d < 0) = 1/2``.

    With :math:`n_+` positive and :math:`n_-` negative differences (zeros dropped), the
    p-value is the two-sided exact binomial test of :math:`n_+` successes in
    :math:`n_+ + n_-` trials at probability 1/2 (``scipy.stats.binomtest``).

    When every difference is a tie, no trial is left: the binomial law of 0 trials puts
    all its mass on 0 successes, so the exact p-value is 1 (no evidence either way).

    Parameters
    ----------
    differences : array_like, 1-d
        Paired differences ``b_i - a_i``.

    References
    ----------
    Seed 002 ("Under the null hypothesis the count of +1s follows a Binomial(n, 0.5)");
    Conover, W. J. (1999). Practical Nonparametric Statistics, 3rd ed., sec. 3.4.
    """
    d = _sample(differences, "differences", minimum=1)
    pos = int(np.sum(d > 0))
    neg = int(np.sum(d < 0))
    ties = int(d.size - pos - neg)
    p = 1.0 if pos + neg == 0 else float(stats.binomtest(pos, pos + neg, 0.5).pvalue)
    return SignTest(p, pos, neg, ties)


# ---------------------------------------------------------------------------------------
# Intervals of the mean difference (small n) and of the median difference
# ---------------------------------------------------------------------------------------

IntervalMethod = Literal["robust", "t", "studentized", "percentile"]
"""How the interval of the mean paired difference is computed (:func:`mean_interval`)."""

INTERVAL_METHODS: tuple[IntervalMethod, ...] = ("robust", "t", "studentized", "percentile")

PairedMethod = Literal["walsh", "robust", "t", "studentized", "percentile"]
"""The interval of a paired comparison (:func:`paired_ci`): ``"walsh"``, the Walsh-average
interval of the Hodges–Lehmann location (:func:`walsh_intervals`), or one of the intervals
of the mean (:data:`IntervalMethod`)."""

PAIRED_METHODS: tuple[PairedMethod, ...] = ("walsh", *INTERVAL_METHODS)

#: Rows of a (rows, resamples, n) bootstrap block computed at once: bounds the memory of
#: the vectorised forms to about 8 * this many bytes.
_BLOCK_VALUES = 4_000_000


def _canonical(x: FloatArray) -> FloatArray:
    # Order by |x| then x: independent of the input order, and mirrored by negation.
    return np.asarray(x[np.lexsort((x, np.abs(x)))], dtype=np.float64)


def _canonical_rows(x: FloatArray) -> FloatArray:
    order = np.lexsort((x, np.abs(x)), axis=-1)
    return np.asarray(np.take_along_axis(x, order, axis=-1), dtype=np.float64)


def _check_resamples(resamples: int) -> None:
    if resamples < 100:
        raise ValueError("resamples must be at least 100 for a bootstrap interval")


def bootstrap_mean_ci(
    x: npt.ArrayLike, confidence: float = 0.95, resamples: int = 10_000, seed: int = 0
) -> tuple[float, float]:
    """Percentile-bootstrap CI of the mean of ``x``, vectorised (``method="percentile"``).

    One draw of a ``(resamples, n)`` index matrix from ``np.random.default_rng(seed)``;
    the row means :math:`\\bar x^*_1..\\bar x^*_B` give
    :math:`[q_{\\alpha/2}, q_{1-\\alpha/2}]` of their empirical distribution
    (``np.percentile``, linear interpolation), :math:`\\alpha = 1 - \\text{confidence}`.
    ``x`` is put in a canonical order first (by :math:`|x_i|`, then :math:`x_i`), which
    makes the result exactly invariant to the order of the values, and exactly negated
    (``[-hi, -lo]``) for ``-x`` unless ``x`` holds both some ``v`` and ``-v``, ``v != 0``
    (then the two agree in distribution, up to Monte Carlo error).
    Memory is :math:`16 B n` bytes (160 MB for 10,000 resamples of 1,000 slices).

    Too narrow at small n (plug-in variance with divisor n, normal tails): it covers the
    mean 85 % of the time at n = 5 on normal differences, 78 % on exponential ones
    (docs/statistics.md, "Coverage"). Kept for comparison; :func:`mean_interval`'s default
    is the ``"robust"`` interval.

    References
    ----------
    Efron & Tibshirani (1993), ch. 13; seed 002's ``ab_interleaved.py`` (same statistic,
    its per-resample loop replaced by one index draw).
    """
    check_confidence(confidence)
    d = _canonical(_sample(x, "x"))
    _check_resamples(resamples)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, d.size, size=(resamples, d.size))
    means = d[idx].mean(axis=1)
    alpha = 1.0 - confidence
    lo, hi = np.percentile(means, [100.0 * alpha / 2.0, 100.0 * (1.0 - alpha / 2.0)])
    return float(lo), float(hi)


@dataclass(frozen=True)
class MeanIntervals:
    """Intervals of the mean of each row of a (rows, n) array (:func:`mean_intervals`).

    Attributes
    ----------
    mean, lo, hi : arrays of ``rows`` values.
    p_value : two-sided p-value of ``mean = 0`` consistent with the interval: the interval
        at level ``c`` excludes 0 when ``p_value < 1 - c`` (up to the bootstrap's
        interpolation). ``"robust"``: ``max`` of the t test's and the bootstrap-t's;
        ``"percentile"``: the percentile bootstrap's ``2 min(P*(m* <= 0), P*(m* >= 0))``.
    """

    mean: FloatArray
    lo: FloatArray
    hi: FloatArray
    p_value: FloatArray


def _t_part(d: FloatArray, level: float) -> tuple[FloatArray, FloatArray, FloatArray]:
    n = d.shape[1]
    mean = d.mean(axis=1)
    se = d.std(axis=1, ddof=1) / np.sqrt(n)
    q = float(stats.t.ppf(0.5 + level / 2.0, n - 1))
    with np.errstate(divide="ignore", invalid="ignore"):
        t_obs = np.where(se > 0, mean / se, np.where(mean == 0, 0.0, np.inf))
    p = np.asarray(2.0 * stats.t.sf(np.abs(t_obs), n - 1), dtype=np.float64)
    return mean - q * se, mean + q * se, p


def _bootstrap_part(
    d: FloatArray, level: float, resamples: int, seed: int, studentized: bool
) -> tuple[FloatArray, FloatArray, FloatArray]:
    rows, n = d.shape
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n, size=(resamples, n))
    alpha = 1.0 - level
    lo = np.empty(rows)
    hi = np.empty(rows)
    p = np.empty(rows)
    mean = d.mean(axis=1)
    se = d.std(axis=1, ddof=1) / np.sqrt(n)
    step = max(1, _BLOCK_VALUES // (resamples * n))
    for start in range(0, rows, step):
        block = d[start:start + step][:, idx]  # (rows, resamples, n)
        m_star = block.mean(axis=2)
        m = mean[start:start + step, None]
        if not studentized:
            q_lo, q_hi = np.percentile(m_star, [50.0 * alpha, 100.0 - 50.0 * alpha], axis=1)
            lo[start:start + step], hi[start:start + step] = q_lo, q_hi
            below = np.mean(m_star <= 0.0, axis=1)
            above = np.mean(m_star >= 0.0, axis=1)
            p[start:start + step] = np.minimum(1.0, 2.0 * np.minimum(below, above))
            continue
        se_star = block.std(axis=2, ddof=1) / np.sqrt(n)
        # A resample of equal values has no studentised value (probability n^(1-n) without
        # ties): it is left out (NaN), the others give the quantiles.
        with np.errstate(divide="ignore", invalid="ignore"):
            t_star = np.where(se_star > 0, (m_star - m) / se_star, np.nan)
        t_star[np.all(np.isnan(t_star), axis=1)] = 0.0  # constant rows: [mean, mean] below
        q_lo, q_hi = np.nanpercentile(t_star, [50.0 * alpha, 100.0 - 50.0 * alpha], axis=1)
        s = se[start:start + step]
        lo[start:start + step] = mean[start:start + step] - q_hi * s
        hi[start:start + step] = mean[start:start + step] - q_lo * s
        with np.errstate(divide="ignore", invalid="ignore"):
            t_obs = np.where(s > 0, mean[start:start + step] / s, 0.0)[:, None]
        valid = np.maximum(1, np.sum(~np.isnan(t_star), axis=1))
        below = np.sum(t_star <= t_obs, axis=1) / valid
        above = np.sum(t_star >= t_obs, axis=1) / valid
        p[start:start + step] = np.minimum(1.0, 2.0 * np.minimum(below, above))
    return lo, hi, p


def mean_intervals(
    rows: npt.ArrayLike,
    confidence: float = 0.95,
    method: IntervalMethod = "robust",
    resamples: int = 10_000,
    seed: int = 0,
) -> MeanIntervals:
    """Interval of the mean of each row, vectorised; :func:`mean_interval` is one row.

    Methods, for :math:`n` values with mean :math:`\\bar d`, standard deviation :math:`s`
    (``ddof=1``) and :math:`\\mathrm{se} = s / \\sqrt n`:

    * ``"t"``: :math:`\\bar d \\pm t_{1-\\alpha/2,\\,n-1}\\,\\mathrm{se}` (Student 1908):
      exact for normal differences, conservative for symmetric heavy tails, too low under
      skewness at small n (88 % at n = 5 on exponential differences);
    * ``"studentized"`` (bootstrap-t, Efron & Tibshirani 1993 ch. 12.5):
      :math:`[\\bar d - \\hat t_{1-\\alpha/2}\\,\\mathrm{se},\\ \\bar d - \\hat
      t_{\\alpha/2}\\,\\mathrm{se}]` with :math:`\\hat t_q` the quantiles of
      :math:`t^*_b = (\\bar d^*_b - \\bar d)/\\mathrm{se}^*_b` over ``resamples`` resamples
      (resamples of equal values left out). Second-order accurate under skewness (Hall
      1988), but too narrow for heavy tails (92 % for Student t₃ differences at n = 10);
    * ``"robust"`` (the default): the hull of the two, :math:`[\\min(L_t, L_{bt}),
      \\max(U_t, U_{bt})]`: each covers where the other fails, and the hull covers the
      mean at least 93 % of the time from n = 5 on normal, skewed (exponential, gamma(2),
      lognormal σ = 0.5) and heavy-tailed (t₂, t₃) differences, measured in
      ``tests/stats/test_paired_coverage.py`` (table in docs/statistics.md). Its cost: on
      normal differences it covers 97 % at n = 5 (median width 1.35x the t interval's),
      96 % at n = 10 (1.07x), 95.5 % at n = 30 (1.02x);
    * ``"percentile"``: :func:`bootstrap_mean_ci` (the earlier default; too narrow at
      small n).

    Every row shares one ``(resamples, n)`` index draw from ``default_rng(seed)``, after
    each row is put in canonical order (by :math:`|d_i|` then :math:`d_i`): a row's interval
    is the one :func:`mean_interval` gives it alone, whatever the order of its values. A row
    whose values are all equal has the interval :math:`[\\bar d, \\bar d]`.

    Parameters
    ----------
    rows : array_like, 2-d (rows, n), n >= 2
    confidence : float, default 0.95
    method : {"robust", "t", "studentized", "percentile"}
    resamples, seed : bootstrap settings (unused by ``"t"``).

    References
    ----------
    Student (1908); Efron & Tibshirani (1993), ch. 12-13; Hall (1988).
    """
    check_confidence(confidence)
    if method not in INTERVAL_METHODS:
        raise ValueError(f"unknown method {method!r}, expected one of {INTERVAL_METHODS}")
    d = np.asarray(rows, dtype=np.float64)
    if d.ndim != 2 or d.shape[1] < 2:
        raise ValueError(f"rows must be 2-d with at least 2 columns, got shape {d.shape}")
    if not np.all(np.isfinite(d)):
        raise ValueError("rows must be finite, got NaN or infinite values")
    d = _canonical_rows(d)
    mean = d.mean(axis=1)
    if method == "t":
        lo, hi, p = _t_part(d, confidence)
    else:
        _check_resamples(resamples)
        lo, hi, p = _bootstrap_part(d, confidence, resamples, seed, method != "percentile")
        if method == "robust":
            t_lo, t_hi, t_p = _t_part(d, confidence)
            lo, hi, p = np.minimum(lo, t_lo), np.maximum(hi, t_hi), np.maximum(p, t_p)
    constant = np.ptp(d, axis=1) == 0
    lo = np.where(constant, mean, lo)
    hi = np.where(constant, mean, hi)
    p = np.where(constant, np.where(mean == 0, 1.0, 0.0), p)
    return MeanIntervals(mean, np.asarray(lo, np.float64), np.asarray(hi, np.float64),
                         np.asarray(p, np.float64))


def mean_interval(
    x: npt.ArrayLike,
    confidence: float = 0.95,
    method: IntervalMethod = "robust",
    resamples: int = 10_000,
    seed: int = 0,
) -> tuple[float, float, float]:
    """``(lo, hi, p_value)`` of the mean of one sample; see :func:`mean_intervals`."""
    d = _sample(x, "x")
    r = mean_intervals(d[None, :], confidence, method, resamples, seed)
    return float(r.lo[0]), float(r.hi[0]), float(r.p_value[0])


@dataclass(frozen=True)
class SignInterval:
    """Distribution-free interval of the median difference (:func:`sign_interval`).

    Attributes
    ----------
    estimate : the sample median.
    lo, hi : order statistics :math:`d_{(k)}, d_{(n-k+1)}`.
    confidence : the level the interval actually has,
        :math:`1 - 2 P(\\mathrm{Bin}(n, 1/2) \\le k - 1)` (>= the level asked for, except
        at n <= 5 where even :math:`[d_{(1)}, d_{(n)}]` has less: 93.75 % at n = 5).
    """

    estimate: float
    lo: float
    hi: float
    confidence: float


def sign_interval(differences: npt.ArrayLike, confidence: float = 0.95) -> SignInterval:
    """Sign-test interval of the median difference: the order statistics
    :math:`[d_{(k)}, d_{(n-k+1)}]` with the largest :math:`k \\ge 1` such that
    :math:`1 - 2 P(\\mathrm{Bin}(n, 1/2) \\le k - 1) \\ge` ``confidence`` (k = 1 when none
    reaches it).

    It is the set of medians :math:`\\theta` the exact sign test of :math:`d_i - \\theta`
    does not reject, and covers the median of any continuous distribution with probability
    exactly ``SignInterval.confidence`` whatever its shape (93.75 % at n = 5, 96.9 % at
    n = 6, >= 95 % from n = 6 on; measured in ``tests/stats/test_paired_coverage.py``).

    References
    ----------
    Conover (1999), sec. 3.2 (confidence interval for a quantile); seed 002 (the sign test
    as a cross-check).
    """
    check_confidence(confidence)
    d = np.sort(_sample(differences, "differences"))
    n = d.size
    ks = np.arange(1, n // 2 + 1)
    attained = 1.0 - 2.0 * stats.binom.cdf(ks - 1, n, 0.5)
    ok = ks[attained >= confidence - 1e-12]
    k = int(ok[-1]) if ok.size else 1
    level = float(1.0 - 2.0 * stats.binom.cdf(k - 1, n, 0.5))
    return SignInterval(float(np.median(d)), float(d[k - 1]), float(d[n - k]), level)


# ---------------------------------------------------------------------------------------
# Hodges–Lehmann location and its Walsh-average interval (rare one-sided spikes)
# ---------------------------------------------------------------------------------------

#: Largest n whose signed-rank null distribution is computed exactly (n(n+1)/2 + 1 values,
#: n passes); beyond it, the normal approximation is within 0.1 % of the exact level.
_EXACT_SIGNED_RANK_MAX = 200
#: Largest n whose n(n+1)/2 Walsh averages are held in memory (32 MB at 2,000); beyond
#: it, the two order statistics are found by bisection on a counting function.
_WALSH_MATERIALISED_MAX = 2_000


def signed_rank_cdf(n: int) -> FloatArray:
    """``P(T+ <= t)``, t = 0..n(n+1)/2, of Wilcoxon's signed-rank statistic under its
    null (each |d_i|'s sign + or − with probability 1/2): the generating function
    :math:`\\prod_{i=1}^n (1 + x^i)/2`, expanded one factor at a time."""
    if n < 1:
        raise ValueError("n must be at least 1")
    p = np.zeros(n * (n + 1) // 2 + 1)
    p[0] = 1.0
    for i in range(1, n + 1):
        q = p.copy()
        q[i:] += p[:-i]
        p = 0.5 * q
    return np.asarray(np.minimum(np.cumsum(p), 1.0), dtype=np.float64)


def walsh_rank(n: int, confidence: float = 0.95) -> tuple[int, float]:
    """``(k, attained)``: the interval :math:`[W_{(k)}, W_{(M+1-k)}]` of the
    :math:`M = n(n+1)/2` sorted Walsh averages, with the largest :math:`k \\ge 1` such that
    its level :math:`1 - 2 P(T^+ \\le k - 1)` is at least ``confidence`` (k = 1 when none
    reaches it: 93.75 % at n = 5, 87.5 % at n = 4), and that level.

    Exact for n <= 200 (:func:`signed_rank_cdf`); beyond, :math:`T^+` is normal with mean
    :math:`n(n+1)/4` and variance :math:`n(n+1)(2n+1)/24`, with a continuity correction
    (Hollander, Wolfe & Chicken 2014, sec. 3.3).
    """
    check_confidence(confidence)
    if n < 1:
        raise ValueError("n must be at least 1")
    m = n * (n + 1) // 2
    alpha = 1.0 - confidence
    if n <= _EXACT_SIGNED_RANK_MAX:
        cdf = signed_rank_cdf(n)
        ks = np.arange(1, (m + 1) // 2 + 1)
        attained = 1.0 - 2.0 * cdf[ks - 1]
        ok = ks[attained >= confidence - 1e-12]
        k = int(ok[-1]) if ok.size else 1
        return k, float(1.0 - 2.0 * cdf[k - 1])
    mean, sd = m / 2.0, float(np.sqrt(n * (n + 1) * (2 * n + 1) / 24.0))
    k = max(1, int(np.floor(mean - float(stats.norm.ppf(1.0 - alpha / 2.0)) * sd + 0.5)))
    return k, float(1.0 - 2.0 * stats.norm.cdf((k - 0.5 - mean) / sd))


def _walsh_count(d_sorted: FloatArray, x: float) -> int:
    # #{i <= j : (d_i + d_j)/2 <= x}: for each i, the j >= i with d_j <= 2x - d_i.
    j = np.searchsorted(d_sorted, 2.0 * x - d_sorted, side="right")
    return int(np.sum(np.maximum(0, j - np.arange(d_sorted.size))))


def _walsh_order_statistic(d_sorted: FloatArray, k: int) -> float:
    # The k-th smallest Walsh average without forming all n(n+1)/2 of them: the smallest x
    # with count(x) >= k, by bisection down to adjacent floats.
    lo, hi = float(d_sorted[0]), float(d_sorted[-1])
    while True:
        mid = lo + (hi - lo) / 2.0
        if mid <= lo or mid >= hi:
            return hi
        if _walsh_count(d_sorted, mid) >= k:
            hi = mid
        else:
            lo = mid


@dataclass(frozen=True)
class WalshIntervals:
    """Hodges–Lehmann estimates and Walsh-average intervals of each row
    (:func:`walsh_intervals`).

    Attributes
    ----------
    estimate, lo, hi : arrays of ``rows`` values.
    attained : the level every row's interval has, :math:`1 - 2 P(T^+ \\le k - 1)`.
    k : the rank of the lower bound among the sorted Walsh averages.
    """

    estimate: FloatArray
    lo: FloatArray
    hi: FloatArray
    attained: float
    k: int


def walsh_intervals(rows: npt.ArrayLike, confidence: float = 0.95) -> WalshIntervals:
    """Hodges–Lehmann estimate and Walsh-average (signed-rank) interval of each row.

    For a row :math:`d_1..d_n`, the :math:`M = n(n+1)/2` Walsh averages
    :math:`W_{ij} = (d_i + d_j)/2`, :math:`i \\le j`, sorted: the estimate is their median
    (Hodges & Lehmann 1963) and the interval :math:`[W_{(k)}, W_{(M+1-k)}]` with ``k`` from
    :func:`walsh_rank`, the locations the exact two-sided signed-rank test does not reject
    (Tukey 1949; Hollander, Wolfe & Chicken 2014, sec. 3.3).

    **Estimand**: the pseudo-median :math:`\\theta` of the differences, the median of
    :math:`(D + D')/2` for two independent differences :math:`D, D'`. It is the centre of
    symmetry when the differences are symmetric (then also their median and mean), and
    the interval then covers it with probability exactly ``attained`` whatever the shape.
    Under asymmetry (a rare one-sided spike) the level holds approximately; measured
    in ``tests/simulations/paired_spikes.py`` (docs/statistics.md, "Rare spikes").
    One spike moves :math:`\\theta` little: only the pairs' averages that involve it move
    (breakdown point 29 %, where the mean's is 0).

    Parameters
    ----------
    rows : array_like, 2-d (rows, n), n >= 2, finite
    confidence : float, default 0.95
    """
    check_confidence(confidence)
    d = np.asarray(rows, dtype=np.float64)
    if d.ndim != 2 or d.shape[1] < 2:
        raise ValueError(f"rows must be 2-d with at least 2 columns, got shape {d.shape}")
    if not np.all(np.isfinite(d)):
        raise ValueError("rows must be finite, got NaN or infinite values")
    n = d.shape[1]
    k, attained = walsh_rank(n, confidence)
    m = n * (n + 1) // 2
    if n > _WALSH_MATERIALISED_MAX:
        est, lo, hi = (np.empty(d.shape[0]) for _ in range(3))
        for r, row in enumerate(np.sort(d, axis=1)):
            lo[r] = _walsh_order_statistic(row, k)
            hi[r] = _walsh_order_statistic(row, m + 1 - k)
            mid = (_walsh_order_statistic(row, (m + 1) // 2)
                   + _walsh_order_statistic(row, m // 2 + 1)) / 2.0
            est[r] = mid
        return WalshIntervals(est, lo, hi, attained, k)
    i, j = np.triu_indices(n)
    walsh = (d[:, i] + d[:, j]) / 2.0
    picks = sorted({k - 1, m - k, (m - 1) // 2, m // 2})
    part = np.partition(walsh, picks, axis=1)
    est = (part[:, (m - 1) // 2] + part[:, m // 2]) / 2.0
    return WalshIntervals(np.asarray(est, np.float64), np.asarray(part[:, k - 1], np.float64),
                          np.asarray(part[:, m - k], np.float64), attained, k)


@dataclass(frozen=True)
class WalshInterval:
    """Hodges–Lehmann estimate of the paired differences and its interval
    (:func:`walsh_interval`).

    Attributes
    ----------
    estimate : median of the Walsh averages.
    lo, hi : :math:`[W_{(k)}, W_{(M+1-k)}]`.
    confidence : the level the interval has (:func:`walsh_rank`; below the level asked
        for only at n <= 5: 93.75 % at n = 5).
    p_value : two-sided signed-rank p-value of a zero pseudo-median, consistent with the
        interval: :math:`2 P(T^+ \\le \\min(\\#\\{W \\le 0\\}, \\#\\{W \\ge 0\\}))`, so the
        interval at level ``c`` excludes 0 exactly when ``p_value <= 1 - c`` (attained).
    """

    estimate: float
    lo: float
    hi: float
    confidence: float
    p_value: float


def _signed_rank_p(d: FloatArray) -> float:
    n = d.size
    m = n * (n + 1) // 2
    srt = np.sort(d)
    below = _walsh_count(srt, 0.0)  # W <= 0
    above = m - _walsh_count(srt, float(-np.finfo(np.float64).tiny))  # W >= 0
    t = min(below, above)
    if n <= _EXACT_SIGNED_RANK_MAX:
        return float(min(1.0, 2.0 * signed_rank_cdf(n)[t]))
    sd = float(np.sqrt(n * (n + 1) * (2 * n + 1) / 24.0))
    return float(min(1.0, 2.0 * stats.norm.cdf((t + 0.5 - m / 2.0) / sd)))


def walsh_interval(differences: npt.ArrayLike, confidence: float = 0.95) -> WalshInterval:
    """Hodges–Lehmann estimate and Walsh-average interval of the paired differences
    ``b_i - a_i``; see :func:`walsh_intervals` (its estimand, the pseudo-median).

    References
    ----------
    Hodges, J. L. & Lehmann, E. L. (1963). Estimates of location based on rank tests.
    Ann. Math. Statist. 34, 598-611. Tukey, J. W. (1949), the Walsh-average form of the
    interval. Hollander, M., Wolfe, D. A. & Chicken, E. (2014). Nonparametric Statistical
    Methods, 3rd ed., sec. 3.2-3.3.
    """
    d = _sample(differences, "differences")
    r = walsh_intervals(d[None, :], confidence)
    return WalshInterval(float(r.estimate[0]), float(r.lo[0]), float(r.hi[0]), r.attained,
                         _signed_rank_p(d))


# ---------------------------------------------------------------------------------------
# Spikes: pairs beyond a robust outlier fence
# ---------------------------------------------------------------------------------------

#: Robust standard deviations from the median difference that make a pair a spike.
#: Iglewicz & Hoaglin's 3.5 ("a potential outlier") flags 9-27 % of clean runs of 5-30
#: pairs when the host's noise is shared multiplicatively (the differences are then a
#: heavy-tailed scale mixture), and a MAD from 5 values is itself noisy; at 10, clean runs
#: are flagged 3-4 % of the time at n = 5 and <= 0.6 % from n = 10, while a x10 stall of
#: one arm is flagged 95-100 % of the time (docs/statistics.md, "Rare spikes").
SPIKE_CUTOFF = 10.0
#: Scale of the MAD that makes it the standard deviation of normal data (1 / 0.6745).
_MAD_TO_SD = 1.4826
#: Scale of the mean absolute deviation from the median that does the same, used when
#: more than half the differences are equal (MAD = 0): sqrt(pi / 2).
_MEANAD_TO_SD = 1.2533


@dataclass(frozen=True)
class Spikes:
    """Paired differences beyond a robust outlier fence (:func:`spike_pairs`).

    Attributes
    ----------
    indices : positions of the pairs beyond the fence, in input order.
    fence_lo, fence_hi : ``median -/+ cutoff * scale``.
    median : median of the differences.
    scale : robust standard deviation, ``1.4826 * MAD`` (``1.2533 *`` the mean absolute
        deviation from the median when the MAD is 0; 0 when every difference is equal).
    cutoff : robust standard deviations from the median that make a spike.
    """

    indices: tuple[int, ...]
    fence_lo: float
    fence_hi: float
    median: float
    scale: float
    cutoff: float


def spike_pairs(differences: npt.ArrayLike, cutoff: float = SPIKE_CUTOFF) -> Spikes:
    """Pairs whose difference lies beyond ``median ± cutoff × 1.4826 MAD``: a slice where
    one arm alone stalled (a GC pause, a descheduled process) shows as one difference far
    from the others, since noise shared by the pair cancels.

    The modified z-score :math:`M_i = (d_i - \\tilde d) / (1.4826\\, \\mathrm{MAD})` of
    Iglewicz & Hoaglin (1993), with a cut-off of 10 where theirs is 3.5: a page flag
    should name a stalled slice, not the tail of a clean run (:data:`SPIKE_CUTOFF`
    says why). Median and MAD are
    not moved by the spikes they look for (breakdown point 50 %), where a fence from the
    mean and standard deviation is widened by the very spike (one value among n can never
    lie more than :math:`(n-1)/\\sqrt n` standard deviations from the mean: 1.8 at n = 5).
    A MAD of 0 (more than half the differences equal) falls back to the mean absolute
    deviation from the median; if that is 0 too, every difference is equal and none is a
    spike. Measured false flags and detections: docs/statistics.md, "Rare spikes".

    References
    ----------
    Iglewicz, B. & Hoaglin, D. C. (1993). How to Detect and Handle Outliers. ASQC
    Quality Press, ch. 3. Hampel, F. R. (1974). JASA 69, 383-393 (the MAD).
    """
    if not cutoff > 0:
        raise ValueError("cutoff must be > 0")
    d = _sample(differences, "differences", minimum=1)
    med = float(np.median(d))
    dev = np.abs(d - med)
    scale = _MAD_TO_SD * float(np.median(dev))
    if scale == 0:
        scale = _MEANAD_TO_SD * float(dev.mean())
    if scale == 0:
        return Spikes((), med, med, med, 0.0, float(cutoff))
    lo, hi = med - cutoff * scale, med + cutoff * scale
    idx = tuple(int(i) for i in np.flatnonzero((d < lo) | (d > hi)))
    return Spikes(idx, lo, hi, med, scale, float(cutoff))


# ---------------------------------------------------------------------------------------
# Paired result
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PairedResult:
    """Paired comparison of A and B over matched slices.

    Attributes
    ----------
    estimate : the location of ``b_i - a_i`` (candidate − baseline) the interval is for
        (:attr:`estimand`): their mean, or with ``method="walsh"`` their Hodges–Lehmann
        estimate (median of the Walsh averages).
    lo, hi : CI of the estimand at level ``confidence`` (:func:`mean_intervals` or
        :func:`walsh_intervals`, by ``method``).
    confidence : level actually used (after Bonferroni widening for ``comparisons``, or
        Holm's step level in :func:`holm_paired`); the rank interval's own level may
        differ a little, see ``attained``.
    sign_p : exact two-sided sign-test p-value (ties dropped).
    n : number of slice pairs.
    n_positive, n_negative, n_ties : signs of the differences.
    resamples, seed : bootstrap settings (the result is reproducible from them).
    method : how ``lo``, ``hi`` were computed.
    p_value : two-sided p-value of a zero mean difference, consistent with the interval
        (NaN when not computed).
    median, median_lo, median_hi, median_confidence : the sign-test interval of the
        median difference (:func:`sign_interval`; NaN when not computed).
    attained : the level the interval has: ``confidence`` for the intervals of the mean
        (nominal), the exact level of the rank interval for ``"walsh"``
        (:func:`walsh_rank`: >= ``confidence`` from n = 6, 93.75 % at n = 5).
    mean, mean_lo, mean_hi : the mean difference and its ``"robust"`` interval (the
        same as ``estimate``, ``lo``, ``hi`` for the methods of the mean).
    """

    estimate: float
    lo: float
    hi: float
    confidence: float
    sign_p: float
    n: int
    n_positive: int
    n_negative: int
    n_ties: int
    resamples: int
    seed: int
    method: PairedMethod = "robust"
    p_value: float = float("nan")
    median: float = float("nan")
    median_lo: float = float("nan")
    median_hi: float = float("nan")
    median_confidence: float = float("nan")
    attained: float = float("nan")
    mean: float = float("nan")
    mean_lo: float = float("nan")
    mean_hi: float = float("nan")

    @property
    def estimand(self) -> Literal["mean", "pseudo-median"]:
        """What ``lo``, ``hi`` cover: the mean of the differences, or their pseudo-median
        (the median of the average of two independent differences; :func:`walsh_intervals`).
        """
        return "pseudo-median" if self.method == "walsh" else "mean"

    @property
    def interval(self) -> Interval[float]:
        """``Interval(estimate, lo, hi)`` of ``b - a``."""
        return Interval(self.estimate, self.lo, self.hi)

    @property
    def contains_zero(self) -> bool:
        """True when the CI does not exclude a zero difference."""
        return self.lo <= 0.0 <= self.hi

    def disagreement(self, alpha: float | None = None) -> str | None:
        """Seed 002's cross-check: a sentence when the interval and the sign test disagree.

        They disagree when the interval excludes 0 while the sign test's p-value is not
        below ``alpha`` (default ``1 - confidence``), or the other way round. The first
        case is what the seed warns about ("typically the bootstrap was misled by 1-2
        outlier slices"); with n <= 5 pairs the sign test cannot go below 0.0625, so it
        can never confirm a 95 % interval, and the sentence says so.
        """
        a = 1.0 - self.confidence if alpha is None else alpha
        sign_rejects = self.sign_p < a
        if self.contains_zero == (not sign_rejects):
            return None
        if not self.contains_zero:
            floor_p = 2.0 * 0.5 ** (self.n - self.n_ties) if self.n > self.n_ties else 1.0
            if floor_p >= a:
                return (
                    f"the interval excludes 0 but {self.n - self.n_ties} non-tied pairs are "
                    f"too few for the sign test to confirm it (its smallest p-value is "
                    f"{min(1.0, floor_p):.3g}): add slice pairs"
                )
            return (
                f"the interval excludes 0 but the sign test sees no preference "
                f"({self.n_positive} pairs up, {self.n_negative} down, p = {self.sign_p:.3g}): "
                "a few outlier slices may carry the mean; look at the per-slice bars"
            )
        what = "the mean" if self.estimand == "mean" else "the Hodges–Lehmann location"
        return (
            f"the sign test sees a preference ({self.n_positive} pairs up, "
            f"{self.n_negative} down, p = {self.sign_p:.3g}) but the interval of {what} "
            "contains 0: the differences are consistent in sign but small or spread"
        )


def paired_ci_from_differences(
    differences: npt.ArrayLike,
    confidence: float = 0.95,
    resamples: int = 10_000,
    seed: int = 0,
    *,
    comparisons: int = 1,
    method: PairedMethod = "robust",
) -> PairedResult:
    """:func:`paired_ci` for already-computed differences ``d_i = b_i - a_i``."""
    if method not in PAIRED_METHODS:
        raise ValueError(f"unknown method {method!r}, expected one of {PAIRED_METHODS}")
    d = _canonical(_sample(differences, "differences"))  # order-free mean too
    level = bonferroni_confidence(confidence, comparisons)
    m_lo, m_hi, m_p = mean_interval(d, level, "robust" if method == "walsh" else method,
                                    resamples, seed)
    mean = float(d.mean())
    if method == "walsh":
        w = walsh_interval(d, level)
        estimate, lo, hi, p, attained = w.estimate, w.lo, w.hi, w.p_value, w.confidence
    else:
        estimate, lo, hi, p, attained = mean, m_lo, m_hi, m_p, level
    sign = sign_test(d)
    median = sign_interval(d, level)
    return PairedResult(
        estimate=estimate,
        lo=lo,
        hi=hi,
        confidence=level,
        sign_p=sign.p_value,
        n=int(d.size),
        n_positive=sign.n_positive,
        n_negative=sign.n_negative,
        n_ties=sign.n_ties,
        resamples=int(resamples),
        seed=int(seed),
        method=method,
        p_value=p,
        median=median.estimate,
        median_lo=median.lo,
        median_hi=median.hi,
        median_confidence=median.confidence,
        attained=attained,
        mean=mean,
        mean_lo=m_lo if method == "walsh" else lo,
        mean_hi=m_hi if method == "walsh" else hi,
    )


def paired_ci(
    a_slices: npt.ArrayLike,
    b_slices: npt.ArrayLike,
    confidence: float = 0.95,
    resamples: int = 10_000,
    seed: int = 0,
    *,
    comparisons: int = 1,
    method: PairedMethod = "robust",
) -> PairedResult:
    """Paired-difference CI and sign test of interleaved A/B slices.

    With per-slice statistics (e.g. each slice's p99) paired in run order,
    :math:`d_i = b_i - a_i`, :math:`i = 1..n` (candidate − baseline):

    * estimate :math:`\\bar d = \\frac1n \\sum_i d_i`;
    * CI of :math:`\\bar d` (:func:`mean_intervals`; the default ``"robust"`` interval
      covers >= 93 % from n = 5 on normal, skewed and heavy-tailed differences, where seed
      002's percentile bootstrap covered 78-85 % at n = 5);
    * or, with ``method="walsh"``, the Hodges–Lehmann estimate and its Walsh-average
      interval (:func:`walsh_intervals`), whose estimand, the pseudo-median, one rare
      spike barely moves: it covers >= 93 % at n = 5, 10, 30 with one B slice in 10
      stalled x10, where the interval of the mean covers 40-65 % of the mean at n = 5-10
      (docs/statistics.md, "Rare spikes"); the mean and its robust interval are kept in
      ``mean``, ``mean_lo``, ``mean_hi``;
    * exact sign-test p-value (:func:`sign_test`), the seed's cross-check: a CI that
      excludes 0 while the sign test sees no preference points to 1-2 outlier slices
      (:meth:`PairedResult.disagreement`);
    * the sign-test interval of the median difference (:func:`sign_interval`).

    Pairing removes noise shared by neighbouring slices:
    :math:`\\operatorname{Var}(a - b) = \\operatorname{Var} a + \\operatorname{Var} b - 2
    \\operatorname{Cov}(a, b)` (seed 002).

    Parameters
    ----------
    a_slices, b_slices : array_like, 1-d, same length n >= 2
        Per-slice statistic of A and B; ``a_slices[i]`` is paired with ``b_slices[i]``.
    confidence : float, default 0.95
        Family-wise level (seed 002's 95 %).
    resamples : int, default 10,000
        Bootstrap resamples (seed 002's ``B_RESAMPLES``); the Monte Carlo error of each
        bound is then about 1 % of the CI width.
    seed : int, default 0
        Seed of ``np.random.default_rng``: the same data give the same CI.
    comparisons : int, default 1
        Intervals judged together (metrics, builds): the CI is computed at
        :func:`bonferroni_confidence` ``(confidence, comparisons)``.
    method : {"walsh", "robust", "t", "studentized", "percentile"}, default "robust"

    Returns
    -------
    PairedResult

    Raises
    ------
    ValueError
        Lengths differ, fewer than 2 pairs, non-finite values, or invalid settings.
    """
    a = _sample(a_slices, "a_slices")
    b = _sample(b_slices, "b_slices")
    if a.shape != b.shape:
        raise ValueError(f"a_slices and b_slices differ in length ({a.size} vs {b.size})")
    return paired_ci_from_differences(
        b - a, confidence, resamples, seed, comparisons=comparisons, method=method
    )


def holm_paired(
    differences: list[npt.ArrayLike],
    confidence: float = 0.95,
    resamples: int = 10_000,
    seed: int = 0,
    *,
    method: PairedMethod = "robust",
) -> list[PairedResult]:
    """Several paired comparisons (metrics, builds) judged together, Holm's step-down way.

    Each comparison's p-value (:attr:`PairedResult.p_value`, consistent with its interval)
    orders them, smallest first. Step :math:`j = 1..m` computes the interval of the
    :math:`j`-th at level :math:`1 - \\alpha/(m - j + 1)`; while it excludes 0 the next step
    follows, and at the first that contains 0 every remaining comparison gets that step's
    level. So a difference is called (its interval excludes 0) exactly where Holm's
    procedure rejects, the family-wise error stays <= :math:`\\alpha = 1 -` ``confidence``
    under any dependence, and Holm rejects at least what Bonferroni does (every level is
    at most Bonferroni's :math:`1 - \\alpha/m`). The results come back in input order, each
    with the level it was computed at.

    References
    ----------
    Holm (1979); seed 002 ("the Holm-Bonferroni sequential method is tighter").
    """
    check_confidence(confidence)
    if not differences:
        raise ValueError("differences must hold at least one comparison")
    alpha = 1.0 - confidence
    m = len(differences)
    first = [paired_ci_from_differences(d, confidence, resamples, seed, method=method)
             for d in differences]
    if m == 1:
        return first
    order = sorted(range(m), key=lambda i: (first[i].p_value, i))
    out: list[PairedResult | None] = [None] * m
    stopped_level: float | None = None
    for step, i in enumerate(order):
        level = stopped_level if stopped_level is not None else 1.0 - alpha / (m - step)
        res = paired_ci_from_differences(differences[i], level, resamples, seed, method=method)
        out[i] = res
        if stopped_level is None and res.contains_zero:
            stopped_level = level
    return [r for r in out if r is not None]

# ---------------------------------------------------------------------------------------
# A/A floor
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class AAFloor:
    """Noise floor of a host from an A/A run (same build on both arms).

    Attributes
    ----------
    floor : ``max(|lo|, |hi|)`` of the A/A paired CI.
    lo, hi, estimate, n, confidence : the A/A paired CI it comes from.
    biased : True when the A/A CI excludes 0: the arms differ systematically (socket,
        warm-up, build flags); seed 002 says to fix that and re-run A/A.
    """

    floor: float
    lo: float
    hi: float
    estimate: float
    n: int
    confidence: float
    biased: bool


def aa_floor(
    aa_differences: npt.ArrayLike | PairedResult,
    confidence: float = 0.95,
    resamples: int = 10_000,
    seed: int = 0,
) -> AAFloor:
    """A/A noise floor: the largest magnitude inside the A/A paired CI.

    .. math:: \\text{floor} = \\max(|L_{AA}|, |U_{AA}|)

    where :math:`[L_{AA}, U_{AA}]` is the paired-difference CI of an A/A run. Seed 002
    reports an A/A CI of [-0.05, +0.07] ms as "A/A floor ±0.07", and for a biased A/A CI of
    [+0.40, +0.55] ms says "any A/B result smaller than +0.55 ms is indistinguishable from
    the bias": both are the largest |bound|, which does not depend on the sign convention
    (the seed's intervals are of A − B; ours of B − A are their mirror images). (One figure
    caption of the seed calls the half-width, 0.06, the floor; the half-width ignores an
    off-centre A/A and is not used.)

    Parameters
    ----------
    aa_differences : array_like (1-d) or PairedResult
        Paired differences of the A/A run, or its :func:`paired_ci` result.
    confidence, resamples, seed :
        As :func:`paired_ci` (ignored when a result is given). Use the level of the A/B
        comparisons the floor will be held against.
    """
    res = (
        aa_differences
        if isinstance(aa_differences, PairedResult)
        else paired_ci_from_differences(aa_differences, confidence, resamples, seed)
    )
    return AAFloor(
        floor=max(abs(res.lo), abs(res.hi)),
        lo=res.lo,
        hi=res.hi,
        estimate=res.estimate,
        n=res.n,
        confidence=res.confidence,
        biased=not res.contains_zero,
    )


def exceeds_floor(result: PairedResult, floor: float) -> bool:
    """True when the whole A/B CI lies beyond the A/A floor: ``lo > floor`` or
    ``hi < -floor``.

    Seed 002: "Any A/B claim below ±floor is rejected as below the noise floor of the host
    itself, regardless of what the bootstrap CI on the test data says". Requiring the CI's
    bound nearest zero (not only the estimate) to clear the floor keeps both sources of
    doubt, the A/B sampling error and the host's floor, in the decision.
    """
    if not floor >= 0:
        raise ValueError("floor must be >= 0")
    return result.lo > floor or result.hi < -floor


def classify(
    result: PairedResult,
    floor: float | None = None,
    *,
    direction: Direction = "lower_is_better",
    tentative_ratio: float = 3.0,
) -> Verdict:
    """What the paired result says about B relative to A.

    * ``"no difference"``: the CI contains 0;
    * ``"within floor"``: the CI excludes 0 but not the A/A band ``[-floor, floor]``;
    * ``"faster"``/``"slower"``: the CI lies beyond the floor (:func:`exceeds_floor`);
    * ``"tentatively ..."``: beyond the floor but :math:`|\\bar d| <` ``tentative_ratio``
      x floor. Seed 002 calls an effect 2x the floor "a tentative result, not a confirmed
      regression" and one 18x the floor trustworthy; 3 is the smallest whole multiple that
      classes its 2x example as tentative.

    The difference is ``b - a``. With ``direction="lower_is_better"`` (latency) a
    negative difference means B is better ("faster"); with ``"higher_is_better"``
    (throughput) a positive one does. ``floor=None`` (not measured) is treated as 0.
    """
    if direction not in DIRECTIONS:
        raise ValueError(f"unknown direction {direction!r}, expected one of {DIRECTIONS}")
    f = 0.0 if floor is None else float(floor)
    if result.contains_zero:
        return "no difference"
    if not exceeds_floor(result, f):
        return "within floor"
    b_better = (result.estimate < 0) == (direction == "lower_is_better")
    if f > 0 and abs(result.estimate) < tentative_ratio * f:
        return "tentatively faster" if b_better else "tentatively slower"
    return "faster" if b_better else "slower"


def result_line(
    result: PairedResult,
    metric: str = "p99",
    unit: str = "ms",
    floor: float | AAFloor | None = None,
    *,
    direction: Direction = "lower_is_better",
    digits: int = 2,
    tentative_ratio: float = 3.0,
    subject: str = "B",
) -> str:
    """Seed 002's four-number result line: estimate, CI, A/A floor, slice count.

    ``"B is 0.93 ms faster at p99 (95% CI [-1.01, -0.85]; A/A floor ±0.07; n=15 slice
    pairs)"``; with ``method="walsh"`` the estimate is the Hodges–Lehmann location and the
    parenthesis starts ``"(Hodges–Lehmann; 95% CI …"``, printing the interval's own level
    when it is below the one asked (93.75 % at n = 5); a higher-is-better metric reads
    ``"B is 41.13 rps higher (better) at …"``. The CI is printed as signed ``B - A`` (the
    seed printed ``A - B``);
    the headline magnitude is ``|estimate|``. When :func:`classify` finds no difference
    (CI contains 0) or none beyond the floor, the line says ``"no detectable difference at
    p99"`` (``"... beyond the A/A floor"``), with the same four numbers. A result between 1
    and ``tentative_ratio`` floors reads ``"B is tentatively ..."``. A floor that was not
    measured is printed as such, never as ±0.

    Parameters
    ----------
    result : PairedResult
    metric, unit : str
        ``unit`` is printed after numbers (no space for ``"%"``).
    floor : float, AAFloor or None
    direction : {"lower_is_better", "higher_is_better"}, default "lower_is_better"
        Latency-like or throughput-like metric; see :func:`classify`.
    digits : int, default 2
    tentative_ratio : float, default 3.0
    subject : str, default "B"
        Name of the challenger arm.
    """
    f = floor.floor if isinstance(floor, AAFloor) else floor
    verdict = classify(result, f, direction=direction, tentative_ratio=tentative_ratio)
    sep = "" if unit in ("", "%") else " "
    # A rank interval whose level falls short of the one asked (n <= 5) says so.
    shown = result.confidence
    if result.attained == result.attained and result.attained < result.confidence - 1e-9:
        shown = result.attained
    level = f"{100 * shown:.4g}%"
    if result.estimand != "mean":
        level = f"Hodges–Lehmann; {level}"
    floor_txt = "A/A floor not measured" if f is None else f"A/A floor ±{f:.{digits}f}"
    pairs = "slice pair" if result.n == 1 else "slice pairs"
    detail = (
        f"({level} CI [{result.lo:+.{digits}f}, {result.hi:+.{digits}f}]; {floor_txt}; "
        f"n={result.n} {pairs})"
    )
    if verdict == "no difference":
        return f"no detectable difference at {metric} {detail}"
    if verdict == "within floor":
        return f"no detectable difference at {metric} beyond the A/A floor {detail}"
    size = f"{abs(result.estimate):.{digits}f}{sep}{unit}"
    # A throughput or a score is not "faster": it is higher (better) or lower (worse).
    words = verdict if direction == "lower_is_better" else (
        verdict.replace("faster", "higher (better)").replace("slower", "lower (worse)"))
    return f"{subject} is {size} {words} at {metric} {detail}".replace(
        f"{subject} is {size} tentatively", f"{subject} is tentatively {size}"
    )


# ---------------------------------------------------------------------------------------
# Welch interval (seed 004)
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class WelchResult:
    """CI of ``mean(b) - mean(a)`` for independent samples with unequal variances.

    Attributes
    ----------
    estimate, lo, hi : the difference of means (later − earlier) and its interval.
    se, df : standard error and Welch–Satterthwaite degrees of freedom.
    confidence : level actually used (after Bonferroni widening for ``comparisons``).
    """

    estimate: float
    lo: float
    hi: float
    se: float
    df: float
    confidence: float

    @property
    def interval(self) -> Interval[float]:
        """``Interval(estimate, lo, hi)`` of ``mean(b) - mean(a)``."""
        return Interval(self.estimate, self.lo, self.hi)


def welch_ci(
    a: npt.ArrayLike, b: npt.ArrayLike, confidence: float = 0.95, *, comparisons: int = 1
) -> WelchResult:
    """Welch's t interval for the difference of means ``mean(b) - mean(a)`` (seed 004).

    .. math::
        \\bar b - \\bar a \\pm t_{1 - \\alpha/2,\\,\\nu}\\, \\mathrm{se}, \\quad
        \\mathrm{se}^2 = \\frac{s_a^2}{n_a} + \\frac{s_b^2}{n_b}, \\quad
        \\nu = \\frac{\\mathrm{se}^4}{\\frac{(s_a^2/n_a)^2}{n_a - 1}
                                    + \\frac{(s_b^2/n_b)^2}{n_b - 1}}

    (Welch-Satterthwaite degrees of freedom; :math:`s^2` with ``ddof=1``). Seed 004's method
    for unpaired runs taken in random order: repeat until the CI is narrower than the
    smallest regression of interest, then check whether it contains 0.

    Parameters
    ----------
    a, b : array_like, 1-d, each with at least 2 values
        Earlier (baseline) and later (candidate) runs.
    confidence : float, default 0.95
        Family-wise level.
    comparisons : int, default 1
        Metrics checked together: Bonferroni widening, see :func:`bonferroni_confidence`.

    Raises
    ------
    ValueError
        Too few values, non-finite values, or both samples constant (no interval exists).

    References
    ----------
    Welch (1947); Satterthwaite (1946); seed 004.
    """
    x = _sample(a, "a")
    y = _sample(b, "b")
    level = bonferroni_confidence(confidence, comparisons)
    va = x.var(ddof=1) / x.size
    vb = y.var(ddof=1) / y.size
    se2 = va + vb
    if se2 <= 0:
        raise ValueError("both samples are constant: the standard error is 0")
    df = se2**2 / (va**2 / (x.size - 1) + vb**2 / (y.size - 1))
    se = float(np.sqrt(se2))
    t = float(stats.t.ppf(0.5 + level / 2.0, df))
    diff = float(y.mean() - x.mean())
    return WelchResult(diff, diff - t * se, diff + t * se, se, float(df), level)


# ---------------------------------------------------------------------------------------
# How many more samples? (seed 004), with an anytime-valid interval
# ---------------------------------------------------------------------------------------

#: Sample size at which the confidence sequence is tuned to be tightest: seed 002's
#: "N >= 30 slice pairs" (any value fixed before the data keeps the guarantee).
DEFAULT_TUNED_N = 30


def sequence_halfwidth(
    n: npt.ArrayLike, sd: npt.ArrayLike, alpha: float = 0.05, tuned_n: int = DEFAULT_TUNED_N
) -> FloatArray:
    """Half-width of the two-sided asymptotic confidence sequence of a mean (Gaussian
    mixture), valid at every n at once.

    .. math::
        h_n = \\sqrt{\\frac{2 (n \\hat\\sigma^2 \\rho^2 + 1)}{n^2 \\rho^2}
              \\log\\frac{\\sqrt{n \\hat\\sigma^2 \\rho^2 + 1}}{\\alpha}}, \\qquad
        \\rho^2 = \\frac{-2 \\log\\alpha + \\log(1 - 2\\log\\alpha)}{n^\\star}

    (Waudby-Smith et al. 2024, Theorem 2.2 with their choice of :math:`\\rho` for a
    sequence tightest near :math:`n^\\star` = ``tuned_n``). :math:`\\bar d_n \\pm h_n`
    covers the mean at every n simultaneously with probability :math:`\\ge 1 - \\alpha`
    asymptotically: looking again after more samples, and stopping when it suits, keeps
    the level, where a fixed-n interval recomputed after each look does not (seed 004's
    loop). The price is width: at n = 30 it is 1.48x the t interval's.

    Parameters
    ----------
    n : array_like
        Number of observations (slice pairs), >= 1.
    sd : array_like
        Standard deviation of one observation (plug-in :math:`\\hat\\sigma`).
    alpha : float, default 0.05
    tuned_n : int, default 30
    """
    check_confidence(1.0 - alpha)
    if tuned_n < 1:
        raise ValueError("tuned_n must be at least 1")
    nn = np.asarray(n, dtype=np.float64)
    sigma = np.asarray(sd, dtype=np.float64)
    if np.any(nn < 1) or np.any(sigma < 0):
        raise ValueError("n must be >= 1 and sd >= 0")
    log_a = np.log(alpha)
    rho2 = (-2.0 * log_a + np.log(1.0 - 2.0 * log_a)) / tuned_n
    v = nn * sigma**2 * rho2 + 1.0
    return np.asarray(np.sqrt(2.0 * v / (nn**2 * rho2) * np.log(np.sqrt(v) / alpha)),
                      dtype=np.float64)


#: Observations before the guarded spread starts its running maximum (the pilot): below it
#: the plain sample standard deviation is used. Ten pairs is the smallest run the A/B page
#: reports a sign test for; issue 22's simulation (docs/statistics.md, §3.11) is measured
#: with it.
PILOT_N = 10

#: Observations before an interval may be called narrow enough: seed 002's "N >= 30 slice
#: pairs". Without it a pilot with no spike yet (1 value in 10 stalls: 35 % of 10-value
#: pilots) has a tiny spread and stops at once; with it the guarded sequence covers the
#: mean of spiky streams 96 % of the time at the stop, against 65 % (docs/statistics.md,
#: §3.11).
MIN_N = 30

#: Allowance for the growth of the guarded spread after n observations, in the prediction of
#: how many more are needed: :math:`\tilde\sigma_n (1 + a/\sqrt{n})` with ``a`` = 0.3.
#: The guarded spread is a running maximum, so the spread the stopping rule meets later is
#: never below today's and often above it (the sample sd of normal data has sd
#: :math:`\sigma/\sqrt{2n}`, so 0.3/sqrt(n) is 0.42 of it); without it the prediction is
#: exact when the maximum is already reached and short otherwise, and ``more_needed`` fell
#: within +-25 % of the number the rule then took 89 % of the time at n = 30 on normal
#: streams, 81 % on spiky ones; with it 95 % and 87 % (docs/statistics.md, §3.11; a = 0.3
#: set on normal streams at n = 30, checked at n = 60 and on the other scenarios).
GUARD_GROWTH = 0.3

PrecisionScale = Literal["linear", "log"]


def guarded_sd(x: npt.ArrayLike, pilot: int = PILOT_N) -> float:
    """Standard deviation guarded against the dips that stop a sequence too early:
    :math:`\\tilde\\sigma_n = \\max_{\\text{pilot} \\le k \\le n} s_k`, the running maximum
    of the sample standard deviation of the first k observations (in arrival order) from
    the pilot on; the plain :math:`s_n` below ``pilot`` observations.

    Why: stopping when :math:`2 h_n(\\hat\\sigma_n) \\le T` stops preferentially where
    :math:`\\hat\\sigma_n` has dipped, and on skewed data a dip in the spread comes with a dip
    in the mean (no large value seen yet), so the plug-in sequence covers the mean of
    lognormal(0, 1) streams only ~89 % of the time at the stop (issue 22). The running
    maximum cannot dip; it converges to the largest fluctuation of :math:`s_k` after the
    pilot, so it is conservative (the sequence stays valid with an over-estimated
    :math:`\\sigma`) and costs samples: ~1.3-1.5x the plug-in rule's stop on normal data
    (docs/statistics.md, §3.11). Because it holds its level until the data exceed it, the
    number of samples it predicts is the number the stopping rule will use unless a larger
    spread arrives.
    """
    if pilot < 2:
        raise ValueError("pilot must be at least 2")
    v = _sample(x, "x")
    k = np.arange(1, v.size + 1, dtype=np.float64)
    centred = v - v.mean()
    c1 = np.cumsum(centred)
    c2 = np.cumsum(centred**2)
    var = (c2 - c1**2 / k)[1:] / (k[1:] - 1.0)
    sd = np.sqrt(np.maximum(var, 0.0))  # sd[j] is s_{j+2}
    if v.size < pilot:
        return float(sd[-1])
    return float(sd[pilot - 2:].max())


@dataclass(frozen=True)
class Precision:
    """Is the interval narrow enough for the smallest change that matters? (seed 004)

    Attributes
    ----------
    estimate, lo, hi : the difference (later − earlier) and its anytime-valid interval; on
        the ``log`` scale the relative change of the geometric mean in percent,
        :math:`100(e^{x} - 1)` of the mean log-ratio and of its interval's ends.
    width : ``hi - lo`` (percentage points on the ``log`` scale).
    min_change : the smallest change the user cares about (seed 004's ``T``; a percentage
        on the ``log`` scale).
    narrow_enough : the interval can no longer straddle both 0 and a change of
        ``min_change`` (``width <= min_change``; on the ``log`` scale the width of the
        log-ratio interval against :math:`\\log(1 + T/100)`), and ``n >= MIN_N`` (30).
    excludes_zero : the interval excludes 0 (a difference, valid whenever it is looked at).
    n : slice pairs (paired) or effective pairs :math:`n_{eff} = (s_a^2 + s_b^2)/\\mathrm{se}^2`
        (two samples; the runs per release when both have as many).
    more_needed : estimated further pairs (paired) or runs per release (two samples) before
        the interval is narrow enough, at the guarded spread (:func:`guarded_sd`) with an
        allowance for its growth (:func:`predicted_sd`), at least up to ``MIN_N``; 0 when
        narrow enough.
    alpha, tuned_n : settings of the sequence.
    scale : ``"linear"`` (estimand: the mean difference) or ``"log"`` (estimand: the mean
        log-ratio, i.e. the ratio of geometric means, for positive metrics).
    """

    estimate: float
    lo: float
    hi: float
    width: float
    min_change: float
    narrow_enough: bool
    excludes_zero: bool
    n: float
    more_needed: int
    alpha: float
    tuned_n: int
    scale: PrecisionScale = "linear"

    @property
    def estimand(self) -> str:
        """What the interval is about, in words for pages: "change of the geometric mean"
        (``log`` scale, percent) or "difference of means" (``linear``, the metric's unit)."""
        return "change of the geometric mean" if self.scale == "log" else "difference of means"

    def _narrow_width(self) -> bool:
        if self.scale == "log":
            return bool(np.log1p(self.hi / 100.0) - np.log1p(self.lo / 100.0)
                        <= np.log1p(self.min_change / 100.0) + 1e-12)
        return self.width <= self.min_change

    def sentence(self, unit: str = "", samples: str = "samples") -> str:
        """One line for pages and the CLI; ``samples`` names what is counted."""
        level = f"{100 * (1 - self.alpha):.4g}%"
        if self.scale == "log":
            span = (f"{level} anytime-valid interval of the change of the geometric mean "
                    f"[{self.lo:+.3g}%, {self.hi:+.3g}%], width {self.width:.3g} points")
            target = f"the smallest change that matters, {self.min_change:.3g}%"
        else:
            sep = "" if unit in ("", "%") else " "
            span = (f"{level} anytime-valid interval of the difference of means [{self.lo:+.3g}, "
                    f"{self.hi:+.3g}]{sep}{unit}, width {self.width:.3g}{sep}{unit}")
            target = f"the smallest change that matters, {self.min_change:.3g}{sep}{unit}"
        if self.narrow_enough:
            return f"narrow enough: {span} <= {target}; looking again later stays valid"
        more = (f"about {self.more_needed} more {samples} (from the largest spread seen "
                "so far, allowing for its growth; looking again is allowed)")
        if self.n < MIN_N and self._narrow_width():
            return (f"narrow, but from only {self.n:.3g} {samples} (at least {MIN_N} before "
                    f"calling it: a rare slow value may not have shown yet): {span}; {more}")
        if self.excludes_zero:
            return (f"already excludes 0 (valid at any look): {span} > {target}; to size "
                    f"the change within it, {more}")
        return f"not narrow enough yet: {span} > {target}; {more}"


def scaled_halfwidth(n: npt.ArrayLike, sd: npt.ArrayLike, alpha: float = 0.05,
                     tuned_n: int = DEFAULT_TUNED_N) -> FloatArray:
    """:func:`sequence_halfwidth` in units of the spread: :math:`\\tilde\\sigma \\cdot
    h_n(1)`, the sequence of the standardised values :math:`x / \\tilde\\sigma` mapped back.

    :func:`sequence_halfwidth` is not scale-free: its mixing parameter :math:`\\rho` is
    tuned for :math:`\\sigma = 1`, so for log-ratios (:math:`\\sigma \\approx 0.05`) the
    ``+ 1`` term dominates and the interval is several times too wide, and for values in
    microseconds (:math:`\\sigma \\approx 10^3`) the log term grows by
    :math:`\\log \\sigma`. Tuning :math:`\\rho^2 = \\rho_0^2 / \\tilde\\sigma^2` (Waudby-Smith
    et al. 2024 tune :math:`\\rho` in the intrinsic time :math:`n\\sigma^2`) gives the same
    relative width whatever the unit; the coverage measured at :math:`\\sigma = 1`
    (docs/statistics.md, §3.8 and §3.11) then holds at every scale.
    """
    return np.asarray(np.asarray(sd, dtype=np.float64)
                      * sequence_halfwidth(n, 1.0, alpha, tuned_n), dtype=np.float64)


def predicted_sd(sd: npt.ArrayLike, n: npt.ArrayLike, growth: float = GUARD_GROWTH) -> FloatArray:
    """The spread at which ``more_needed`` is predicted: the guarded spread after ``n``
    observations with an allowance for its growth, :math:`\\tilde\\sigma_n (1 + a/\\sqrt{n})`
    (``a`` = :data:`GUARD_GROWTH`). The stopping rule uses the running maximum of the spread
    (:func:`guarded_sd`), which only grows; predicting at today's value is exact when the
    maximum is already reached and short whenever it grows, so the prediction's errors were
    all on one side (issue 22, part 4). The allowance is of the order of the fluctuation of a
    sample sd, :math:`\\sigma/\\sqrt{2n}` for normal data, which is what the running maximum
    still gains after n.
    """
    nn = np.asarray(n, dtype=np.float64)
    if np.any(nn < 1) or growth < 0:
        raise ValueError("n must be >= 1 and growth >= 0")
    return np.asarray(np.asarray(sd, dtype=np.float64) * (1.0 + growth / np.sqrt(nn)),
                      dtype=np.float64)


def _samples_needed(n_now: float, sd: float, min_change: float, alpha: float,
                    tuned_n: int) -> int:
    def wide(n: float) -> bool:
        return bool(2.0 * scaled_halfwidth(n, sd, alpha, tuned_n) > min_change)

    if not wide(n_now):
        return 0
    hi = max(2.0, n_now)
    while wide(hi):
        hi *= 2.0
        if hi > 1e12:
            raise ValueError("min_change is too small to reach (more than 1e12 samples)")
    lo = n_now
    while hi - lo > 0.5:
        mid = (lo + hi) / 2.0
        lo, hi = (mid, hi) if wide(mid) else (lo, mid)
    return int(np.ceil(hi - n_now))


def _precision(estimate: float, n: float, sd: float, min_change: float, alpha: float,
               tuned_n: int, scale: PrecisionScale = "linear") -> Precision:
    if not min_change > 0:
        raise ValueError("min_change must be > 0")
    h = float(scaled_halfwidth(n, sd, alpha, tuned_n))
    lo, hi = estimate - h, estimate + h
    target = float(np.log1p(min_change / 100.0)) if scale == "log" else float(min_change)
    narrow = hi - lo <= target and n >= MIN_N
    more = 0 if narrow else max(
        _samples_needed(n, float(predicted_sd(sd, n)), target, alpha, tuned_n),
        int(np.ceil(MIN_N - n)),
    )
    if scale == "log":
        estimate, lo, hi = (float(100.0 * np.expm1(x)) for x in (estimate, lo, hi))
    return Precision(
        estimate=estimate, lo=lo, hi=hi, width=hi - lo, min_change=float(min_change),
        narrow_enough=narrow, excludes_zero=not lo <= 0.0 <= hi, n=n, more_needed=more,
        alpha=alpha, tuned_n=tuned_n, scale=scale,
    )


def precision_paired(
    differences: npt.ArrayLike, min_change: float, alpha: float = 0.05,
    tuned_n: int = DEFAULT_TUNED_N, pilot: int = PILOT_N,
) -> Precision:
    """Seed 004's question for paired slices: is the anytime-valid interval of the mean
    difference narrower than ``min_change``, and if not, about how many more slice pairs?

    :math:`\\bar d \\pm h_n` with :func:`sequence_halfwidth` at the guarded spread
    :math:`\\tilde\\sigma_n` (:func:`guarded_sd`, differences in slice order); the pairs
    still needed are the smallest :math:`N` with :math:`2 h_{n+N}(\\tilde\\sigma_n) \\le`
    ``min_change``. For positive metrics :func:`precision_ratio_paired` holds on skewed and
    spiky data where this one (a mean) cannot (docs/statistics.md, §3.11).
    """
    d = _sample(differences, "differences")
    return _precision(float(d.mean()), float(d.size), guarded_sd(d, pilot), min_change,
                      alpha, tuned_n)


def _logs(x: npt.ArrayLike, name: str) -> FloatArray:
    v = _sample(x, name)
    if np.any(v <= 0):
        raise ValueError(f"{name} must be positive for the log scale")
    return np.asarray(np.log(v), dtype=np.float64)


def precision_ratio_paired(
    a: npt.ArrayLike, b: npt.ArrayLike, min_change_pct: float, alpha: float = 0.05,
    tuned_n: int = DEFAULT_TUNED_N, pilot: int = PILOT_N,
) -> Precision:
    """:func:`precision_paired` on the log-ratios :math:`\\log(b_i / a_i)` of a positive
    metric: estimand the mean log-ratio, reported as the relative change of the geometric
    mean, :math:`100(e^{\\bar d} - 1)` %, with ``min_change_pct`` a percentage.

    Logs turn a multiplicative skew (lognormal times) into a symmetric one and a rare x10
    spike into a bounded jump of :math:`\\log 10`, so the sequence holds at the stop where
    the mean's cannot (issue 22: 99.8-100 % on lognormal and 95 % on spiky streams at the
    stop, against 89 % and 64 % for the mean; docs/statistics.md, §3.11).
    """
    x, y = _logs(a, "a"), _logs(b, "b")
    if x.size != y.size:
        raise ValueError("a and b must have the same length (one value per slice pair)")
    d = y - x
    return _precision(float(d.mean()), float(d.size), guarded_sd(d, pilot), min_change_pct,
                      alpha, tuned_n, "log")


def relative_scale(a: npt.ArrayLike, b: npt.ArrayLike) -> PrecisionScale:
    """The scale of "how many more samples?" when the smallest change that matters is a
    percentage: ``"log"`` (the change of the geometric mean, :func:`precision_ratio_paired`,
    :func:`precision_ratio_two_sample`) when every value of both samples is > 0, else
    ``"linear"`` (the difference of means). On positive metrics the log scale's prediction
    at n = 30 falls within ±25 % of the samples then needed 85-93 % of the time against
    65-78 % for the mean of heavy-tailed data (docs/statistics.md, §3.11)."""
    x = np.asarray(a, dtype=np.float64)
    y = np.asarray(b, dtype=np.float64)
    return "log" if bool(np.all(x > 0) and np.all(y > 0)) else "linear"


def _relative_threshold(a: FloatArray, min_change_pct: float) -> float:
    base = abs(float(a.mean()))
    if base == 0:
        raise ValueError("the earlier sample's mean is 0: a change in percent of it is undefined")
    return base * min_change_pct / 100.0


def precision_relative_paired(
    a: npt.ArrayLike, b: npt.ArrayLike, min_change_pct: float, alpha: float = 0.05,
    tuned_n: int = DEFAULT_TUNED_N, pilot: int = PILOT_N,
) -> Precision:
    """"How many more slice pairs?" for a smallest change given in percent (issue 22,
    part 4): :func:`precision_ratio_paired` (change of the geometric mean, T =
    ``min_change_pct`` %) when every value is > 0 (:func:`relative_scale`), else
    :func:`precision_paired` on :math:`b_i - a_i` with T = ``min_change_pct`` % of
    :math:`|\bar a|` (difference of means). ``Precision.scale`` / ``estimand`` say which."""
    x, y = _sample(a, "a"), _sample(b, "b")
    if x.size != y.size:
        raise ValueError("a and b must have the same length (one value per slice pair)")
    if relative_scale(x, y) == "log":
        return precision_ratio_paired(x, y, min_change_pct, alpha, tuned_n, pilot)
    return precision_paired(y - x, _relative_threshold(x, min_change_pct), alpha, tuned_n,
                            pilot)


def _two_sample(x: FloatArray, y: FloatArray, min_change: float, alpha: float, tuned_n: int,
                pilot: int, scale: PrecisionScale) -> Precision:
    va, vb = guarded_sd(x, pilot) ** 2, guarded_sd(y, pilot) ** 2
    se2 = va / x.size + vb / y.size
    total = va + vb
    n_eff = total / se2 if se2 > 0 else float(min(x.size, y.size))
    return _precision(float(y.mean() - x.mean()), n_eff, float(np.sqrt(total)), min_change,
                      alpha, tuned_n, scale)


def precision_two_sample(
    a: npt.ArrayLike, b: npt.ArrayLike, min_change: float, alpha: float = 0.05,
    tuned_n: int = DEFAULT_TUNED_N, pilot: int = PILOT_N,
) -> Precision:
    """Seed 004's question for two independent samples (two releases of a series).

    The difference of means :math:`\\bar b - \\bar a` has :math:`\\mathrm{se}^2 = s_a^2/n_a
    + s_b^2/n_b`; it is treated as the mean of :math:`n_{eff} = (s_a^2 + s_b^2)/\\mathrm{se}^2`
    pairs of standard deviation :math:`\\sqrt{s_a^2 + s_b^2}` (exactly so when
    :math:`n_a = n_b`, where :math:`n_{eff} = n_a`), and :func:`sequence_halfwidth` gives the
    interval; each :math:`s` is the guarded spread of its release's runs in run order
    (:func:`guarded_sd`). ``more_needed`` counts further runs of each release. Seed 004 asks
    for runs taken in random order; its fixed-n Welch interval (:func:`welch_ci`) is not
    valid when one looks after every run, this one is (asymptotically).
    """
    return _two_sample(_sample(a, "a"), _sample(b, "b"), min_change, alpha, tuned_n, pilot,
                       "linear")


def precision_ratio_two_sample(
    a: npt.ArrayLike, b: npt.ArrayLike, min_change_pct: float, alpha: float = 0.05,
    tuned_n: int = DEFAULT_TUNED_N, pilot: int = PILOT_N,
) -> Precision:
    """:func:`precision_two_sample` on the logs of a positive metric: estimand the
    difference of the mean logs (the ratio of geometric means), reported as a relative
    change in percent, with ``min_change_pct`` a percentage (docs/statistics.md, §3.11)."""
    return _two_sample(_logs(a, "a"), _logs(b, "b"), min_change_pct, alpha, tuned_n, pilot,
                       "log")


# ---------------------------------------------------------------------------------------
# Has a host's A/A floor moved?
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FloorChange:
    """Comparison of a new A/A run with the previous one of the same host and metric.

    Attributes
    ----------
    moved : ``spread_p < alpha`` or ``shift_p < alpha``.
    spread_ratio : ``s_new / s_previous``, standard deviations of the A/A differences.
    spread_p : Brown-Forsythe test of equal spread (Levene's test centred on medians).
    shift : mean A/A difference now minus before.
    shift_p : Welch's t test of equal means.
    alpha : level of each test.
    """

    moved: bool
    spread_ratio: float
    spread_p: float
    shift: float
    shift_p: float
    alpha: float


def floor_change(
    previous: npt.ArrayLike, new: npt.ArrayLike, alpha: float = 0.01
) -> FloorChange:
    """Did the host change between two A/A runs? (seed 002: "if the A/A floor was [-0.05,
    +0.07] last quarter and is [-0.20, +0.40] this quarter, something on the host changed")

    The floor :math:`\\max(|L|, |U|)` of an A/A interval mixes two things, each tested on the
    two runs' paired differences: their **spread**, which sets the interval's width
    (Brown-Forsythe test, ``scipy.stats.levene(center="median")``, robust to non-normal
    differences), and their **centre**, a systematic bias between the arms (Welch's t test).
    Comparing the two floors directly would not do: with :math:`n = 30` pairs the floor of
    the same host varies by a factor of ~2 from run to run by chance alone, because
    :math:`|\\bar d|` is part of it.

    Parameters
    ----------
    previous, new : array_like, 1-d, each >= 3 values
        Paired differences of the previous and the new A/A run of one metric.
    alpha : float, default 0.01
        Level of each test: one flag in 100 A/A runs of an unchanged host and metric per
        test, so a flag is worth a look.

    References
    ----------
    Brown, M. B. & Forsythe, A. B. (1974). JASA 69, 364-367; Welch (1947); seed 002.
    """
    check_confidence(1.0 - alpha)
    x = _sample(previous, "previous", minimum=3)
    y = _sample(new, "new", minimum=3)
    sx, sy = float(x.std(ddof=1)), float(y.std(ddof=1))
    if sx == 0 and sy == 0:
        spread_p, ratio = 1.0, 1.0
    else:
        spread_p = float(stats.levene(x, y, center="median").pvalue)
        ratio = sy / sx if sx > 0 else float("inf")
    shift = float(y.mean() - x.mean())
    if sx == 0 and sy == 0:
        shift_p = 1.0 if shift == 0 else 0.0
    else:
        shift_p = float(stats.ttest_ind(y, x, equal_var=False).pvalue)
    return FloorChange(
        moved=spread_p < alpha or shift_p < alpha, spread_ratio=ratio, spread_p=spread_p,
        shift=shift, shift_p=shift_p, alpha=alpha,
    )


def precision_relative_two_sample(
    a: npt.ArrayLike, b: npt.ArrayLike, min_change_pct: float, alpha: float = 0.05,
    tuned_n: int = DEFAULT_TUNED_N, pilot: int = PILOT_N,
) -> Precision:
    """"How many more runs of each release?" for a smallest change given in percent (issue
    22, part 4): :func:`precision_ratio_two_sample` (change of the geometric mean, T =
    ``min_change_pct`` %) when every run's value is > 0 (:func:`relative_scale`), else
    :func:`precision_two_sample` with T = ``min_change_pct`` % of :math:`|\bar a|`
    (difference of means). ``Precision.scale`` / ``estimand`` say which."""
    x, y = _sample(a, "a"), _sample(b, "b")
    if relative_scale(x, y) == "log":
        return precision_ratio_two_sample(x, y, min_change_pct, alpha, tuned_n, pilot)
    return precision_two_sample(x, y, _relative_threshold(x, min_change_pct), alpha, tuned_n,
                                pilot)
