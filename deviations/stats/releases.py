"""Verdicts between consecutive releases: the paper's rule, the recommended rule, digressions.

This module answers the dashboard's question for one pair of releases (:func:`compare`)
and for a whole functions × releases matrix at once (:func:`compare_matrix`, and the
pieces a stored matrix recomputes incrementally: :func:`pair_statistics`,
:func:`window_tests`, :func:`recommended_verdict_codes`, :func:`digressions`). The
intervals come from :mod:`~deviations.stats.intervals`, the exact rank tests from
:mod:`~deviations.stats.ranks`, the false-discovery control from
:mod:`~deviations.stats.multiple`.

Two rules answer "did this function get slower or faster between release ``r-1``
and release ``r``?":

``paper``
    Benbachir et al. (seed 003, §III.D): a *deviation* when the confidence interval
    of the difference excludes zero **and** the two releases' intervals do not
    overlap. Conservative: non-overlap of two 95% intervals is a much stronger
    requirement than a significant difference (Schenker & Gentleman 2001).
``recommended``
    A windowed Mann–Whitney test of the ``window`` releases before the boundary
    against the ``window`` releases after it, Benjamini–Hochberg over every
    (function, boundary) of the matrix, a minimal relative effect, and a
    local-maximum selection so one step gives one flag. See :func:`compare_matrix`.

Verdict codes (``int8``), shared by both rules and exported as strings by
:data:`VERDICTS`:

====  =========================  ==============================================
code  string                     meaning
====  =========================  ==============================================
 -1   (none)                     no verdict: a release of the pair has < 2 runs
  0   ``nonsignificant_overlap`` no significant difference
  1   ``significant_overlap``    significant, but not retained as a deviation
  2   ``regression``             deviation for the worse
  3   ``improvement``            deviation for the better
  4   ``appeared``               absent from every run of the earlier release,
                                 measured in the later one
  5   ``vanished``               measured in the earlier release, absent from
                                 every run of the later one
====  =========================  ==============================================

*Absent* (:func:`absent_releases`): every run of the release has exactly 0 for the
function (the trace did not record it: a headed/headless switch, a renamed or new
function). An absent release is not a measurement of 0 µs: a pair with one absent side
is ``appeared`` or ``vanished`` (never a regression or improvement), a pair absent on
both sides has no difference (``nonsignificant_overlap``), and the recommended rule's
window tests leave absent releases out and give no p-value to a boundary touching one,
so they never enter the Benjamini–Hochberg family.

The codes are stored; they never change meaning.

Sign conventions: ``diff = estimate(b) - estimate(a)``, later − earlier, whatever the
metric; ``gap`` has the sign of ``diff`` and is the distance between the two intervals
when they do not overlap, 0 when they overlap or touch. Which sign is worse is the
metric's ``direction``: with ``"lower_is_better"`` (the default: run times) a
significant increase is a regression, with ``"higher_is_better"`` (throughput, frames
per second, scores) it is an improvement.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, Literal

import numpy as np
import numpy.typing as npt

# scipy.special rather than scipy.stats: the same distribution functions at a fraction of
# the import time (docs/statistics.md, "Import time").
from scipy import special  # type: ignore[import-untyped]  # no scipy-stubs in the venv

from ._checks import check_confidence
from ._typing import DIRECTIONS, BoolArray, Direction, FloatArray, Int8Array, IntArray
from .intervals import (
    MIN_RUNS,
    Interval,
    IntervalArray,
    _as_sample,
    diff_ci_array,
    mean_ci_array,
    median_ci_array,
)
from .multiple import benjamini_hochberg, benjamini_hochberg_rejections
from .ranks import _mann_whitney_rows

__all__ = [
    "APPEARED",
    "IMPROVEMENT",
    "NONSIGNIFICANT_OVERLAP",
    "NO_VERDICT",
    "REGRESSION",
    "SEGMENT_MAX_LENGTH",
    "SEGMENT_PENALTY",
    "SEGMENT_PENALTY_COST",
    "SEGMENT_PENALTY_RUNS",
    "SEGMENT_PROVISIONAL",
    "SIGNIFICANT_OVERLAP",
    "VANISHED",
    "VERDICTS",
    "Comparison",
    "ComparisonMatrix",
    "PairStatistics",
    "Segments",
    "WindowTests",
    "absent_releases",
    "compare",
    "compare_matrix",
    "adjacent_change",
    "digressions",
    "interval_gap",
    "optimal_segments",
    "pair_statistics",
    "practical_verdicts",
    "provisional_pairs",
    "recommended_verdict_codes",
    "recommended_verdicts",
    "segment_verdicts",
    "verdict_name",
    "window_tests",
]

Estimator = Literal["median", "mean"]
Rule = Literal["paper", "recommended", "segments"]
Verdict = Literal[
    "nonsignificant_overlap", "significant_overlap", "regression", "improvement", "appeared",
    "vanished",
]

NO_VERDICT: Final = -1
NONSIGNIFICANT_OVERLAP: Final = 0
SIGNIFICANT_OVERLAP: Final = 1
REGRESSION: Final = 2
IMPROVEMENT: Final = 3
APPEARED: Final = 4
VANISHED: Final = 5
VERDICTS: Final[tuple[Verdict, ...]] = (
    "nonsignificant_overlap",
    "significant_overlap",
    "regression",
    "improvement",
    "appeared",
    "vanished",
)
"""``VERDICTS[code]`` is the exported string of a verdict code ``>= 0``."""


def verdict_name(code: int) -> Verdict | None:
    """Exported string of a verdict code, ``None`` for :data:`NO_VERDICT`.

    Raises
    ------
    ValueError
        An unknown code.
    """
    if code == NO_VERDICT:
        return None
    if 0 <= code < len(VERDICTS):
        return VERDICTS[code]
    raise ValueError(f"unknown verdict code {code!r}")


def _check_direction(direction: Direction) -> None:
    if direction not in DIRECTIONS:
        raise ValueError(f"unknown direction {direction!r}, expected one of {DIRECTIONS}")


def _deviation_codes(increase: BoolArray, direction: Direction) -> IntArray:
    """Verdict code of a retained deviation: which of regression / improvement an increase
    (later − earlier > 0) is, given the metric's direction."""
    if direction == "lower_is_better":
        up, down = REGRESSION, IMPROVEMENT
    else:
        up, down = IMPROVEMENT, REGRESSION
    codes: IntArray = np.where(increase, up, down)
    return codes


def absent_releases(samples: npt.ArrayLike) -> BoolArray:
    """Which (function, release) cells are *absent*: every run exactly 0.

    Parameters
    ----------
    samples : array_like of float64, shape (..., runs)
        Run times, NaN-padded.

    Returns
    -------
    ndarray of bool, shape ``samples.shape[:-1]``
        ``True`` where at least :data:`~deviations.stats.intervals.MIN_RUNS` runs are
        given and each is 0. Trace times are 0 where a run did not record the function
        at all, so such a release says nothing about how long the function takes.
    """
    x = np.asarray(samples, dtype=np.float64)
    given = ~np.isnan(x)
    out: BoolArray = (np.sum(given, axis=-1) >= MIN_RUNS) & ~np.any(given & (x != 0), axis=-1)
    return out


def _appearance(
    code: npt.ArrayLike, absent_a: BoolArray, absent_b: BoolArray
) -> Int8Array:
    """Verdict codes with absent releases taken into account (module docstring)."""
    c = np.asarray(code)
    out: Int8Array = np.where(
        c == NO_VERDICT, NO_VERDICT,
        np.where(absent_a & ~absent_b, APPEARED,
                 np.where(~absent_a & absent_b, VANISHED,
                          np.where(absent_a & absent_b, NONSIGNIFICANT_OVERLAP, c))),
    ).astype(np.int8)
    return out


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


def digressions(verdict: npt.ArrayLike, lo: npt.ArrayLike, hi: npt.ArrayLike) -> BoolArray:
    """Flag the pairs that start a digression (a deviation that later comes back).

    Parameters
    ----------
    verdict : array_like of int, shape (..., releases - 1)
        Verdict codes of consecutive pairs (pair ``i`` is release ``i`` → ``i+1``).
    lo, hi : array_like of float, shape (..., releases)
        Per-release confidence limits of the estimator the verdicts used.

    Returns
    -------
    ndarray of bool, shape (..., releases - 1)
        ``True`` on pair ``i`` when it starts a digression.

    Notes
    -----
    Seed 003 (Fig. 7) calls a deviation that "has a fallback at the same level as
    before" a digression. Precisely: pair ``i`` is a deviation (regression or
    improvement) and some later pair ``j > i`` is a deviation in the opposite
    direction whose later release's interval ``[lo[j+1], hi[j+1]]`` overlaps the
    interval ``[lo[i], hi[i]]`` of the release before pair ``i``. Deviations in the
    same direction between ``i`` and ``j`` are allowed (Fig. 7: two regressions,
    then one improvement back to the first level marks the first regression only,
    the second one started from a level the series does not return to).

    The test needs only opposite verdict codes, so it holds for either ``direction`` of
    the metric (a regression back after an improvement is a digression too).

    Cost: one test per pair of deviations of the same function (deviations are rare),
    not per pair of releases.
    """
    v = np.asarray(verdict)
    low = np.asarray(lo, dtype=np.float64)
    high = np.asarray(hi, dtype=np.float64)
    pairs = v.shape[-1]
    if low.shape[-1] != pairs + 1 or high.shape != low.shape:
        raise ValueError("lo and hi need one more release than verdict has pairs")
    out = np.zeros(v.shape, dtype=np.bool_)
    if pairs < 2:
        return out
    v2 = v.reshape(-1, pairs)
    low2, high2 = low.reshape(-1, pairs + 1), high.reshape(-1, pairs + 1)
    flat = out.reshape(-1, pairs)
    # Deviations are sparse: test every (deviation i, later deviation j) of a row, in
    # chunks of at most _PAIRS_PER_CHUNK candidate pairs.
    rows, cols = np.nonzero((v2 == REGRESSION) | (v2 == IMPROVEMENT))
    later = np.searchsorted(rows, rows, side="right") - np.arange(len(rows)) - 1
    ends = np.cumsum(later)
    start = 0
    while start < len(rows):
        stop = max(start + 1, int(np.searchsorted(ends, ends[start] + _PAIRS_PER_CHUNK)))
        count = later[start:stop]
        a = np.repeat(np.arange(start, stop), count)
        b = a + 1 + np.arange(len(a)) - np.repeat(np.cumsum(count) - count, count)
        r, i, j = rows[a], cols[a], cols[b]
        hit = (
            (v2[r, j] != v2[r, i])  # both deviations: the opposite direction
            & (low2[r, j + 1] <= high2[r, i])
            & (high2[r, j + 1] >= low2[r, i])
        )
        flat[r[hit], i[hit]] = True
        start = stop
    return out


_PAIRS_PER_CHUNK: Final = 1 << 20


@dataclass(frozen=True)
class ComparisonMatrix:
    """Per-release statistics and per-pair verdicts of a functions × releases matrix.

    Per release (shape ``(functions, releases)``): ``median``, ``mean`` (intervals
    with ``estimate``, ``lo``, ``hi``, ``se``, ``df``), ``n``; ``median`` is the
    interval the rule shows: Olive's for ``paper`` (seed 003), the order-statistic
    interval (:func:`~deviations.stats.intervals.median_ci_array`, ``method="order"``)
    for ``recommended``, whose ``gap`` and digressions use it too.
    Per consecutive pair ``r-1 → r`` (shape ``(functions, releases - 1)``, column
    ``r-1``): ``verdict`` (int8 codes, see :data:`VERDICTS`), ``gap``, ``diff``,
    ``diff_lo``, ``diff_hi`` (for the chosen estimator), ``p_value`` (raw),
    ``q_value`` (Benjamini–Hochberg over the matrix; recommended rule only, NaN for
    the paper rule), ``shift`` (relative change of the windowed medians;
    recommended rule only), ``digression``. ``direction`` is the metric's direction the
    verdicts were decided with.
    """

    rule: Rule
    estimator: Estimator
    confidence: float
    median: IntervalArray
    mean: IntervalArray
    n: IntArray
    verdict: Int8Array
    gap: FloatArray
    diff: FloatArray
    diff_lo: FloatArray
    diff_hi: FloatArray
    p_value: FloatArray
    q_value: FloatArray
    shift: FloatArray
    digression: BoolArray
    direction: Direction = "lower_is_better"


@dataclass(frozen=True)
class WindowTests:
    """Windowed Mann–Whitney statistics of the recommended rule, one column per boundary.

    Attributes
    ----------
    z : ndarray of float64
        Signed z of the normal approximation (positive: the later window is larger).
    p_value : ndarray of float64
        Raw two-sided p-value (exact where :func:`compare_matrix` says so).
    shift : ndarray of float64
        ``(med_R - med_L) / |med_L|`` of the pooled medians.
    """

    z: FloatArray
    p_value: FloatArray
    shift: FloatArray


def window_tests(
    samples: npt.ArrayLike, window: int = 3, boundaries: range | None = None
) -> WindowTests:
    """Step 1 and 3 of the recommended rule (:func:`compare_matrix`) at some boundaries.

    Parameters
    ----------
    samples : array_like of float64, shape (functions, releases, runs)
        Run times, NaN-padded.
    window : int, default 3
        Releases pooled on each side of a boundary.
    boundaries : range, optional
        Boundaries to test (boundary ``k`` separates releases ``k`` and ``k+1``);
        all ``releases - 1`` of them by default.

    Returns
    -------
    WindowTests
        Arrays of shape ``(functions, len(boundaries))``.

    Raises
    ------
    ValueError
        ``samples`` not 3-D, ``window < 1``, a boundary out of range.

    Notes
    -----
    Boundary ``k`` pools releases ``max(0, k+1-window) .. k`` (left) against
    ``k+1 .. min(R-1, k+window)`` (right) of ``samples``: a boundary's statistics
    depend on those ``2 window`` releases only, so a caller holding a stored matrix
    recomputes the boundaries whose windows hold a changed release and passes the
    releases within ``2 window - 1`` of the change (the ends of ``samples`` must then
    be the ends of the series or lie beyond every window). The result does not depend
    on the NaN padding: ranks, rank sums and medians are exact. One loop over
    boundaries; each step is vectorised over all functions.

    Absent releases (:func:`absent_releases`: every run 0) are left out of the
    windows, and a boundary next to one (``k`` or ``k+1`` absent) gets NaN: it is
    ``appeared``, ``vanished`` or absent on both sides, not a measured change, and
    stays out of the Benjamini–Hochberg family.
    """
    x = np.asarray(samples, dtype=np.float64)
    if x.ndim != 3:
        raise ValueError(f"samples must have shape (functions, releases, runs), got {x.shape}")
    if window < 1:
        raise ValueError(f"window must be >= 1, got {window}")
    F, R, _ = x.shape
    ks = range(R - 1) if boundaries is None else boundaries
    if len(ks) and (min(ks) < 0 or max(ks) > R - 2):
        raise ValueError(f"boundaries {ks} outside 0 .. {R - 2}")
    z = np.full((F, len(ks)), np.nan)
    p = np.full((F, len(ks)), np.nan)
    shift = np.full((F, len(ks)), np.nan)
    absent = absent_releases(x)
    if absent.any():
        x = np.where(absent[:, :, np.newaxis], np.nan, x)
    for j, k in enumerate(ks):
        left = x[:, max(0, k + 1 - window) : k + 1, :].reshape(F, -1)
        right = x[:, k + 1 : min(R, k + 1 + window), :].reshape(F, -1)
        z[:, j], p[:, j], shift[:, j] = _mann_whitney_rows(left, right)
        touching = absent[:, k] | absent[:, k + 1]
        if touching.any():
            z[touching, j] = p[touching, j] = shift[touching, j] = np.nan
    return WindowTests(z=z, p_value=p, shift=shift)


def practical_verdicts(
    verdict: npt.ArrayLike,
    diff: npt.ArrayLike,
    before: npt.ArrayLike,
    *,
    min_relative: float,
    min_absolute: float,
) -> Int8Array:
    """Deviations smaller than a minimum practical change become ``significant_overlap``.

    Parameters
    ----------
    verdict : array_like of int8
        Verdict codes of either rule.
    diff : array_like of float, same shape
        Later − earlier of the pair's estimates.
    before : array_like of float, same shape
        The earlier release's estimate.
    min_relative, min_absolute : float
        A regression or improvement is kept when ``|diff| >= min_absolute`` **and**
        ``|diff| >= min_relative * |before|``; otherwise it is "significant, not a
        deviation" (statistically real, too small to act on: seed 003 §VI.A on
        practical significance). ``0, 0`` keeps every deviation.

    Returns
    -------
    ndarray of int8
    """
    if min_relative < 0 or min_absolute < 0:
        raise ValueError("minimum practical changes must be >= 0")
    v = np.asarray(verdict)
    d = np.abs(np.asarray(diff, dtype=np.float64))
    b = np.abs(np.asarray(before, dtype=np.float64))
    deviation = (v == REGRESSION) | (v == IMPROVEMENT)
    with np.errstate(invalid="ignore"):
        small = ~((d >= min_absolute) & (d >= min_relative * b))
    out: Int8Array = np.where(deviation & small, SIGNIFICANT_OVERLAP, v).astype(np.int8)
    return out


def provisional_pairs(pairs: int, rule: Rule, window: int = 3) -> BoolArray:
    """Which of the last pairs of a series have a verdict later releases may still change.

    Parameters
    ----------
    pairs : int
        Consecutive pairs of the series (releases − 1).
    rule : {"paper", "recommended", "segments"}
    window : int, default 3
        The recommended rule's window.

    Returns
    -------
    ndarray of bool, shape (pairs,)

    Notes
    -----
    ``paper``: a verdict depends on its two releases only, never provisional.
    ``recommended``: boundary ``k``'s window test pools releases ``k+1-w .. k+w``; its
    local maximum compares it with boundaries up to ``k+w-1``, whose windows reach
    release ``k+2w-1``; and a flag kept at a boundary up to ``w-1`` later may be placed
    on ``k``, which reaches release ``k+3w-2``: the verdict is final once that release
    exists, so the last ``3w - 3`` boundaries (6 with ``w = 3``) are provisional.
    (The Benjamini–Hochberg step is global, so any verdict near its threshold can
    still move with new p-values; that is rare and not marked.)
    ``segments`` (:func:`segment_verdicts`): the segmentation is global, so any verdict
    may move; measured, 95% of the verdict changes happen within the last
    :data:`SEGMENT_PROVISIONAL` boundaries, which are provisional (``window`` unused).
    """
    if pairs < 0 or window < 1:
        raise ValueError("pairs must be >= 0 and window >= 1")
    out = np.zeros(pairs, dtype=np.bool_)
    if rule == "recommended":
        out[max(0, pairs - (3 * window - 3)) :] = True
    elif rule == "segments":
        out[max(0, pairs - SEGMENT_PROVISIONAL) :] = True
    elif rule != "paper":
        raise ValueError(f"unknown rule {rule!r}")
    return out


def _local_maximum(strength: FloatArray, window: int) -> BoolArray:
    """True where ``strength`` is the largest within ``window - 1`` pairs either side.

    Ties go to the earliest pair; NaN never wins.
    """
    s = np.where(np.isnan(strength), -np.inf, strength)
    P = s.shape[-1]
    best = np.ones(s.shape, dtype=np.bool_)
    for off in range(1, window):
        if off >= P:
            break
        # A later neighbour must be strictly stronger to win; an earlier one only as strong.
        best[..., : P - off] &= s[..., : P - off] >= s[..., off:]
        best[..., off:] &= s[..., off:] > s[..., : P - off]
    out: BoolArray = best & np.isfinite(s)
    return out


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


def recommended_verdicts(
    p_value: npt.ArrayLike,
    z: npt.ArrayLike,
    shift: npt.ArrayLike,
    paired: npt.ArrayLike,
    *,
    window: int = 3,
    fdr: float = 0.05,
    min_relative_effect: float = 0.1,
    direction: Direction = "lower_is_better",
    appearance: npt.ArrayLike | None = None,
    adjacent: npt.ArrayLike | None = None,
) -> tuple[FloatArray, Int8Array]:
    """Steps 2 and 4 of the recommended rule (:func:`compare_matrix`): q-values and verdicts.

    Parameters
    ----------
    p_value, z, shift : array_like of float, shape (functions, releases - 1)
        Window statistics (:func:`window_tests`) of every boundary of the matrix,
        NaN where not ``paired``.
    paired : array_like of bool, same shape
        Both releases of the pair have at least :data:`MIN_RUNS` runs.
    window, fdr, min_relative_effect, direction
        As in :func:`compare_matrix`.
    appearance : array_like of int8, same shape, optional
        Verdict codes whose ``appeared``/``vanished`` cells override the rule's
        (:attr:`PairStatistics.paper_verdict`: both rules see the same absent
        releases).
    adjacent : array_like of float, same shape, optional
        Relative change of adjacent medians (:func:`adjacent_change`), to place each
        flag (:func:`compare_matrix`, step 4).

    Returns
    -------
    q_value : ndarray of float64
        Benjamini–Hochberg over every finite ``p_value`` of the matrix.
    verdict : ndarray of int8
        Verdict codes.

    Notes
    -----
    Both steps are global (the Benjamini–Hochberg thresholds depend on every
    p-value; the local maximum of ``|z|`` on ``window - 1`` neighbours each side),
    but cheap: one sort and ``window - 1`` comparisons. A stored matrix re-runs
    them over its stored arrays after recomputing the boundaries a change touched.
    """
    q_value = benjamini_hochberg(p_value)
    verdict = recommended_verdict_codes(
        q_value <= fdr,
        z,
        shift,
        paired,
        window=window,
        min_relative_effect=min_relative_effect,
        direction=direction,
        appearance=appearance,
        adjacent=adjacent,
    )
    return q_value, verdict


def recommended_verdict_codes(
    significant: npt.ArrayLike,
    z: npt.ArrayLike,
    shift: npt.ArrayLike,
    paired: npt.ArrayLike,
    *,
    window: int = 3,
    min_relative_effect: float = 0.1,
    direction: Direction = "lower_is_better",
    appearance: npt.ArrayLike | None = None,
    adjacent: npt.ArrayLike | None = None,
) -> Int8Array:
    """Step 4 of the recommended rule: verdict codes from the Benjamini–Hochberg
    rejections (``significant``: :func:`benjamini_hochberg_rejections`, or q-values
    ``<= fdr``) and the window statistics; other arguments as in
    :func:`recommended_verdicts`.

    ``adjacent`` (relative change of the adjacent releases' medians, later − earlier
    over ``|earlier|``) places each kept flag: see :func:`compare_matrix`, step 4.
    """
    _check_direction(direction)
    sig = np.asarray(significant, dtype=np.bool_)
    zz = np.asarray(z, dtype=np.float64)
    sh = np.asarray(shift, dtype=np.float64)
    ok = np.asarray(paired, dtype=np.bool_)
    candidate = sig & (np.abs(sh) >= min_relative_effect) & ok
    strength = np.where(candidate, np.abs(zz), np.nan)
    # Boundaries compete only with boundaries of the same sign: the two ends of a short
    # digression (up, then down) are both kept.
    kept = candidate & (_local_maximum(np.where(zz > 0, strength, np.nan), window)
                        | _local_maximum(np.where(zz < 0, strength, np.nan), window))
    up = sh > 0
    if adjacent is not None:
        kept, up = _place(kept, up, np.asarray(adjacent, dtype=np.float64), ok, window - 1,
                          np.abs(sh))
    code = np.where(
        kept,
        _deviation_codes(up, direction),
        np.where(sig, SIGNIFICANT_OVERLAP, NONSIGNIFICANT_OVERLAP),
    )
    if appearance is not None:
        seen = np.asarray(appearance)
        code = np.where((seen == APPEARED) | (seen == VANISHED), seen, code)
    verdict: Int8Array = np.where(ok, code, NO_VERDICT).astype(np.int8)
    return verdict


PLACE_BELOW: Final = 0.3
"""A flag is moved only when its own adjacent releases moved less than this fraction of its
window shift: a step the window locates well is never moved by adjacent-median noise
(bimodal runs make single-release medians jump between modes)."""


def adjacent_change(estimate: npt.ArrayLike) -> FloatArray:
    """``(e[r] - e[r-1]) / |e[r-1]|`` of per-release estimates (functions, releases):
    the relative change of each adjacent pair (NaN where undefined)."""
    e = np.asarray(estimate, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        out: FloatArray = (e[:, 1:] - e[:, :-1]) / np.abs(e[:, :-1])
    return np.where(np.isfinite(out), out, np.nan)


def _place(
    kept: BoolArray, up: BoolArray, adjacent: FloatArray, ok: BoolArray, reach: int,
    size: FloatArray,
) -> tuple[BoolArray, BoolArray]:
    """Move each kept flag whose own adjacent releases moved less than half its window
    shift ``size`` to the boundary within ``reach`` whose adjacent releases changed most
    in the flag's direction (the windows say *that* the level moved, the adjacent medians
    *where*); a flag stays when no neighbour moved its way more than it did."""
    F, P = kept.shape  # noqa: N806
    sign = np.where(up, 1.0, -1.0)
    moved = np.where(ok, adjacent, np.nan)
    best = np.full((F, P), -np.inf)
    offset = np.zeros((F, P), dtype=np.int64)
    # Nearest boundaries first, so that ties go to the nearest (then the earlier) one.
    for off in sorted(range(-reach, reach + 1), key=lambda o: (abs(o), o)):
        if abs(off) >= P:
            continue
        shifted = np.full((F, P), np.nan)
        if off >= 0:
            shifted[:, : P - off] = moved[:, off:]
        else:
            shifted[:, -off:] = moved[:, : P + off]
        score = np.where(np.isnan(shifted), -np.inf, sign * shifted)
        better = score > best
        best = np.where(better, score, best)
        offset = np.where(better, off, offset)
    own = np.where(np.isnan(moved), -np.inf, sign * moved)
    misplaced = own < PLACE_BELOW * size
    offset = np.where((best > 0) & (best > own) & misplaced, offset, 0)
    f, k = np.nonzero(kept)
    target = k + offset[f, k]
    placed = np.zeros((F, P), dtype=np.bool_)
    placed[f, target] = True
    direction_up = up.copy()
    direction_up[f, target] = up[f, k]
    return placed, direction_up


def compare_matrix(
    samples: npt.ArrayLike,
    confidence: float = 0.95,
    *,
    rule: Rule = "paper",
    estimator: Estimator = "median",
    window: int = 3,
    fdr: float = 0.05,
    min_relative_effect: float = 0.1,
    direction: Direction = "lower_is_better",
) -> ComparisonMatrix:
    r"""Statistics and verdicts for every function and consecutive release pair.

    Parameters
    ----------
    samples : array_like of float64, shape (functions, releases, runs)
        Run times; NaN pads releases with fewer runs. Infinities raise.
    confidence : float, default 0.95
        Level of the per-release intervals and of the difference intervals.
    rule : {"paper", "recommended"}, default "paper"
        How verdicts are decided (below). ``diff``, ``diff_lo``, ``diff_hi`` and
        ``gap`` always describe the adjacent pair with the chosen estimator.
    estimator : {"median", "mean"}, default "median"
        Estimator of the paper rule's intervals and of ``diff``/``gap``.
    window : int, default 3
        Recommended rule: releases pooled on each side of a boundary (fewer at
        the ends of the series). 3 releases of 5 runs give 15 runs a side, enough
        for a rank test to reach the Benjamini–Hochberg thresholds of a large
        matrix; longer windows gain little power and blur nearby steps.
    fdr : float, default 0.05
        Recommended rule: false-discovery rate of the Benjamini–Hochberg step over
        all (function, boundary) p-values of the matrix.
    min_relative_effect : float, default 0.1
        Recommended rule: smallest relative change of the windowed medians that is
        reported as a deviation (practical significance, seed 003 §VI.A); 10% is
        well under the ×1.6 steps the rule is tuned for and above run-to-run
        jitter of medians of 15 runs.
    direction : {"lower_is_better", "higher_is_better"}, default "lower_is_better"
        Whether a larger value is worse (run times) or better (throughput): decides
        which deviations are regressions, for both rules. Differences, ``gap`` and
        ``shift`` are later − earlier either way.

    Returns
    -------
    ComparisonMatrix

    Raises
    ------
    ValueError
        ``samples`` not 3-D, infinite values, bad parameters.

    Notes
    -----
    A release with fewer than two runs gets NaN statistics, and both pairs it
    belongs to get :data:`NO_VERDICT` (-1) with NaN ``diff``/``gap``/p-values.

    **Paper rule** — as :func:`compare` for every cell; ``p_value`` is the two-sided
    p-value of the t statistic behind the difference interval (it excludes zero
    exactly when ``p_value < 1 - confidence``).

    **Recommended rule** — for the boundary between releases ``k`` and ``k+1``:

    1. pool the runs of releases ``k-window+1 .. k`` (left) and
       ``k+1 .. k+window`` (right); Mann–Whitney U (Mann & Whitney 1947) with
       average ranks for ties. The raw two-sided ``p_value`` is exact (null
       distribution of U, as ``scipy.stats.mannwhitneyu(method="exact")``) when
       the pooled runs have no ties and ``n_left * n_right <= 2500``; exact
       conditional on the ties (permutation distribution of the mid-rank sum)
       when runs are tied, at most :data:`EXACT_TIES_MAX_N` are pooled and the
       normal p-value is below :data:`EXACT_TIES_BELOW`; otherwise the normal
       approximation with tie and continuity corrections (as
       ``method="asymptotic"``). ``z`` (normal approximation) ranks the
       boundaries in step 4;
    2. ``q_value`` = Benjamini–Hochberg (1995) over every finite p-value of the
       matrix;
    3. ``shift = (med_R - med_L) / |med_L|`` of the pooled medians;
    4. the boundary is a deviation when ``q_value <= fdr``,
       ``|shift| >= min_relative_effect`` and ``|z|`` is the largest within
       ``window - 1`` boundaries on either side (a step makes every window that
       straddles it significant; only the best-placed boundary is kept). Its sign
       and ``direction`` give regression / improvement. Significant boundaries not kept are
       ``significant_overlap`` ("significant, not a deviation": the name is kept
       for the export contract);
    5. the verdict of the last ``window - 1`` boundaries is provisional: it can
       change when later releases arrive and fill their right-hand window.

    The rule assumes a level stays put for about ``window`` releases; it sees a
    one-release blip only weakly, and two steps closer than ``window`` releases
    are reported as one. Digressions (:func:`digressions`) use the verdicts of
    the chosen rule and the per-release intervals of ``estimator``.

    References
    ----------
    .. [1] H. B. Mann and D. R. Whitney, "On a test of whether one of two random
       variables is stochastically larger than the other", Ann. Math. Statist.
       18(1), 50-60, 1947.
    .. [2] Y. Benjamini and Y. Hochberg, J. R. Statist. Soc. B 57(1), 289-300, 1995.
    .. [3] A. Benbachir et al., QRS 2017 (seed 003), §III.D and §V.
    """
    check_confidence(confidence)
    _check_direction(direction)
    x = np.asarray(samples, dtype=np.float64)
    if x.ndim != 3:
        raise ValueError(f"samples must have shape (functions, releases, runs), got {x.shape}")
    if x.shape[1] < 2:
        raise ValueError("need at least two releases to compare")
    if window < 1:
        raise ValueError(f"window must be >= 1, got {window}")
    if not 0.0 < fdr < 1.0:
        raise ValueError(f"fdr must lie strictly between 0 and 1, got {fdr}")
    if min_relative_effect < 0:
        raise ValueError("min_relative_effect must be >= 0")
    if rule not in ("paper", "recommended"):
        raise ValueError(f"unknown rule {rule!r}")
    med = median_ci_array(x, confidence)
    mean = mean_ci_array(x, confidence)
    chosen = {"median": med, "mean": mean}.get(estimator)
    if chosen is None:
        raise ValueError(f"unknown estimator {estimator!r}")
    a = _slice(chosen, slice(None, -1))
    b = _slice(chosen, slice(1, None))
    absent = absent_releases(x)
    pairs = pair_statistics(a, b, confidence, direction=direction,
                            absent=(absent[:, :-1], absent[:, 1:]))
    paired = pairs.paired
    gap = pairs.gap
    if rule == "recommended":
        # The interval the recommended rule shows for the median: order statistics
        # (coverage on bimodal and quantised runs); Olive's stays the paper rule's.
        med = median_ci_array(x, confidence, method="order")
        if estimator == "median":
            chosen = med
            gap = np.where(paired, interval_gap(med.lo[:, :-1], med.hi[:, :-1], med.lo[:, 1:],
                                                med.hi[:, 1:]), np.nan)
    if rule == "paper":
        verdict = pairs.paper_verdict
        p_value = pairs.paper_p_value
        q_value = np.full(verdict.shape, np.nan)
        shift = np.full(verdict.shape, np.nan)
    else:
        tests = window_tests(x, window)
        p_value = np.where(paired, tests.p_value, np.nan)
        shift = np.where(paired, tests.shift, np.nan)
        q_value, verdict = recommended_verdicts(
            p_value,
            np.where(paired, tests.z, np.nan),
            shift,
            paired,
            window=window,
            fdr=fdr,
            min_relative_effect=min_relative_effect,
            direction=direction,
            appearance=pairs.paper_verdict,
            adjacent=adjacent_change(med.estimate),
        )
    return ComparisonMatrix(
        rule=rule,
        estimator=estimator,
        confidence=confidence,
        median=med,
        mean=mean,
        n=med.n,
        verdict=verdict,
        gap=gap,
        diff=pairs.diff,
        diff_lo=pairs.diff_lo,
        diff_hi=pairs.diff_hi,
        p_value=p_value,
        q_value=q_value,
        shift=shift,
        digression=digressions(verdict, chosen.lo, chosen.hi),
        direction=direction,
    )


def _slice(ia: IntervalArray, s: slice) -> IntervalArray:
    """The releases ``s`` (along axis 1) of a (functions, releases) interval array."""
    return IntervalArray(
        estimate=ia.estimate[:, s],
        lo=ia.lo[:, s],
        hi=ia.hi[:, s],
        se=ia.se[:, s],
        df=ia.df[:, s],
        n=ia.n[:, s],
    )


# --- issue 12: segmentation of each function's series (selectable, measured) -----------------

SEGMENT_PENALTY: Final = 18.0
"""Penalty per change point of :func:`segment_verdicts` at up to
:data:`SEGMENT_PENALTY_RUNS` runs per release, in units of the scaled empirical-distribution
cost (:func:`optimal_segments`). Measured on the dashboard-sized simulation
(docs/statistics.md §6c, seeds 0–19): 14 lets false flags reach 0.30% at 10 runs, 25 loses
6.5 points of recall at 5 runs; 16–19 all meet the targets."""

SEGMENT_PENALTY_RUNS: Final = 5
"""With ``m`` runs per release (a function's median over its releases), the penalty is
``SEGMENT_PENALTY * sqrt(max(1, m / SEGMENT_PENALTY_RUNS))``: a step's cost gain grows with
the runs, so more runs afford a stricter penalty. Measured at 10 runs (β ≈ 25.5 instead of
18): recall 99.0% → 98.9%, false flags 0.09% → 0.01%, flag changes later than 9 releases
13% → 6.5%, 95% of them within 11 releases instead of 14 (docs/statistics.md §6c)."""

SEGMENT_PENALTY_COST: Final = 72.0
"""A function whose runs, as one segment, cost less than this (:func:`optimal_segments`;
about 3.3 per run, so fewer than about 22 runs) gets a proportionally smaller penalty:
``min(..., C / SEGMENT_PENALTY_COST)`` times the penalty, a quarter of ``C`` at the default
:data:`SEGMENT_PENALTY`. ``C`` bounds what any segmentation can save, and a fully
separated ×3 step in 4 releases × 3 runs saves 16.5 of its 37.7, less than 18. Measured on
small series (docs/statistics.md §6c, ``compare_rules --small 20``): ×3 steps in 4 × 3
found 0% → 96–100%, false flags 0.04–0.06% per boundary at 4 × 3, 6 × 3 and 4 × 5 (worst
seed 0.14%); every series of the dashboard-sized simulation (24 releases, 5 or 10 runs)
keeps 18 or 25.5."""

SEGMENT_MAX_LENGTH: Final = 30
"""Longest segment of :func:`optimal_segments`, in releases: the cost grows with releases
× this length instead of releases squared. A level held longer gets a cut the rank test
does not confirm (docs/statistics.md §6c measures recall and false flags with and
without)."""

SEGMENT_PROVISIONAL: Final = 12
"""Last boundaries whose :func:`segment_verdicts` verdict is provisional. Measured by adding
the releases of the dashboard-sized simulation one at a time (docs/statistics.md §6c,
``python -m tests.simulations.compare_rules --provisional 20``): 95% of the verdict changes
happen within 12 releases after the boundary at 5 runs, within 11 at 10 runs."""


@dataclass(frozen=True)
class Segments:
    """Verdicts of :func:`segment_verdicts`, one column per boundary.

    Attributes
    ----------
    change : ndarray of bool
        The optimal segmentation puts a change point at the boundary.
    p_value : ndarray of float64
        Two-sided Mann–Whitney p-value between the two segments a change point
        separates (NaN elsewhere).
    shift : ndarray of float64
        ``exp(med_R - med_L) - 1`` of the two segments' median log times (NaN elsewhere).
    verdict : ndarray of int8
        Verdict codes (:data:`VERDICTS`).
    """

    change: BoolArray
    p_value: FloatArray
    shift: FloatArray
    verdict: Int8Array


def _log_times(x: FloatArray) -> FloatArray:
    """Log of the positive values; NaN for the rest (absent releases are all 0)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        out: FloatArray = np.where(x > 0, np.log(np.where(x > 0, x, 1.0)), np.nan)
    return out


def _nanmedian_rows(a: FloatArray) -> FloatArray:
    """Row medians ignoring NaN; NaN (no warning) for an all-NaN row."""
    s = np.sort(a, axis=1)  # NaN sort last
    n = np.sum(~np.isnan(a), axis=1)
    if a.shape[1] == 0:
        return np.full(a.shape[0], np.nan)
    lo = np.take_along_axis(s, np.maximum((n - 1) // 2, 0)[:, None], axis=1)[:, 0]
    hi = np.take_along_axis(s, np.maximum(n // 2, 0)[:, None], axis=1)[:, 0]
    out: FloatArray = np.where(n > 0, (lo + hi) / 2.0, np.nan)
    return out


def _ed_quantiles(y: FloatArray) -> tuple[FloatArray, FloatArray]:
    """The quantiles of each function's empirical-distribution cost and its scale.

    For a function with ``N`` finite runs (``N >= 2``), ``K = ceil(4 log N)`` levels
    ``q_k``: the quantiles (linear interpolation, as ``numpy.nanquantile``) of all its runs
    at ``p_k = 1 / (1 + (2N - 1) exp(c (2k - 1) / K))``, ``c = -log(2N - 1)``, ``k = 1..K``
    (Haynes et al. 2017, §3: more levels in the tails). Columns past a function's ``K``
    are ``-inf`` (they count no run and add nothing to the cost). The scale is
    ``-2c / K`` (0 below two runs).

    Returns ``(levels, scale)`` of shapes (functions, max K) and (functions,).
    """
    F = y.shape[0]  # noqa: N806
    flat = np.sort(y.reshape(F, -1), axis=1)  # NaN sort last
    count = np.sum(~np.isnan(flat), axis=1)
    n_all = np.maximum(count, 2).astype(np.float64)
    levels_k = np.where(count >= 2, np.ceil(4.0 * np.log(n_all)), 0).astype(np.int64)
    width = max(int(levels_k.max()), 1) if F else 1
    k = np.arange(1, width + 1)[None, :]
    c = -np.log(2.0 * n_all - 1.0)[:, None]
    kf = np.maximum(levels_k, 1)[:, None]
    p = 1.0 / (1.0 + (2.0 * n_all[:, None] - 1.0) * np.exp(c / kf * (2 * k - 1)))
    # numpy.quantile's "linear" method, operation for operation (a level landing on a run
    # counts it half, so the last bit matters).
    pos = (n_all[:, None] - 1.0) * p
    lo = np.floor(pos).astype(np.int64)
    hi = np.minimum(lo + 1, np.maximum(count - 1, 0)[:, None])
    frac = pos - lo
    a = np.take_along_axis(flat, lo, axis=1)
    b = np.take_along_axis(flat, hi, axis=1)
    q = np.where(frac >= 0.5, b - (b - a) * (1.0 - frac), a + (b - a) * frac)
    levels: FloatArray = np.where(k <= levels_k[:, None], q, -np.inf)
    scale: FloatArray = np.where(levels_k > 0, -2.0 * c[:, 0] / np.maximum(levels_k, 1), 0.0)
    return levels, scale


_SEGMENT_CHUNK: Final = 128
"""Functions segmented at once (bounds the per-run comparisons of :func:`_partition`)."""


@dataclass(frozen=True)
class _Tables:
    """Prefix tables of one chunk of functions (:func:`_tables`)."""

    below: npt.NDArray[np.int32]  # (F, R + 1, K): doubled counts below each level
    size: npt.NDArray[np.int32]  # (F, R + 1): doubled runs
    g: FloatArray  # g(j / 2) = (j / 2) log(j / 2), j = 0, 1, ...
    scale: FloatArray  # (F,)

    def cost(self, starts: IntArray, t: int) -> FloatArray:
        """Cost of releases ``s .. t-1`` of each function, for each ``s`` of ``starts``:
        shape (F, len(starts))."""
        K = self.below.shape[2]  # noqa: N806
        m = self.below[:, t, None, :] - self.below[:, starts, :]  # (F, starts, K)
        n = self.size[:, t, None] - self.size[:, starts]  # (F, starts)
        terms = self.g[m]
        terms += self.g[n[:, :, None] - m]
        out: FloatArray = self.scale[:, None] * (K * self.g[n] - np.add.reduce(terms, axis=2))
        return out

    def whole(self) -> FloatArray:
        """Cost of all the releases of each function as one segment."""
        return self.cost(np.zeros(1, dtype=np.int64), self.size.shape[1] - 1)[:, 0]


def _tables(y: FloatArray) -> _Tables:
    """The prefix tables of :func:`_partition` for ``y`` (functions, releases, runs).

    ``below[r, k]`` is twice the empirical distribution function at level ``q_k`` times
    the runs of releases ``< r`` (``2 #(y < q_k) + #(y = q_k)``, an integer), ``size[r]``
    their runs, doubled too. With ``g(x) = x log x`` tabulated at half-integers, the cost of
    releases ``s .. t-1`` is ``scale · Σ_k [g(n) - g(m_k) - g(n - m_k)]`` (``n`` runs,
    ``m_k`` of them below ``q_k``), which is ``-scale · n Σ_k [F log F + (1 - F) log(1 - F)]``
    (levels ``-inf`` past a function's ``K`` add ``g(n) - g(0) - g(n) = 0``).
    """
    F, R, _ = y.shape  # noqa: N806
    levels, scale = _ed_quantiles(y)
    K = levels.shape[1]  # noqa: N806
    # int32 counts: half the memory traffic of the lookups below (a series would need
    # over a billion runs to overflow them).
    below = np.zeros((F, R + 1, K), dtype=np.int32)
    doubled = 2 * np.sum(y[:, :, :, None] < levels[:, None, None, :], axis=2) + np.sum(
        y[:, :, :, None] == levels[:, None, None, :], axis=2
    )
    np.cumsum(doubled, axis=1, out=below[:, 1:])
    size = np.zeros((F, R + 1), dtype=np.int32)
    np.cumsum(2 * np.sum(~np.isnan(y), axis=2), axis=1, out=size[:, 1:])
    half = np.arange(int(size[:, R].max(initial=0)) + 1) / 2.0
    g = np.zeros(half.shape)
    np.multiply(half[1:], np.log(half[1:]), out=g[1:])  # g(j / 2), j = 0, 1, ...
    return _Tables(below, size, g, scale)


def _partition(tables: _Tables, penalty: FloatArray, max_length: int) -> IntArray:
    """Optimal partitioning of each function of ``tables`` (:func:`_tables`):
    ``last[:, t]`` is the first release of the last segment of the best segmentation of
    releases ``0 .. t-1`` into segments of at most ``max_length`` releases."""
    F, R = tables.size.shape[0], tables.size.shape[1] - 1  # noqa: N806
    best = np.zeros((F, R + 1))
    last = np.zeros((F, R + 1), dtype=np.int64)
    rows = np.arange(F)
    for t in range(1, R + 1):
        s0 = max(0, t - max_length)
        candidates = best[:, s0:t] + tables.cost(np.arange(s0, t), t)
        if s0 == 0:
            candidates[:, 1:] += penalty[:, None]
        else:
            candidates += penalty[:, None]
        arg = np.argmin(candidates, axis=1)
        last[:, t] = s0 + arg
        best[:, t] = candidates[rows, arg]
    return last


def _change_points(
    y: FloatArray, penalty_of: Callable[[slice, FloatArray], FloatArray],
    max_length: int | None,
) -> BoolArray:
    """Change points of the optimal segmentation of each function of ``y``, chunk by
    chunk (:func:`optimal_segments`); ``penalty_of(rows, whole)`` is the penalty of the
    functions ``rows`` given the cost of all their runs as one segment (``whole``, from the
    tables the recursion's costs come from)."""
    if max_length is not None and max_length < 1:
        raise ValueError("max_length must be >= 1 or None")
    F, R, _ = y.shape  # noqa: N806
    if R < 2:
        return np.zeros((F, 0), dtype=np.bool_)
    max_length = R if max_length is None else min(max_length, R)
    last = np.zeros((F, R + 1), dtype=np.int64)
    for lo in range(0, F, _SEGMENT_CHUNK):
        part = slice(lo, min(F, lo + _SEGMENT_CHUNK))
        tables = _tables(y[part])
        last[part] = _partition(tables, penalty_of(part, tables.whole()), max_length)
    rows = np.arange(F)
    change = np.zeros((F, R - 1), dtype=np.bool_)
    t_now = np.full(F, R)
    for _ in range(R):
        start = last[rows, t_now]
        cut = start > 0
        change[rows[cut], start[cut] - 1] = True
        t_now = np.where(cut, start, 0)
        if not cut.any():
            break
    return change


def optimal_segments(
    log_times: npt.ArrayLike,
    penalty: float | npt.ArrayLike = SEGMENT_PENALTY,
    *,
    max_length: int | None = SEGMENT_MAX_LENGTH,
) -> BoolArray:
    r"""Change points of the penalised empirical-distribution segmentation of each row.

    Parameters
    ----------
    log_times : array_like of float64, shape (functions, releases, runs)
        Log run times, NaN for missing runs (any monotone transform gives the same
        result: the cost depends on ranks only).
    penalty : float or array_like of shape (functions,), default :data:`SEGMENT_PENALTY`
        Cost of one change point, :math:`\beta`, for every function or for each.
    max_length : int or None, default :data:`SEGMENT_MAX_LENGTH`
        Longest segment, in releases; ``None``: unbounded.

    Returns
    -------
    ndarray of bool, shape (functions, releases - 1)
        True at boundary ``k`` (between releases ``k`` and ``k+1``) when a segment ends
        at release ``k``.

    Notes
    -----
    Each function's releases are split into segments of consecutive releases
    minimising

    .. math:: \sum_{\text{segments } S} C(S) + \beta \, (\#\text{segments} - 1),\qquad
       C(S) = -\frac{2c}{K} \, n_S \sum_{k=1}^{K} \Big[ \hat F_S(q_k) \log \hat F_S(q_k)
       + \big(1 - \hat F_S(q_k)\big) \log\big(1 - \hat F_S(q_k)\big) \Big]

    the nonparametric (empirical-distribution) cost of Zou et al. (2014) in the
    discretised form of Haynes, Fearnhead & Eckley (2017, ``changepoint.np``):
    :math:`n_S` runs in the segment, :math:`\hat F_S(q) = (\#\{y < q\} + \tfrac12
    \#\{y = q\}) / n_S` its empirical distribution function, :math:`K = \lceil 4 \log N
    \rceil` levels :math:`q_k` spread over the function's :math:`N` runs with more of
    them in the tails, :math:`c = -\log(2N - 1)` (:func:`_ed_quantiles`). It is minus
    the binomial log-likelihood of the segment's runs at each level, so a segment pays
    for any change of the distribution (level, spread, the share of a second mode), not
    only of its median, and it is scale-free (ranks only). The minimum is found exactly
    by optimal partitioning (Jackson et al. 2005), vectorised over functions:
    :math:`F(t) = \min_{t - L \le s < t} F(s) + C(s..t-1) + \beta`, ``L = max_length``;
    each segment cost is :math:`O(K)` from prefix tables of the counts below each level
    (:func:`_partition`): :math:`O(R \min(R, L) K)` per function of ``R`` releases.

    References
    ----------
    .. [1] B. Jackson et al., "An algorithm for optimal partitioning of data on an
       interval", IEEE Signal Processing Letters 12(2), 105-108, 2005.
    .. [2] C. Zou, G. Yin, L. Feng and Z. Wang, "Nonparametric maximum likelihood approach
       to multiple change-point problems", Annals of Statistics 42(3), 970-1002, 2014.
    .. [3] K. Haynes, P. Fearnhead and I. A. Eckley, "A computationally efficient
       nonparametric approach for changepoint detection", Statistics and Computing
       27(5), 1293-1305, 2017.
    """
    y = np.asarray(log_times, dtype=np.float64)
    if y.ndim != 3:
        raise ValueError(f"log_times must have shape (functions, releases, runs), got {y.shape}")
    beta = np.broadcast_to(np.asarray(penalty, dtype=np.float64), (y.shape[0],))
    if not np.all(beta >= 0):
        raise ValueError("penalty must be >= 0")
    return _change_points(y, lambda rows, _whole: beta[rows], max_length)


def _whole_cost(y: FloatArray) -> FloatArray:
    """Each function's empirical-distribution cost of all its runs as one segment
    (:func:`optimal_segments`): the largest cost any segmentation can save. (The
    segmentation takes it from the tables it builds anyway, :func:`_change_points`.)"""
    F, R, _ = y.shape  # noqa: N806
    out = np.zeros(F)
    for lo in range(0, F, _SEGMENT_CHUNK):
        part = slice(lo, min(F, lo + _SEGMENT_CHUNK))
        out[part] = _tables(y[part]).whole()
    return out


def _segment_penalty(y: FloatArray, penalty: float) -> Callable[[slice, FloatArray], FloatArray]:
    """Each function's penalty of :func:`segment_verdicts` (log times ``y``) as
    :func:`_change_points` asks for it: ``penalty * min(sqrt(max(1, m /
    SEGMENT_PENALTY_RUNS)), C / SEGMENT_PENALTY_COST)``, ``C`` the whole-series cost."""
    given = np.sum(~np.isnan(y), axis=2).astype(np.float64)
    per_release = _nanmedian_rows(np.where(given > 0, given, np.nan))
    runs = np.sqrt(np.fmax(1.0, per_release / SEGMENT_PENALTY_RUNS))  # NaN: no runs → 1

    def penalty_of(rows: slice, whole: FloatArray) -> FloatArray:
        out: FloatArray = penalty * np.fmin(runs[rows], whole / SEGMENT_PENALTY_COST)
        return out

    return penalty_of


def segment_verdicts(
    samples: npt.ArrayLike,
    *,
    penalty: float = SEGMENT_PENALTY,
    fdr: float = 0.05,
    min_relative_effect: float = 0.1,
    direction: Direction = "lower_is_better",
    max_length: int | None = SEGMENT_MAX_LENGTH,
) -> Segments:
    r"""Change points of each function's series, confirmed by rank tests (issue 12).

    Parameters
    ----------
    samples : array_like of float64, shape (functions, releases, runs)
        Run times, NaN-padded; values ``<= 0`` (absent releases) are left out.
    penalty : float, default :data:`SEGMENT_PENALTY`
        Per change point at up to :data:`SEGMENT_PENALTY_RUNS` runs per release; a
        function with a median of ``m`` runs per release whose runs, as one segment, cost
        ``C`` (:func:`optimal_segments`) gets
        ``penalty * min(sqrt(max(1, m / SEGMENT_PENALTY_RUNS)), C / SEGMENT_PENALTY_COST)``:
        more runs per release afford a stricter penalty, and a small series (fewer than
        about 22 runs) a smaller one, since no segmentation can save more than ``C``.
    fdr : float, default 0.05
        False-discovery rate of the Benjamini–Hochberg step.
    min_relative_effect : float, default 0.1
        Smallest ``|shift|`` reported as a deviation (as :func:`compare_matrix`).
    direction : {"lower_is_better", "higher_is_better"}, default "lower_is_better"
    max_length : int or None, default :data:`SEGMENT_MAX_LENGTH`
        Longest segment, in releases, see :func:`optimal_segments`.

    Returns
    -------
    Segments

    Notes
    -----
    1. :func:`optimal_segments` of the log times, with the penalty above;
    2. each change point ``k`` is tested: Mann–Whitney U (Mann & Whitney 1947, exact
       where :func:`compare_matrix` says so) of the runs of the segment ending at
       release ``k`` against the runs of the segment starting at ``k+1``;
    3. Benjamini–Hochberg (1995) over the **whole matrix** (functions × boundaries),
       boundaries without a change point counting as ``p = 1``: the segmentation chose
       where to test, so only the family of every boundary keeps its false flags
       near the rate of the window rule (measured: the family of the change points
       alone let 0.4–0.7% of stable boundaries through);
    4. a change point rejected at ``fdr`` with ``|shift| >= min_relative_effect`` is a
       regression or improvement by its sign and ``direction``; rejected with a smaller
       shift it is ``significant_overlap``; every other boundary with two releases of
       at least :data:`MIN_RUNS` runs is ``nonsignificant_overlap``, the rest
       :data:`NO_VERDICT`. Appeared / vanished functions are not decided here
       (:func:`pair_statistics` does).

    A segment lasts as long as the level holds, so a step is tested against all the
    releases since the previous change and until the next one: a 2-release digression
    gets both ends, a step at the newest release is tested against the history since
    the previous change point (at most ``max_length`` releases). Any verdict may change
    when releases are added (the segmentation is global); the last
    :data:`SEGMENT_PROVISIONAL` boundaries are marked provisional (:func:`provisional_pairs`).
    """
    _check_direction(direction)
    if not 0.0 < fdr < 1.0:
        raise ValueError(f"fdr must lie strictly between 0 and 1, got {fdr}")
    x = np.asarray(samples, dtype=np.float64)
    if x.ndim != 3:
        raise ValueError(f"samples must have shape (functions, releases, runs), got {x.shape}")
    F, R, n = x.shape  # noqa: N806
    y = _log_times(x)
    if penalty < 0:
        raise ValueError("penalty must be >= 0")
    change = _change_points(y, _segment_penalty(y, penalty), max_length)
    p = np.full((F, max(R - 1, 0)), np.nan)
    shift = np.full((F, max(R - 1, 0)), np.nan)
    f, k = np.nonzero(change)
    if len(f):
        # Each change point's segments: from the previous change point (or the start) to
        # the next one (or the end).
        cuts = np.concatenate([np.zeros((F, 1), dtype=np.bool_), change,
                               np.zeros((F, 1), dtype=np.bool_)], axis=1)
        release = np.arange(R)
        # start[f, r]: first release of r's segment; end[f, r]: its last release + 1.
        start = np.maximum.accumulate(np.where(cuts[:, :-1], release, 0), axis=1)
        end = np.minimum.accumulate(np.where(cuts[:, 1:], release + 1, R)[:, ::-1],
                                    axis=1)[:, ::-1]
        # The runs of each side, as wide as the longest side (not the whole series).
        before = k[:, None] - np.arange(int((k - start[f, k]).max()) + 1)[None, :]
        after = k[:, None] + 1 + np.arange(int((end[f, k + 1] - k - 1).max()))[None, :]
        in_left = before >= start[f, k][:, None]
        in_right = after < end[f, k + 1][:, None]
        rows = f[:, None]
        left = np.where(in_left[:, :, None], y[rows, np.where(in_left, before, 0)],
                        np.nan).reshape(len(f), -1)
        right = np.where(in_right[:, :, None], y[rows, np.where(in_right, after, 0)],
                         np.nan).reshape(len(f), -1)
        _, pv, _ = _mann_whitney_rows(left, right)
        p[f, k] = pv
        shift[f, k] = np.expm1(_nanmedian_rows(right) - _nanmedian_rows(left))
    counted = np.where(np.isnan(p), 1.0, p)
    significant = benjamini_hochberg_rejections(counted, fdr) & change
    with np.errstate(invalid="ignore"):
        large = np.abs(shift) >= min_relative_effect
    runs = np.sum(~np.isnan(x), axis=2)
    paired = (runs[:, :-1] >= MIN_RUNS) & (runs[:, 1:] >= MIN_RUNS)
    code = np.where(
        significant & large,
        _deviation_codes(shift > 0, direction),
        np.where(significant, SIGNIFICANT_OVERLAP, NONSIGNIFICANT_OVERLAP),
    )
    verdict: Int8Array = np.where(paired, code, NO_VERDICT).astype(np.int8)
    return Segments(change=change, p_value=p, shift=shift, verdict=verdict)
