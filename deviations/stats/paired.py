"""Interleaved A/B comparisons: paired bootstrap CI, sign test, A/A floor, Welch.

An A/B run alternates the baseline A and the candidate B in short slices on one host, so
neighbouring slices share the host's drift; pairing them cancels it. This module gives
the paired interval with its sign-test cross-check, the host's A/A noise floor, the
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
Efron, B. & Tibshirani, R. (1993). An Introduction to the Bootstrap, ch. 13 (percentile
    interval).
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
# Paired bootstrap
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PairedResult:
    """Paired comparison of A and B over matched slices.

    Attributes
    ----------
    estimate : mean of ``b_i - a_i`` (candidate − baseline).
    lo, hi : percentile-bootstrap CI of ``estimate`` at level ``confidence``.
    confidence : level actually used (after Bonferroni widening for ``comparisons``).
    sign_p : exact two-sided sign-test p-value (ties dropped).
    n : number of slice pairs.
    n_positive, n_negative, n_ties : signs of the differences.
    resamples, seed : bootstrap settings (the result is reproducible from them).
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

    @property
    def interval(self) -> Interval[float]:
        """``Interval(estimate, lo, hi)`` of ``b - a``."""
        return Interval(self.estimate, self.lo, self.hi)

    @property
    def contains_zero(self) -> bool:
        """True when the CI does not exclude a zero difference."""
        return self.lo <= 0.0 <= self.hi


def _canonical(x: FloatArray) -> FloatArray:
    # Order by |x| then x: independent of the input order, and mirrored by negation.
    return np.asarray(x[np.lexsort((x, np.abs(x)))], dtype=np.float64)


def bootstrap_mean_ci(
    x: npt.ArrayLike, confidence: float = 0.95, resamples: int = 10_000, seed: int = 0
) -> tuple[float, float]:
    """Percentile-bootstrap CI of the mean of ``x``, vectorised.

    One draw of a ``(resamples, n)`` index matrix from ``np.random.default_rng(seed)``;
    the row means :math:`\\bar x^*_1..\\bar x^*_B` give
    :math:`[q_{\\alpha/2}, q_{1-\\alpha/2}]` of their empirical distribution
    (``np.percentile``, linear interpolation), :math:`\\alpha = 1 - \\text{confidence}`.
    ``x`` is put in a canonical order first (by :math:`|x_i|`, then :math:`x_i`), which
    makes the result exactly invariant to the order of the values, and exactly negated
    (``[-hi, -lo]``) for ``-x`` unless ``x`` holds both some ``v`` and ``-v``, ``v != 0``
    (then the two agree in distribution, up to Monte Carlo error).
    Memory is :math:`16 B n` bytes (160 MB for 10,000 resamples of 1,000 slices).

    References
    ----------
    Efron & Tibshirani (1993), ch. 13; seed 002's ``ab_interleaved.py`` (same statistic,
    its per-resample loop replaced by one index draw).
    """
    check_confidence(confidence)
    d = _canonical(_sample(x, "x"))
    if resamples < 100:
        raise ValueError("resamples must be at least 100 for a percentile interval")
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, d.size, size=(resamples, d.size))
    means = d[idx].mean(axis=1)
    alpha = 1.0 - confidence
    lo, hi = np.percentile(means, [100.0 * alpha / 2.0, 100.0 * (1.0 - alpha / 2.0)])
    return float(lo), float(hi)


def paired_ci_from_differences(
    differences: npt.ArrayLike,
    confidence: float = 0.95,
    resamples: int = 10_000,
    seed: int = 0,
    *,
    comparisons: int = 1,
) -> PairedResult:
    """:func:`paired_ci` for already-computed differences ``d_i = b_i - a_i``."""
    d = _canonical(_sample(differences, "differences"))  # order-free mean too
    level = bonferroni_confidence(confidence, comparisons)
    lo, hi = bootstrap_mean_ci(d, level, resamples, seed)
    sign = sign_test(d)
    return PairedResult(
        estimate=float(d.mean()),
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
    )


def paired_ci(
    a_slices: npt.ArrayLike,
    b_slices: npt.ArrayLike,
    confidence: float = 0.95,
    resamples: int = 10_000,
    seed: int = 0,
    *,
    comparisons: int = 1,
) -> PairedResult:
    """Paired-difference bootstrap CI and sign test of interleaved A/B slices.

    With per-slice statistics (e.g. each slice's p99) paired in run order,
    :math:`d_i = b_i - a_i`, :math:`i = 1..n` (candidate − baseline):

    * estimate :math:`\\bar d = \\frac1n \\sum_i d_i`;
    * percentile-bootstrap CI of :math:`\\bar d` (:func:`bootstrap_mean_ci`);
    * exact sign-test p-value (:func:`sign_test`), the seed's cross-check: a CI that
      excludes 0 while the sign test sees no preference points to 1-2 outlier slices.

    Pairing removes noise shared by neighbouring slices:
    :math:`\\operatorname{Var}(a - b) = \\operatorname{Var} a + \\operatorname{Var} b - 2
    \\operatorname{Cov}(a, b)` (seed 002).

    Parameters
    ----------
    a_slices, b_slices : array_like, 1-d, same length n >= 2
        Per-slice statistic of A and B; ``a_slices[i]`` is paired with ``b_slices[i]``.
        Seed 002 asks for n >= 30 pairs for an honest bootstrap. Fewer are accepted, but
        the percentile interval is then too narrow (plug-in variance with divisor n, normal
        rather than t tails); report n, as :func:`result_line` does.
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
    return paired_ci_from_differences(b - a, confidence, resamples, seed, comparisons=comparisons)


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
    pairs)"``. The CI is printed as signed ``B - A`` (the seed printed ``A - B``);
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
    level = f"{100 * result.confidence:.4g}%"
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
    return f"{subject} is {size} {verdict} at {metric} {detail}".replace(
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
