"""Time-uniform confidence sequences and sequential tests for distributions.

Everything here follows Lindon, Sanden and Shirikian (2022), "Rapid Regression
Detection in Software Deployments through Sequential Testing", KDD '22, §3
("the paper" below), which builds on Howard and Ramdas (2022), "Sequential
estimation of quantiles with applications to A/B testing and best-arm
identification", Bernoulli 28(3).

Notation (the paper's): arm A is the control, arm B the candidate;
``d = F_b - F_a`` is the difference of the distribution functions and
``d_n = F_{n_b} - F_{n_a}`` its empirical counterpart.

Null hypotheses (the paper's Table 1, named by the *null*, unlike scipy's
``alternative=`` which names the alternative):

=============  ==========================  =====================================
``hypothesis``  null hypothesis             rejected when (evidence that ...)
=============  ==========================  =====================================
``"less"``     A <= B  (F_a >= F_b)        F_b > F_a somewhere: B is smaller
``"greater"``  A >= B  (F_a <= F_b)        F_b < F_a somewhere: B is larger
``"equal"``    A =d B  (F_a == F_b)        the distributions differ anywhere
=============  ==========================  =====================================

For a latency metric (larger is worse) the regression test is
``hypothesis="greater"``: its rejection means the candidate B is
stochastically larger than the control A somewhere in the distribution.

Only numpy and scipy are imported here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal, cast

import numpy as np
import numpy.typing as npt
from scipy.optimize import brentq  # type: ignore[import-untyped]  # no scipy-stubs in the venv

from ._checks import as_sample
from ._typing import FloatArray, IntArray

Hypothesis = Literal["equal", "less", "greater"]
Decision = Literal["continue", "reject", "accept"]

__all__ = [
    "CdfBand",
    "DifferenceBand",
    "QuantileBand",
    "QuantileBands",
    "SequentialResult",
    "SequentialTest",
    "cdf_band",
    "difference_band",
    "epsilon_dkw",
    "epsilon_time_uniform",
    "inter_arrival_times",
    "quantile_band",
    "sample_size",
    "samples_for_width",
    "sequential_p_value",
]

# Constants of the Howard-Ramdas boundary as printed in the paper's eq. (19):
# eps_n(alpha) = 0.85 * sqrt((log log(e n) + 0.8 log(1612 / alpha)) / n).
_HR_SCALE = 0.85
_HR_LOG_WEIGHT = 0.8
_HR_ALPHA_FACTOR = 1612.0

# With the union bound over the two arms each arm gets alpha / 2, so the
# argument of the logarithm becomes 1612 / (alpha / 2) = 3224 / alpha.
_TWO_ARM_FACTOR = 2.0 * _HR_ALPHA_FACTOR

# Version of the dictionary written by ``SequentialTest.to_state``.
_STATE_FORMAT = 1

# Absolute tolerance (on the log scale of the p-value) of the root finder.
_ROOT_XTOL = 1e-13


# ---------------------------------------------------------------------------
# Result types
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class CdfBand:
    """Confidence band on one distribution function (eqs. 5-6 or 16 with 19).

    Attributes
    ----------
    x : FloatArray
        Sorted distinct sample values; the band is a right-continuous step
        function that jumps there (below ``x[0]`` it is ``[0, epsilon]``).
    cdf : FloatArray
        Empirical distribution function ``F_n(x)``.
    lo, hi : FloatArray
        ``max(0, F_n - eps)`` and ``min(1, F_n + eps)``.
    epsilon : float
        Half-width ``eps_n(alpha)``.
    n : int
        Sample size.
    """

    x: FloatArray
    cdf: FloatArray
    lo: FloatArray
    hi: FloatArray
    epsilon: float
    n: int


@dataclass(frozen=True)
class DifferenceBand:
    """Confidence band on ``d = F_b - F_a`` (Lindon et al. 2022, Prop. 3.1, eq. 9).

    Attributes
    ----------
    x : FloatArray
        Points where the band is evaluated (right-continuous step functions).
    diff : FloatArray
        ``d_n(x) = F_{n_b}(x) - F_{n_a}(x)``.
    lo, hi : FloatArray
        ``d^l = F^l_b - F^u_a`` and ``d^u = F^u_b - F^l_a``, each arm at ``alpha / 2``.
    epsilon_a, epsilon_b : float
        Half-widths of the two arms' bands.
    """

    x: FloatArray
    diff: FloatArray
    lo: FloatArray
    hi: FloatArray
    epsilon_a: float
    epsilon_b: float


@dataclass(frozen=True)
class QuantileBand:
    """Confidence band on a quantile function (Lindon et al. 2022, eq. 7).

    Attributes
    ----------
    p : FloatArray
        Probabilities in ``[0, 1]``.
    estimate : FloatArray
        Lower empirical quantile ``Q_n^-(p)`` (the ``ceil(n p)``-th order
        statistic; the minimum for ``p = 0``). For a difference band, the
        difference of the two arms' estimates.
    lo, hi : FloatArray
        ``Q_n^-(p - eps)`` and ``Q_n(p + eps)``; ``-inf``/``+inf`` where the
        band leaves ``[0, 1]`` (the support is taken to be the real line).
    """

    p: FloatArray
    estimate: FloatArray
    lo: FloatArray
    hi: FloatArray


@dataclass(frozen=True)
class QuantileBands:
    """Simultaneous quantile bands of both arms and of ``Q_b - Q_a``.

    Each arm's band is at level ``1 - alpha / 2`` so the three hold together
    with probability ``1 - alpha`` (union bound, eq. 8); ``diff`` is
    ``[Q_b^l - Q_a^u, Q_b^u - Q_a^l]`` (the paper's Figure 8).
    """

    a: QuantileBand
    b: QuantileBand
    diff: QuantileBand


@dataclass(frozen=True)
class SequentialResult:
    """Snapshot of a :class:`SequentialTest`, small enough to store per batch.

    Attributes
    ----------
    hypothesis : str
        ``"equal"``, ``"less"`` or ``"greater"`` (the null hypothesis).
    alpha : float
        Level of the test.
    tau : float or None
        Tolerance of the approximate-acceptance rule (Table 1), if any.
    n_a, n_b : int
        Observations so far in each arm.
    statistic : float
        The sup-statistic of the hypothesis: ``sup (F_{n_b} - F_{n_a})^+`` for
        ``"less"``, ``sup (F_{n_a} - F_{n_b})^+`` for ``"greater"``,
        ``||F_{n_b} - F_{n_a}||_inf`` for ``"equal"``.
    p_value : float
        Running minimum of the sequential p-values over the updates (eq. 21).
    p_value_now : float
        Sequential p-value at the current sample sizes alone.
    decision : str
        ``"continue"``, ``"reject"`` or ``"accept"``; sticky once reached.
    decided_at : tuple of int or None
        ``(n_a, n_b)`` when the decision was reached.
    """

    hypothesis: Hypothesis
    alpha: float
    tau: float | None
    n_a: int
    n_b: int
    statistic: float
    p_value: float
    p_value_now: float
    decision: Decision
    decided_at: tuple[int, int] | None


# ---------------------------------------------------------------------------
# Band half-widths
# ---------------------------------------------------------------------------


def epsilon_dkw(n: npt.ArrayLike, alpha: npt.ArrayLike) -> FloatArray:
    """Fixed-n DKW half-width, Lindon et al. 2022 eq. (6).

    ``eps_n(alpha) = sqrt(log(2 / alpha) / (2 n))``, from the
    Dvoretzky-Kiefer-Wolfowitz inequality with Massart's constant (eq. 4).

    Parameters
    ----------
    n : array_like
        Sample sizes (``n >= 1``; ``n = 0`` gives ``inf``).
    alpha : array_like
        Levels in ``(0, 1]``.

    Returns
    -------
    FloatArray
        Half-widths, broadcast over ``n`` and ``alpha``.

    References
    ----------
    Massart (1990), Ann. Probab. 18(3); Lindon et al. (2022), eq. (6).
    """
    n_arr, alpha_arr = _check_n_alpha(n, alpha)
    with np.errstate(divide="ignore"):
        out: FloatArray = np.sqrt(np.log(2.0 / alpha_arr) / (2.0 * n_arr))
    return out


def epsilon_time_uniform(n: npt.ArrayLike, alpha: npt.ArrayLike) -> FloatArray:
    """Time-uniform DKW half-width of Howard and Ramdas, Lindon et al. 2022 eq. (19).

    ``eps_n(alpha) = 0.85 sqrt((log log(e n) + 0.8 log(1612 / alpha)) / n)``.
    The band ``F_n(x) +- eps_n(alpha)`` holds for all ``x`` and all ``n >= 1``
    simultaneously with probability at least ``1 - alpha`` (eq. 16).

    Parameters
    ----------
    n : array_like
        Sample sizes (``n >= 1``; ``n = 0`` gives ``inf``). Real values are
        accepted (the sample-size bound solves for ``n``).
    alpha : array_like
        Levels in ``(0, 1]``.

    Returns
    -------
    FloatArray
        Half-widths, broadcast over ``n`` and ``alpha``.

    Notes
    -----
    ``log log(e n) = log(1 + log n)`` is evaluated in that form. The function
    is decreasing in ``n`` for ``alpha <= 1`` (its derivative in ``n`` has the
    sign of ``1 / log(e n) - log log(e n) - 0.8 log(1612 / alpha) < 0``).

    References
    ----------
    Howard and Ramdas (2022), Bernoulli 28(3), Theorem 5 as simplified in
    Lindon et al. (2022), eq. (19).
    """
    n_arr, alpha_arr = _check_n_alpha(n, alpha)
    with np.errstate(divide="ignore", invalid="ignore"):
        loglog = np.log1p(np.log(np.where(n_arr > 0, n_arr, 1.0)))
        out = _HR_SCALE * np.sqrt(
            (loglog + _HR_LOG_WEIGHT * np.log(_HR_ALPHA_FACTOR / alpha_arr)) / n_arr
        )
    return cast(FloatArray, np.where(n_arr > 0, out, np.inf))


def _epsilon(n: int, alpha: float, time_uniform: bool) -> float:
    if time_uniform:
        return float(epsilon_time_uniform(n, alpha))
    return float(epsilon_dkw(n, alpha))


def _check_n_alpha(n: npt.ArrayLike, alpha: npt.ArrayLike) -> tuple[FloatArray, FloatArray]:
    n_arr = np.asarray(n, dtype=np.float64)
    alpha_arr = np.asarray(alpha, dtype=np.float64)
    if np.any(~(n_arr >= 0)):
        raise ValueError("sample sizes must be >= 0")
    if np.any(~((alpha_arr > 0) & (alpha_arr <= 1))):
        raise ValueError("alpha must lie in (0, 1]")
    return n_arr, alpha_arr


def _check_alpha(alpha: float) -> float:
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha!r}")
    return float(alpha)


# ---------------------------------------------------------------------------
# Sequential p-value (derived from eq. 19 and the union bound)
# ---------------------------------------------------------------------------


def _eps_sum_log(log_term: float, n_a: int, n_b: int) -> float:
    """``eps_{n_a}(alpha/2) + eps_{n_b}(alpha/2)`` with ``log_term = log(3224 / alpha)``."""
    w = _HR_LOG_WEIGHT * log_term
    return _HR_SCALE * (
        math.sqrt((math.log1p(math.log(n_a)) + w) / n_a)
        + math.sqrt((math.log1p(math.log(n_b)) + w) / n_b)
    )


def _log_term_equal_n(statistic: float, n: int) -> float:
    """Solve ``2 eps_n(alpha/2) = statistic`` for ``log(3224 / alpha)`` (closed form)."""
    return (n * (statistic / (2.0 * _HR_SCALE)) ** 2 - math.log1p(math.log(n))) / _HR_LOG_WEIGHT


def _p_value_scalar(statistic: float, n_a: int, n_b: int) -> float:
    if n_a <= 0 or n_b <= 0 or statistic <= 0.0:
        return 1.0
    log_one = math.log(_TWO_ARM_FACTOR)  # log(3224 / alpha) at alpha = 1
    if _eps_sum_log(log_one, n_a, n_b) >= statistic:
        return 1.0
    if n_a == n_b:
        log_term = _log_term_equal_n(statistic, n_a)
    else:
        # Bracket (the paper's "sandwich"): eps_n is decreasing in n, so the root
        # lies between the equal-n roots at min(n_a, n_b) and max(n_a, n_b).
        lo = _log_term_equal_n(statistic, min(n_a, n_b))
        hi = _log_term_equal_n(statistic, max(n_a, n_b))
        lo = max(lo, log_one)
        pad = 1e-9 * (1.0 + abs(hi))

        def excess(log_term: float) -> float:
            return _eps_sum_log(log_term, n_a, n_b) - statistic

        while excess(lo) > 0.0:  # rounding only: the bracket is exact in real arithmetic
            lo -= pad
        while excess(hi) < 0.0:
            hi += pad
        log_term = float(brentq(excess, lo, hi, xtol=_ROOT_XTOL, rtol=4 * np.finfo(float).eps))
    return min(1.0, _TWO_ARM_FACTOR * math.exp(-log_term))


def sequential_p_value(
    statistic: npt.ArrayLike, n_a: npt.ArrayLike, n_b: npt.ArrayLike
) -> FloatArray:
    """Sequential p-value of the DKW confidence-sequence test (Lindon et al. 2022, §3.3.1).

    The p-value is the smallest ``alpha`` at which the time-uniform band on
    ``d = F_b - F_a`` (Prop. 3.1 with eq. 19) rejects, i.e. the root in
    ``alpha`` of

        ``statistic = eps_{n_a}(alpha / 2) + eps_{n_b}(alpha / 2)``      (eq. 11 with eq. 19)

    capped at 1. ``statistic`` is ``sup (F_{n_b} - F_{n_a})^+`` for the null
    ``A <= B``, ``sup (F_{n_a} - F_{n_b})^+`` for ``A >= B`` and
    ``||F_{n_b} - F_{n_a}||_inf`` for ``A =d B``.

    Parameters
    ----------
    statistic : array_like
        Sup-statistics in ``[0, 1]``.
    n_a, n_b : array_like of int
        Sample sizes of the two arms (``0`` gives p-value 1).

    Returns
    -------
    FloatArray
        p-values in ``(0, 1]``, broadcast over the inputs.

    Notes
    -----
    Derivation. Reject ``A <= B`` at level ``alpha`` when the band's lower edge
    ``d^l(alpha, x) = max(0, F_{n_b} - e_b) - min(1, F_{n_a} + e_a)`` reaches 0
    for some ``x``, where ``e_k = eps_{n_k}(alpha / 2)`` (each arm gets
    ``alpha / 2``: union bound, eq. 8). Because ``F_{n_a} >= 0`` and
    ``F_{n_b} <= 1`` the clipping never matters here, so the test rejects iff
    ``sup_x (F_{n_b} - F_{n_a}) >= e_a + e_b``. The right side decreases in
    ``alpha``, so the set of rejecting levels is ``[p, 1]`` with ``p`` the root
    above. With eq. (19) at ``alpha / 2``,
    ``e_k = 0.85 sqrt((log log(e n_k) + 0.8 L) / n_k)`` with
    ``L = log(1612 / (alpha / 2)) = log(3224 / alpha)``. For ``n_a = n_b = n``
    the equation ``D = 2 e_n`` solves in closed form:

        ``p = 3224 exp(-(n (D / 1.7)^2 - log log(e n)) / 0.8)``.

    The paper prints ``3624`` instead of ``2 * 1612 = 3224`` and
    ``(d / 2)^2 / 0.85`` instead of ``((d / 2) / 0.85)^2`` in ``p_n(d)``. (In
    the fixed-n eq. (12) its ``2 exp(-n D^2 / 2)`` should likewise read
    ``4 exp(-n D^2 / 2)``, as its own eq. (13) and §3.2.6 have.) For
    ``n_a != n_b`` the root in ``L`` is found with Brent's method
    (``scipy.optimize.brentq``) inside the bracket given by the equal-n roots
    at ``min(n_a, n_b)`` and ``max(n_a, n_b)`` (``eps_n`` decreases in ``n``),
    which is the paper's sandwich. By construction ``p <= alpha`` exactly
    when the band rejects (``>=`` form; the paper writes ``> 0``, which
    differs only at the single level ``alpha = p``).

    Validity (eq. 20): under the null the event ``p <= alpha`` for some
    ``(n_a, n_b)`` implies one of the two arms' time-uniform bands fails at
    level ``alpha' / 2`` for every ``alpha' > alpha``, so it has probability
    at most ``alpha``.

    References
    ----------
    Lindon et al. (2022), Theorem 3.4, eqs. (11)-(13), (19), §3.3.1 and
    Appendix B; Howard and Ramdas (2022).
    """
    stat_arr, na_arr, nb_arr = np.broadcast_arrays(
        np.asarray(statistic, dtype=np.float64),
        np.asarray(n_a, dtype=np.int64),
        np.asarray(n_b, dtype=np.int64),
    )
    if np.any(~((stat_arr >= 0) & (stat_arr <= 1))):
        raise ValueError("statistic must lie in [0, 1]")
    if np.any(na_arr < 0) or np.any(nb_arr < 0):
        raise ValueError("sample sizes must be >= 0")
    shape = stat_arr.shape
    stat_f, na_f, nb_f = stat_arr.ravel(), na_arr.ravel(), nb_arr.ravel()
    out = np.ones(stat_f.size, dtype=np.float64)
    equal = (na_f == nb_f) & (na_f > 0) & (stat_f > 0)
    if np.any(equal):
        n_eq = na_f[equal].astype(np.float64)
        log_term = (
            n_eq * (stat_f[equal] / (2.0 * _HR_SCALE)) ** 2 - np.log1p(np.log(n_eq))
        ) / _HR_LOG_WEIGHT
        out[equal] = np.minimum(1.0, _TWO_ARM_FACTOR * np.exp(-log_term))
    for i in np.flatnonzero(~equal):
        out[i] = _p_value_scalar(float(stat_f[i]), int(na_f[i]), int(nb_f[i]))
    return out.reshape(shape)


# ---------------------------------------------------------------------------
# Bands from samples
# ---------------------------------------------------------------------------


def cdf_band(sample: npt.ArrayLike, *, alpha: float = 0.05, time_uniform: bool = True) -> CdfBand:
    """Confidence band on the distribution function of one sample.

    ``F_n(x) +- eps_n(alpha)`` clipped to ``[0, 1]`` (Lindon et al. 2022,
    eqs. 5-6); with ``time_uniform=True`` (default) ``eps_n`` is the
    Howard-Ramdas boundary of eq. (19), so the band holds for all ``x`` and
    all ``n`` at once (eq. 16), otherwise the fixed-n DKW radius of eq. (6).

    Parameters
    ----------
    sample : array_like
        Finite observations.
    alpha : float, default 0.05
        One minus the coverage.
    time_uniform : bool, default True
        Use eq. (19) rather than eq. (6).

    Returns
    -------
    CdfBand
        The band at the sample's distinct values.
    """
    _check_alpha(alpha)
    x = as_sample(sample, "sample")
    if x.size == 0:
        raise ValueError("sample is empty")
    support, counts = np.unique(x, return_counts=True)
    F = np.cumsum(counts) / x.size
    eps = _epsilon(x.size, alpha, time_uniform)
    return CdfBand(
        x=support,
        cdf=F,
        lo=np.maximum(0.0, F - eps),
        hi=np.minimum(1.0, F + eps),
        epsilon=eps,
        n=int(x.size),
    )


def _difference_band_from_cdfs(
    x: FloatArray, F_a: FloatArray, F_b: FloatArray, eps_a: float, eps_b: float
) -> DifferenceBand:
    lo = np.maximum(0.0, F_b - eps_b) - np.minimum(1.0, F_a + eps_a)
    hi = np.minimum(1.0, F_b + eps_b) - np.maximum(0.0, F_a - eps_a)
    return DifferenceBand(x=x, diff=F_b - F_a, lo=lo, hi=hi, epsilon_a=eps_a, epsilon_b=eps_b)


def difference_band(
    a: npt.ArrayLike,
    b: npt.ArrayLike,
    *,
    alpha: float = 0.05,
    time_uniform: bool = True,
    x: npt.ArrayLike | None = None,
) -> DifferenceBand:
    """Confidence band on ``d = F_b - F_a``, Lindon et al. 2022 Prop. 3.1 (eq. 9).

    ``d^u = F^u_{n_b}(alpha/2) - F^l_{n_a}(alpha/2)`` and
    ``d^l = F^l_{n_b}(alpha/2) - F^u_{n_a}(alpha/2)``: each arm's band at level
    ``alpha / 2`` (union bound, eq. 8), so the band covers ``d`` everywhere with
    probability at least ``1 - alpha`` (for all sample sizes at once when
    ``time_uniform``).

    Parameters
    ----------
    a, b : array_like
        Samples of arms A and B (non-empty, finite).
    alpha : float, default 0.05
        One minus the coverage.
    time_uniform : bool, default True
        Use eq. (19) rather than the fixed-n eq. (6).
    x : array_like, optional
        Evaluation points; default the sorted distinct values of both samples.

    Returns
    -------
    DifferenceBand
    """
    _check_alpha(alpha)
    xa = np.sort(as_sample(a, "a"))
    xb = np.sort(as_sample(b, "b"))
    if xa.size == 0 or xb.size == 0:
        raise ValueError("both samples must be non-empty")
    pts = np.union1d(xa, xb) if x is None else np.asarray(x, dtype=np.float64)
    F_a = np.searchsorted(xa, pts, side="right") / xa.size
    F_b = np.searchsorted(xb, pts, side="right") / xb.size
    return _difference_band_from_cdfs(
        pts,
        F_a,
        F_b,
        _epsilon(xa.size, alpha / 2, time_uniform),
        _epsilon(xb.size, alpha / 2, time_uniform),
    )


def _order_statistics(support: FloatArray, cumulative: IntArray, ranks: IntArray) -> FloatArray:
    """Order statistics of rank ``ranks`` (1-based) from a support with cumulative counts.

    Ranks below 1 give ``-inf``, ranks above ``n`` give ``+inf``.
    """
    n = int(cumulative[-1])
    out = np.empty(ranks.shape, dtype=np.float64)
    low = ranks < 1
    high = ranks > n
    mid = ~(low | high)
    out[low] = -np.inf
    out[high] = np.inf
    out[mid] = support[np.searchsorted(cumulative, ranks[mid], side="left")]
    return out


def _band_ranks(n: int, p: FloatArray, eps: float) -> tuple[IntArray, IntArray, IntArray]:
    """Ranks (1-based) of the order statistics of the estimate, the lower and the upper
    end of the quantile band at ``p`` (eq. 7)."""
    # Q_n(q) = sup{x : F_n(x) <= q} is the (floor(n q) + 1)-th order statistic and
    # Q_n^-(q) the ceil(n q)-th (eq. 7); the band leaves the data outside [0, 1].
    upper_rank = np.floor(n * (p + eps)).astype(np.int64) + 1
    lower_q = p - eps
    lower_rank = np.where(lower_q > 0, np.ceil(n * lower_q), 0).astype(np.int64)
    est_rank = np.maximum(np.ceil(n * p), 1).astype(np.int64)
    return est_rank, lower_rank, upper_rank


def _quantile_band_from_counts(
    support: FloatArray, cumulative: IntArray, p: FloatArray, eps: float
) -> QuantileBand:
    est_rank, lower_rank, upper_rank = _band_ranks(int(cumulative[-1]), p, eps)
    return QuantileBand(
        p=p,
        estimate=_order_statistics(support, cumulative, est_rank),
        lo=_order_statistics(support, cumulative, lower_rank),
        hi=_order_statistics(support, cumulative, upper_rank),
    )


def _as_probabilities(ps: npt.ArrayLike) -> FloatArray:
    p = np.atleast_1d(np.asarray(ps, dtype=np.float64))
    if p.ndim != 1 or np.any(~((p >= 0) & (p <= 1))):
        raise ValueError("ps must be a 1-D array of probabilities in [0, 1]")
    return p


def quantile_band(
    sample: npt.ArrayLike,
    ps: npt.ArrayLike,
    *,
    alpha: float = 0.05,
    time_uniform: bool = True,
) -> QuantileBand:
    """Confidence band on the quantile function, Lindon et al. 2022 eq. (7).

    ``[Q_n^-(p - eps_n), Q_n(p + eps_n)]`` where ``Q_n`` is the upper empirical
    quantile (the ``floor(n p) + 1``-th order statistic) and ``Q_n^-`` the lower
    one (the ``ceil(n p)``-th): the inversion of the CDF band, simultaneous
    over ``p`` (and over ``n`` when ``time_uniform``).

    Parameters
    ----------
    sample : array_like
        Finite observations (non-empty).
    ps : array_like
        Probabilities in ``[0, 1]``.
    alpha : float, default 0.05
        One minus the coverage.
    time_uniform : bool, default True
        Use eq. (19) rather than the fixed-n eq. (6).

    Returns
    -------
    QuantileBand
        Infinite ends where ``p +- eps`` leaves ``[0, 1]``.
    """
    _check_alpha(alpha)
    x = as_sample(sample, "sample")
    if x.size == 0:
        raise ValueError("sample is empty")
    support, counts = np.unique(x, return_counts=True)
    return _quantile_band_from_counts(
        support,
        np.cumsum(counts, dtype=np.int64),
        _as_probabilities(ps),
        _epsilon(x.size, alpha, time_uniform),
    )


def _quantile_difference(a: QuantileBand, b: QuantileBand) -> QuantileBand:
    return QuantileBand(p=a.p, estimate=b.estimate - a.estimate, lo=b.lo - a.hi, hi=b.hi - a.lo)


# ---------------------------------------------------------------------------
# Sample size and count metrics
# ---------------------------------------------------------------------------


def sample_size(radius: float, *, alpha: float = 0.05, time_uniform: bool = True) -> int:
    """Observations per arm for a band on ``F_b - F_a`` of half-width ``radius``.

    Smallest ``n`` with ``2 eps_n(alpha / 2) <= radius`` (``n_a = n_b = n``).
    Fixed-n: ``n = 2 log(4 / alpha) / radius^2`` (Lindon et al. 2022, eq. 15,
    §3.2.7); time-uniform: ``eps_n`` of eq. (19), solved numerically (§3.3.3).

    To bound the length of a sequential test with tolerance ``tau`` use
    ``radius`` just below ``tau / 2``: once ``2 eps_n(alpha/2) < tau / 2`` the
    band on ``d`` (width at most twice its radius) either excludes 0 somewhere
    (reject) or lies within ``(-tau, tau)`` everywhere (accept) for every
    hypothesis of Table 1.

    Parameters
    ----------
    radius : float
        Half-width in ``(0, 1]``.
    alpha : float, default 0.05
        One minus the coverage.
    time_uniform : bool, default True
        Use eq. (19) rather than eq. (6).

    Returns
    -------
    int
        Sample size per arm.
    """
    _check_alpha(alpha)
    if not 0.0 < radius <= 1.0:
        raise ValueError("radius must lie in (0, 1]")
    if not time_uniform:
        return math.ceil(2.0 * math.log(4.0 / alpha) / radius**2)

    def width(n: float) -> float:
        return 2.0 * float(epsilon_time_uniform(n, alpha / 2)) - radius

    hi = 2.0
    while width(hi) > 0.0:
        hi *= 2.0
    root = float(brentq(width, 1.0 if width(1.0) > 0 else hi / 2, hi, xtol=1e-9))
    n = max(1, math.ceil(root))
    while width(n) > 0.0:  # guard the ceiling against the root finder's tolerance
        n += 1
    while n > 1 and width(n - 1) <= 0.0:
        n -= 1
    return n


def samples_for_width(
    width: float, target: float, n_a: int, n_b: int, *, alpha: float = 0.05
) -> int:
    """Estimated observations per arm for a quantile-difference band to shrink to ``target``.

    The band on ``Q_b(p) - Q_a(p)`` (eq. 7 with eq. 19, each arm at ``alpha / 2``) is, to
    first order in the half-widths, ``Q_b(p) - Q_a(p) +- (e_a / f_a + e_b / f_b)`` with
    ``f`` the densities at the quantile (the delta method on ``Q(p +- eps)``): its width is
    proportional to the half-widths ``eps_n(alpha / 2)`` of eq. (19). With equal densities
    the width is ``c (e_{n_a} + e_{n_b})``; ``c`` is estimated from the current band, and
    the answer is the smallest ``n`` with ``c 2 e_n <= target`` (:func:`sample_size` with
    radius ``target / c``).

    This is an estimate (it assumes the densities near the quantile stay as the data show
    them), not a bound; the band itself stays valid whenever it is looked at, so checking
    again at the estimated ``n`` costs nothing (time-uniform, eq. 16).

    Parameters
    ----------
    width : float
        Current width of the band (finite, ``> 0``).
    target : float
        Width wanted (``> 0``): the smallest change worth telling apart.
    n_a, n_b : int
        Current sample sizes (``>= 1``).
    alpha : float, default 0.05
        Level of the band.

    Returns
    -------
    int
        Estimated total observations per arm (at least ``max(n_a, n_b)`` when the band is
        still too wide; ``min(n_a, n_b)`` when it is already narrow enough).

    References
    ----------
    Lindon et al. (2022), eqs. (7), (15)-(19), §3.3.3; Howard and Ramdas (2022).
    """
    _check_alpha(alpha)
    if not (math.isfinite(width) and width > 0.0):
        raise ValueError("width must be finite and > 0")
    if not (math.isfinite(target) and target > 0.0):
        raise ValueError("target must be finite and > 0")
    if n_a < 1 or n_b < 1:
        raise ValueError("both arms need at least one observation")
    if width <= target:
        return min(n_a, n_b)
    eps_sum = float(epsilon_time_uniform(n_a, alpha / 2) + epsilon_time_uniform(n_b, alpha / 2))
    radius = min(1.0, eps_sum * target / width)
    return max(max(n_a, n_b), sample_size(radius, alpha=alpha))


def inter_arrival_times(timestamps: npt.ArrayLike, *, previous: float | None = None) -> FloatArray:
    """Waiting times between events, for count metrics (Lindon et al. 2022, §3.4).

    A count metric (e.g. error events) is modelled as a renewal process; its
    inter-arrival times are i.i.d. draws from the renewal distribution ``G``,
    so feeding them into :class:`SequentialTest` tests ``G_a`` against ``G_b``.
    A higher event rate means shorter waits, i.e. a stochastically smaller
    renewal distribution.

    Parameters
    ----------
    timestamps : array_like
        Event times of one arm (any order; sorted here).
    previous : float, optional
        Time of the last event of the previous batch, so that a stream can be
        fed in batches; without it the first event only starts the clock (the
        paper feeds ``t_2 - t_1, t_3 - t_2, ...``). The censored wait after the
        last event is never an observation.

    Returns
    -------
    FloatArray
        Non-negative waiting times.
    """
    t = np.sort(as_sample(timestamps, "timestamps"))
    if previous is not None:
        if t.size and t[0] < previous:
            raise ValueError("timestamps precede the previous batch's last event")
        t = np.concatenate(([float(previous)], t))
    return np.diff(t)


# ---------------------------------------------------------------------------
# The sequential test
# ---------------------------------------------------------------------------


class SequentialTest:
    """Sequential test of ``A <= B``, ``A >= B`` or ``A =d B`` on batches of data.

    Implements the confidence-sequence test of Lindon et al. (2022), §3.3:
    time-uniform DKW bands (eq. 19) on each arm at ``alpha / 2``, the band on
    ``F_b - F_a`` (Prop. 3.1), the sequential p-value with its running minimum
    (eq. 21) and the stopping rules of Table 1.

    Parameters
    ----------
    hypothesis : {"equal", "less", "greater"}, default "equal"
        The *null* hypothesis: ``A =d B``, ``A <= B`` or ``A >= B`` (stochastic
        order, A the control). See the module docstring for the mapping.
    alpha : float, default 0.05
        Type I error over the whole (open-ended) run.
    tau : float, optional
        Tolerance of the approximate acceptance (Table 1): accept once the
        band guarantees ``F_b - F_a < tau`` (``"less"``), ``> -tau``
        (``"greater"``) or ``||F_b - F_a||_inf < tau`` (``"equal"``). ``None``
        (default): never accept, only reject or continue.
    buffer_limit : int, default 16384
        Performance only (results do not depend on it): how many distinct new
        values are held in the small sorted buffer before it is merged into
        the main sorted support.

    Notes
    -----
    State: the sorted distinct values seen in either arm with cumulative
    per-arm counts (the *main* support, ``U <= n_a + n_b`` points), plus a
    small sorted *buffer* of distinct values not yet merged (``k`` points, each
    with its insertion position in the main support). The statistics need
    ``g(x) = n_a n_b (F_{n_b}(x) - F_{n_a}(x))`` at every point (exact
    integers). On the main support ``g`` is one vectorised linear pass over
    the cumulative counts; the buffer adds a step function that is constant
    between consecutive buffer positions, so the sup and inf of ``g`` are
    segment maxima/minima of the main pass (``np.maximum.reduceat``) plus the
    buffer's offsets, together with ``g`` at the buffer points themselves.

    Cost of an update of ``m`` values: ``O(m log m)`` to sort the batch,
    ``O(m log U + k)`` to place it, and ``O(U)`` for the pass (no sorting and
    no memory moves of the main arrays). Every ``~buffer_limit / m`` updates
    the buffer is merged: ``O(U + k)``. Recomputing from scratch costs
    ``O(N log N)`` per update. A linear pass per update is the floor for an
    exact sup because ``n_a`` and ``n_b`` change, and with them every point of
    ``d_n``. With ``tau`` set, the clipped band extremes of the acceptance rule
    are computed only when cheap bounds cannot settle the rule (then the
    buffer is merged first).

    The p-value is the running minimum over updates (eq. 21): evaluating it
    only after each batch (not after each observation) keeps it valid, and
    can only make it larger than observation-by-observation monitoring.
    Decisions are sticky: the first ``"reject"``/``"accept"`` is kept
    (rejection wins if both rules fire in the same update), which is the
    stopping time whose error probability Table 1 bounds by ``alpha``.
    """

    def __init__(
        self,
        hypothesis: Hypothesis = "equal",
        alpha: float = 0.05,
        tau: float | None = None,
        *,
        buffer_limit: int = 16_384,
    ) -> None:
        if hypothesis not in ("equal", "less", "greater"):
            raise ValueError(f"unknown hypothesis {hypothesis!r}")
        if tau is not None and not 0.0 < tau <= 1.0:
            raise ValueError("tau must lie in (0, 1]")
        if buffer_limit < 0:
            raise ValueError("buffer_limit must be >= 0")
        self.hypothesis: Hypothesis = hypothesis
        self.alpha = _check_alpha(alpha)
        self.tau = None if tau is None else float(tau)
        self.buffer_limit = int(buffer_limit)
        # main support and cumulative counts
        self._support: FloatArray = np.empty(0, dtype=np.float64)
        self._cum_a: IntArray = np.empty(0, dtype=np.int64)
        self._cum_b: IntArray = np.empty(0, dtype=np.int64)
        # buffer: distinct values, insertion positions in the main support, counts
        self._buf_x: FloatArray = np.empty(0, dtype=np.float64)
        self._buf_pos: IntArray = np.empty(0, dtype=np.int64)
        self._buf_a: IntArray = np.empty(0, dtype=np.int64)
        self._buf_b: IntArray = np.empty(0, dtype=np.int64)
        # work arrays for the pass over the main support, reused between updates
        self._work_g: IntArray = np.empty(0, dtype=np.int64)
        self._work_t: IntArray = np.empty(0, dtype=np.int64)
        self._n_a = 0
        self._n_b = 0
        self._g_max = 0  # max(0, sup g), g = n_a n_b d_n (exact integers)
        self._g_min = 0  # min(0, inf g)
        self._p_min = 1.0
        self._decision: Decision = "continue"
        self._decided_at: tuple[int, int] | None = None

    # -- data --------------------------------------------------------------

    def update(self, a_values: npt.ArrayLike, b_values: npt.ArrayLike) -> SequentialResult:
        """Add a batch of observations to each arm and re-evaluate the test.

        Parameters
        ----------
        a_values, b_values : array_like
            New finite observations of arms A and B; either may be empty and
            their sizes may differ.

        Returns
        -------
        SequentialResult
            The snapshot after this update.
        """
        a = as_sample(a_values, "a_values")
        b = as_sample(b_values, "b_values")
        if a.size == 0 and b.size == 0:
            return self.result()
        values, inverse = np.unique(np.concatenate((a, b)), return_inverse=True)
        new_a = np.bincount(inverse[: a.size], minlength=values.size).astype(np.int64)
        new_b = np.bincount(inverse[a.size :], minlength=values.size).astype(np.int64)
        at = np.searchsorted(self._buf_x, values)
        found = at < self._buf_x.size
        found[found] = self._buf_x[at[found]] == values[found]
        self._buf_a[at[found]] += new_a[found]
        self._buf_b[at[found]] += new_b[found]
        fresh = ~found
        if np.any(fresh):
            at, x = at[fresh], values[fresh]
            self._buf_x = np.insert(self._buf_x, at, x)
            self._buf_pos = np.insert(self._buf_pos, at, np.searchsorted(self._support, x))
            self._buf_a = np.insert(self._buf_a, at, new_a[fresh])
            self._buf_b = np.insert(self._buf_b, at, new_b[fresh])
        self._n_a += a.size
        self._n_b += b.size
        if self._buf_x.size > self.buffer_limit:
            self._merge()
        self._evaluate()
        return self.result()

    def _merge(self) -> None:
        """Merge the buffer into the main support (``O(U + k)``)."""
        if self._buf_x.size == 0:
            return
        size = self._support.size
        pos = self._buf_pos
        hit = pos < size
        hit[hit] = self._support[pos[hit]] == self._buf_x[hit]
        count_a = np.diff(self._cum_a, prepend=0)
        count_b = np.diff(self._cum_b, prepend=0)
        count_a[pos[hit]] += self._buf_a[hit]
        count_b[pos[hit]] += self._buf_b[hit]
        new = ~hit
        self._support = np.insert(self._support, pos[new], self._buf_x[new])
        self._cum_a = np.cumsum(np.insert(count_a, pos[new], self._buf_a[new]))
        self._cum_b = np.cumsum(np.insert(count_b, pos[new], self._buf_b[new]))
        self._buf_x = np.empty(0, dtype=np.float64)
        self._buf_pos = np.empty(0, dtype=np.int64)
        self._buf_a = np.empty(0, dtype=np.int64)
        self._buf_b = np.empty(0, dtype=np.int64)

    def _evaluate(self) -> None:
        n_a, n_b = self._n_a, self._n_b
        if n_a == 0 or n_b == 0:
            return
        g_max, g_min = 0, 0
        size, k = self._support.size, self._buf_x.size
        if k:
            # Buffer values <= x add these amounts to g(x).
            cum_buf_a = np.cumsum(self._buf_a)
            cum_buf_b = np.cumsum(self._buf_b)
            offset = cum_buf_b * n_a - cum_buf_a * n_b
            # g at the buffer points: main points <= the value, plus the buffer's.
            pos = self._buf_pos
            inside = pos < size
            right = pos.copy()
            right[inside] += self._support[pos[inside]] == self._buf_x[inside]
            below = np.maximum(right - 1, 0)
            main_a = np.where(right > 0, self._cum_a[below] if size else 0, 0)
            main_b = np.where(right > 0, self._cum_b[below] if size else 0, 0)
            g_buf = offset + main_b * n_a - main_a * n_b
            g_max, g_min = max(g_max, int(g_buf.max())), min(g_min, int(g_buf.min()))
        if size:
            if self._work_g.size != size:
                self._work_g = np.empty(size, dtype=np.int64)
                self._work_t = np.empty(size, dtype=np.int64)
            g, t = self._work_g, self._work_t
            np.multiply(self._cum_b, n_a, out=g)
            np.multiply(self._cum_a, n_b, out=t)
            np.subtract(g, t, out=g)
            if k == 0:
                g_max, g_min = max(g_max, int(g.max())), min(g_min, int(g.min()))
            else:
                # Segments of the main support between consecutive buffer positions
                # carry the offset of the last buffer value inserted before them.
                last = np.flatnonzero(np.append(pos[1:] != pos[:-1], True))
                last = last[pos[last] < size]
                starts, offs = pos[last], offset[last]
                if starts.size == 0 or starts[0] > 0:
                    starts = np.concatenate(([0], starts))
                    offs = np.concatenate(([0], offs))
                seg_max = np.maximum.reduceat(g, starts) + offs
                seg_min = np.minimum.reduceat(g, starts) + offs
                g_max, g_min = max(g_max, int(seg_max.max())), min(g_min, int(seg_min.min()))
        self._g_max, self._g_min = g_max, g_min
        p_now = self._p_now()
        self._p_min = min(self._p_min, p_now)
        if self._decision != "continue":
            return
        if self._p_min <= self.alpha:
            self._decide("reject")
        elif self.tau is not None and self._accepts(self.tau):
            self._decide("accept")

    def _decide(self, decision: Decision) -> None:
        self._decision = decision
        self._decided_at = (self._n_a, self._n_b)

    def _accepts(self, tau: float) -> bool:
        eps_a = float(epsilon_time_uniform(self._n_a, self.alpha / 2))
        eps_b = float(epsilon_time_uniform(self._n_b, self.alpha / 2))
        # Outside the data the band is [-min(1, e_a), min(1, e_b)] (below) and
        # [-min(1, e_b), min(1, e_a)] (above): acceptance needs both below tau.
        if max(eps_a, eps_b) >= tau:
            return False
        scale = self._n_a * self._n_b
        sup_hi = self._g_max / scale + eps_a + eps_b  # clipping only narrows the band
        inf_lo = self._g_min / scale - eps_a - eps_b
        if self._accept_rule(sup_hi, inf_lo, tau):
            return True
        band = self.difference_band()
        return self._accept_rule(
            max(float(band.hi.max()), min(1.0, eps_b)),
            min(float(band.lo.min()), -min(1.0, eps_a)),
            tau,
        )

    def _accept_rule(self, sup_hi: float, inf_lo: float, tau: float) -> bool:
        """Table 1, approximate acceptance, from ``sup d^u`` and ``inf d^l``."""
        if self.hypothesis == "less":
            return sup_hi < tau
        if self.hypothesis == "greater":
            return inf_lo > -tau
        return max(-inf_lo, sup_hi) < tau

    # -- statistics --------------------------------------------------------

    @property
    def n_a(self) -> int:
        """Observations in arm A."""
        return self._n_a

    @property
    def n_b(self) -> int:
        """Observations in arm B."""
        return self._n_b

    @property
    def statistic(self) -> float:
        """Sup-statistic of the hypothesis (see :class:`SequentialResult`)."""
        if self._n_a == 0 or self._n_b == 0:
            return 0.0
        scale = self._n_a * self._n_b
        if self.hypothesis == "less":
            return self._g_max / scale
        if self.hypothesis == "greater":
            return -self._g_min / scale
        return max(self._g_max, -self._g_min) / scale

    @property
    def sup_difference(self) -> float:
        """``max(0, sup_x (F_{n_b} - F_{n_a})(x))``: evidence that B is smaller somewhere."""
        if self._n_a == 0 or self._n_b == 0:
            return 0.0
        return self._g_max / (self._n_a * self._n_b)

    @property
    def inf_difference(self) -> float:
        """``min(0, inf_x (F_{n_b} - F_{n_a})(x))``: evidence that B is larger somewhere."""
        if self._n_a == 0 or self._n_b == 0:
            return 0.0
        return self._g_min / (self._n_a * self._n_b)

    def _p_now(self) -> float:
        return _p_value_scalar(self.statistic, self._n_a, self._n_b)

    @property
    def p_value(self) -> float:
        """Sequential p-value: running minimum over updates (Lindon et al. 2022, eq. 21)."""
        return self._p_min

    @property
    def decision(self) -> Decision:
        """``"continue"``, ``"reject"`` or ``"accept"`` (Table 1; sticky)."""
        return self._decision

    def result(self) -> SequentialResult:
        """Snapshot of the current state (see :class:`SequentialResult`)."""
        return SequentialResult(
            hypothesis=self.hypothesis,
            alpha=self.alpha,
            tau=self.tau,
            n_a=self._n_a,
            n_b=self._n_b,
            statistic=self.statistic,
            p_value=self._p_min,
            p_value_now=self._p_now(),
            decision=self._decision,
            decided_at=self._decided_at,
        )

    def _require_data(self) -> None:
        if self._n_a == 0 or self._n_b == 0:
            raise ValueError("both arms need at least one observation")

    def difference_band(self, x: npt.ArrayLike | None = None) -> DifferenceBand:
        """Time-uniform band on ``F_b - F_a`` at level ``alpha`` (Prop. 3.1 with eq. 19).

        Parameters
        ----------
        x : array_like, optional
            Evaluation points; default the support (all distinct values seen).

        Returns
        -------
        DifferenceBand
        """
        self._require_data()
        self._merge()
        cum_a, cum_b = self._cum_a, self._cum_b
        if x is None:
            pts = self._support
            F_a = cum_a / self._n_a
            F_b = cum_b / self._n_b
        else:
            pts = np.asarray(x, dtype=np.float64)
            idx = np.searchsorted(self._support, pts, side="right") - 1
            F_a = np.where(idx >= 0, cum_a[np.maximum(idx, 0)], 0) / self._n_a
            F_b = np.where(idx >= 0, cum_b[np.maximum(idx, 0)], 0) / self._n_b
        return _difference_band_from_cdfs(
            pts,
            F_a,
            F_b,
            float(epsilon_time_uniform(self._n_a, self.alpha / 2)),
            float(epsilon_time_uniform(self._n_b, self.alpha / 2)),
        )

    def quantile_bands(self, ps: npt.ArrayLike) -> QuantileBands:
        """Time-uniform quantile bands of both arms and of ``Q_b - Q_a`` (eq. 7 with eq. 19).

        Each arm's band is at ``alpha / 2`` so that, with the difference band
        derived from them, all hold together with probability ``1 - alpha``
        for all sample sizes.

        Parameters
        ----------
        ps : array_like
            Probabilities in ``[0, 1]``.

        Returns
        -------
        QuantileBands

        Notes
        -----
        The buffer is not merged: each order statistic is found on the main
        support and on the buffer separately (``_buffered_order_statistics``),
        ``O(len(ps) log U log k)``, where a merge would move ``O(U)`` memory at
        every call (the canary's page reads the bands after every update).
        """
        self._require_data()
        p = _as_probabilities(ps)
        # Main points <= each buffer value (the buffer's positions, one past an equal point).
        pos, size = self._buf_pos, self._support.size
        main_below = pos.copy()
        inside = pos < size
        main_below[inside] += self._support[pos[inside]] == self._buf_x[inside]
        band_a = self._arm_quantile_band(self._cum_a, self._buf_a, main_below, self._n_a, p)
        band_b = self._arm_quantile_band(self._cum_b, self._buf_b, main_below, self._n_b, p)
        return QuantileBands(a=band_a, b=band_b, diff=_quantile_difference(band_a, band_b))

    def _arm_quantile_band(
        self, cumulative: IntArray, buffered: IntArray, main_below: IntArray, n: int,
        p: FloatArray,
    ) -> QuantileBand:
        eps = float(epsilon_time_uniform(n, self.alpha / 2))
        ranks = np.concatenate(_band_ranks(n, p, eps))
        if self._buf_x.size == 0:
            values = _order_statistics(self._support, cumulative, ranks)
        else:
            values = self._buffered_order_statistics(cumulative, buffered, main_below, ranks)
        estimate, lo, hi = np.split(values, 3)
        return QuantileBand(p=p, estimate=estimate, lo=lo, hi=hi)

    def _buffered_order_statistics(
        self, cumulative: IntArray, buffered: IntArray, main_below: IntArray, ranks: IntArray
    ) -> FloatArray:
        """Order statistics of one arm (main cumulative counts ``cumulative``, buffer counts
        ``buffered``, ``main_below``: main points <= each buffer value) as if the buffer
        were merged; ranks outside ``[1, n]`` give ``-inf`` or ``+inf`` (as
        ``_order_statistics``).

        With ``C(x)`` the arm's count of values ``<= x`` (main plus buffer), the order
        statistic of rank ``r`` is the smallest point ``v`` of the main support or of the
        buffer with ``C(v) >= r`` (a point where the arm has no observation never is the
        first to reach ``r``). ``C`` is non-decreasing along each sorted array: on the
        buffer it is known at every point (``O(k)``); on the main support it is found by a
        vectorised bisection, each step reading the buffer's count below the probed points
        (``O(log U)`` steps of ``O(len(ranks) log k)``). The answer is the smaller of the
        two candidates.
        """
        size, k = self._support.size, self._buf_x.size
        buf_cum = np.cumsum(buffered)
        n = (int(cumulative[-1]) if size else 0) + int(buf_cum[-1])
        out = np.empty(ranks.shape, dtype=np.float64)
        out[ranks < 1] = -np.inf
        out[ranks > n] = np.inf
        mid = (ranks >= 1) & (ranks <= n)
        r = ranks[mid]
        # On the buffer: C(buffer value) = its buffer cumulative + main counts <= it.
        c_buf = buf_cum + np.where(main_below > 0, cumulative[main_below - 1] if size else 0, 0)
        at_buf = np.searchsorted(c_buf, r, side="left")
        best = np.where(at_buf < k, self._buf_x[np.minimum(at_buf, k - 1)], np.inf)
        if size:
            # On the main support: the first j with C(support[j]) >= r, by bisection.
            lo = np.zeros(r.shape, dtype=np.int64)
            hi = np.full(r.shape, size, dtype=np.int64)
            while np.any(active := lo < hi):
                probe = np.minimum((lo + hi) // 2, size - 1)
                below = np.searchsorted(self._buf_x, self._support[probe], side="right")
                c_main = cumulative[probe] + np.where(below > 0, buf_cum[below - 1], 0)
                short = c_main < r
                lo = np.where(active & short, probe + 1, lo)
                hi = np.where(active & ~short, probe, hi)
            best = np.minimum(best, np.where(lo < size, self._support[np.minimum(lo, size - 1)],
                                             np.inf))
        out[mid] = best
        return out

    # -- persistence -------------------------------------------------------

    def to_state(self) -> dict[str, Any]:
        """JSON-serialisable state, restored exactly by :meth:`from_state`.

        Returns
        -------
        dict
            ``{"format": 1, "hypothesis", "alpha", "tau", "n_a", "n_b",
            "p_value" (running minimum), "decision", "decided_at" ([n_a, n_b] or
            None), "support" (sorted distinct values, list of float),
            "counts_a", "counts_b" (lists of int, same length),
            "buffer_limit"}``. Floats round-trip exactly through ``json``
            (shortest repr). The buffer is merged first, so the state is
            canonical: equal data give equal states whatever the batching.
        """
        self._merge()
        return {
            "format": _STATE_FORMAT,
            "hypothesis": self.hypothesis,
            "alpha": self.alpha,
            "tau": self.tau,
            "n_a": self._n_a,
            "n_b": self._n_b,
            "p_value": self._p_min,
            "decision": self._decision,
            "decided_at": None if self._decided_at is None else list(self._decided_at),
            "support": self._support.tolist(),
            "counts_a": np.diff(self._cum_a, prepend=0).tolist(),
            "counts_b": np.diff(self._cum_b, prepend=0).tolist(),
            "buffer_limit": self.buffer_limit,
        }

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> SequentialTest:
        """Rebuild a test from :meth:`to_state` output (validated; errors raise).

        Parameters
        ----------
        state : dict
            As written by :meth:`to_state` (lists or numpy arrays).

        Returns
        -------
        SequentialTest
        """
        if state.get("format") != _STATE_FORMAT:
            raise ValueError(f"unsupported state format {state.get('format')!r}")
        test = cls(
            hypothesis=state["hypothesis"],
            alpha=state["alpha"],
            tau=state["tau"],
            buffer_limit=state.get("buffer_limit", 16_384),
        )
        support = np.asarray(state["support"], dtype=np.float64)
        count_a = np.asarray(state["counts_a"], dtype=np.int64)
        count_b = np.asarray(state["counts_b"], dtype=np.int64)
        if not (support.ndim == count_a.ndim == count_b.ndim == 1) or not (
            support.size == count_a.size == count_b.size
        ):
            raise ValueError("support and counts must be 1-D arrays of equal length")
        if not np.all(np.isfinite(support)) or np.any(np.diff(support) <= 0):
            raise ValueError("support must be finite and strictly increasing")
        if np.any(count_a < 0) or np.any(count_b < 0) or np.any(count_a + count_b == 0):
            raise ValueError("counts must be non-negative and every support point observed")
        if int(count_a.sum()) != state["n_a"] or int(count_b.sum()) != state["n_b"]:
            raise ValueError("counts do not add up to n_a, n_b")
        decision = state["decision"]
        if decision not in ("continue", "reject", "accept"):
            raise ValueError(f"unknown decision {decision!r}")
        p_min = float(state["p_value"])
        if not 0.0 < p_min <= 1.0:
            raise ValueError("p_value must lie in (0, 1]")
        test._support = support
        test._cum_a, test._cum_b = np.cumsum(count_a), np.cumsum(count_b)
        test._n_a, test._n_b = int(state["n_a"]), int(state["n_b"])
        test._decision = decision
        decided_at = state["decided_at"]
        test._decided_at = None if decided_at is None else (int(decided_at[0]), int(decided_at[1]))
        test._p_min = p_min
        test._evaluate()
        return test

    def same_state(self, other: SequentialTest) -> bool:
        """Whether two tests hold the same data and settings (for tests and audits)."""
        self._merge()
        other._merge()
        return (
            self.hypothesis == other.hypothesis
            and self.alpha == other.alpha
            and self.tau == other.tau
            and self._n_a == other._n_a
            and self._n_b == other._n_b
            and np.array_equal(self._support, other._support)
            and np.array_equal(self._cum_a, other._cum_a)
            and np.array_equal(self._cum_b, other._cum_b)
        )
