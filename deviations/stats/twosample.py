"""Any two releases compared function by function, the false-discovery rate controlled.

The release rules (:mod:`~deviations.stats.releases`) judge consecutive releases; a user
whose culprit hides in a range of releases compares two arbitrary ones, a base ``a`` and a
new ``b``, for every function at once: :func:`compare_two`. Each function gets both
medians with their intervals (Olive 2005), the difference ``median(b) - median(a)`` with
its interval, a two-sample p-value, Benjamini–Hochberg over all the functions of the
comparison, and a verdict that also asks for a minimal change (practical significance).

Verdicts (strings, :data:`TWO_SAMPLE_VERDICTS`):

===================  ===================================================================
``regression``       significant after Benjamini–Hochberg, the change passes both minimal
                     changes, and its sign is the worse one for ``direction``
``improvement``      the same with the better sign
``below_threshold``  significant, but smaller than a minimal change (e.g. microseconds)
``unchanged``        not significant
``appeared``         absent from every run of ``a``, present in ``b`` (never a test)
``vanished``         present in ``a``, absent from every run of ``b`` (never a test)
===================  ===================================================================

Sign convention: every difference is later − earlier, ``b - a``.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import comb
from typing import Final, Literal

import numpy as np
import numpy.typing as npt

from ._checks import check_confidence
from ._typing import DIRECTIONS, BoolArray, Direction, FloatArray, Int8Array
from .intervals import MIN_RUNS, Interval, diff_ci_array, mean_ci_array, median_ci_array
from .multiple import benjamini_hochberg
from .ranks import _mann_whitney_rows
from .releases.paper import _t_p_value

__all__ = [
    "APPEARED",
    "BELOW_THRESHOLD",
    "IMPROVEMENT",
    "REGRESSION",
    "TWO_SAMPLE_VERDICTS",
    "UNCHANGED",
    "VANISHED",
    "TwoSampleComparison",
    "compare_two",
    "rank_test_resolves",
]

TwoSampleVerdict = Literal[
    "unchanged", "below_threshold", "regression", "improvement", "appeared", "vanished"
]
TestName = Literal["auto", "rank", "welch", "median"]

UNCHANGED: Final = 0
BELOW_THRESHOLD: Final = 1
REGRESSION: Final = 2
IMPROVEMENT: Final = 3
APPEARED: Final = 4
VANISHED: Final = 5
TWO_SAMPLE_VERDICTS: Final[tuple[TwoSampleVerdict, ...]] = (
    "unchanged", "below_threshold", "regression", "improvement", "appeared", "vanished",
)
"""``TWO_SAMPLE_VERDICTS[code]`` is the string of a verdict code."""


@dataclass(frozen=True, eq=False)
class TwoSampleComparison:
    """Per function (one row of the inputs), the comparison of ``a`` (base) and ``b`` (new).

    Attributes
    ----------
    median_a, median_b : Interval of float64 arrays
        Each side's median with its interval; NaN where the function is absent there.
    diff : Interval of float64 arrays
        ``median(b) - median(a)`` with its interval (Olive standard errors,
        Welch–Satterthwaite degrees of freedom: ``intervals.diff_ci_array``).
    relative : ndarray of float64
        ``diff / |median(a)|`` (``±inf`` when ``median(a)`` is 0 and ``b``'s is not).
    p_value, q_value : ndarray of float64
        Raw two-sided p-value of ``test`` and its Benjamini–Hochberg q-value over all
        tested functions; NaN for appeared and vanished functions.
    verdict : ndarray of int8
        Codes of :data:`TWO_SAMPLE_VERDICTS`.
    significant : ndarray of bool
        ``q_value <= fdr`` and the interval of ``diff`` excludes 0: the change the numbers
        shown beside it support (regression, improvement or below the threshold).
    test : {"rank", "welch", "median"}
        The test that gave the p-values (see :func:`compare_two`).
    """

    median_a: Interval[FloatArray]
    median_b: Interval[FloatArray]
    diff: Interval[FloatArray]
    relative: FloatArray
    p_value: FloatArray
    q_value: FloatArray
    verdict: Int8Array
    significant: BoolArray
    test: Literal["rank", "welch", "median"]
    fdr: float
    min_relative_change: float
    min_absolute_change: float


def rank_test_resolves(n_a: int, n_b: int, tests: int, fdr: float) -> bool:
    r"""Whether an exact Mann–Whitney test of ``n_a`` against ``n_b`` runs can pass
    Benjamini–Hochberg among ``tests`` tests even as the only change.

    The smallest two-sided exact p-value (the two samples completely separated) is
    :math:`2 / \binom{n_a + n_b}{n_a}`; the first Benjamini–Hochberg threshold is
    ``fdr / tests``. Five runs a side give 2/252 = 0.0079: a lone change among more than
    six functions can never be found by the rank test.
    """
    if n_a < 1 or n_b < 1 or tests < 1:
        return False
    return 2.0 / comb(n_a + n_b, n_a) <= fdr / tests


def compare_two(
    a: npt.ArrayLike,
    b: npt.ArrayLike,
    confidence: float = 0.95,
    *,
    fdr: float = 0.05,
    min_relative_change: float = 0.1,
    min_absolute_change: float = 0.0,
    test: TestName = "auto",
    direction: Direction = "lower_is_better",
) -> TwoSampleComparison:
    r"""Compare two releases for every function: intervals, tests, FDR, verdicts.

    Parameters
    ----------
    a, b : array_like of float64, shapes (functions, runs_a) and (functions, runs_b)
        Run values of the base (``a``) and the new (``b``) release, one row per function
        (the same functions in the same order). A row that is NaN in every run of one
        side is a function absent from that side (``appeared`` / ``vanished``); no other
        NaN is allowed (a function absent from one run was not called there: 0).
    confidence : float, default 0.95
        Level of the medians' and the difference's intervals.
    fdr : float, default 0.05
        False-discovery rate of the Benjamini–Hochberg step over all tested functions.
    min_relative_change : float, default 0.1
        Smallest ``|diff| / |median(a)|`` reported as a regression or improvement.
        10% is the recommended release rule's ``min_relative_effect``: well above the
        run-to-run jitter of medians, well under the changes users chase.
    min_absolute_change : float, default 0
        Smallest ``|diff|`` reported, in the values' unit: keeps a change of a few
        clock ticks of a tiny function (3 → 4 µs is +33%) from being flagged.
    test : {"auto", "rank", "welch", "median"}, default "auto"
        ``"rank"``: exact Mann–Whitney (:mod:`~deviations.stats.ranks`: exact without
        ties, exact permutation distribution given ties, normal approximation for large
        samples). ``"welch"``: Welch's t test of the means. ``"median"``: the t test
        behind the medians' difference interval, ``diff / SE_d`` with Olive's standard
        errors and Welch–Satterthwaite degrees of freedom. ``"auto"``: the rank test when
        it can resolve a lone change (:func:`rank_test_resolves`), otherwise Welch's test
        (few runs: 5 a side never reach ``0.05 / 16`` with ranks, and Olive's standard
        error of a median of 5 runs is half their range, too wide to pass
        Benjamini–Hochberg for less than a doubling; docs/statistics.md has the figures).
    direction : {"lower_is_better", "higher_is_better"}, default "lower_is_better"
        Whether a larger value is worse; decides regression against improvement only.

    Returns
    -------
    TwoSampleComparison

    Raises
    ------
    ValueError
        Shapes that do not match, fewer than two runs a side, NaN outside whole absent
        rows, infinite values, bad parameters.

    Notes
    -----
    1. Medians and intervals per side (Olive 2005, ``intervals.median_ci_array``);
       ``diff`` and its interval as ``intervals.diff_ci_array``.
    2. ``p_value`` of every function present on both sides, by ``test``; Welch's is
       :math:`t = (\bar b - \bar a) / \sqrt{s_a^2/n_a + s_b^2/n_b}` with
       Welch–Satterthwaite degrees of freedom (Welch 1947).
    3. ``q_value``: Benjamini–Hochberg (1995) over those p-values.
    4. *significant*: ``q_value <= fdr`` **and** the interval of ``diff`` excludes 0.
       The test and the interval are different methods (a rank test of the whole
       distributions, or Welch's of the means, against Olive's interval of the medians'
       difference): a change flagged beside an interval that holds 0 contradicted the
       numbers shown with it (it was, on the compare page's call tree), so both must agree.
    5. ``regression`` / ``improvement`` when significant,
       ``|relative| >= min_relative_change`` and ``|diff| >= min_absolute_change``,
       the sign of ``diff`` and ``direction`` deciding which; ``below_threshold`` when
       only significant; else ``unchanged``.

    References
    ----------
    .. [1] H. B. Mann and D. R. Whitney, Ann. Math. Statist. 18(1), 50-60, 1947.
    .. [2] Y. Benjamini and Y. Hochberg, J. R. Statist. Soc. B 57(1), 289-300, 1995.
    .. [3] D. J. Olive, "A simple confidence interval for the median", 2005.
    .. [4] B. L. Welch, Biometrika 34, 28-35, 1947.
    """
    check_confidence(confidence)
    if direction not in DIRECTIONS:
        raise ValueError(f"unknown direction {direction!r}, expected one of {DIRECTIONS}")
    if not 0.0 < fdr < 1.0:
        raise ValueError(f"fdr must lie strictly between 0 and 1, got {fdr}")
    if min_relative_change < 0 or min_absolute_change < 0:
        raise ValueError("minimal changes must be >= 0")
    if test not in ("auto", "rank", "welch", "median"):
        raise ValueError(f"unknown test {test!r}, expected auto, rank, welch or median")
    xa = _side(a, "a")
    xb = _side(b, "b")
    if xa.shape[0] != xb.shape[0]:
        raise ValueError(f"a and b need the same functions (rows): {xa.shape[0]} != "
                         f"{xb.shape[0]}")
    in_a = ~np.all(np.isnan(xa), axis=1)
    in_b = ~np.all(np.isnan(xb), axis=1)
    both = in_a & in_b
    ia = median_ci_array(xa, confidence)
    ib = median_ci_array(xb, confidence)
    d = diff_ci_array(ia, ib, confidence)
    with np.errstate(invalid="ignore", divide="ignore"):
        relative = d.estimate / np.abs(ia.estimate)
    tested = int(np.count_nonzero(both))
    chosen: Literal["rank", "welch", "median"]
    if test == "auto":
        resolves = rank_test_resolves(xa.shape[1], xb.shape[1], max(tested, 1), fdr)
        chosen = "rank" if resolves else "welch"
    else:
        chosen = test
    p = np.full(both.shape, np.nan)
    if tested:
        if chosen == "rank":
            _, p_rank, _ = _mann_whitney_rows(xa[both], xb[both])
            p[both] = p_rank
        elif chosen == "welch":
            means = diff_ci_array(mean_ci_array(xa, confidence), mean_ci_array(xb, confidence),
                                  confidence)
            p[both] = _t_p_value(means)[both]
        else:
            p[both] = _t_p_value(d)[both]
    q = benjamini_hochberg(p)
    excludes_zero = (d.lo > 0) | (d.hi < 0)
    significant = both & (q <= fdr) & excludes_zero
    large = (np.abs(relative) >= min_relative_change) & (np.abs(d.estimate) >= min_absolute_change)
    worse = d.estimate > 0 if direction == "lower_is_better" else d.estimate < 0
    code = np.where(
        significant & large,
        np.where(worse, REGRESSION, IMPROVEMENT),
        np.where(significant, BELOW_THRESHOLD, UNCHANGED),
    )
    code = np.where(in_a & ~in_b, VANISHED, np.where(~in_a & in_b, APPEARED, code))
    return TwoSampleComparison(
        median_a=Interval(ia.estimate, ia.lo, ia.hi),
        median_b=Interval(ib.estimate, ib.lo, ib.hi),
        diff=Interval(d.estimate, d.lo, d.hi),
        relative=np.where(both, relative, np.nan),
        p_value=p,
        q_value=q,
        verdict=code.astype(np.int8),
        significant=significant,
        test=chosen,
        fdr=fdr,
        min_relative_change=min_relative_change,
        min_absolute_change=min_absolute_change,
    )


def _side(x: npt.ArrayLike, name: str) -> FloatArray:
    """One side's (functions, runs) values; NaN only as whole rows (absent functions)."""
    arr = np.asarray(x, dtype=np.float64)
    if arr.ndim != 2:
        raise ValueError(f"{name} must have shape (functions, runs), got {arr.shape}")
    if arr.shape[1] < MIN_RUNS:
        raise ValueError(f"{name} needs at least {MIN_RUNS} runs, got {arr.shape[1]}")
    if np.any(np.isinf(arr)):
        raise ValueError(f"{name} has infinite values")
    nan = np.isnan(arr)
    partial: BoolArray = np.any(nan, axis=1) & ~np.all(nan, axis=1)
    if np.any(partial):
        raise ValueError(f"{name}: NaN must fill a whole row (a function absent from every "
                         f"run); row {int(np.flatnonzero(partial)[0])} has some")
    return arr
