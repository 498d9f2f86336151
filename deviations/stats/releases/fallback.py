"""Digressions: deviations that come back to the level before them (seed 003, Fig. 7)."""

from __future__ import annotations

from typing import Final

import numpy as np
import numpy.typing as npt

from .._typing import BoolArray
from .codes import IMPROVEMENT, REGRESSION

__all__ = ["DIGRESSION_SPAN", "digressions", "level_digressions"]

DIGRESSION_SPAN: Final = 12
"""Pairs after a deviation within which its return is looked for: the mark of pair ``i``
depends on pairs ``i+1 .. i+DIGRESSION_SPAN`` only, so it is final once they are (a
deviation that comes back later than that is a deviation followed by another one)."""


def digressions(
    verdict: npt.ArrayLike, lo: npt.ArrayLike, hi: npt.ArrayLike, *,
    span: int = DIGRESSION_SPAN,
) -> BoolArray:
    """Flag the pairs that start a digression (a deviation that later comes back).

    Parameters
    ----------
    verdict : array_like of int, shape (..., releases - 1)
        Verdict codes of consecutive pairs (pair ``i`` is release ``i`` → ``i+1``).
    lo, hi : array_like of float, shape (..., releases)
        Per-release confidence limits of the estimator the verdicts used.
    span : int, default :data:`DIGRESSION_SPAN`
        The return must come within this many pairs.

    Returns
    -------
    ndarray of bool, shape (..., releases - 1)
        ``True`` on pair ``i`` when it starts a digression.

    Notes
    -----
    Seed 003 (Fig. 7) calls a deviation that "has a fallback at the same level as
    before" a digression. Precisely: pair ``i`` is a deviation (regression or
    improvement) and some later pair ``i < j <= i + span`` is a deviation in the opposite
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
    if span < 1:
        raise ValueError("span must be >= 1")
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
            (j - i <= span)
            & (v2[r, j] != v2[r, i])  # both deviations: the opposite direction
            & (low2[r, j + 1] <= high2[r, i])
            & (high2[r, j + 1] >= low2[r, i])
        )
        flat[r[hit], i[hit]] = True
        start = stop
    return out


_PAIRS_PER_CHUNK: Final = 1 << 20



def level_digressions(
    verdict: npt.ArrayLike, before: npt.ArrayLike, diff: npt.ArrayLike, *,
    span: int = DIGRESSION_SPAN,
) -> BoolArray:
    """Digressions of the shift rule, from its own comparisons (one-run releases have no
    interval to test overlap with).

    Pair ``i`` starts a digression when it is a deviation and some later pair
    ``i < j <= i + span`` is a deviation the other way that ends nearer the level before
    ``i`` than the level ``i`` reached: with ``L = before[i]`` the level before ``i`` and
    ``before[j] + diff[j]`` the level after ``j``,
    ``|before[j] + diff[j] - L| < |diff[i]| / 2`` (seed 003, Fig. 7: "a fallback at the
    same level as before"). Shapes (..., pairs).
    """
    v = np.asarray(verdict)
    lvl = np.asarray(before, dtype=np.float64)
    d = np.asarray(diff, dtype=np.float64)
    if lvl.shape != v.shape or d.shape != v.shape:
        raise ValueError("verdict, before and diff need the same shape")
    if span < 1:
        raise ValueError("span must be >= 1")
    out = np.zeros(v.shape, dtype=np.bool_)
    pairs = v.shape[-1]
    if pairs < 2:
        return out
    v2, l2, d2 = v.reshape(-1, pairs), lvl.reshape(-1, pairs), d.reshape(-1, pairs)
    flat = out.reshape(-1, pairs)
    deviation = (v2 == REGRESSION) | (v2 == IMPROVEMENT)
    after = l2 + d2
    for f, i in zip(*np.nonzero(deviation), strict=True):
        js = np.arange(i + 1, min(pairs, i + span + 1))
        back = (deviation[f, js] & (v2[f, js] != v2[f, i])
                & (np.abs(after[f, js] - l2[f, i]) < np.abs(d2[f, i]) / 2))
        flat[f, i] = bool(back.any())
    return out
