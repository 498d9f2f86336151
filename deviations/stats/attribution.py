"""Why a function's total time changed: its change split among its self time and callees.

A run's call tree is exact per run: for every function ``f``,
``total(f) = self(f) + sum over callees c of edge(f, c)`` (``ingest.traces``, "Call
tree"). Given the runs of two releases, :func:`attribute_change` compares every component
(the total, the self time, each edge) as :func:`~deviations.stats.twosample.compare_two`
compares functions (medians with Olive's intervals, the interval of the difference of
medians, an exact rank or Welch test, Benjamini–Hochberg over the whole family of rows),
and adds what a sum of medians cannot give:

* **share** of the total's change explained by a component, from means, which add:
  ``share(c) = (mean_b(c) - mean_a(c)) / (mean_b(total) - mean_a(total))``; the shares of
  a total's parts sum to 1 exactly;
* **remainder** of the medians: ``Δmedian(total) - Σ Δmedian(parts)``, the part of the
  total's median change that the parts' median changes do not account for (medians do not
  add: the median of a sum is not the sum of the medians).

Every difference is later − earlier (``b - a``). docs/statistics.md, "Call-tree
attribution", has the formulas and why.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt

from ._typing import BoolArray, Direction, FloatArray, IntArray
from .twosample import TestName, TwoSampleComparison, compare_two

__all__ = ["TOTAL", "Attribution", "attribute_change"]

TOTAL: Final = -1
"""``owner`` of a row that is a total (not a part of another row)."""

#: Per run, a total and the sum of its parts may differ by rounding only: float64 sums of
#: microseconds (relative 1e-9; 1e-6 µs absolute for totals near 0).
_RTOL: Final = 1e-9
_ATOL: Final = 1e-6


@dataclass(frozen=True, eq=False)
class Attribution:
    """Per row (a total, or a part of the total ``owner[i]``), the comparison of ``a`` and
    ``b`` and the row's part in its total's change.

    Attributes
    ----------
    comparison : TwoSampleComparison
        Medians, the difference of medians with its interval, p- and q-values (one
        Benjamini–Hochberg step over every row), verdicts; ``compare_two``'s fields.
    owner : ndarray of int64
        The total row each row is a part of, :data:`TOTAL` for totals.
    mean_a, mean_b, mean_diff : ndarray of float64
        Means over the runs of each side and ``mean_b - mean_a``; NaN on an absent side.
    share : ndarray of float64
        A part's ``mean_diff`` over its total's ``mean_diff`` (NaN for totals, and where
        the total's mean did not change).
    remainder : ndarray of float64
        For a total, its median difference minus the sum of its parts' median differences
        (NaN for parts, and where a side is absent).
    significant : ndarray of bool
        ``compare_two``'s: ``q_value <= fdr`` and the difference's interval excludes 0.
    """

    comparison: TwoSampleComparison
    owner: IntArray
    mean_a: FloatArray
    mean_b: FloatArray
    mean_diff: FloatArray
    share: FloatArray
    remainder: FloatArray
    significant: BoolArray


def attribute_change(
    a: npt.ArrayLike,
    b: npt.ArrayLike,
    owner: npt.ArrayLike,
    confidence: float = 0.95,
    *,
    fdr: float = 0.05,
    min_relative_change: float = 0.1,
    min_absolute_change: float = 0.0,
    test: TestName = "auto",
    direction: Direction = "lower_is_better",
) -> Attribution:
    r"""Split the change of totals among their parts, with intervals and FDR control.

    Parameters
    ----------
    a, b : array_like of float64, shapes (rows, runs_a) and (rows, runs_b)
        Per-run values of the base (``a``) and the new (``b``) release. Rows are totals
        and their parts (self time, each callee's edge); a part absent from a run is 0
        there. A total absent from every run of a side is an all-NaN row there; its parts
        are then taken as absent on that side too (``appeared`` / ``vanished``).
    owner : array_like of int, shape (rows,)
        ``owner[i]``: the row of the total that row ``i`` is a part of, or :data:`TOTAL`.
        Every total needs at least one part; in every run a total equals the sum of its
        parts (up to float64 rounding), which is checked.
    confidence, fdr, min_relative_change, min_absolute_change, test, direction
        As :func:`~deviations.stats.twosample.compare_two`; the Benjamini–Hochberg family
        is every row given (totals, self times and edges together).

    Returns
    -------
    Attribution

    Raises
    ------
    ValueError
        Shapes that do not match, an ``owner`` that is not a total, a total without parts,
        a run where a total is not the sum of its parts, and what ``compare_two`` refuses.

    Notes
    -----
    With :math:`T` a total and :math:`P_1..P_m` its parts, :math:`T_r = \sum_j P_{j,r}` in
    every run :math:`r`, so the means add:
    :math:`\bar T_b - \bar T_a = \sum_j (\bar P_{j,b} - \bar P_{j,a})`, and
    :math:`\mathrm{share}_j = (\bar P_{j,b} - \bar P_{j,a}) / (\bar T_b - \bar T_a)` sums
    to 1. Medians do not add (:math:`\mathrm{med}(\sum_j P_j) \ne \sum_j \mathrm{med}(P_j)`
    in general), so the median differences, which carry the intervals and the tests as
    everywhere else in the project, leave a remainder
    :math:`\Delta\mathrm{med}(T) - \sum_j \Delta\mathrm{med}(P_j)`, reported, not hidden.
    Tests: as ``compare_two`` (Mann 1947; Welch 1947); q-values: Benjamini and Hochberg
    (1995) over every row, valid under the positive dependence of a total and its parts
    (Benjamini and Yekutieli 2001, PRDS).

    References
    ----------
    .. [1] Y. Benjamini and Y. Hochberg, J. R. Statist. Soc. B 57(1), 289-300, 1995.
    .. [2] Y. Benjamini and D. Yekutieli, Ann. Statist. 29(4), 1165-1188, 2001.
    .. [3] D. J. Olive, "A simple confidence interval for the median", 2005.
    """
    xa = np.array(a, dtype=np.float64, ndmin=2, copy=True)
    xb = np.array(b, dtype=np.float64, ndmin=2, copy=True)
    own = np.asarray(owner, dtype=np.int64)
    rows = xa.shape[0]
    if xb.shape[0] != rows or own.shape != (rows,):
        raise ValueError(f"a, b and owner need the same rows: {xa.shape[0]}, {xb.shape[0]}, "
                         f"{own.shape}")
    is_total = own == TOTAL
    parts = np.flatnonzero(~is_total)
    if ((own[parts] < 0) | (own[parts] >= rows)).any() or (~is_total[own[parts]]).any():
        raise ValueError("every owner must be the row of a total (owner == TOTAL)")
    if np.setdiff1d(np.flatnonzero(is_total), own[parts]).size:
        raise ValueError("every total needs at least one part")
    for x, side in ((xa, "a"), (xb, "b")):
        absent = is_total & np.isnan(x).all(axis=1)
        x[parts[absent[own[parts]]]] = np.nan  # a total absent from a side: its parts too
        present = parts[~absent[own[parts]]]
        sums = np.zeros_like(x)
        np.add.at(sums, own[present], np.nan_to_num(x[present]))
        totals = np.flatnonzero(is_total & ~absent)
        if not np.allclose(sums[totals], x[totals], rtol=_RTOL, atol=_ATOL):
            bad = totals[np.flatnonzero(~np.isclose(sums[totals], x[totals], rtol=_RTOL,
                                                    atol=_ATOL).all(axis=1))[0]]
            raise ValueError(f"row {bad} of {side} is not the sum of its parts in every run")
    comparison = compare_two(xa, xb, confidence, fdr=fdr,
                             min_relative_change=min_relative_change,
                             min_absolute_change=min_absolute_change, test=test,
                             direction=direction)
    with np.errstate(invalid="ignore"):
        mean_a = np.full(rows, np.nan)
        mean_b = np.full(rows, np.nan)
        in_a, in_b = ~np.isnan(xa).all(axis=1), ~np.isnan(xb).all(axis=1)
        mean_a[in_a] = xa[in_a].mean(axis=1)
        mean_b[in_b] = xb[in_b].mean(axis=1)
    mean_diff = mean_b - mean_a
    share = np.full(rows, np.nan)
    whole = mean_diff[own[parts]]
    moved = whole != 0
    share[parts[moved]] = mean_diff[parts[moved]] / whole[moved]
    summed = np.zeros(rows)
    np.add.at(summed, own[parts], comparison.diff.estimate[parts])
    remainder = np.where(is_total, comparison.diff.estimate - summed, np.nan)
    return Attribution(
        comparison=comparison,
        owner=own,
        mean_a=mean_a,
        mean_b=mean_b,
        mean_diff=mean_diff,
        share=share,
        remainder=remainder,
        significant=comparison.significant,
    )
