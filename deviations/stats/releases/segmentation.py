"""Penalised segmentation of a function's runs into levels (the shift rule's first step).

:func:`optimal_segments` splits each function's releases into segments of consecutive
releases with the nonparametric empirical-distribution cost of Zou et al. (2014), in the
discretised form of Haynes, Fearnhead & Eckley (2017), solved exactly by optimal
partitioning (Jackson et al. 2005), vectorised over functions. The shift rule
(:mod:`.shifts`) runs it on a bounded window of releases around each boundary.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt

from .._typing import BoolArray, FloatArray, IntArray

__all__ = [
    "SEGMENT_PENALTY",
    "SEGMENT_PENALTY_COST",
    "SEGMENT_PENALTY_RUNS",
    "optimal_segments",
]

SEGMENT_PENALTY: Final = 18.0
"""Penalty per change point of the segmentation (the shift rule's, and before it the retired
``segments`` rule's) at up to
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
    """Each function's penalty of the segmentation (log times ``y``) as
    :func:`_change_points` asks for it: ``penalty * min(sqrt(max(1, m /
    SEGMENT_PENALTY_RUNS)), C / SEGMENT_PENALTY_COST)``, ``C`` the whole-series cost."""
    given = np.sum(~np.isnan(y), axis=2).astype(np.float64)
    per_release = _nanmedian_rows(np.where(given > 0, given, np.nan))
    runs = np.sqrt(np.fmax(1.0, per_release / SEGMENT_PENALTY_RUNS))  # NaN: no runs → 1

    def penalty_of(rows: slice, whole: FloatArray) -> FloatArray:
        out: FloatArray = penalty * np.fmin(runs[rows], whole / SEGMENT_PENALTY_COST)
        return out

    return penalty_of


