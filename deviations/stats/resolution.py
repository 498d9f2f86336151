"""Observations on a fixed relative grid: bounded state for open-ended sequential tests.

The grid of relative resolution ``r > 0`` is ``G_r = {0} ∪ {±(1 + r)^k : k >= k_0}``
(each point computed as ``(1 + r) ** k`` in float64, so the grid is one fixed set;
``k_0`` is the smallest k with ``(1 + r)^k >= 1e-300``, so that the points stay distinct
normal floats).
:func:`to_grid` maps each value to ``q(x) = max{g ∈ G_r : g <= x}``; ``r = 0`` is the
identity.

**Why a test on q(data) keeps its guarantee.** ``q`` is one fixed non-decreasing map,
applied to both arms at all times, chosen before any data. If ``A =d B`` then
``q(A) =d q(B)``, and ``A <=st B`` implies ``q(A) <=st q(B)``; the mapped streams are
again i.i.d. within each arm. So a sequential test run on ``q(A), q(B)`` (the DKW
confidence sequences of Lindon et al. 2022, the quantile test of Howard and Ramdas 2022)
tests a null that the original null implies: its type I error stays <= alpha under any
monitoring, exactly — nothing is approximated, the test is applied to other data. Power
is lost only for differences that ``q`` hides: changes smaller than one grid step, ``r``
relative.

**Quantiles.** For any p, with ``xi = Q_X(p)`` (left-continuous inverse) and
``xi' = Q_{q(X)}(p)``: ``xi' <= q(xi) <= xi`` (``q(xi)`` is a grid point with
``P(q(X) <= q(xi)) >= P(X <= xi) >= p``), and ``P(X < up(xi')) = P(q(X) <= xi') >= p`` so
``xi <= up(xi')``, where :func:`grid_up` is the next grid point above. A band
``[L, U]`` for ``xi'`` therefore gives ``[L, up(U)]`` for ``xi``: widen the upper end by
one step (:func:`widen_band`).

**Size.** Positive values within ``[lo, hi]`` take at most ``ln(hi/lo)/ln(1 + r) + 1``
grid points (likewise negative): at r = 1e-4, 1 ms to 100 s is 115,130 points whatever
the number of observations.

References
----------
M. Lindon, D. W. Ham, M. Tingley, I. Bojinov, *Anytime-valid linear models and regression
adjusted causal inference in randomized experiments* / *Anytime-valid inference in
sequential experiments* (Netflix, 2022), the DKW confidence sequences used here. S. R.
Howard, A. Ramdas, *Sequential estimation of quantiles with applications to A/B-testing
and best-arm identification*, Bernoulli 28(3), 2022. The invariance of a two-sample null
under a common monotone map: E. L. Lehmann, J. P. Romano, *Testing Statistical
Hypotheses*, 3rd ed., 2005, §6.8 (rank tests and monotone transformations).

Only numpy is imported here.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from deviations.stats._typing import FloatArray

#: The finest resolution accepted: below it neighbouring grid points are a few ulps apart
#: and rounding of ``(1 + r) ** k`` could no longer be corrected by one step.
MIN_RESOLUTION = 1e-9
#: The coarsest: a 10 % step already hides any change a canary is for.
MAX_RESOLUTION = 0.1
#: The grid's smallest positive point is the first power at or above this (subnormal
#: powers would not be distinct).
_FLOOR = 1e-300


def check_resolution(resolution: float) -> float:
    """``resolution`` as a float, 0 or within [MIN_RESOLUTION, MAX_RESOLUTION]; else raise."""
    r = float(resolution)
    if not (r == 0.0 or MIN_RESOLUTION <= r <= MAX_RESOLUTION):
        raise ValueError(f"resolution must be 0 or in [{MIN_RESOLUTION}, {MAX_RESOLUTION}], "
                         f"got {resolution!r}")
    return r


def _power(r: float, k: FloatArray) -> FloatArray:
    with np.errstate(over="ignore", under="ignore"):
        out: FloatArray = np.power(1.0 + r, k)
    return out


def _floor_index(m: FloatArray, r: float) -> FloatArray:
    """``max{k : (1 + r)^k <= m}`` for ``m > 0`` (the computed powers, corrected by a step)."""
    with np.errstate(divide="ignore"):
        # log of the float 1 + r that the powers use (log1p(r) differs by ~1e-7 at 1e-9).
        k = np.floor(np.log(m) / math.log(1.0 + r))
    k = np.where(_power(r, k) > m, k - 1, k)
    return np.where(_power(r, k + 1) <= m, k + 1, k)


def _k0(r: float) -> float:
    """``k_0``: the smallest k with ``(1 + r)^k >= _FLOOR``."""
    k = float(_floor_index(np.array(_FLOOR), r))
    return k if float(_power(r, np.array(k))) >= _FLOOR else k + 1


def to_grid(values: npt.ArrayLike, resolution: float) -> FloatArray:
    """``q(x)``: the largest point of the grid ``G_r`` at or below each value.

    Non-decreasing, ``q(x) <= x < grid_up(q(x))``; ``resolution=0`` returns the values.
    """
    r = check_resolution(resolution)
    x = np.asarray(values, dtype=np.float64)
    if r == 0.0 or x.size == 0:
        return x.copy()
    m = np.abs(x)
    safe = np.where(m > 0, m, 1.0)
    k = _floor_index(safe, r)
    # x < 0: the largest grid point <= x is -(1+r)^j with the smallest j with (1+r)^j >= |x|.
    k0 = _k0(r)
    j = np.maximum(np.where(_power(r, k) == safe, k, k + 1), k0)
    out: FloatArray = np.where(x > 0, np.where(k >= k0, _power(r, k), 0.0),
                               np.where(x < 0, -_power(r, j), 0.0))
    return out


def grid_up(points: npt.ArrayLike, resolution: float) -> FloatArray:
    """The next grid point above each grid point (``+inf`` stays ``+inf``, ``-inf`` too).

    Above 0 it is the smallest positive grid point; ``resolution=0`` returns the points.
    """
    r = check_resolution(resolution)
    g = np.asarray(points, dtype=np.float64)
    if r == 0.0:
        return g.copy()
    finite = np.isfinite(g)
    m = np.where(finite & (g != 0), np.abs(g), 1.0)
    k = _floor_index(m, r)
    k0 = _k0(r)
    below = np.where(k - 1 >= k0, -_power(r, k - 1), 0.0)
    out: FloatArray = np.where(
        ~finite, g, np.where(g > 0, _power(r, k + 1),
                             np.where(g < 0, below, float(_power(r, np.array(k0))))))
    return out


def widen_band(lo: npt.ArrayLike, hi: npt.ArrayLike,
               resolution: float) -> tuple[FloatArray, FloatArray]:
    """A band ``[lo, hi]`` for a quantile of ``q(X)`` made one for the quantile of ``X``:
    ``[lo, grid_up(hi)]`` (module docstring, "Quantiles")."""
    return np.asarray(lo, dtype=np.float64).copy(), grid_up(hi, resolution)


def widen_difference(diff_lo: npt.ArrayLike, diff_hi: npt.ArrayLike,
                     band_a: tuple[npt.ArrayLike, npt.ArrayLike],
                     band_b: tuple[npt.ArrayLike, npt.ArrayLike],
                     resolution: float) -> tuple[FloatArray, FloatArray]:
    """A band on ``Q_B - Q_A`` of the gridded data made one for the original data.

    With ``xi' <= xi <= up(xi')`` per arm, ``xi_b - xi_a`` lies in
    ``[xi'_b - xi'_a - step_a, xi'_b - xi'_a + step_b]`` where ``step = up(xi') - xi'``;
    the largest step over an arm's band ``[lo, hi]`` is at one of its ends (the step grows
    with ``|x|`` on each side of 0; an interval holding 0 or reaching past the data is
    bounded by the ends' steps plus the step above 0, or is infinite).
    """
    lo = np.asarray(diff_lo, dtype=np.float64)
    hi = np.asarray(diff_hi, dtype=np.float64)

    def largest_step(band: tuple[npt.ArrayLike, npt.ArrayLike]) -> FloatArray:
        ends = [np.asarray(e, dtype=np.float64) for e in band]
        steps = []
        for e in ends:
            with np.errstate(invalid="ignore"):
                s = grid_up(e, resolution) - e
            steps.append(np.where(np.isfinite(e), s, np.inf))
        zero = grid_up(np.zeros(1), resolution)[0]
        out: FloatArray = np.maximum(np.maximum(steps[0], steps[1]), zero)
        return out

    return lo - largest_step(band_a), hi + largest_step(band_b)
