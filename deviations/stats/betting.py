"""An anytime-valid two-sample rank test by betting on sequential ranks (canaries' ``ranks``).

**The sequence.** The observations are put in one order drawn independently of their
values (each arm's batch in a random order; then, as pairs complete, A, B, A, B, ...:
an arm's values wait for the other arm's), giving one pooled sequence ``z_1, z_2, ...``
with labels ``s_t = +1`` (B) or ``-1`` (A). The smoothed sequential rank of ``z_t`` among
``z_1..z_t`` is

    ``u_t = (#{i < t : z_i < z_t} + V_t (#{i < t : z_i = z_t} + 1)) / t``,   V_t ~ U(0, 1)   (1)

drawn independently. If ``A =d B`` (each arm i.i.d., the arms independent), the pooled
sequence is i.i.d., so the ``u_t`` are independent and uniform on (0, 1) (Vovk, Gammerman
and Shafer 2005, Algorithmic Learning in a Random World, Prop. 8.1: smoothed conformal
p-values of an exchangeable sequence are i.i.d. uniform; the ranks need no continuity).
The score ``x_t = s_t (2 u_t - 1)`` lies in [-1, 1] and has mean 0 given the past
(``u_1..u_{t-1}`` and the labels, fixed in advance of the values).

**The bets.** For a fixed ``lambda`` in (-1, 1), ``W_t(lambda) = prod_{i <= t} (1 + lambda
x_i)`` is a non-negative martingale with ``W_0 = 1`` (a test martingale: the wealth of a
gambler betting the fraction ``lambda`` of her wealth on ``x_t`` at fair odds), and so is any
mixture ``W_t = sum_k w_k W_t(lambda_k)``, ``sum_k w_k = 1``. By Ville's inequality,

    ``P(exists t : W_t >= 1 / alpha) <= alpha``,                                    (2)

so rejecting ``A =d B`` the first time the mixture reaches ``1/alpha`` is a level-alpha test
however often and whenever it is looked at, and ``min(1, 1 / max_{s <= t} W_s)`` is an
anytime-valid p-value (Ramdas, Grünwald, Vovk and Shafer 2023; Waudby-Smith and Ramdas
2024, "Estimating means of bounded random variables by betting", JRSS-B 86(1), the
hedged capital process and its mixture over a grid of bets; Vovk's conformal test
martingales, Vovk 2021, "Testing randomness online", Stat. Sci. 36(4)). The grid is fixed:
``lambda_k = +-lambda_max rho^-j``, ``j = 0..J-1``, equal weights, so the price of not
knowing the effect is ``log(2J)`` nats of evidence; with ``rho = sqrt 2`` the best grid
point grows at least 96 % as fast as the best ``lambda`` in the grid's range. Any other
bets and weights fixed before the data keep (2): :func:`tuned_bets` concentrates them on a
stated smallest effect that matters (measured in docs/statistics.md, "Against the
target"; not the canaries' default).

**Bets tuned to a stated change in the values' unit** (canaries with a ``min_effect`` use
the held-out form: :func:`held_out_bets`, :class:`RankBettingTest` ``tuned``).
:func:`shifted_effect` estimates the rank effect of a stated change ``d`` of the values
from a sample ``a`` of arm A: ``theta_hat(d) = P(A' + d > A) + P(A' + d = A)/2`` over the
ordered pairs ``i != j`` (a U-statistic). Two ways to turn ``theta_hat(+d) - 1/2`` (B
larger) and ``1/2 - theta_hat(-d)`` (B smaller) into bets were measured in
``tests.simulations.canary_ranks_oracle`` (docs/statistics.md, "Against the target"); only
the first is here, the second lives in that simulation (``adaptive_lambdas``), since what it
bets is not covered by (2):

* *held out*: ``theta_hat`` from A values that are never scored (the stream's first
  batch of A); given them the bets are fixed before the scored data, so (2) holds exactly;
* *adaptive*: ``theta_hat`` per look from the A values scored before it ("predictable"
  bets, as in Waudby-Smith and Ramdas 2024's predictable plug-in). That argument needs
  scores of conditional mean 0 given the data the bets are computed from, and the rank scores have
  it only given the past **ranks**: given the past values, an A score has mean ``-(t-1)(1 -
  2 m)/t`` and a pair A, B scored with one bet ``-t (1 - 2 m)/((t + 1)(t + 2))``, ``m`` =
  the mean of ``F(z_i)`` over the t past values (a simulation of 2,000,000 pairs given 10
  past values agrees within 0.1 standard error). So a bet computed from the values is not
  covered by (2). The pairs' drift is typically of order ``lambda t^{-3/2}`` (``|1 - 2 m|``
  is about ``0.58 / sqrt t``) and summed from 50 A values on stays within a few hundredths
  of a nat, below what an A/A simulation resolves; but that is an estimate, not a bound.

**Why it has power, and as much as Mann–Whitney.** When half the past is each arm, a new B
observation's ``2 u_t - 1`` has mean ``(theta - 1/2)`` with ``theta = P(B > A) + P(B = A)/2``
(the rank effect that Mann–Whitney estimates): against the other arm's half it has mean
``2 theta - 1``, against its own half 0. A's scores have the same mean with the sign
flipped, so ``x_t`` drifts by ``theta - 1/2`` per observation with variance about 1/3, the
same information per observation as the Mann–Whitney statistic (whose estimate of theta
has variance ``(1/n_a + 1/n_b)/12`` under the null). The best fixed bet ``lambda* ~ 3
(theta - 1/2)`` grows ``log W`` by about ``3 (theta - 1/2)^2 / 2`` per observation, so the
test stops after about ``2 (log(1/alpha) + log 2J) / (3 (theta - 1/2)^2)`` observations in
all, where a fixed-n Mann–Whitney at 90 % power needs ``(z_{alpha/2} + z_0.1)^2 / (3 (theta
- 1/2)^2)``: the first is about 1.2 times the second at alpha = 0.05 and J = 12, before the
random walk's spread (measured: docs/statistics.md, "Canaries: the rank betting test").

**Direction.** With ``W+`` and ``W-`` the mixtures over the positive and the negative bets
(``W = (W+ + W-)/2``), the test says "B larger" when it rejects with ``W+ >= W-``, which
implies ``W+ >= 1/alpha``. For continuous distributions that statement keeps error <= alpha
under the whole composite null "B is stochastically at most A" (not only ``A =d B``):
couple each B observation with ``b' = F_A^{-1}(F_B(b)) >= b`` (distributed as A; the map
keeps the B values' order strictly, almost surely). Comparisons within an arm are
unchanged and every B value moves up against every A value (it ranks higher against
earlier A's, later A's rank lower against it), so every score ``x_t`` is at least as large
in the coupled sequence (a null ``A =d B`` sequence) as in the real one; ``W+`` is
non-decreasing in each ``x_t`` (fixed positive bets), so ``sup W+`` real ``<= sup W+``
coupled, whose probability of reaching ``1/alpha`` is at most alpha (2). "B smaller"
likewise. With ties (atoms, a canary's grid) the map can tie B values that were ordered,
which this argument does not cover: the rejection of ``A =d B`` stays exact, the side is
the one the wealth favours.

**What it tests.** Like the sign test (``signs.py``) it has power against changes of
``theta`` (shifts, scalings of the whole distribution) and none against changes keeping
``theta = 1/2`` (a spread widening symmetrically), which the distribution-function test
(``sequential.py``) sees. It never accepts.

**Work.** Each arm is held as its sorted distinct values with cumulative counts
(``quantiles.ArmCounts``): a look of m observations finds the counts below and at each new
value among the older ones by ``searchsorted`` and the counts among the same look's earlier
ones by a vectorised merge count (``earlier_counts``, ``O(m log^2 m)``); then ``2J``
cumulative sums of ``log1p(lambda_k x_t)``. The state is the arms plus ``2J`` log-wealths.

References: V. Vovk, A. Gammerman, G. Shafer (2005), ch. 7–8; V. Vovk (2021), Stat. Sci.
36(4); I. Waudby-Smith, A. Ramdas (2024), JRSS-B 86(1); A. Ramdas, P. Grünwald, V. Vovk,
G. Shafer (2023), Stat. Sci. 38(4); J. Ville (1939).

Only numpy is imported here (and this package's ``quantiles.ArmCounts``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from ._checks import as_sample
from ._typing import FloatArray, IntArray
from .quantiles import ArmCounts

__all__ = [
    "HELD_OUT", "LAMBDA_MAX", "RATIO", "STEPS", "TUNED_FACTORS", "TUNED_TAIL",
    "TUNED_WEIGHTS", "RankBettingResult", "RankBettingTest", "bets", "earlier_counts",
    "held_out_bets", "log_wealth", "rank_effect", "scores", "shifted_effect", "tuned_bets",
]

Decision = Literal["continue", "reject"]

#: Largest bet: ``1 + lambda x >= 1/2`` for every score, so one observation never costs
#: more than half the wealth (Waudby-Smith and Ramdas 2024 truncate at 1/2 or 3/4 too).
LAMBDA_MAX = 0.5
#: Ratio between neighbouring bets: the best grid point grows >= 96 % as fast as the best
#: bet between them (``2 r - r^2`` at ``r = 2^(1/4)``).
RATIO = math.sqrt(2.0)
#: Bets per side: down to ``0.5 / sqrt(2)^11 = 0.011``, the best bet for ``theta - 1/2 ~
#: 0.004`` (a median shift of about 1 % at log-sd 0.4); smaller effects still grow the
#: wealth, more slowly.
STEPS = 12
_STATE_FORMAT = 1
#: A state with mixture weights (older code refuses it rather than reading equal weights).
_STATE_FORMAT_WEIGHTS = 2
#: A state of a test tuned to a stated change (its held-out A values, ``tuned``).
_STATE_FORMAT_TUNED = 3


def bets(lambda_max: float = LAMBDA_MAX, ratio: float = RATIO, steps: int = STEPS) -> FloatArray:
    """The grid of bets, positive first: ``+-lambda_max ratio^-j``, ``j = 0..steps-1``."""
    if not (0.0 < lambda_max < 1.0 and ratio > 1.0 and steps >= 1):
        raise ValueError("need 0 < lambda_max < 1, ratio > 1, steps >= 1")
    positive = lambda_max * ratio ** -np.arange(steps, dtype=np.float64)
    out: FloatArray = np.concatenate((positive, -positive))
    return out


#: Bets of :func:`tuned_bets` per side, as multiples of ``lambda_s = 3 delta_s`` (the bet
#: growing fastest at the stated effect ``delta_s``), and their weights within a side: the
#: most on 0.7 (the bet reaching ``1/alpha`` soonest in 80-90 % of streams at the stated
#: effect), the rest on neighbours covering true effects from half to twice the stated one.
TUNED_FACTORS = (0.5, 0.7, 1.0, 1.4, 2.0)
TUNED_WEIGHTS = (0.15, 0.35, 0.2, 0.2, 0.1)
#: Share of each side's weight spread over the default grid's bets below the tuned ones, so
#: that effects much smaller than the stated one are still found (at ``log(1/0.95)`` =
#: 0.05 nats of evidence).
TUNED_TAIL = 0.05


def tuned_bets(effect: float, *, two_sided: bool = True,
               factors: tuple[float, ...] = TUNED_FACTORS,
               weights: tuple[float, ...] = TUNED_WEIGHTS, tail: float = TUNED_TAIL,
               lambda_max: float = LAMBDA_MAX) -> tuple[FloatArray, FloatArray]:
    """Bets and mixture weights tuned to a stated smallest rank effect that matters,
    ``delta_s = theta_s - 1/2`` with ``theta_s = P(B > A)`` at that change.

    Per side: the bets ``f lambda_s`` for each factor f, ``lambda_s = 3 delta_s`` (capped at
    ``lambda_max``), with weights ``(1 - tail) w_f``; and the default grid's bets
    (:func:`bets`) below the smallest of them sharing ``tail`` equally. Two-sided: both
    signs, each side half the weight; one-sided (``two_sided=False``): the positive bets
    only ("B larger"). Any bets and weights fixed before the data keep Ville's bound (2).

    Why these bets (module docstring, "Why it has power"): the score drifts by
    ``delta = theta - 1/2`` per observation with variance about 1/3, so ``log W_t(lambda)``
    is a random walk with drift ``lambda delta - lambda^2/6``, fastest at ``lambda* = 3
    delta``. The bet that reaches ``c = log(1/(alpha w))`` first in a share p of the
    streams is smaller: in the Brownian approximation the boundary ``c/lambda +
    lambda t/6`` on the score sum is lowest at t for ``lambda = sqrt(6c/t)``, and the sum
    reaches it by t in a share p of streams for ``t delta^2 = (sqrt(2c/3) + z_p/sqrt 3)^2``,
    so ``lambda = lambda* sqrt(2c)/(sqrt(2c) + z_p)``: 0.68-0.71 lambda* at p = 0.9 and
    0.76-0.79 at 0.8 (alpha = 0.05, ``w`` from 1/2 to 1/6), against a one-look test's
    ``t delta^2 = (z_{alpha/2} + z_p)^2 / 3``. The price of the weights is ``log(1/w)``
    nats of evidence at the bet that matters: ``log 2J = 3.2`` for the default grid; here
    ``log(2 / (0.95 * 0.35)) = 1.8`` two-sided at the stated effect, 1.1 one-sided (the
    oracle, the one bet ``+-0.7 lambda*``: ``log 2 = 0.7`` and 0).
    """
    if not 0.0 < effect < 0.5:
        raise ValueError(f"effect must lie in (0, 1/2), got {effect!r}")
    f = np.asarray(factors, dtype=np.float64)
    w = np.asarray(weights, dtype=np.float64)
    if (f.ndim != 1 or f.shape != w.shape or not f.size or np.any(f <= 0) or np.any(w <= 0)
            or not 0.0 <= tail < 1.0):
        raise ValueError("factors, weights: as many of each, positive; tail in [0, 1)")
    tuned = np.minimum(lambda_max, 3.0 * effect * f)
    tuned_w = (1.0 - tail) * w / w.sum()
    grid = bets(lambda_max)[:STEPS]
    small = grid[grid < tuned.min()]
    if tail > 0.0 and small.size:
        positive = np.concatenate((tuned, small))
        side_w = np.concatenate((tuned_w, np.full(small.size, tail / small.size)))
    else:
        positive, side_w = tuned, w / w.sum()
    if not two_sided:
        return positive, side_w
    lam: FloatArray = np.concatenate((positive, -positive))
    out_w: FloatArray = np.concatenate((side_w, side_w)) / 2.0
    return lam, out_w


def shifted_effect(a: npt.ArrayLike, shift: float) -> float:
    """``theta_hat(d) = P(A' + d > A) + P(A' + d = A)/2`` over the ordered pairs ``i != j``
    of the sample ``a`` (a U-statistic; ``d`` = ``shift``, in the values' unit)."""
    values = np.sort(np.asarray(a, dtype=np.float64))
    n = values.size
    if n < 2:
        return 0.5
    q = values + shift
    below = np.searchsorted(values, q, side="left")
    at_or_below = np.searchsorted(values, q, side="right")
    twice = float(np.sum(below + at_or_below))  # 2 #{a' + d > a} + #{a' + d = a}, n^2 pairs
    self_pairs = 2.0 * n if shift > 0 else (float(n) if shift == 0 else 0.0)
    return (twice - self_pairs) / (2.0 * n * (n - 1))


#: A values a test tuned to a stated change holds out (:class:`RankBettingTest`,
#: ``tuned``): the first ``HELD_OUT`` values of arm A, in the batches' random order, set its
#: bets and are never scored.
HELD_OUT = 20


def held_out_bets(a: npt.ArrayLike, change: float, sides: int
                  ) -> tuple[FloatArray, FloatArray]:
    """Bets and weights tuned to a stated ``change`` of the values (their unit), from A
    values that are never scored (``HELD_OUT`` of them in a canary): :func:`tuned_bets` at
    ``theta_hat(+change) - 1/2`` (B larger by the change) for the positive side and
    ``1/2 - theta_hat(-change)`` (B smaller) for the negative, each clipped to [0.001, 0.49]
    (:func:`shifted_effect`). ``sides``: +1 positive bets only ("B larger"), -1 negative
    only, 0 both (each side half the weight). Given the held-out values the bets are fixed
    before every scored value, so Ville's bound (2) holds exactly; measured in
    docs/statistics.md, "Against the target" ("held-out 1s")."""
    if not (math.isfinite(change) and change > 0.0) or sides not in (-1, 0, 1):
        raise ValueError("change: a positive number; sides: -1, 0 or +1")

    def one(effect: float) -> tuple[FloatArray, FloatArray]:
        return tuned_bets(min(max(effect, 1e-3), 0.49), two_sided=False)

    pos, w_pos = one(shifted_effect(a, change) - 0.5)
    if sides > 0:
        return pos, w_pos
    neg, w_neg = one(0.5 - shifted_effect(a, -change))
    if sides < 0:
        return -neg, w_neg
    lam: FloatArray = np.concatenate((pos, -neg))
    w: FloatArray = np.concatenate((w_pos, w_neg)) / 2.0
    return lam, w


def earlier_counts(v: npt.ArrayLike) -> tuple[IntArray, IntArray]:
    """For each row of integer keys and each position j: ``#{i < j : v_i < v_j}`` and
    ``#{i < j : v_i == v_j}`` (rows are independent sequences).

    Bottom-up merge counting, vectorised over rows and blocks: at the level of blocks of
    ``2w``, each element of a block's right half counts the left half's smaller keys with
    one ``searchsorted`` in the sorted left halves (keys offset by row and block so that
    one sorted array holds them all). ``O(m log^2 m)`` for m keys.
    """
    keys = np.atleast_2d(np.asarray(v, dtype=np.int64))
    if keys.ndim != 2:
        raise ValueError("keys must be one- or two-dimensional")
    rows, m = keys.shape
    below = np.zeros((rows, m), dtype=np.int64)
    if m == 0:
        return below, below.copy()
    # Dense ranks per row (0..m-1), so that offsets of m per block keep blocks apart.
    order = np.argsort(keys, axis=1, kind="stable")
    sorted_keys = np.take_along_axis(keys, order, axis=1)
    new = np.ones((rows, m), dtype=bool)
    new[:, 1:] = sorted_keys[:, 1:] != sorted_keys[:, :-1]
    dense = np.empty((rows, m), dtype=np.int64)
    np.put_along_axis(dense, order, np.cumsum(new, axis=1) - 1, axis=1)
    # Equal earlier keys: position within the run of equal keys (stable sort keeps order).
    run_start = np.maximum.accumulate(np.where(new, np.arange(m), 0), axis=1)
    equal = np.empty((rows, m), dtype=np.int64)
    np.put_along_axis(equal, order, np.arange(m) - run_start, axis=1)
    j = np.arange(m)
    row_ids = np.arange(rows)[:, None]
    w = 1
    while w < m:
        blocks = (m + 2 * w - 1) // (2 * w)
        block = row_ids * blocks + (j // (2 * w))[None, :]
        right = ((j // w) % 2 == 1)[None, :].repeat(rows, axis=0)
        key = block * m + dense
        left_keys = np.sort(key[~right])
        targets = key[right]
        floor = block[right] * m
        below[right] += (np.searchsorted(left_keys, targets, side="left")
                         - np.searchsorted(left_keys, floor, side="left"))
        w *= 2
    out_equal: IntArray = equal
    return below, out_equal


def scores(below: npt.ArrayLike, equal: npt.ArrayLike, t: npt.ArrayLike, labels: npt.ArrayLike,
           v: npt.ArrayLike) -> FloatArray:
    """``x_t = s_t (2 u_t - 1)`` with the smoothed sequential rank (1):
    ``u_t = (below + V (equal + 1)) / t``; ``t`` counts the observation itself."""
    u = (np.asarray(below, dtype=np.float64)
         + np.asarray(v, dtype=np.float64) * (np.asarray(equal, dtype=np.float64) + 1.0)
         ) / np.asarray(t, dtype=np.float64)
    out: FloatArray = np.asarray(labels, dtype=np.float64) * (2.0 * u - 1.0)
    return out


def log_wealth(x: npt.ArrayLike, lambdas: npt.ArrayLike, start: npt.ArrayLike | None = None,
               weights: npt.ArrayLike | None = None) -> tuple[FloatArray, FloatArray]:
    """Log-wealth of each bet after each score, and of their mixture (equal weights unless
    ``weights`` are given).

    Parameters
    ----------
    x : array_like, shape (..., m)
        Scores in [-1, 1], in order along the last axis.
    lambdas : array_like, shape (K,)
        The bets.
    start : array_like, shape (..., K), optional
        Each bet's log-wealth before ``x`` (default 0: ``W_0 = 1``).
    weights : array_like, shape (K,), optional
        The mixture's weights, positive, summing to 1 (default ``1/K`` each).

    Returns
    -------
    per_bet : FloatArray, shape (..., K, m)
        ``log W_t(lambda_k)``.
    mixture : FloatArray, shape (..., m)
        ``log sum_k w_k W_t(lambda_k)``.
    """
    xs = np.asarray(x, dtype=np.float64)
    lam = np.asarray(lambdas, dtype=np.float64)
    per_bet = np.cumsum(np.log1p(lam[:, None] * xs[..., None, :]), axis=-1)
    if start is not None:
        per_bet += np.asarray(start, dtype=np.float64)[..., None]
    w = None if weights is None else _checked_weights(weights, lam.size)
    mixture: FloatArray = _log_mean_exp(per_bet, axis=-2, weights=w)
    return per_bet, mixture


def _checked_weights(weights: npt.ArrayLike, size: int) -> FloatArray:
    w = np.asarray(weights, dtype=np.float64)
    if w.shape != (size,) or not np.all(w > 0.0) or abs(float(w.sum()) - 1.0) > 1e-9:
        raise ValueError("weights: one positive weight per bet, summing to 1")
    return w


def _log_mean_exp(values: FloatArray, axis: int = -1,
                  weights: FloatArray | None = None) -> FloatArray:
    """``log mean exp`` along an axis (``log sum w exp`` with weights along it), without
    overflow (all values finite)."""
    top = values.max(axis=axis, keepdims=True)
    scaled = np.exp(values - top)
    if weights is None:
        inner = scaled.mean(axis=axis)
    else:
        shape = [1] * values.ndim
        shape[axis] = weights.size
        inner = (scaled * weights.reshape(shape)).sum(axis=axis)
    out: FloatArray = np.squeeze(top, axis=axis) + np.log(inner)
    return out


def rank_effect(a: ArmCounts, b: ArmCounts) -> float:
    """``P(B > A) + P(B = A)/2`` estimated from all pairs (Mann–Whitney's U / (n_a n_b))."""
    if not (a.n and b.n):
        return 0.5
    return _twice_u(a, b) / (2.0 * a.n * b.n)


def _twice_u(a: ArmCounts, b: ArmCounts) -> int:
    """``2 U = sum over pairs of 2 1{b > a} + 1{b = a}``, exact in integers."""
    if not (a.n and b.n):
        return 0
    less = a.below(b.values, "left")
    at_or_below = a.below(b.values, "right")
    return int(np.sum(b.counts() * (less + at_or_below)))


@dataclass(frozen=True)
class RankBettingResult:
    """Snapshot of a :class:`RankBettingTest`.

    Attributes
    ----------
    n_a, n_b : int
        Observations per arm.
    log_wealth : float
        ``log W`` of the mixture now.
    p_value : float
        ``min(1, 1 / max_t W_t)`` (anytime-valid).
    decision : str
        ``"continue"`` or ``"reject"`` (sticky).
    decided_at : tuple of int or None
        ``(n_a, n_b)`` at the look that rejected.
    b_larger : bool
        The positive bets hold more wealth than the negative ones (at the decision, once
        rejected: the direction decided).
    effect : float
        ``P(B > A) + P(B = A)/2`` estimated from every pair of scored observations
        (Mann–Whitney's U/(n_a n_b); values waiting for a partner are not in it yet).
    """

    n_a: int
    n_b: int
    log_wealth: float
    p_value: float
    decision: Decision
    decided_at: tuple[int, int] | None
    b_larger: bool
    effect: float


class RankBettingTest:
    """Anytime-valid test of ``A =d B`` betting on sequential ranks (module docstring).

    Parameters
    ----------
    alpha : float, default 0.05
        Type I error over the whole open-ended run.
    seed : int, default 0
        Seed of the value-independent randomness: the batches' orders and the ranks'
        smoothing ``V_t`` (drawn per look from ``(seed, look)``).
    lambdas : array_like, optional
        The bets (default :func:`bets`; both signs for a two-sided test).
    weights : array_like, optional
        The mixture's weights, one per bet, positive, summing to 1 (default equal; see
        :func:`tuned_bets`). The side said on rejection keeps the module docstring's
        guarantee when the positive and the negative bets each hold half the weight (or
        all bets are positive: a one-sided test).
    tuned : (change, sides), optional
        Bets tuned to a stated change of the values (their unit): the first ``HELD_OUT`` A
        values (in the batches' random order) are held out, never scored, and set the bets
        and weights (:func:`held_out_bets`; ``sides`` +1: "B larger" only, -1: "B smaller"
        only, 0: both); nothing is scored before. ``lambdas`` and ``weights`` are then
        those of a restored state only.

    Notes
    -----
    Observations are scored in pairs: an arm's values wait (in the random order given to
    their batch) until the other arm has as many, and each look scores the pairs it can,
    A, B, A, B, ... So a drift common to both arms over time (load, time of day) moves A's
    and B's ranks alike and cancels in the scores, where a look of one arm alone would
    read it as a difference; the waiting values are held in the state (as many as the
    arms' imbalance). Under ``A =d B`` the scored sequence is still i.i.d.: which values
    are scored when depends only on the counts.
    """

    def __init__(self, alpha: float = 0.05, *, seed: int = 0,
                 lambdas: npt.ArrayLike | None = None,
                 weights: npt.ArrayLike | None = None,
                 tuned: tuple[float, int] | None = None) -> None:
        if not 0.0 < alpha < 1.0:
            raise ValueError(f"alpha must lie in (0, 1), got {alpha!r}")
        if tuned is not None and not (math.isfinite(tuned[0]) and tuned[0] > 0.0
                                      and tuned[1] in (-1, 0, 1)):
            raise ValueError("tuned: (a positive change, sides -1, 0 or +1)")
        #: ``(change, sides)`` of a test tuned to a stated change, else None.
        self.tuned: tuple[float, int] | None = (
            None if tuned is None else (float(tuned[0]), int(tuned[1])))
        #: Its held-out A values (``HELD_OUT`` once its bets are set).
        self._held: FloatArray = np.empty(0)
        lam = bets() if lambdas is None else np.asarray(lambdas, dtype=np.float64)
        if lam.ndim != 1 or not lam.size or np.any(np.abs(lam) >= 1.0):
            raise ValueError("lambdas: a non-empty list of bets within (-1, 1)")
        self.alpha = float(alpha)
        self.seed = int(seed)
        self.lambdas: FloatArray = lam
        #: ``None``: equal weights (the state then keeps format 1, as before weights).
        self.weights: FloatArray | None = (None if weights is None
                                           else _checked_weights(weights, lam.size))
        self._looks = 0
        self._a = ArmCounts.empty()
        self._b = ArmCounts.empty()
        self._wait_a: FloatArray = np.empty(0)
        self._wait_b: FloatArray = np.empty(0)
        self._log_bets: FloatArray = np.zeros(lam.size)
        self._log_max = 0.0
        self._decision: Decision = "continue"
        self._decided_at: tuple[int, int] | None = None
        self._b_larger = False
        self._twice_u = 0  # Mann–Whitney's 2U over the scored pairs, kept up to date

    @property
    def n_a(self) -> int:
        return self._a.n + self._wait_a.size + self._held.size

    @property
    def ready(self) -> bool:
        """Whether it scores: always, or once a tuned test has held out its A values."""
        return self.tuned is None or self._held.size >= HELD_OUT

    def _hold_out(self, a: FloatArray) -> FloatArray:
        """A tuned test's held-out A values taken from ``a`` (in order) until it has
        ``HELD_OUT``; its bets set then. Returns the rest of ``a``."""
        if self.ready:
            return a
        need = HELD_OUT - self._held.size
        self._held = np.concatenate((self._held, a[:need]))
        if self.ready:
            assert self.tuned is not None
            self.lambdas, weights = held_out_bets(self._held, *self.tuned)
            self.weights = _checked_weights(weights, self.lambdas.size)
            self._log_bets = np.zeros(self.lambdas.size)
        return a[need:]

    @property
    def n_b(self) -> int:
        return self._b.n + self._wait_b.size

    def update(self, a_values: npt.ArrayLike, b_values: npt.ArrayLike) -> RankBettingResult:
        """Add a batch to each arm (either may be empty), score the pairs now complete and
        look."""
        a = as_sample(a_values, "a_values")
        b = as_sample(b_values, "b_values")
        if not (a.size or b.size):
            return self.result()
        rng = np.random.default_rng([self.seed, self._looks])
        self._looks += 1
        self._wait_a = np.concatenate((self._wait_a,
                                       self._hold_out(a[rng.permutation(a.size)])))
        self._wait_b = np.concatenate((self._wait_b, b[rng.permutation(b.size)]))
        m = min(self._wait_a.size, self._wait_b.size) if self.ready else 0
        if m:
            take_a, self._wait_a = self._wait_a[:m], self._wait_a[m:]
            take_b, self._wait_b = self._wait_b[:m], self._wait_b[m:]
            z = np.empty(2 * m)
            z[0::2], z[1::2] = take_a, take_b
            labels = np.tile([-1.0, 1.0], m)
            held = self._a.n + self._b.n
            old_below = _below(self._a, z, "left") + _below(self._b, z, "left")
            old_equal = _below(self._a, z, "right") + _below(self._b, z, "right") - old_below
            _, inverse = np.unique(z, return_inverse=True)
            new_below, new_equal = earlier_counts(inverse.reshape(1, -1))
            t = held + np.arange(1, z.size + 1)
            x = scores(old_below + new_below[0], old_equal + new_equal[0], t, labels,
                       rng.random(z.size))
            per_bet, mixture = log_wealth(x, self.lambdas, self._log_bets, self.weights)
            self._log_bets = per_bet[:, -1].copy()
            self._log_max = max(self._log_max, float(mixture.max()))
            # 2U gains the pairs with a new value: new B with old A, new A with old B, new
            # with new (O(m log U), not a pass over the held values).
            old_b = self._b.n
            new_a = ArmCounts.from_counts(*np.unique(take_a, return_counts=True))
            self._twice_u += int(
                np.sum(_below(self._a, take_b, "left") + _below(self._a, take_b, "right"))
                + np.sum(2 * old_b - _below(self._b, take_a, "left")
                         - _below(self._b, take_a, "right"))
                + np.sum(new_a.below(take_b, "left") + new_a.below(take_b, "right")))
            self._a = self._a.merged(take_a)
            self._b = self._b.merged(take_b)
        if self._decision == "continue":
            self._b_larger = self._side()
            if self._log_max >= math.log(1.0 / self.alpha):
                self._decision = "reject"
                self._decided_at = (self.n_a, self.n_b)
        return self.result()

    def _side(self) -> bool:
        positive = self.lambdas > 0
        wealth = np.exp(self._log_bets - self._log_bets.max())
        if self.weights is not None:
            wealth = wealth * self.weights
        return bool(wealth[positive].sum() >= wealth[~positive].sum())

    @property
    def p_value(self) -> float:
        return min(1.0, math.exp(-self._log_max))

    @property
    def decision(self) -> Decision:
        return self._decision

    def result(self) -> RankBettingResult:
        now = float(_log_mean_exp(self._log_bets, weights=self.weights))
        return RankBettingResult(
            n_a=self.n_a, n_b=self.n_b, log_wealth=now, p_value=self.p_value,
            decision=self._decision, decided_at=self._decided_at, b_larger=self._b_larger,
            effect=(self._twice_u / (2.0 * self._a.n * self._b.n) if self._a.n and self._b.n
                    else 0.5),
        )

    def to_state(self, *, data: bool = True) -> dict[str, Any]:
        """JSON-serialisable state; ``data=False`` leaves out the arms' values (``support``,
        ``counts_a``, ``counts_b``: every observation received, waiting ones included), which
        a caller holding the same observations passes back to :meth:`from_state`."""
        out: dict[str, Any] = {
            "format": (_STATE_FORMAT_TUNED if self.tuned is not None else _STATE_FORMAT
                       if self.weights is None else _STATE_FORMAT_WEIGHTS),
            "alpha": self.alpha, "seed": self.seed,
            "lambdas": self.lambdas.tolist(), "looks": self._looks,
            "wait_a": self._wait_a.tolist(), "wait_b": self._wait_b.tolist(),
            "log_bets": self._log_bets.tolist(), "log_max": self._log_max,
            "decision": self._decision, "b_larger": self._b_larger,
            "decided_at": None if self._decided_at is None else list(self._decided_at),
        }
        if self.weights is not None:
            out["weights"] = self.weights.tolist()
        if self.tuned is not None:
            out["tuned"] = list(self.tuned)
            out["held"] = self._held.tolist()
        if data:
            all_a = self._a.merged(np.concatenate((self._wait_a, self._held)))
            all_b = self._b.merged(self._wait_b)
            support = np.union1d(all_a.values, all_b.values)
            out["support"] = support.tolist()
            out["counts_a"] = _counts_on(all_a, support).tolist()
            out["counts_b"] = _counts_on(all_b, support).tolist()
        return out

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> RankBettingTest:
        """Rebuild a test from :meth:`to_state` output with the data (``support``,
        ``counts_a``, ``counts_b``: sorted distinct values and each arm's count of every
        observation received there). Errors raise. A state of format 1 (before weights)
        has equal weights; format 2 carries ``weights``."""
        form = state.get("format")
        if form not in (_STATE_FORMAT, _STATE_FORMAT_WEIGHTS, _STATE_FORMAT_TUNED):
            raise ValueError(f"unsupported state format {form!r}")
        if form != _STATE_FORMAT_TUNED and (form == _STATE_FORMAT_WEIGHTS) != (
                "weights" in state):
            raise ValueError("weights: in a state of format 2 or 3 only")
        if (form == _STATE_FORMAT_TUNED) != ("tuned" in state and "held" in state):
            raise ValueError("tuned, held: in a state of format 3 only")
        tuned = state.get("tuned")
        test = cls(state["alpha"], seed=state["seed"], lambdas=state["lambdas"],
                   weights=state.get("weights"),
                   tuned=None if tuned is None else (float(tuned[0]), int(tuned[1])))
        if tuned is not None:
            held = np.asarray(state["held"], dtype=np.float64)
            if held.ndim != 1 or held.size > HELD_OUT or not np.all(np.isfinite(held)):
                raise ValueError(f"held: at most {HELD_OUT} finite values")
            test._held = held
            if test.ready != (test.weights is not None):
                raise ValueError("weights: set once the held-out values are complete")
        test._looks = int(state["looks"])
        log_bets = np.asarray(state["log_bets"], dtype=np.float64)
        if log_bets.shape != test.lambdas.shape or not np.all(np.isfinite(log_bets)):
            raise ValueError("log_bets: one finite log-wealth per bet")
        test._log_bets = log_bets
        test._log_max = float(state["log_max"])
        if state["decision"] not in ("continue", "reject"):
            raise ValueError(f"unknown decision {state['decision']!r}")
        test._decision = state["decision"]
        test._b_larger = bool(state["b_larger"])
        at = state["decided_at"]
        test._decided_at = None if at is None else (int(at[0]), int(at[1]))
        test._wait_a = np.asarray(state["wait_a"], dtype=np.float64)
        test._wait_b = np.asarray(state["wait_b"], dtype=np.float64)
        support = np.asarray(state.get("support", []), dtype=np.float64)
        counts = []
        for key, wait in (("counts_a", np.concatenate((test._wait_a, test._held))),
                          ("counts_b", test._wait_b)):
            given = np.asarray(state.get(key, []), dtype=np.int64)
            if given.shape != support.shape:
                raise ValueError("support, counts_a, counts_b: one count per value")
            at_values = np.searchsorted(support, wait)
            if wait.size and (np.any(at_values >= support.size)
                              or np.any(support[np.minimum(at_values, support.size - 1)]
                                        != wait)):
                raise ValueError("wait_a, wait_b: values not in the support")
            counts.append(given - np.bincount(at_values, minlength=support.size))
        if not (np.all(np.diff(support) > 0) and np.all(np.isfinite(support))
                and all(np.all(c >= 0) for c in counts)):
            raise ValueError("support, counts_a, counts_b: sorted distinct values and counts "
                             "covering the waiting values")
        test._a = ArmCounts.from_counts(support, counts[0])
        test._b = ArmCounts.from_counts(support, counts[1])
        test._twice_u = _twice_u(test._a, test._b)
        if test._log_max < 0.0 or test._log_max < float(
                _log_mean_exp(log_bets, weights=test.weights)) - 1e-9:
            raise ValueError("log_max: below the wealth now")
        return test


def _below(arm: ArmCounts, points: FloatArray, side: Literal["left", "right"]) -> IntArray:
    """``ArmCounts.below``, also for an arm with no observation yet; the points are looked
    up in sorted order (a sorted query walks the held values once instead of jumping
    about them: 3-4x faster on a large arm)."""
    if not arm.n:
        return np.zeros(points.size, dtype=np.int64)
    order = np.argsort(points, kind="stable")
    out: IntArray = np.empty(points.size, dtype=np.int64)
    out[order] = arm.below(points[order], side)
    return out


def _counts_on(arm: ArmCounts, support: FloatArray) -> IntArray:
    out: IntArray = _below(arm, support, "right") - _below(arm, support, "left")
    return out
