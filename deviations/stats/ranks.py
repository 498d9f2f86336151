"""Exact Mann–Whitney machinery of the recommended release rule.

The recommended rule (:func:`~deviations.stats.releases.compare_matrix`) tests the runs of
the releases before a boundary against those after it, for every boundary of a matrix at
once. A dashboard's windows are small (3 releases of 5 runs a side), where the normal
approximation of Mann–Whitney's U overstates small p-values several-fold; this module
gives the exact null distribution without ties (Mann & Whitney 1947), the exact
permutation distribution given tied mid-ranks, and the row-wise test that picks one of
them or the normal approximation per row.

References
----------
H. B. Mann and D. R. Whitney, "On a test of whether one of two random variables is
    stochastically larger than the other", Ann. Math. Statist. 18(1), 50-60, 1947.
"""

from __future__ import annotations

import functools
from typing import Final

import numpy as np
import numpy.typing as npt

# scipy.special rather than scipy.stats: the same distribution functions at a fraction of
# the import time (docs/statistics.md, "Import time").
from scipy import special  # type: ignore[import-untyped]  # no scipy-stubs in the venv

from ._typing import FloatArray, IntArray
from .intervals import _sorted_median

__all__ = ["EXACT_MAX_PAIRS", "EXACT_TIES_BELOW", "EXACT_TIES_MAX_N"]

EXACT_MAX_PAIRS: Final = 2500
"""Largest ``n_left * n_right`` (50 × 50 runs) given an exact Mann–Whitney p-value.

Below it the normal approximation overstates small p-values several-fold (15 vs 5
runs completely separated: exact 1.3e-4, normal 1.2e-3), which costs detections
after the Benjamini–Hochberg step; above it the approximation is accurate and the
exact table would grow as ``n_left * n_right``.
"""

EXACT_TIES_MAX_N: Final = 40
"""Largest pooled run count given an exact permutation p-value when runs are tied.

Microsecond clocks tie short functions' runs; the normal approximation then costs
most detections at 5 runs per release. Above 40 runs it is accurate enough.
"""

EXACT_TIES_BELOW: Final = 0.2
"""Tied windows get the exact p-value only when the normal one is below this.

The exact distribution with ties needs a per-window dynamic programme; windows
with a normal p-value of 0.2 or more cannot pass any Benjamini–Hochberg threshold
(at most ``fdr``) either way, so they keep the normal p-value.
"""


def _mann_whitney_rows(
    left: FloatArray, right: FloatArray, exact_rows: npt.NDArray[np.bool_] | None = None,
    pooled_ranks: FloatArray | None = None,
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Row-wise Mann–Whitney test of ``right`` against ``left``.

    NaN entries are missing values. ``exact_rows`` (default: every row) limits the exact
    p-value given ties, a dynamic programme per row, to the rows whose p-value decides
    something. ``pooled_ranks``, an array of the shape of ``left`` and ``right`` side
    by side, receives the pooled mid-ranks (NaN for missing values) for a second test.
    Returns the signed z of the normal approximation (tie and continuity corrected;
    positive: right larger), the two-sided p-value (exact when possible;
    otherwise the normal approximation) and
    ``(median(right) - median(left)) / |median(left)|``.
    """
    union = np.concatenate([left, right], axis=1)
    is_right = np.concatenate(
        [np.zeros(left.shape, dtype=np.bool_), np.ones(right.shape, dtype=np.bool_)], axis=1
    )
    valid = ~np.isnan(union)
    n_left = np.sum(~np.isnan(left), axis=1)
    n_right = np.sum(~np.isnan(right), axis=1)
    N = n_left + n_right
    order = np.argsort(union, axis=1)  # NaN sort last; tie order is irrelevant here
    s = np.take_along_axis(union, order, axis=1)
    r_sorted = np.take_along_axis(is_right & valid, order, axis=1)
    width = s.shape[1]
    pos = np.broadcast_to(np.arange(width), s.shape)
    start = np.ones(s.shape, dtype=np.bool_)
    start[:, 1:] = s[:, 1:] != s[:, :-1]
    end = np.ones(s.shape, dtype=np.bool_)
    end[:, :-1] = start[:, 1:]
    first = np.maximum.accumulate(np.where(start, pos, 0), axis=1)
    last = np.minimum.accumulate(np.where(end, pos, width - 1)[:, ::-1], axis=1)[:, ::-1]
    avg_rank = 0.5 * (first + last) + 1.0
    ties = (last - first + 1).astype(np.float64)
    valid_sorted = np.arange(width)[np.newaxis, :] < N[:, np.newaxis]
    if pooled_ranks is not None:
        np.put_along_axis(pooled_ranks, order, np.where(valid_sorted, avg_rank, np.nan), axis=1)
    rank_sum = np.sum(np.where(r_sorted, avg_rank, 0.0), axis=1)
    tie_term = np.sum(np.where(valid_sorted, ties * ties - 1.0, 0.0), axis=1)
    nl = n_left.astype(np.float64)
    nr = n_right.astype(np.float64)
    Nf = N.astype(np.float64)
    u_right = rank_sum - nr * (nr + 1.0) / 2.0
    mu = nl * nr / 2.0
    with np.errstate(invalid="ignore", divide="ignore"):
        var = nl * nr / 12.0 * ((Nf + 1.0) - tie_term / (Nf * (Nf - 1.0)))
        dev = u_right - mu
        z = np.sign(dev) * np.maximum(np.abs(dev) - 0.5, 0.0) / np.sqrt(var)
    p = np.minimum(2.0 * special.ndtr(-np.abs(z)), 1.0)  # norm.sf(|z|)
    enough = (n_left >= 1) & (n_right >= 1)
    untied = tie_term == 0
    exact = enough & untied & (n_left * n_right <= EXACT_MAX_PAIRS)
    if np.any(exact):
        sizes = np.stack([n_left[exact], n_right[exact]], axis=1)
        u_exact = u_right[exact]
        p_exact = np.empty(u_exact.shape)
        uniq, inverse = np.unique(sizes, axis=0, return_inverse=True)
        for g, (m, n) in enumerate(uniq):
            rows = inverse.ravel() == g
            p_exact[rows] = _exact_two_sided(u_exact[rows], int(m), int(n))
        p[exact] = p_exact
    tied = enough & ~untied & (var > 0) & (N <= EXACT_TIES_MAX_N) & (p < EXACT_TIES_BELOW)
    if exact_rows is not None:
        tied &= exact_rows
    for row in np.flatnonzero(tied):
        doubled = np.rint(2.0 * avg_rank[row, : N[row]]).astype(np.int64)
        p[row] = _exact_two_sided_ties(
            doubled, int(n_right[row]), int(np.rint(2.0 * rank_sum[row]))
        )
    # All pooled runs tied: no evidence of a shift.
    p = np.where(enough & (var <= 0), 1.0, np.where(enough, p, np.nan))
    z = np.where(enough & (var <= 0), 0.0, np.where(enough, z, np.nan))
    med_left = _sorted_median(np.sort(left, axis=1), n_left)
    med_right = _sorted_median(np.sort(right, axis=1), n_right)
    with np.errstate(invalid="ignore", divide="ignore"):
        shift = (med_right - med_left) / np.abs(med_left)
    shift = np.where(enough, shift, np.nan)
    return z, p, shift


@functools.lru_cache(maxsize=512)
def _u_null_cdf(m: int, n: int) -> FloatArray:
    r"""``P(U <= u)`` for ``u = 0 .. m n`` under the null hypothesis, without ties.

    The counts of ``U`` are the coefficients of the Gaussian binomial coefficient
    :math:`\binom{m+n}{m}_q = \prod_{i=1}^{m} (1 - q^{n+i}) / (1 - q^i)` (Mann &
    Whitney 1947), built one factor at a time as truncated power series.
    """
    m, n = min(m, n), max(m, n)
    size = m * n + 1
    c = np.zeros(size)
    c[0] = 1.0
    for i in range(1, m + 1):
        step = n + i
        if step < size:
            c[step:] = c[step:] - c[:-step].copy()
        pad = (-size) % i
        c = np.cumsum(np.concatenate([c, np.zeros(pad)]).reshape(-1, i), axis=0).ravel()[:size]
    cdf: FloatArray = np.minimum(np.cumsum(c) / np.sum(c), 1.0)
    cdf.setflags(write=False)
    return cdf


def _exact_two_sided(u: FloatArray, m: int, n: int) -> FloatArray:
    """Two-sided exact p-value of ``U = u`` for samples without ties."""
    cdf = _u_null_cdf(m, n)
    top = cdf.size - 1
    lower = cdf[np.clip(np.floor(u).astype(np.int64), 0, top)]
    # P(U >= c) = P(U <= m n - c) by symmetry: no cancellation in 1 - cdf.
    upper = cdf[np.clip(top - np.ceil(u).astype(np.int64), 0, top)]
    p: FloatArray = np.minimum(2.0 * np.minimum(lower, upper), 1.0)
    return p


def _exact_two_sided_ties(doubled_ranks: IntArray, n_right: int, doubled_sum: int) -> float:
    """Exact two-sided p-value of the right rank sum given tied mid-ranks.

    Under the null hypothesis every set of ``n_right`` of the pooled runs is equally
    likely to be the right window (the permutation distribution conditional on the
    ties). A dynamic programme counts subsets by size and by doubled rank sum
    (doubling makes mid-ranks integers).
    """
    total = int(doubled_ranks.sum())
    counts = np.zeros((n_right + 1, total + 1))
    counts[0, 0] = 1.0
    for v in doubled_ranks:
        counts[1:, v:] = counts[1:, v:] + counts[:-1, : total + 1 - v]
    dist = counts[n_right]
    dist = dist / dist.sum()
    lower = float(dist[: doubled_sum + 1].sum())
    upper = float(dist[doubled_sum:].sum())
    return min(1.0, 2.0 * min(lower, upper))


def _midranks(a: FloatArray, *, presorted: bool = False) -> FloatArray:
    """Row-wise mid-ranks (1-based, ties averaged) in the original positions; NaN stays
    NaN (missing values rank after every value and are masked out). ``presorted``: each
    row is sorted already (NaN last), no sort needed."""
    if presorted:
        order = np.broadcast_to(np.arange(a.shape[1]), a.shape)
        s = a
    else:
        order = np.argsort(a, axis=1, kind="stable")
        s = np.take_along_axis(a, order, axis=1)
    width = s.shape[1]
    pos = np.broadcast_to(np.arange(width), s.shape)
    start = np.ones(s.shape, dtype=np.bool_)
    start[:, 1:] = s[:, 1:] != s[:, :-1]
    end = np.ones(s.shape, dtype=np.bool_)
    end[:, :-1] = start[:, 1:]
    first = np.maximum.accumulate(np.where(start, pos, 0), axis=1)
    last = np.minimum.accumulate(np.where(end, pos, width - 1)[:, ::-1], axis=1)[:, ::-1]
    mid = 0.5 * (first + last) + 1.0
    if presorted:
        ranks = mid
    else:
        ranks = np.empty(a.shape)
        np.put_along_axis(ranks, order, mid, axis=1)
    out: FloatArray = np.where(np.isnan(a), np.nan, ranks)
    return out


def _brunner_munzel_rows(
    left: FloatArray, right: FloatArray, *, pooled: FloatArray | None = None,
    presorted: bool = False,
) -> FloatArray:
    r"""Row-wise two-sided p-value of the Brunner–Munzel test of ``right`` against
    ``left`` (NaN: missing), NaN where a side has fewer than two values.

    The test of :math:`p = P(X < Y) + \tfrac12 P(X = Y) = \tfrac12` that does not assume
    the two samples share their spread (Mann–Whitney's null variance does: with a
    change of spread alone and unequal sample sizes its false-alarm rate grows). With
    pooled mid-ranks :math:`R`, mid-ranks within each sample :math:`W`, means
    :math:`\bar R_1, \bar R_2`:

    .. math:: S_i^2 = \frac{1}{n_i - 1}\sum_j \big(R_{ij} - W_{ij} - \bar R_i
       + \tfrac{n_i + 1}{2}\big)^2,\quad
       T = \frac{n_1 n_2 (\bar R_2 - \bar R_1)}{(n_1 + n_2)\sqrt{n_1 S_1^2 + n_2 S_2^2}}

    on Satterthwaite's :math:`\nu = (n_1 S_1^2 + n_2 S_2^2)^2 / ((n_1 S_1^2)^2/(n_1 - 1)
    + (n_2 S_2^2)^2/(n_2 - 1))` degrees of freedom (Brunner & Munzel 2000, §2; equal to
    ``scipy.stats.brunnermunzel``). Zero variances (two samples completely apart) give
    ``p = 0``: callers combine it with an exact test for small samples.

    References
    ----------
    E. Brunner, U. Munzel, "The nonparametric Behrens-Fisher problem: asymptotic theory
    and a small-sample approximation", Biometrical Journal 42(1), 17-25, 2000.

    ``pooled``: the pooled mid-ranks when the caller has them (:func:`_mann_whitney_rows`
    gives them); ``presorted``: each row of ``left`` and of ``right`` is sorted (NaN last).
    """
    n1 = np.sum(~np.isnan(left), axis=1).astype(np.float64)
    n2 = np.sum(~np.isnan(right), axis=1).astype(np.float64)
    if pooled is None:
        pooled = _midranks(np.concatenate([left, right], axis=1))
    # Placements R - W are half-integers: their sums and sums of squares are exact in
    # float64 whatever the order or the padding, so equal samples give equal p-values
    # however they are laid out. (The mean within-sample mid-rank is (n + 1) / 2.)
    d1 = np.nan_to_num(pooled[:, : left.shape[1]] - _midranks(left, presorted=presorted))
    d2 = np.nan_to_num(pooled[:, left.shape[1] :] - _midranks(right, presorted=presorted))
    r1 = np.nansum(pooled[:, : left.shape[1]], axis=1)
    r2 = np.nansum(pooled[:, left.shape[1] :], axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        m1, m2 = r1 / n1, r2 / n2
        s1 = (np.sum(d1 * d1, axis=1) - np.sum(d1, axis=1) ** 2 / n1) / (n1 - 1)
        s2 = (np.sum(d2 * d2, axis=1) - np.sum(d2, axis=1) ** 2 / n2) / (n2 - 1)
        s1, s2 = np.maximum(s1, 0.0), np.maximum(s2, 0.0)
        v = n1 * s1 + n2 * s2
        t = n1 * n2 * (m2 - m1) / ((n1 + n2) * np.sqrt(v))
        df = v**2 / ((n1 * s1) ** 2 / (n1 - 1) + (n2 * s2) ** 2 / (n2 - 1))
        p = 2.0 * special.stdtr(df, -np.abs(t))
    p = np.where(v > 0, p, np.where(m1 == m2, 1.0, 0.0))
    out: FloatArray = np.where((n1 >= 2) & (n2 >= 2), np.minimum(p, 1.0), np.nan)
    return out
