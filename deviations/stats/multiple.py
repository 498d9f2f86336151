"""Multiple testing: Benjamini–Hochberg (false-discovery rate) and Holm (family-wise error).

A dashboard tests every (function, release boundary) of a matrix, an A/B report several
metrics; each test at 5% would flag 5% of the quiet ones. The recommended release rule
controls the false-discovery rate over the whole matrix (Benjamini–Hochberg); paired A/B
reports control the family-wise error over their few metrics (Holm).

References
----------
Y. Benjamini and Y. Hochberg, "Controlling the false discovery rate: a practical and
    powerful approach to multiple testing", J. R. Statist. Soc. B 57(1), 289-300, 1995.
S. Holm, "A simple sequentially rejective multiple test procedure", Scand. J. Statist. 6,
    65-70, 1979.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ._typing import BoolArray, FloatArray

__all__ = ["HolmResult", "benjamini_hochberg", "benjamini_hochberg_rejections", "holm"]


def benjamini_hochberg(p: npt.ArrayLike) -> FloatArray:
    r"""Benjamini–Hochberg adjusted p-values (q-values), NaN left out.

    Parameters
    ----------
    p : array_like
        Raw p-values of any shape; NaN marks a missing test and stays NaN.

    Returns
    -------
    ndarray of float64
        Same shape; reject at false-discovery rate ``q`` where the result ``<= q``.

    Raises
    ------
    ValueError
        A p-value outside ``[0, 1]``.

    Notes
    -----
    With the ``m`` finite p-values sorted, :math:`p_{(1)} \le \dots \le p_{(m)}`,

    .. math:: q_{(i)} = \min_{j \ge i} \min\!\left(1, \frac{m\, p_{(j)}}{j}\right).

    The adjustment depends on every stored p-value, so a dashboard adding a
    release re-runs it over the stored raw p-values (cheap: one sort).

    References
    ----------
    .. [1] Y. Benjamini and Y. Hochberg, "Controlling the false discovery rate: a
       practical and powerful approach to multiple testing", J. R. Statist. Soc. B
       57(1), 289-300, 1995.
    """
    arr, ok, vals = _finite_p_values(p)
    m = vals.size
    out = np.full(arr.size, np.nan)
    if m:
        # Tied p-values get equal q-values whatever their order, so any sort will do.
        order = np.argsort(vals)
        scaled = _step_up(vals[order], m)
        adjusted = np.minimum.accumulate(scaled[::-1])[::-1]
        np.minimum(adjusted, 1.0, out=adjusted)
        q = np.empty(m)
        q[order] = adjusted
        out[ok.ravel()] = q
    result: FloatArray = out.reshape(arr.shape)
    return result


def _finite_p_values(p: npt.ArrayLike) -> tuple[FloatArray, BoolArray, FloatArray]:
    """``p`` as float64, where it is not NaN, and those values; raises outside [0, 1]."""
    arr = np.asarray(p, dtype=np.float64)
    ok = ~np.isnan(arr)
    vals = arr[ok]
    if vals.size and (vals.min() < 0 or vals.max() > 1):
        raise ValueError("p-values must lie in [0, 1]")
    return arr, ok, vals


def _step_up(ranked: FloatArray, m: int) -> FloatArray:
    """``p_(k) m / k`` for the ``k`` smallest of ``m`` p-values, sorted: the one
    expression both :func:`benjamini_hochberg` and :func:`benjamini_hochberg_rejections`
    compare, so that they agree to the last bit."""
    scaled: FloatArray = ranked * (m / np.arange(1.0, len(ranked) + 1.0))
    return scaled


def benjamini_hochberg_rejections(p: npt.ArrayLike, fdr: float) -> BoolArray:
    r"""Where :func:`benjamini_hochberg` is ``<= fdr``, without computing every q-value.

    Parameters
    ----------
    p : array_like
        Raw p-values of any shape; NaN marks a missing test (never rejected).
    fdr : float
        The false-discovery rate, in (0, 1).

    Returns
    -------
    ndarray of bool
        Same shape: the rejected hypotheses.

    Raises
    ------
    ValueError
        A p-value outside ``[0, 1]``.

    Notes
    -----
    The step-up rule: with the ``m`` finite p-values sorted, let ``k`` be the largest
    rank with :math:`p_{(k)}\, m / k \le q`; reject every p-value :math:`\le p_{(k)}`.
    Since :math:`q_{(i)} \ge p_{(i)}`, only p-values ``<= fdr`` can qualify, so only
    those are sorted (a few percent of a dashboard's matrix, where
    :func:`benjamini_hochberg` sorts them all). Each candidate's :math:`p\, (m / k)` is
    computed by the same expression as there (``_step_up``), and tied p-values share
    their q-value, so the result equals ``benjamini_hochberg(p) <= fdr`` exactly.
    """
    arr, ok, finite = _finite_p_values(p)
    m = finite.size
    out = np.zeros(arr.shape, dtype=np.bool_)
    if not m:
        return out
    candidates = np.sort(finite[finite <= fdr])
    hits = np.flatnonzero(_step_up(candidates, m) <= fdr)
    if len(hits):
        out = ok & (arr <= candidates[hits[-1]])
    return out


@dataclass(frozen=True, eq=False)
class HolmResult:
    """Holm-adjusted p-values (input order) and which hypotheses are rejected at alpha."""

    adjusted: FloatArray
    reject: BoolArray
    alpha: float


def holm(pvalues: npt.ArrayLike, alpha: float = 0.05) -> HolmResult:
    """Holm-Bonferroni step-down adjustment of ``m`` p-values.

    With :math:`p_{(1)} \\le \\dots \\le p_{(m)}` sorted,

    .. math:: \\tilde p_{(i)} = \\min\\Big(1, \\max_{j \\le i} (m - j + 1)\\, p_{(j)}\\Big)

    and hypothesis :math:`(i)` is rejected when :math:`\\tilde p_{(i)} \\le \\alpha`
    (equivalently: reject while :math:`p_{(i)} \\le \\alpha / (m - i + 1)`, stop at the
    first failure). Controls the family-wise error rate at ``alpha`` under any dependence,
    and rejects at least what Bonferroni rejects (seed 002: "tighter").

    Parameters
    ----------
    pvalues : array_like, 1-d
        Values in [0, 1].
    alpha : float, default 0.05
        Family-wise error rate.

    References
    ----------
    Holm (1979).
    """
    p = np.asarray(pvalues, dtype=np.float64)
    if p.ndim != 1 or p.size == 0:
        raise ValueError("pvalues must be a non-empty 1-d array")
    if not np.all((p >= 0) & (p <= 1)):
        raise ValueError("p-values must lie in [0, 1] (NaN is not a p-value)")
    if not 0 < alpha < 1:
        raise ValueError("alpha must be in (0, 1)")
    m = p.size
    order = np.argsort(p, kind="stable")
    stepped = (m - np.arange(m)) * p[order]
    adjusted_sorted = np.minimum(1.0, np.maximum.accumulate(stepped))
    adjusted = np.empty(m)
    adjusted[order] = adjusted_sorted
    return HolmResult(
        adjusted=np.asarray(adjusted, dtype=np.float64),
        reject=np.asarray(adjusted <= alpha, dtype=np.bool_),
        alpha=float(alpha),
    )
