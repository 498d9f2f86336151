"""Anytime-valid decisions on chosen quantiles of two arms (canaries judged on p50/p90/p99).

For one probability ``q`` and one arm, at the arm's true ``q``-quantile ``x*`` the
indicators ``1{X_i <= x*}`` are i.i.d. Bernoulli(q) (for a continuous distribution; see
"ties" below), so with ``S_n(x) = #{i <= n : X_i <= x}`` the beta-binomial mixture of the
Bernoulli likelihood ratios,

    ``M_n(k) = integral (r/q)^k ((1-r)/(1-q))^(n-k) dBeta(r; c q, c (1-q))
             = B(c q + k, c (1-q) + n - k) / (B(c q, c (1-q)) q^k (1-q)^(n-k))``,    (1)

evaluated at ``k = S_n(x*)`` is a non-negative martingale with ``M_0 = 1``; by Ville's
inequality ``P(exists n: M_n(S_n(x*)) >= 1/alpha) <= alpha``. ``{x : M_n(S_n(x)) < 1/alpha}``
is therefore a confidence sequence for the quantile, valid at every n at once (Howard and
Ramdas 2022, the fixed-quantile confidence sequence with a beta-binomial mixture boundary;
Howard et al. 2021, the conjugate beta-binomial mixture). Eq. (1) is this module's own
numbering: it mixes over the success probability with a plain conjugate Beta prior, where
the paper (and its authors' ``confseq``) mix over the exponential-family tilt of the
centred increments; both are test martingales, so Ville's inequality applies alike. On
the probability scale the sequence is about ``q +- sqrt(q (1-q) log(n) / n)`` wide: tight
where the data are, unlike the DKW band of the whole distribution function
(``sequential.py``) whose width ``eps_n`` is the same at every quantile.

**Two arms.** Arms A and B are independent, so at the true pair ``(x_a*, x_b*)`` of
quantiles the product ``M^A_{n_a}(S^A(x_a*)) M^B_{n_b}(S^B(x_b*))`` is again a test
martingale (each new observation, of either arm, multiplies it by a factor of mean one).
With ``g_X(x) = log M^X(S^X(x))`` the set ``C_n = {(x_a, x_b) : g_A(x_a) + g_B(x_b) <
log(1/alpha)}`` is a joint confidence sequence for the two quantiles. We conclude

* "B's q-quantile is above A's" when ``C_n`` holds no pair with ``x_b <= x_a``, i.e. when
  ``E+ = min_{x_b <= x_a} g_A(x_a) + g_B(x_b) >= log(1/alpha)``;
* "B's q-quantile is below A's" when ``E- = min_{x_a <= x_b} (...) >= log(1/alpha)``.

Either error needs ``C_n`` to miss the true pair at some n, so each quantile's pair of
decisions has error <= alpha whatever the two distributions; with K quantiles each is
tested at ``alpha / K`` (Bonferroni), so the family's error is <= alpha under continuous
monitoring. ``E+`` at ``x_b = x_a`` is Howard and Ramdas's two-sample statistic for equal
quantiles (their A/B-testing section; ``confseq.quantiles.quantile_ab_p_value``); the
direction comes from restricting the minimum to one side. Compared with checking that two
per-arm sequences at ``alpha/2`` each no longer overlap, the evidence is pooled: roughly
half the sample size for the same decision.

**Ties.** With atoms, couple ``X_i = F^{-1}(U_i)`` with uniforms: then
``#{X_i < x*} <= #{U_i <= q} <= #{X_i <= x*}``, so using at each x the smallest
``log M_n(k)`` over ``k`` in ``[#{X_i < x}, #{X_i <= x}]`` keeps every statement valid.

**Tuning** (Howard et al. 2021, the two-sided normal mixture's ``rho`` optimised for an
intrinsic time ``v = n q (1-q)``): ``rho = v_opt / (2 log(1/alpha) + log(1 + 2
log(1/alpha)))``; the Beta prior of (1) with variance ``q (1-q) / (c + 1)`` matches it
when ``c + 1 = rho / (q (1-q)) = tuned_n / (2 L + log(1 + 2 L))``, ``L = log(1/alpha)``.
The sequence is tightest near ``tuned_n`` observations per arm and valid at every n.

**Work per look.** Each arm is kept as its sorted distinct values with cumulative counts
(:class:`ArmCounts`; a batch of m is merged in ``O(m log m + U)`` for U distinct values):
counts below and at a point are a ``searchsorted`` on the values, the order statistic of
rank k a ``searchsorted`` of k on the cumulative counts, so the decisions equal those on
the raw sorted arrays (tested) and the memory is bounded by the distinct values (bounded
whatever the stream's length once the values lie on a grid, ``stats.resolution``). The
evidence only depends on x within each arm's window of ranks ``{k : log M_n(k) < T}``
(``T = log(1/alpha)`` minus the other arm's minimum), about ``sqrt(n log n)`` order
statistics, so a look costs ``O(sqrt(n log n))`` beyond the merge, vectorised.

References
----------
S. R. Howard, A. Ramdas, *Sequential estimation of quantiles with applications to
A/B-testing and best-arm identification*, Bernoulli 28(3), 2022 (arXiv:1906.09712).
S. R. Howard, A. Ramdas, J. McAuliffe, J. Sekhon, *Time-uniform, nonparametric,
nonasymptotic confidence sequences*, Ann. Stat. 49(2), 2021 (mixture boundaries and the
choice of ``rho``). J. Ville (1939), Étude critique de la notion de collectif.

Only numpy and scipy are imported here.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
from scipy.special import betaln  # type: ignore[import-untyped]  # no scipy-stubs in the venv

from ._checks import as_sample
from ._typing import FloatArray, IntArray

__all__ = [
    "DEFAULT_QUANTILES",
    "QuantileDecision",
    "QuantileResult",
    "QuantileSequentialTest",
    "QuantileVerdict",
    "log_mixture",
    "prior_size",
]

QuantileDecision = Literal["continue", "b_above", "b_below"]

# p50, p90, p99: the quantiles a latency canary is judged on unless told otherwise (issue 22).
DEFAULT_QUANTILES = (0.5, 0.9, 0.99)
# Tightest around 10,000 observations per arm: canaries run to tens of thousands, and
# the p99 has only ~1 % of them on its far side (tests/simulations/canary_quantiles.py).
_DEFAULT_TUNED_N = 10_000
# Evidence is computed exactly up to log(1/alpha) + log(100): p-values are exact down
# to alpha/100 and shown as that floor below it (decisions need only log(1/alpha)).
_EVIDENCE_MARGIN = math.log(100.0)
_STATE_FORMAT = 1


def prior_size(q: float, tuned_n: float, alpha: float) -> float:
    """Size ``c`` of the Beta(c q, c (1-q)) prior of eq. (1), tuned for ``tuned_n``.

    ``c + 1 = tuned_n / (2 L + log(1 + 2 L))`` with ``L = log(1/alpha)`` (Howard et al.
    2021's ``rho`` for the two-sided normal mixture at intrinsic time
    ``v = tuned_n q (1-q)``, divided by ``q (1-q)``), at least 1.
    """
    if not 0.0 < q < 1.0:
        raise ValueError(f"quantile probabilities must lie in (0, 1), got {q!r}")
    log_inv = math.log(1.0 / alpha)
    return max(tuned_n / (2.0 * log_inv + math.log1p(2.0 * log_inv)) - 1.0, 1.0)


def log_mixture(k: npt.ArrayLike, n: int, q: float, c: float) -> FloatArray:
    """``log M_n(k)`` of eq. (1): the Beta(c q, c (1-q)) mixture of Bernoulli(r) against
    Bernoulli(q) likelihood ratios after ``k`` of ``n`` indicators are 1.

    Parameters
    ----------
    k : array_like of int
        Counts ``0 <= k <= n``.
    n : int
        Observations.
    q : float
        Null probability (the quantile's level).
    c : float
        Prior size (:func:`prior_size`).

    Returns
    -------
    FloatArray
        ``log B(cq + k, c(1-q) + n - k) - log B(cq, c(1-q)) - k log q - (n - k) log(1-q)``.
    """
    k_arr = np.asarray(k, dtype=np.float64)
    a, b = c * q, c * (1.0 - q)
    out: FloatArray = (
        betaln(a + k_arr, b + n - k_arr) - betaln(a, b)
        - k_arr * math.log(q) - (n - k_arr) * math.log1p(-q)
    )
    return out


@dataclass(frozen=True)
class _Window:
    """An arm's ranks ``[k_lo, k_hi]`` where ``log M_n(k) < threshold`` and its minimum."""

    k_lo: int
    k_hi: int
    k_min: int
    minimum: float


@functools.lru_cache(maxsize=4096)
def _window(n: int, q: float, c: float, threshold: float | None) -> _Window:
    """Minimum of the convex ``k -> log M_n(k)`` and (if ``threshold``) its sublevel set.

    Evaluated on a block of counts around ``n q``, widened until the block's inner ends
    exceed the threshold (from the normal mixture's boundary, so one pass nearly always).
    Cached: it depends on the sizes only, and arms of equal size share it.
    """
    centre = round(n * q)
    v = n * q * (1.0 - q)
    rho = (c + 1.0) * q * (1.0 - q)
    level = 1.0 if threshold is None else max(threshold, 1.0)
    width = int(math.ceil(1.5 * math.sqrt((v + rho) * (math.log1p(v / rho) + 2.0 * level)))) + 8
    while True:
        lo, hi = max(centre - width, 0), min(centre + width, n)
        ks = np.arange(lo, hi + 1)
        values = log_mixture(ks, n, q, c)
        i_min = int(np.argmin(values))
        inner_ok = (i_min > 0 or lo == 0) and (i_min < ks.size - 1 or hi == n)
        if threshold is not None:
            inner_ok = inner_ok and (lo == 0 or values[0] >= threshold) and (
                hi == n or values[-1] >= threshold)
        if inner_ok:
            break
        width *= 2
    if threshold is None:
        return _Window(int(ks[i_min]), int(ks[i_min]), int(ks[i_min]), float(values[i_min]))
    below = np.flatnonzero(values < threshold)
    return _Window(int(ks[below[0]]), int(ks[below[-1]]), int(ks[i_min]), float(values[i_min]))


@dataclass(frozen=True)
class ArmCounts:
    """One arm's observations as sorted distinct ``values`` (each seen at least once) and
    ``cumulative`` counts (``cumulative[i] = #{X <= values[i]}``)."""

    values: FloatArray
    cumulative: IntArray

    @property
    def n(self) -> int:
        return int(self.cumulative[-1]) if self.cumulative.size else 0

    @classmethod
    def empty(cls) -> ArmCounts:
        return cls(np.empty(0), np.empty(0, dtype=np.int64))

    @classmethod
    def from_counts(cls, values: FloatArray, counts: IntArray) -> ArmCounts:
        keep = counts > 0
        return cls(values[keep], np.cumsum(counts[keep], dtype=np.int64))

    def counts(self) -> IntArray:
        out: IntArray = np.diff(self.cumulative, prepend=0)
        return out

    def merged(self, batch: FloatArray) -> ArmCounts:
        """This arm with ``batch`` added (``O(m log m + U)``)."""
        if not batch.size:
            return self
        new, new_counts = np.unique(batch, return_counts=True)
        at = np.searchsorted(self.values, new)
        seen = np.zeros(new.size, dtype=bool)
        inside = at < self.values.size
        seen[inside] = self.values[at[inside]] == new[inside]
        counts = self.counts()
        counts[at[seen]] += new_counts[seen]
        # One pass over the held arrays (no sort of them): O(m log m + U).
        values = np.insert(self.values, at[~seen], new[~seen])
        counts = np.insert(counts, at[~seen], new_counts[~seen])
        return ArmCounts(values, np.cumsum(counts))

    def below(self, points: FloatArray, side: Literal["left", "right"]) -> IntArray:
        """``#{X < p}`` (``side="left"``) or ``#{X <= p}`` (``"right"``) for each point."""
        i = np.searchsorted(self.values, points, side=side)
        out: IntArray = np.where(i > 0, self.cumulative[np.maximum(i - 1, 0)], 0)
        return out

    def ranks(self, first: int, last: int) -> FloatArray:
        """The distinct values among the order statistics of ranks ``first..last``
        (1-based, within 1..n; empty if ``first > last``)."""
        if first > last:
            return np.empty(0)
        i, j = np.searchsorted(self.cumulative, [first, last], side="left")
        out: FloatArray = self.values[i:j + 1]
        return out


def _arm_g(arm: ArmCounts, points: FloatArray, q: float, c: float, k_min: int) -> FloatArray:
    """``g(x)`` on the cells ``(-inf, p_0), [p_0], (p_0, p_1), ..., [p_{m-1}], (p_{m-1}, inf)``
    of sorted distinct ``points``: ``log M_n`` at the arm's count there, the smallest over
    ``[#{X < x}, #{X <= x}]`` at a point (ties, see the module docstring)."""
    n = arm.n
    less = arm.below(points, "left")
    less_eq = arm.below(points, "right")
    counts = np.empty(2 * points.size + 1, dtype=np.int64)
    counts[0:-1:2] = less                     # gaps just below each point
    counts[-1] = less_eq[-1]                  # above the last point
    counts[1::2] = np.clip(k_min, less, less_eq)  # points: convexity puts the minimum here
    return log_mixture(counts, n, q, c)


def _cells(
    sorted_a: ArmCounts, sorted_b: ArmCounts, q: float, c: float, threshold: float
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """The two arms' ``g`` on the cells of the union of their windows' order statistics.

    Returns ``(points, g_a, g_b)``. Outside an arm's window its ``g`` is at least that
    arm's threshold, so every pair with ``g_a + g_b < threshold`` lies in cells where both
    are evaluated exactly (module docstring, "Work per look").
    """
    n_a, n_b = sorted_a.n, sorted_b.n
    min_a = _window(n_a, q, c, None).minimum
    min_b = _window(n_b, q, c, None).minimum
    win_a = _window(n_a, q, c, threshold - min_b)
    win_b = _window(n_b, q, c, threshold - min_a)
    # Order statistics of ranks k_lo .. k_hi + 1 (1-based) bound each arm's window.
    pa = sorted_a.ranks(max(win_a.k_lo, 1), min(win_a.k_hi + 1, n_a))
    pb = sorted_b.ranks(max(win_b.k_lo, 1), min(win_b.k_hi + 1, n_b))
    points = np.unique(np.concatenate((pa, pb)))
    return (points, _arm_g(sorted_a, points, q, c, win_a.k_min),
            _arm_g(sorted_b, points, q, c, win_b.k_min))


def _evidence(g_low: FloatArray, g_high: FloatArray) -> float:
    """``min_{x_low <= x_high} g_low(x_low) + g_high(x_high)`` over ordered cells."""
    return float(np.min(np.minimum.accumulate(g_low)
                        + np.minimum.accumulate(g_high[::-1])[::-1]))


def directional_evidence(
    a: npt.ArrayLike, b: npt.ArrayLike, q: float, *, alpha: float = 0.05,
    tuned_n: float = _DEFAULT_TUNED_N,
) -> tuple[float, float]:
    """``(E+, E-)`` of the module docstring for one quantile, from scratch (for checks).

    ``E+ >= log(1/alpha)`` concludes B's ``q``-quantile is above A's, ``E- >= log(1/alpha)``
    below. Exact up to ``log(1/alpha) + log(100)``, capped there.
    """
    sa = ArmCounts.empty().merged(as_sample(a, "a", minimum=1))
    sb = ArmCounts.empty().merged(as_sample(b, "b", minimum=1))
    return _directional(sa, sb, q, prior_size(q, tuned_n, alpha), math.log(1.0 / alpha))


def _directional(sa: ArmCounts, sb: ArmCounts, q: float, c: float,
                 log_level: float) -> tuple[float, float]:
    cap = log_level + _EVIDENCE_MARGIN
    _, g_a, g_b = _cells(sa, sb, q, c, cap)
    return min(_evidence(g_b, g_a), cap), min(_evidence(g_a, g_b), cap)


def _sublevel_ends(g: FloatArray, levels: FloatArray) -> tuple[IntArray, IntArray]:
    """First and last cell with ``g < level`` for each level (each above ``g``'s minimum).

    ``g`` is unimodal over the cells where it is below the levels (convex in the count,
    the count monotone in x); beyond them its running maxima from the minimum outwards
    are at least as large, so searching those monotone sequences is exact.
    """
    i0 = int(np.argmin(g))
    right = np.maximum.accumulate(g[i0:])
    left = np.maximum.accumulate(g[:i0 + 1][::-1])
    last = i0 + np.searchsorted(right, levels, side="left") - 1
    first = i0 - (np.searchsorted(left, levels, side="left") - 1)
    return first.astype(np.int64), last.astype(np.int64)


def _order_statistic(arm: ArmCounts, rank: int) -> float:
    """1-based order statistic; ``-inf`` below rank 1, ``+inf`` above n."""
    if rank < 1:
        return -math.inf
    if rank > arm.n:
        return math.inf
    return float(arm.values[int(np.searchsorted(arm.cumulative, rank, side="left"))])


@dataclass(frozen=True)
class QuantileVerdict:
    """One quantile of a :class:`QuantileSequentialTest`.

    Attributes
    ----------
    q : float
        The quantile's probability (0.99 for the p99).
    decision : str
        ``"continue"``, ``"b_above"`` (B's quantile above A's) or ``"b_below"``; sticky.
    decided_at : tuple of int or None
        ``(n_a, n_b)`` at the look where it was decided.
    p_above, p_below : float
        Anytime-valid p-values of "B's quantile is not above A's" and "... not below",
        Bonferroni-adjusted over the test's K quantiles: ``min(1, K exp(-max_t E_t))``
        (running maximum of the evidence over the looks). The decision is ``p <= alpha``.
    estimate_a, estimate_b : float
        The arms' sample quantiles (``ceil(n q)``-th order statistic), ``nan`` before data.
    """

    q: float
    decision: QuantileDecision
    decided_at: tuple[int, int] | None
    p_above: float
    p_below: float
    estimate_a: float
    estimate_b: float

    @property
    def label(self) -> str:
        """``"p99"``, ``"p50"``, ``"p99.9"``."""
        return f"p{100 * self.q:g}"


@dataclass(frozen=True)
class QuantileResult:
    """Snapshot of a :class:`QuantileSequentialTest`.

    ``decided_by`` lists the quantiles decided so far, in the order they were decided
    (ties: in the order of ``quantiles``); ``decision`` is the first of them, or
    ``"continue"``.
    """

    alpha: float
    n_a: int
    n_b: int
    verdicts: tuple[QuantileVerdict, ...]
    decided_by: tuple[float, ...]

    @property
    def decision(self) -> QuantileDecision:
        if not self.decided_by:
            return "continue"
        return next(v.decision for v in self.verdicts if v.q == self.decided_by[0])


@dataclass(frozen=True)
class QuantileInterval:
    """Anytime-valid band of one quantile: both arms and ``Q_B - Q_A``.

    ``lo_a, hi_a`` (and B's) hold together with ``[diff_lo, diff_hi]`` at the quantile's
    level ``1 - alpha/K``: the difference band is the range of ``x_b - x_a`` over the
    joint confidence sequence ``C_n``, so it excludes 0 exactly when the quantile is
    decided; the arms' bands are ``C_n``'s projections.
    """

    q: float
    estimate_a: float
    lo_a: float
    hi_a: float
    estimate_b: float
    lo_b: float
    hi_b: float
    diff_lo: float
    diff_hi: float


class QuantileSequentialTest:
    """Anytime-valid decisions on chosen quantiles of arms A and B (module docstring).

    Parameters
    ----------
    quantiles : sequence of float, default (0.5, 0.9, 0.99)
        Probabilities in (0, 1), distinct.
    alpha : float, default 0.05
        Family-wise error over all quantiles and the whole open-ended run; each quantile
        is tested at ``alpha / K`` (Bonferroni).
    tuned_n : float, default 10,000
        Observations per arm where the sequences are tightest (:func:`prior_size`).
    """

    def __init__(self, quantiles: npt.ArrayLike = DEFAULT_QUANTILES, alpha: float = 0.05,
                 *, tuned_n: float = _DEFAULT_TUNED_N) -> None:
        qs = np.atleast_1d(np.asarray(quantiles, dtype=np.float64))
        if qs.ndim != 1 or qs.size == 0 or np.any(~((qs > 0) & (qs < 1))):
            raise ValueError("quantiles must be a non-empty 1-D sequence in (0, 1)")
        if np.unique(qs).size != qs.size:
            raise ValueError("quantiles must be distinct")
        if not 0.0 < alpha < 1.0:
            raise ValueError(f"alpha must lie in (0, 1), got {alpha!r}")
        if not tuned_n >= 1:
            raise ValueError(f"tuned_n must be at least 1, got {tuned_n!r}")
        self.quantiles = tuple(float(q) for q in qs)
        self.alpha = float(alpha)
        self.tuned_n = float(tuned_n)
        k = len(self.quantiles)
        self._log_level = math.log(k / self.alpha)
        self._priors = tuple(prior_size(q, self.tuned_n, self.alpha / k) for q in self.quantiles)
        self._a = ArmCounts.empty()
        self._b = ArmCounts.empty()
        self._above = [0.0] * k   # running maxima of E+ and E- (log scale)
        self._below = [0.0] * k
        self._decisions: list[QuantileDecision] = ["continue"] * k
        self._decided_at: list[tuple[int, int] | None] = [None] * k
        self._order: list[float] = []

    @property
    def n_a(self) -> int:
        return self._a.n

    @property
    def n_b(self) -> int:
        return self._b.n

    def update(self, a_values: npt.ArrayLike, b_values: npt.ArrayLike) -> QuantileResult:
        """Add a batch to each arm (either may be empty) and look once.

        Returns
        -------
        QuantileResult
        """
        a = as_sample(a_values, "a_values")
        b = as_sample(b_values, "b_values")
        self._a = self._a.merged(a)
        self._b = self._b.merged(b)
        if self._a.n and self._b.n:
            self._look()
        return self.result()

    def _look(self) -> None:
        newly: list[float] = []
        for j, (q, c) in enumerate(zip(self.quantiles, self._priors, strict=True)):
            if self._decisions[j] != "continue":
                continue
            above, below = _directional(self._a, self._b, q, c, self._log_level)
            self._above[j] = max(self._above[j], above)
            self._below[j] = max(self._below[j], below)
            if max(self._above[j], self._below[j]) >= self._log_level:
                # Both at once would need C_n empty; the stronger evidence names it.
                self._decisions[j] = "b_above" if self._above[j] >= self._below[j] else "b_below"
                self._decided_at[j] = (self.n_a, self.n_b)
                newly.append(q)
        self._order.extend(newly)

    def _p(self, log_evidence: float) -> float:
        return min(1.0, len(self.quantiles) * math.exp(-log_evidence))

    def result(self) -> QuantileResult:
        verdicts = tuple(
            QuantileVerdict(
                q=q, decision=self._decisions[j], decided_at=self._decided_at[j],
                p_above=self._p(self._above[j]), p_below=self._p(self._below[j]),
                estimate_a=self._estimate(self._a, q), estimate_b=self._estimate(self._b, q),
            )
            for j, q in enumerate(self.quantiles)
        )
        return QuantileResult(alpha=self.alpha, n_a=self.n_a, n_b=self.n_b,
                              verdicts=verdicts, decided_by=tuple(self._order))

    @staticmethod
    def _estimate(arm: ArmCounts, q: float) -> float:
        if not arm.n:
            return math.nan
        return _order_statistic(arm, max(math.ceil(arm.n * q), 1))

    def intervals(self) -> tuple[QuantileInterval, ...]:
        """Each quantile's anytime-valid bands (:class:`QuantileInterval`), at this look.

        Raises
        ------
        ValueError
            Before both arms have data.
        """
        if not (self._a.n and self._b.n):
            raise ValueError("both arms need observations")
        return tuple(self._interval(q, c) for q, c in
                     zip(self.quantiles, self._priors, strict=True))

    def _interval(self, q: float, c: float) -> QuantileInterval:
        level = self._log_level
        points, g_a, g_b = _cells(self._a, self._b, q, c, level)
        # Cell j's range: gaps (p_{i-1}, p_i) at even j, points [p_i] at odd j. C_n always
        # holds the pair of the two minima (their sum is <= 0 < level), so nothing is empty.
        inf_ = np.concatenate(([-np.inf], np.repeat(points, 2)))
        sup_ = np.concatenate((np.repeat(points, 2), [np.inf]))
        est_a, est_b = self._estimate(self._a, q), self._estimate(self._b, q)
        # B's cells that belong to some pair of C_n, and for each the first and last of
        # A's cells that pair with it (a contiguous run: g_a is unimodal over the cells).
        jb = np.flatnonzero(g_b + g_a.min() < level)
        first_a, last_a = _sublevel_ends(g_a, level - g_b[jb])
        ja = np.flatnonzero(g_a + g_b.min() < level)
        return QuantileInterval(
            q=q,
            estimate_a=est_a, lo_a=float(inf_[ja].min()), hi_a=float(sup_[ja].max()),
            estimate_b=est_b, lo_b=float(inf_[jb].min()), hi_b=float(sup_[jb].max()),
            diff_lo=float(np.min(inf_[jb] - sup_[last_a])),
            diff_hi=float(np.max(sup_[jb] - inf_[first_a])),
        )

    def to_state(self, *, data: bool = True) -> dict[str, Any]:
        """JSON-serialisable state, restored exactly by :meth:`from_state`.

        ``data=False`` leaves out the arms' data (``"support"``, the sorted distinct values
        of both arms, and ``"counts_a"``, ``"counts_b"``, each value's count per arm, as in
        ``SequentialTest.to_state``), for a caller that keeps the observations elsewhere and
        passes them back to :meth:`from_state` (in that form, or as raw sorted values
        ``"a"``, ``"b"``).
        """
        out: dict[str, Any] = {
            "format": _STATE_FORMAT, "quantiles": list(self.quantiles), "alpha": self.alpha,
            "tuned_n": self.tuned_n,
            "above": list(self._above), "below": list(self._below),
            "decisions": list(self._decisions),
            "decided_at": [None if d is None else list(d) for d in self._decided_at],
            "order": list(self._order),
        }
        if data:
            support = np.union1d(self._a.values, self._b.values)
            for key, arm in (("counts_a", self._a), ("counts_b", self._b)):
                counts = np.zeros(support.size, dtype=np.int64)
                counts[np.searchsorted(support, arm.values)] = arm.counts()
                out[key] = counts.tolist()
            out["support"] = support.tolist()
        return out

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> QuantileSequentialTest:
        """Rebuild a test from :meth:`to_state` output (validated; errors raise)."""
        if state.get("format") != _STATE_FORMAT:
            raise ValueError(f"unsupported state format {state.get('format')!r}")
        test = cls(state["quantiles"], state["alpha"], tuned_n=state["tuned_n"])
        k = len(test.quantiles)
        if "support" in state:
            support = np.asarray(state["support"], dtype=np.float64)
            if (support.ndim != 1 or not np.all(np.isfinite(support))
                    or np.any(np.diff(support) <= 0)):
                raise ValueError("support must be finite, sorted and distinct")
            arms = []
            for key in ("counts_a", "counts_b"):
                counts = np.asarray(state[key], dtype=np.int64)
                if counts.shape != support.shape or np.any(counts < 0):
                    raise ValueError(f"{key} must be non-negative, one per support value")
                arms.append(ArmCounts.from_counts(support, counts))
            test._a, test._b = arms
        else:
            for key in ("a", "b"):
                arm = np.asarray(state[key], dtype=np.float64)
                if arm.ndim != 1 or not np.all(np.isfinite(arm)) or np.any(np.diff(arm) < 0):
                    raise ValueError("arm values must be finite and sorted")
            test._a = ArmCounts.empty().merged(np.asarray(state["a"], dtype=np.float64))
            test._b = ArmCounts.empty().merged(np.asarray(state["b"], dtype=np.float64))
        lists = (state["above"], state["below"], state["decisions"], state["decided_at"])
        if any(len(x) != k for x in lists):
            raise ValueError("per-quantile state does not match the quantiles")
        test._above = [float(x) for x in state["above"]]
        test._below = [float(x) for x in state["below"]]
        if any(not x >= 0.0 for x in test._above + test._below):
            raise ValueError("evidence must be non-negative")
        decisions: list[QuantileDecision] = []
        for d in state["decisions"]:
            if d not in ("continue", "b_above", "b_below"):
                raise ValueError(f"unknown decision {d!r}")
            decisions.append(d)
        test._decisions = decisions
        test._decided_at = [None if d is None else (int(d[0]), int(d[1]))
                            for d in state["decided_at"]]
        test._order = [float(q) for q in state["order"]]
        decided = {q for q, d in zip(test.quantiles, decisions, strict=True) if d != "continue"}
        if set(test._order) != decided or len(test._order) != len(decided):
            raise ValueError("decision order does not match the decisions")
        return test

