"""Confidence intervals for one release's runs and for the difference of two releases.

Scalar functions (:func:`median_ci`, :func:`mean_ci`, :func:`median_diff_ci`,
:func:`mean_diff_ci`) take one 1-D sample of run times and raise on anything that
is not at least two finite numbers. Their vectorised counterparts
(:func:`median_ci_array`, :func:`mean_ci_array`, :func:`diff_ci_array`) work on
arrays of shape ``(..., n_runs)`` where a ragged number of runs is padded with NaN;
cells with fewer than two runs give NaN. The scalar functions call the vectorised
ones, so both agree up to floating-point summation order.

Every interval is an :class:`Interval` ``(estimate, lo, hi)``; the vectorised functions
return its array form :class:`IntervalArray`, which adds what a difference interval is
built from (standard error, degrees of freedom, run count). Differences are later −
earlier: ``estimate(b) - estimate(a)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, Literal, TypeVar

import numpy as np
import numpy.typing as npt

# scipy.special, not scipy.stats: the same quantiles at a fraction of the import time, which
# every CLI command and worker start pays (docs/statistics.md, "Import time").
from scipy import special  # type: ignore[import-untyped]  # no scipy-stubs in the venv

from ._checks import as_sample, check_confidence
from ._typing import FloatArray, IntArray

__all__ = [
    "MIN_RUNS",
    "Interval",
    "IntervalArray",
    "diff_ci_array",
    "mean_ci",
    "mean_ci_array",
    "mean_diff_ci",
    "median_ci",
    "median_ci_array",
    "median_diff_ci",
    "olive_ranks",
    "order_ranks",
]

MIN_RUNS = 2
"""Fewest runs an interval is computed from: one run has no spread to estimate."""

V = TypeVar("V", float, FloatArray)
MedianMethod = Literal["olive", "bonett_price", "order"]


@dataclass(frozen=True)
class Interval(Generic[V]):
    """A point estimate with a two-sided confidence interval ``[lo, hi]``.

    The one interval type of the package: the fields are floats for one interval
    (``Interval[float]``) or arrays of one shape for many (``Interval[FloatArray]``, see
    :class:`IntervalArray`). A difference is always later − earlier.
    """

    estimate: V
    lo: V
    hi: V


@dataclass(frozen=True)
class IntervalArray(Interval[FloatArray]):
    """Element-wise intervals of a vectorised computation: an :class:`Interval` of arrays
    with what a difference interval needs (:func:`diff_ci_array`).

    Every field has the shape of the input without its last (runs) axis. Cells
    with fewer than :data:`MIN_RUNS` runs hold NaN (``n`` holds the true count).

    Attributes
    ----------
    estimate, lo, hi : ndarray of float64
        Point estimate and confidence limits.
    se : ndarray of float64
        Standard error used for the interval.
    df : ndarray of float64
        Degrees of freedom of the t quantile (``inf`` for a normal quantile).
    n : ndarray of int64
        Number of finite runs in the cell.
    """

    se: FloatArray
    df: FloatArray
    n: IntArray


def _as_sample(x: npt.ArrayLike, name: str = "x") -> FloatArray:
    """One release's runs, refusing what has no honest interval."""
    return as_sample(x, name, minimum=MIN_RUNS, unit="runs")


def _as_padded(x: npt.ArrayLike) -> FloatArray:
    """Runs along the last axis; NaN marks a missing run, infinities raise."""
    arr = np.asarray(x, dtype=np.float64)
    if arr.ndim < 1:
        raise ValueError("samples need at least one axis (the runs)")
    if np.any(np.isinf(arr)):
        raise ValueError("samples contain infinite values (use NaN for missing runs)")
    return arr


def _order_stat(sorted_x: FloatArray, index: IntArray) -> FloatArray:
    """``sorted_x[..., index]`` per cell (0-based index, clipped into range)."""
    idx = np.clip(index, 0, sorted_x.shape[-1] - 1)[..., np.newaxis]
    out: FloatArray = np.take_along_axis(sorted_x, idx, axis=-1)[..., 0]
    return out


def _sorted_median(s: FloatArray, n: IntArray) -> FloatArray:
    """Sample median of NaN-padded rows already sorted ascending (NaN last)."""
    lo = _order_stat(s, (n - 1) // 2)
    hi = _order_stat(s, n // 2)
    med: FloatArray = 0.5 * (lo + hi)
    return med


def _t_quantile(confidence: float, df: FloatArray) -> FloatArray:
    """Two-sided t quantile per cell, computed once per distinct df value."""
    finite = np.isfinite(df) & (df > 0)
    q = np.full(df.shape, np.nan)
    if np.any(finite):
        uniq, inverse = np.unique(df[finite], return_inverse=True)
        q[finite] = special.stdtrit(uniq, 0.5 + confidence / 2.0)[inverse]  # t.ppf
    return q


def olive_ranks(n: IntArray) -> tuple[IntArray, IntArray]:
    """Olive's (2005) order-statistic ranks ``L_n`` and ``U_n``.

    ``L_n = floor(n/2) - ceil(sqrt(n/4))`` and ``U_n = n - L_n``.

    Parameters
    ----------
    n : ndarray of int64
        Sample sizes (``n >= 2`` gives ``L_n >= 0``).

    Returns
    -------
    L, U : ndarray of int64
    """
    L = n // 2 - np.ceil(np.sqrt(n / 4.0)).astype(np.int64)
    return L, n - L


def median_ci_array(
    x: npt.ArrayLike,
    confidence: float = 0.95,
    *,
    method: MedianMethod = "olive",
) -> IntervalArray:
    r"""Vectorised confidence interval for the median over the last axis.

    Parameters
    ----------
    x : array_like, shape (..., n_runs)
        Run times; NaN marks a missing run (ragged releases). Infinities raise.
    confidence : float, default 0.95
        Two-sided confidence level.
    method : {"olive", "bonett_price", "order"}, default "olive"
        Standard error of the median: Olive (2005), used by seed 003, or
        Price & Bonett (2001) as in statpsych's ``ci.median2``; ``"order"``: the
        distribution-free order-statistic interval (below), which the recommended
        rule's pages show.

    Returns
    -------
    IntervalArray
        NaN where a cell has fewer than two runs.

    Notes
    -----
    With the sorted sample :math:`Y_{(1)} \le \dots \le Y_{(n)}`, Olive (2005)
    takes :math:`L_n = \lfloor n/2 \rfloor - \lceil \sqrt{n/4}\,\rceil`,
    :math:`U_n = n - L_n`,

    .. math::

        SE(\mathrm{MED}) = \tfrac12 \left(Y_{(U_n)} - Y_{(L_n+1)}\right),
        \qquad
        \mathrm{MED} \pm t_{p,\,1-\alpha/2}\, SE(\mathrm{MED}),
        \quad p = U_n - L_n - 1.

    The Price–Bonett variant (``method="bonett_price"``) uses
    :math:`a = \mathrm{round}(n/2 - \sqrt n)` (at least 1, rounding half to even as R
    does), :math:`SE = (Y_{(n-a+1)} - Y_{(a)}) / (2 z_0)` with
    :math:`z_0 = \Phi^{-1}(1 - P[\mathrm{Bin}(n, 1/2) \le a-1])` and a normal
    quantile (``df = inf``).

    The order-statistic interval (``method="order"``; Thompson 1936, Hahn & Meeker
    1991 §5.2) is :math:`[Y_{(k)}, Y_{(n-k+1)}]` with the largest ``k`` (at least 1,
    :func:`order_ranks`) such that :math:`P[\mathrm{Bin}(n, 1/2) \le k-1] \le \alpha/2`.
    Its coverage is at least :math:`1 - 2 P[\mathrm{Bin}(n, 1/2) \le k-1]` for *any*
    distribution, discrete ones included (ties only add coverage): bimodal runs
    and a microsecond clock cannot push it below its level. For ``n < 6`` at 95%
    no ``k`` reaches the level and ``[min, max]`` is used (93.75% at ``n = 5``). Its
    limits are runs, so a duration's interval never goes below zero. When the two
    limits tie but the runs are not all equal (quantised times), each limit moves
    to the next distinct run value outwards, so a zero width means every run is
    equal (coverage can only grow). For difference intervals it carries the
    Price–Bonett standard error with this ``k``:
    :math:`SE = (Y_{(n-k+1)} - Y_{(k)}) / (2 z_k)`,
    :math:`z_k = \Phi^{-1}(1 - P[\mathrm{Bin}(n, 1/2) \le k-1])`, ``df = inf``.

    References
    ----------
    .. [1] D. J. Olive, "A simple confidence interval for the median", manuscript,
       Southern Illinois University, 2005 (www.math.siu.edu/olive/ppmedci.pdf).
    .. [2] R. M. Price and D. G. Bonett, "Estimating the variance of the sample
       median", J. Statist. Comput. Simul. 68(3), 295-305, 2001.
    .. [3] D. G. Bonett and R. M. Price, "Statistical inference for a linear function
       of medians", Psychological Methods 7(3), 370-383, 2002.
    .. [4] W. R. Thompson, "On confidence ranges for the median and other expectation
       distributions for populations of unknown distribution form", Ann. Math.
       Statist. 7(3), 122-128, 1936.
    .. [5] G. J. Hahn and W. Q. Meeker, *Statistical Intervals*, Wiley, 1991, §5.2.
    """
    check_confidence(confidence)
    arr = _as_padded(x)
    n = np.sum(~np.isnan(arr), axis=-1).astype(np.int64)
    s = np.sort(arr, axis=-1)
    med = _sorted_median(s, n)
    ok = n >= MIN_RUNS
    if method == "olive":
        L, U = olive_ranks(n)
        se = 0.5 * (_order_stat(s, U - 1) - _order_stat(s, L))
        df = (U - L - 1).astype(np.float64)
        q = _t_quantile(confidence, np.where(ok, df, np.nan))
    elif method == "bonett_price":
        a = np.maximum(np.round(n / 2.0 - np.sqrt(n)), 1).astype(np.int64)
        p = special.bdtr(a - 1, np.maximum(n, 1), 0.5)  # binom.cdf; a >= 1
        z0 = -special.ndtri(p)  # norm.isf
        se = (_order_stat(s, n - a) - _order_stat(s, a - 1)) / (2.0 * z0)
        df = np.full(n.shape, np.inf)
        q = np.full(n.shape, special.ndtri(0.5 + confidence / 2.0))  # norm.ppf
    elif method == "order":
        return _order_interval(s, n, med, ok, confidence)
    else:
        raise ValueError(f"unknown method {method!r}")
    return _finish(med, se, df, q, n, ok)


def order_ranks(n: IntArray, confidence: float = 0.95) -> IntArray:
    """Rank ``k`` (1-based) of the order-statistic median interval ``[Y_(k), Y_(n-k+1)]``.

    The largest ``k >= 1`` with ``P[Bin(n, 1/2) <= k - 1] <= (1 - confidence) / 2``, or 1
    when even ``[min, max]`` falls short of the level (``n < 6`` at 95%).
    """
    check_confidence(confidence)
    n = np.asarray(n, dtype=np.int64)
    k = np.ones(n.shape, dtype=np.int64)
    for size in np.unique(n[n >= 1]):
        tail = special.bdtr(np.arange(size), int(size), 0.5)  # P[Bin <= j], j = 0 .. n-1
        k[n == size] = max(1, int(np.sum(tail <= (1.0 - confidence) / 2.0)))
    return k


def _order_interval(
    s: FloatArray, n: IntArray, med: FloatArray, ok: npt.NDArray[np.bool_], confidence: float
) -> IntervalArray:
    """``method="order"`` of :func:`median_ci_array` on rows sorted ascending (NaN last)."""
    nan = np.float64(np.nan)
    k = order_ranks(np.maximum(n, 1), confidence)
    lo = _order_stat(s, k - 1)
    hi = _order_stat(s, n - k)
    tied = ok & (lo == hi)
    if np.any(tied):
        # Quantised runs: widen a tied interval to the neighbouring distinct values.
        valid = ~np.isnan(s)
        below = np.where(valid & (s < lo[..., np.newaxis]), s, -np.inf).max(axis=-1)
        above = np.where(valid & (s > hi[..., np.newaxis]), s, np.inf).min(axis=-1)
        lo = np.where(tied & np.isfinite(below), below, lo)
        hi = np.where(tied & np.isfinite(above), above, hi)
    p = special.bdtr(k - 1, np.maximum(n, 1), 0.5)
    z = -special.ndtri(p)  # norm.isf(P[Bin <= k-1])
    with np.errstate(invalid="ignore", divide="ignore"):
        se = (hi - lo) / (2.0 * z)
    return IntervalArray(
        estimate=np.where(ok, med, nan), lo=np.where(ok, lo, nan), hi=np.where(ok, hi, nan),
        se=np.where(ok, se, nan), df=np.where(ok, np.inf, nan), n=n,
    )


def mean_ci_array(x: npt.ArrayLike, confidence: float = 0.95) -> IntervalArray:
    r"""Vectorised Student t interval for the mean over the last axis.

    Parameters
    ----------
    x : array_like, shape (..., n_runs)
        Run times; NaN marks a missing run. Infinities raise.
    confidence : float, default 0.95
        Two-sided confidence level.

    Returns
    -------
    IntervalArray
        NaN where a cell has fewer than two runs.

    Notes
    -----
    :math:`\bar Y \pm t_{n-1,\,1-\alpha/2}\, s/\sqrt n` with the sample standard
    deviation :math:`s` (divisor :math:`n-1`).

    References
    ----------
    .. [1] "Student", "The probable error of a mean", Biometrika 6(1), 1-25, 1908.
    """
    check_confidence(confidence)
    arr = _as_padded(x)
    valid = ~np.isnan(arr)
    n = np.sum(valid, axis=-1).astype(np.int64)
    ok = n >= MIN_RUNS
    with np.errstate(invalid="ignore", divide="ignore"):
        total = np.sum(np.where(valid, arr, 0.0), axis=-1)
        mean = total / n
        dev = np.where(valid, arr - mean[..., np.newaxis], 0.0)
        var = np.sum(dev * dev, axis=-1) / (n - 1)
        se = np.sqrt(var / n)
    df = (n - 1).astype(np.float64)
    q = _t_quantile(confidence, np.where(ok, df, np.nan))
    return _finish(mean, se, df, q, n, ok)


def _finish(
    est: FloatArray,
    se: FloatArray,
    df: FloatArray,
    q: FloatArray,
    n: IntArray,
    ok: npt.NDArray[np.bool_],
) -> IntervalArray:
    nan = np.float64(np.nan)
    est = np.where(ok, est, nan)
    se = np.where(ok, se, nan)
    half = q * se
    return IntervalArray(
        estimate=est,
        lo=est - half,
        hi=est + half,
        se=se,
        df=np.where(ok, df, nan),
        n=n,
    )


def diff_ci_array(a: IntervalArray, b: IntervalArray, confidence: float = 0.95) -> IntervalArray:
    r"""Interval for ``estimate(b) - estimate(a)`` of two independent samples.

    Parameters
    ----------
    a, b : IntervalArray
        Per-sample estimates with their standard errors and degrees of freedom
        (from :func:`median_ci_array` or :func:`mean_ci_array`), broadcastable.
    confidence : float, default 0.95
        Two-sided confidence level.

    Returns
    -------
    IntervalArray
        ``estimate = b.estimate - a.estimate``; ``se``, ``df`` of the difference;
        ``n`` is the smaller of the two counts.

    Notes
    -----
    .. math::

        SE_d = \sqrt{SE_a^2 + SE_b^2}, \qquad
        \nu = \frac{(SE_a^2 + SE_b^2)^2}{SE_a^4/\nu_a + SE_b^4/\nu_b},
        \qquad d \pm t_{\nu,\,1-\alpha/2}\, SE_d .

    The Welch–Satterthwaite degrees of freedom [1]_ reduce to Welch's t interval
    for means (``nu_i = n_i - 1``). For Olive's medians ``nu_i = U_n - L_n - 1``,
    the degrees of freedom of each median's own interval: the two-sample analogue
    of Olive's one-sample interval, our choice by analogy with Welch. When both
    standard errors are zero (all runs tied) ``nu = min(nu_a, nu_b)``. Normal
    quantiles (``nu_i = inf``, Bonett & Price 2002 [2]_) stay normal.

    References
    ----------
    .. [1] B. L. Welch, "The generalization of Student's problem when several
       different population variances are involved", Biometrika 34, 28-35, 1947.
    .. [2] D. G. Bonett and R. M. Price, "Statistical inference for a linear
       function of medians", Psychological Methods 7(3), 370-383, 2002.
    """
    check_confidence(confidence)
    va = a.se * a.se
    vb = b.se * b.se
    v = va + vb
    with np.errstate(invalid="ignore", divide="ignore"):
        df = v * v / (va * va / a.df + vb * vb / b.df)
    df = np.where(v > 0, df, np.minimum(a.df, b.df))
    est = b.estimate - a.estimate
    se = np.sqrt(v)
    q = _t_quantile(confidence, df)
    q = np.where(np.isinf(df), special.ndtri(0.5 + confidence / 2.0), q)  # norm.ppf
    half = q * se
    return IntervalArray(
        estimate=est,
        lo=est - half,
        hi=est + half,
        se=se,
        df=df,
        n=np.minimum(a.n, b.n),
    )


def _scalar(ia: IntervalArray) -> Interval[float]:
    return Interval(float(ia.estimate), float(ia.lo), float(ia.hi))


def median_ci(
    x: npt.ArrayLike,
    confidence: float = 0.95,
    *,
    method: MedianMethod = "olive",
) -> Interval[float]:
    """Confidence interval for the median of one release's runs (Olive 2005).

    Parameters
    ----------
    x : array_like, 1-D
        At least two finite run times.
    confidence : float, default 0.95
        Two-sided confidence level.
    method : {"olive", "bonett_price", "order"}, default "olive"
        See :func:`median_ci_array` (formulas and references there).

    Returns
    -------
    Interval

    Raises
    ------
    ValueError
        Fewer than two runs, NaN or infinite values, a confidence outside (0, 1).

    Notes
    -----
    ``MED ± t_{U_n-L_n-1} · ½ (Y_(U_n) − Y_(L_n+1))`` with
    ``L_n = ⌊n/2⌋ − ⌈√(n/4)⌉``, ``U_n = n − L_n`` (Olive 2005).
    """
    return _scalar(median_ci_array(_as_sample(x), confidence, method=method))


def mean_ci(x: npt.ArrayLike, confidence: float = 0.95) -> Interval[float]:
    """Student t confidence interval for the mean of one release's runs.

    Parameters
    ----------
    x : array_like, 1-D
        At least two finite run times.
    confidence : float, default 0.95
        Two-sided confidence level.

    Returns
    -------
    Interval

    Raises
    ------
    ValueError
        Fewer than two runs, NaN or infinite values, a confidence outside (0, 1).

    Notes
    -----
    ``mean ± t_{n−1, 1−α/2} · s/√n`` (Student 1908); see :func:`mean_ci_array`.
    """
    return _scalar(mean_ci_array(_as_sample(x), confidence))


def median_diff_ci(
    a: npt.ArrayLike,
    b: npt.ArrayLike,
    confidence: float = 0.95,
    *,
    method: MedianMethod = "olive",
) -> Interval[float]:
    """Confidence interval for ``median(b) - median(a)`` of two independent samples.

    Parameters
    ----------
    a, b : array_like, 1-D
        Runs of the earlier (``a``) and later (``b``) release, at least two each.
    confidence : float, default 0.95
        Two-sided confidence level.
    method : {"olive", "bonett_price", "order"}, default "olive"
        ``"olive"``: Olive's standard errors with a Welch–Satterthwaite t quantile
        (used by the paper rule). ``"bonett_price"``: Price–Bonett standard errors
        with a normal quantile, identical to statpsych's ``ci.median2``
        (Bonett & Price 2002) up to the order of the arguments.

    Returns
    -------
    Interval

    Raises
    ------
    ValueError
        Fewer than two runs, NaN or infinite values, a confidence outside (0, 1).

    Notes
    -----
    ``d ± q · sqrt(SE_a² + SE_b²)``; see :func:`diff_ci_array` for the degrees
    of freedom and :func:`median_ci_array` for the standard errors.
    """
    ia = median_ci_array(_as_sample(a, "a"), confidence, method=method)
    ib = median_ci_array(_as_sample(b, "b"), confidence, method=method)
    return _scalar(diff_ci_array(ia, ib, confidence))


def mean_diff_ci(a: npt.ArrayLike, b: npt.ArrayLike, confidence: float = 0.95) -> Interval[float]:
    """Welch's confidence interval for ``mean(b) - mean(a)``.

    Parameters
    ----------
    a, b : array_like, 1-D
        Runs of the earlier (``a``) and later (``b``) release, at least two each.
    confidence : float, default 0.95
        Two-sided confidence level.

    Returns
    -------
    Interval

    Raises
    ------
    ValueError
        Fewer than two runs, NaN or infinite values, a confidence outside (0, 1).

    Notes
    -----
    ``d ± t_ν · sqrt(s_a²/n_a + s_b²/n_b)`` with Welch–Satterthwaite ``ν``
    (Welch 1947); see :func:`diff_ci_array`.
    """
    ia = mean_ci_array(_as_sample(a, "a"), confidence)
    ib = mean_ci_array(_as_sample(b, "b"), confidence)
    return _scalar(diff_ci_array(ia, ib, confidence))
