"""Observations on a fixed relative grid: bounded state for open-ended sequential tests.

The grid of relative resolution ``r > 0`` keeps the ``m = ceil(log2(1/r))`` leading bits
of the binary mantissa: ``G_r = {0} ∪ {±(1 + j 2^-m) 2^e : 0 <= j < 2^m, e}`` plus the
floats beyond the largest such point (the float64 numbers whose 52 − m lowest mantissa
bits are zero; below the normal range, the multiples of ``2^(-1074 + 52 - m)``).
Consecutive points differ by between ``2^-(m+1)`` and ``2^-m <= r`` relative.
:func:`to_grid` maps each value to ``q(x) = max{g ∈ G_r : g <= x}`` by clearing those
bits (rounding the magnitude up for negative x); ``r = 0`` is the identity.

A grid of powers ``(1 + r)^k`` was tried first and dropped: numpy's ``power`` gives
results one ulp apart for the same k in its vectorised and scalar paths (seen at r = 0.1,
k = −1), so the same value could be mapped to two different points depending on its
position in a batch: not one fixed map. Clearing bits is exact and the same everywhere;
the price is up to 2× more points than a power grid of the same largest step.

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

**Size.** Positive values within ``[lo, hi]`` take at most ``2^m (log2(hi/lo) + 1)``
grid points (likewise negative): at r = 1e-4 (m = 14), 1 ms to 100 s is at most 294,912
points whatever the number of observations; lognormal latencies with log-sd 0.4 reached
83,105 of them (both arms) after 10^8 observations per arm (docs/statistics.md).

References
----------
M. Lindon, C. Sanden, V. Shirikian, *Rapid Regression Detection in Software Deployments
through Sequential Testing*, KDD '22, §3 (the DKW confidence sequences of
``stats.sequential``). S. R.
Howard, A. Ramdas, *Sequential estimation of quantiles with applications to A/B-testing
and best-arm identification*, Bernoulli 28(3), 2022. The invariance of a two-sample null
under a common monotone map: E. L. Lehmann, J. P. Romano, *Testing Statistical
Hypotheses*, 3rd ed., 2005, ch. 6 (invariance under monotone transformations).

Only numpy is imported here.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from deviations.stats._typing import FloatArray

#: The finest resolution accepted (m = 30 bits kept).
MIN_RESOLUTION = 1e-9
#: The coarsest: a 10 % step already hides any change a canary is for.
MAX_RESOLUTION = 0.1
_MANTISSA_BITS = 52


def check_resolution(resolution: float) -> float:
    """``resolution`` as a float, 0 or within [MIN_RESOLUTION, MAX_RESOLUTION]; else raise."""
    r = float(resolution)
    if not (r == 0.0 or MIN_RESOLUTION <= r <= MAX_RESOLUTION):
        raise ValueError(f"resolution must be 0 or in [{MIN_RESOLUTION}, {MAX_RESOLUTION}], "
                         f"got {resolution!r}")
    return r


def kept_bits(resolution: float) -> int:
    """``m = ceil(log2(1/r))``: mantissa bits kept, so that a step is at most ``r``."""
    r = check_resolution(resolution)
    if r == 0.0:
        return _MANTISSA_BITS
    return min(_MANTISSA_BITS, math.ceil(-math.log2(r)))


def _mask(resolution: float) -> np.int64:
    return np.int64((1 << (_MANTISSA_BITS - kept_bits(resolution))) - 1)


def _magnitude_bits(x: FloatArray) -> npt.NDArray[np.int64]:
    out: npt.NDArray[np.int64] = np.abs(x).view(np.int64)
    return out


def _from_bits(bits: npt.NDArray[np.int64], negative: npt.NDArray[np.bool_]) -> FloatArray:
    magnitude = bits.view(np.float64)
    out: FloatArray = np.where(negative, -magnitude, magnitude)
    return out


_LARGEST = np.float64(np.finfo(np.float64).max)


def to_grid(values: npt.ArrayLike, resolution: float) -> FloatArray:
    """``q(x)``: the largest point of the grid ``G_r`` at or below each finite value.

    Non-decreasing, ``q(x) <= x < grid_up(q(x))``; ``resolution=0`` returns the values.
    """
    r = check_resolution(resolution)
    x = np.array(values, dtype=np.float64)  # a C-contiguous copy, 0-d kept 0-d
    if r == 0.0 or x.size == 0:
        return x.copy()
    mask = _mask(r)
    bits = _magnitude_bits(x)
    negative = x < 0
    # Positive: drop the low bits (down). Negative: raise the magnitude to the next
    # multiple (the grid point below x); past the largest float that is inf: keep the float.
    bits = np.where(negative, (bits + mask) & ~mask, bits & ~mask)
    out = _from_bits(bits, negative)
    out = np.where(np.isinf(out) & negative, -_LARGEST, out)
    return np.where(x == 0, 0.0, out)


def grid_up(points: npt.ArrayLike, resolution: float) -> FloatArray:
    """The smallest grid point above each value (``+inf`` past the largest; infinite values
    stay); ``resolution=0`` returns the values."""
    r = check_resolution(resolution)
    g = np.array(points, dtype=np.float64)
    if r == 0.0:
        return g.copy()
    mask = _mask(r)
    finite = np.isfinite(g)
    safe = np.where(finite, g, 0.0)
    bits = _magnitude_bits(safe)
    negative = safe < 0
    up_bits = np.where(negative, (bits - 1) & ~mask, (bits & ~mask) + mask + 1)
    with np.errstate(over="ignore"):
        out = _from_bits(up_bits, negative & (up_bits > 0))
    return np.where(finite, out, g)

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
