"""Seed 003's rule (``paper``): two releases' intervals, compared pair by pair.

Benbachir et al. (seed 003, §III.D): a *deviation* when the confidence interval of the
difference excludes zero **and** the two releases' intervals do not overlap.
Conservative: non-overlap of two 95% intervals is a much stronger requirement than a
significant difference (Schenker & Gentleman 2001). Each verdict depends on its two
releases only, so it is final as soon as both exist; it needs two runs a side (an
interval needs two), so a pair touching a one-run release has no verdict under this rule.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

# scipy.special rather than scipy.stats: the same distribution functions at a fraction of
# the import time (docs/statistics.md, "Import time").
from scipy import special  # type: ignore[import-untyped]  # no scipy-stubs in the venv

from .._checks import check_confidence
from .._typing import BoolArray, Direction, FloatArray, Int8Array
from ..intervals import (
    MIN_RUNS,
    Interval,
    IntervalArray,
    _as_sample,
    diff_ci_array,
    mean_ci_array,
    median_ci_array,
)
from .codes import (
    NO_VERDICT,
    NONSIGNIFICANT_OVERLAP,
    SIGNIFICANT_OVERLAP,
    VERDICTS,
    Estimator,
    Verdict,
    _appearance,
    _check_direction,
    _deviation_codes,
    absent_releases,
)

__all__ = ["Comparison", "PairStatistics", "compare", "interval_gap", "pair_statistics"]


@dataclass(frozen=True)
class Comparison:
    """Verdict for two consecutive releases ``a`` (earlier) and ``b`` (later).

    Attributes
    ----------
    verdict : str
        One of :data:`VERDICTS`.
    gap : float
        Distance between the two intervals when they do not overlap, with the sign
        of ``diff``; 0 when they overlap.
    diff, diff_lo, diff_hi : float
        ``estimate(b) - estimate(a)`` (later − earlier) and its confidence interval.
    """

    verdict: Verdict
    gap: float
    diff: float
    diff_lo: float
    diff_hi: float

    @property
    def difference(self) -> Interval[float]:
        """``Interval(diff, diff_lo, diff_hi)``: later − earlier with its interval."""
        return Interval(self.diff, self.diff_lo, self.diff_hi)


def _stats(x: FloatArray, confidence: float, estimator: Estimator) -> IntervalArray:
    if estimator == "median":
        return median_ci_array(x, confidence)
    if estimator == "mean":
        return mean_ci_array(x, confidence)
    raise ValueError(f"unknown estimator {estimator!r}")


def _signed_gap(a: IntervalArray, b: IntervalArray) -> FloatArray:
    return interval_gap(a.lo, a.hi, b.lo, b.hi)


def interval_gap(
    a_lo: npt.ArrayLike, a_hi: npt.ArrayLike, b_lo: npt.ArrayLike, b_hi: npt.ArrayLike
) -> FloatArray:
    """Signed distance from interval ``a`` (earlier) to interval ``b`` (later).

    ``b_lo - a_hi`` when ``b`` lies above ``a``, ``b_hi - a_lo`` (negative) when below,
    0 when they overlap or touch; NaN where a limit is NaN.
    """
    alo, ahi = np.asarray(a_lo, dtype=np.float64), np.asarray(a_hi, dtype=np.float64)
    blo, bhi = np.asarray(b_lo, dtype=np.float64), np.asarray(b_hi, dtype=np.float64)
    above = blo - ahi
    below = bhi - alo
    gap: FloatArray = np.where(above > 0, above, np.where(below < 0, below, 0.0))
    nan = np.isnan(above) | np.isnan(below)
    out: FloatArray = np.where(nan, np.nan, gap)
    return out


def _paper_verdicts(
    a: IntervalArray, b: IntervalArray, d: IntervalArray, direction: Direction
) -> Int8Array:
    """Seed 003's two conditions, element-wise."""
    significant = (d.lo > 0) | (d.hi < 0)
    separate = (b.lo > a.hi) | (b.hi < a.lo)
    deviation = significant & separate
    code = np.where(
        deviation,
        _deviation_codes(d.estimate > 0, direction),
        np.where(significant, SIGNIFICANT_OVERLAP, NONSIGNIFICANT_OVERLAP),
    )
    missing = ~((a.n >= MIN_RUNS) & (b.n >= MIN_RUNS))
    out: Int8Array = np.where(missing, NO_VERDICT, code).astype(np.int8)
    return out


def _t_p_value(d: IntervalArray) -> FloatArray:
    """Two-sided p-value of the t statistic ``diff / se`` behind the difference interval."""
    with np.errstate(invalid="ignore", divide="ignore"):
        t = np.abs(d.estimate) / d.se
    p = 2.0 * special.stdtr(d.df, -t)  # t.sf(t, df)
    # Zero standard error (every run tied): the difference is exact, 0 or 1.
    p = np.where(d.se == 0, np.where(d.estimate == 0, 1.0, 0.0), p)
    out: FloatArray = np.where(np.isnan(d.estimate), np.nan, p)
    return out


def compare(
    a: npt.ArrayLike,
    b: npt.ArrayLike,
    confidence: float = 0.95,
    *,
    estimator: Estimator = "median",
    direction: Direction = "lower_is_better",
) -> Comparison:
    """Compare two consecutive releases with the paper's two conditions.

    Parameters
    ----------
    a, b : array_like, 1-D
        Run times of the earlier (``a``) and later (``b``) release, at least two
        finite values each.
    confidence : float, default 0.95
        Level of the three intervals (each release and the difference).
    estimator : {"median", "mean"}, default "median"
        ``"median"``: Olive's (2005) interval per release and Olive standard
        errors with Welch–Satterthwaite degrees of freedom for the difference
        (:func:`~deviations.stats.intervals.median_diff_ci`). ``"mean"``: Student
        intervals and Welch's interval for the difference.
    direction : {"lower_is_better", "higher_is_better"}, default "lower_is_better"
        Whether a larger value is worse (run times) or better (throughput): decides
        which of ``regression`` / ``improvement`` a deviation is. ``diff`` is
        later − earlier either way.

    Returns
    -------
    Comparison

    Raises
    ------
    ValueError
        Fewer than two runs, NaN or infinite values, unknown estimator or direction.

    Notes
    -----
    Benbachir et al. (seed 003, §III.D): the medians differ significantly when the
    interval of the difference excludes zero; the intervals do not overlap when the
    lower bound of the greater one exceeds the upper bound of the smaller one.
    Both ⇒ a deviation: ``regression`` when ``diff`` has the worse sign for
    ``direction`` (``diff > 0`` for run times), otherwise ``improvement``; only the first ⇒
    ``significant_overlap``; otherwise ``nonsignificant_overlap`` (this includes
    the rare case of separate intervals whose difference is not significant).
    Before the two conditions, a release absent from every run (all 0,
    :func:`absent_releases`) makes the pair ``appeared`` or ``vanished``.

    References
    ----------
    .. [1] A. Benbachir, I. F. De Melo jr, M. Dagenais, B. Adams, "Automated
       performance deviation detection across software versions releases",
       QRS 2017, §III.D.
    .. [2] N. Schenker and J. F. Gentleman, "On judging the significance of
       differences by examining the overlap between confidence intervals",
       The American Statistician 55(3), 182-186, 2001.
    """
    check_confidence(confidence)
    _check_direction(direction)
    xa, xb = _as_sample(a, "a"), _as_sample(b, "b")
    sa = _stats(xa, confidence, estimator)
    sb = _stats(xb, confidence, estimator)
    d = diff_ci_array(sa, sb, confidence)
    code = int(_appearance(_paper_verdicts(sa, sb, d, direction),
                           absent_releases(xa), absent_releases(xb)))
    return Comparison(
        verdict=VERDICTS[code],
        gap=float(_signed_gap(sa, sb)),
        diff=float(d.estimate),
        diff_lo=float(d.lo),
        diff_hi=float(d.hi),
    )



@dataclass(frozen=True)
class PairStatistics:
    """What both rules know of adjacent releases ``a → b``, element-wise.

    Attributes
    ----------
    paired : ndarray of bool
        Both releases have at least :data:`MIN_RUNS` runs; elsewhere every other
        field is NaN or :data:`NO_VERDICT`.
    gap, diff, diff_lo, diff_hi : ndarray of float64
        As in :class:`ComparisonMatrix`.
    paper_verdict : ndarray of int8
        The paper rule's verdict codes.
    paper_p_value : ndarray of float64
        Two-sided p-value of the t statistic behind the difference interval.
    """

    paired: BoolArray
    gap: FloatArray
    diff: FloatArray
    diff_lo: FloatArray
    diff_hi: FloatArray
    paper_verdict: Int8Array
    paper_p_value: FloatArray


def pair_statistics(
    a: IntervalArray,
    b: IntervalArray,
    confidence: float = 0.95,
    *,
    direction: Direction = "lower_is_better",
    absent: tuple[npt.ArrayLike, npt.ArrayLike] | None = None,
) -> PairStatistics:
    """Difference interval, gap and paper verdict of adjacent releases, element-wise.

    Parameters
    ----------
    a, b : IntervalArray
        Per-release intervals of the earlier and later release of each pair (same
        shape; from :func:`~deviations.stats.intervals.median_ci_array` or
        :func:`~deviations.stats.intervals.mean_ci_array`).
    confidence : float, default 0.95
        Level of the difference interval.
    direction : {"lower_is_better", "higher_is_better"}, default "lower_is_better"
        As in :func:`compare`.
    absent : pair of bool arrays, optional
        :func:`absent_releases` of ``a`` and ``b``: pairs with an absent side get
        ``appeared``/``vanished`` (or no difference when both are absent) and no
        p-value.

    Returns
    -------
    PairStatistics

    Notes
    -----
    The per-pair part of :func:`compare_matrix` (paper rule in full; ``gap`` and
    the difference interval for both rules). Each cell depends on its two releases
    only, so a stored matrix recomputes the pairs that touch a changed release.
    """
    _check_direction(direction)
    d = diff_ci_array(a, b, confidence)
    paired = (a.n >= MIN_RUNS) & (b.n >= MIN_RUNS)
    verdict = _paper_verdicts(a, b, d, direction)
    measured = paired
    if absent is not None:
        absent_a, absent_b = (np.asarray(m, dtype=np.bool_) for m in absent)
        verdict = _appearance(verdict, absent_a, absent_b)
        measured = paired & ~absent_a & ~absent_b
    return PairStatistics(
        paired=paired,
        gap=np.where(paired, _signed_gap(a, b), np.nan),
        diff=np.where(paired, d.estimate, np.nan),
        diff_lo=np.where(paired, d.lo, np.nan),
        diff_hi=np.where(paired, d.hi, np.nan),
        paper_verdict=verdict,
        paper_p_value=np.where(measured, _t_p_value(d), np.nan),
    )


