"""The relative grid (``stats.resolution``): the map against a brute-force search over the
grid's points, its order properties, the band widening, and the tests' type I error and
power on gridded values (a small seeded version of ``tests.simulations.canary_resolution``)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from deviations.stats.resolution import grid_up, to_grid, widen_band, widen_difference
from deviations.stats.sequential import SequentialTest
from tests.simulations.canary_resolution import stop_ns


def _brute(x: float, r: float) -> float:
    """The grid point at or below a normal float x, from its binary expansion
    ``x = f 2^e`` (``math.frexp``, f in [0.5, 1)): ``floor(f 2^(m+1)) 2^(e-m-1)`` for
    x > 0, the ceiling for x < 0, with m the smallest number of bits whose step
    ``2^-m`` is at most r (products by powers of two and floor are exact)."""
    if x == 0:
        return 0.0
    m = 0
    while 2.0 ** -m > r:
        m += 1
    f, e = math.frexp(abs(x))
    scaled = f * 2.0 ** (m + 1)
    whole = math.floor(scaled) if x > 0 else math.ceil(scaled)
    return math.copysign(math.ldexp(whole, e - m - 1), x)


@pytest.mark.parametrize("r", [1e-9, 1e-4, 1e-3, 0.1])
def test_the_map_is_the_largest_grid_point_below(r: float) -> None:
    rng = np.random.default_rng(int(r * 1e9))
    x = np.concatenate((rng.lognormal(0, 3, 300) * rng.choice([-1, 1], 300),
                        [1.0, -1.0, 0.0, 800.0, 1e-12, -1e-12, 1e300, -1e300, 2.0 - 1e-16]))
    got = to_grid(x, r)
    want = np.array([_brute(float(v), r) for v in x])
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("r", [1e-6, 1e-4, 0.05])
def test_order_properties(r: float) -> None:
    rng = np.random.default_rng(11)
    x = np.sort(rng.standard_normal(20_000) * rng.lognormal(0, 4, 20_000))
    g = to_grid(x, r)
    up = grid_up(g, r)
    assert np.all(np.diff(g) >= 0)                # monotone
    assert np.all(g <= x)         # q(x) <= x < next grid point
    assert np.all(x < up)
    np.testing.assert_array_equal(to_grid(g, r), g)     # grid points are fixed
    np.testing.assert_array_equal(to_grid(up, r), up)   # and so are the next ones
    normal = np.abs(g) > 1e-300
    step = (up[normal] - g[normal]) / np.abs(g[normal])
    assert np.all(step <= r)      # between 2^-(m+1) and 2^-m
    assert np.all(step > r / 4)
    m = math.ceil(-math.log2(r))
    assert np.unique(g[x > 1]).size <= 2 ** m * (math.log2(x.max()) + 1)


def test_zero_resolution_is_exact_and_bad_ones_raise() -> None:
    x = np.array([0.3, -2.0, 5.0])
    np.testing.assert_array_equal(to_grid(x, 0.0), x)
    np.testing.assert_array_equal(grid_up(x, 0.0), x)
    top = np.finfo(np.float64).max
    assert (to_grid([-top], 1e-4)[0], grid_up([top], 1e-4)[0]) == (
        -np.finfo(np.float64).max, np.inf)  # the grid's ends
    for r in (-1e-4, 0.5, 1e-12):
        with pytest.raises(ValueError, match="resolution"):
            to_grid(x, r)


def test_widened_bands_cover_the_exact_quantiles() -> None:
    """The band of the gridded data's quantile, upper end one step up, holds the exact
    data's quantile (the argument in the module docstring), at coarse r."""
    rng = np.random.default_rng(3)
    r = 0.05
    for _ in range(20):
        a, b = rng.lognormal(0, 1, 300), rng.lognormal(0.2, 1, 250)
        ps = np.linspace(0.05, 0.95, 19)
        exact_a = np.sort(a)[np.ceil(ps * a.size).astype(int) - 1]
        exact_b = np.sort(b)[np.ceil(ps * b.size).astype(int) - 1]
        ga, gb = np.sort(to_grid(a, r)), np.sort(to_grid(b, r))
        qa = ga[np.ceil(ps * a.size).astype(int) - 1]
        qb = gb[np.ceil(ps * b.size).astype(int) - 1]
        lo, hi = widen_band(qa, qa, r)  # a zero-width band at the gridded sample quantile
        assert np.all((lo <= exact_a) & (exact_a <= hi))
        dlo, dhi = widen_difference(qb - qa, qb - qa, (qa, qa), (qb, qb), r)
        assert np.all((dlo <= exact_b - exact_a) & (exact_b - exact_a <= dhi))


def test_gridded_test_equals_the_exact_test_on_grid_data() -> None:
    """Data already on the grid are left alone, so the test sees exactly them."""
    rng = np.random.default_rng(5)
    a, b = to_grid(rng.lognormal(6, 0.4, 2_000), 1e-3), to_grid(rng.lognormal(6, 0.4, 2_000), 1e-3)
    one, two = SequentialTest("equal"), SequentialTest("equal")
    one.update(a, b)
    two.update(to_grid(a, 1e-3), to_grid(b, 1e-3))
    assert one.same_state(two)


def test_type_one_error_and_power_unchanged_on_the_grid() -> None:
    """60 A/A streams, batches of 100 per arm looked at after each up to 2,000: at most 3
    rejections (5 %) for each test and resolution. Median ×1.05, 6 streams up to 16,000:
    every stream stopped at every resolution, the gridded median stop within 10 % of the
    exact one (full-size figures: docs/statistics.md)."""
    aa = stop_ns(1.0, 60, 2_000, 100, seed=240)
    for key, stops in aa.items():
        assert sum(1 for s in stops if s) <= 3, key
    shift = stop_ns(1.05, 6, 16_000, 500, seed=241)
    for test in ("dkw", "quantiles"):
        exact = np.median(shift[test, 0.0])
        for r in (1e-4, 1e-3):
            assert all(shift[test, r]), (test, r)
            assert abs(np.median(shift[test, r]) - exact) <= 0.1 * exact, (test, r)


def test_scalars_keep_their_shape() -> None:
    assert to_grid(3.3, 1e-3).shape == grid_up(3.3, 1e-3).shape == ()
    lo, hi = widen_difference(1.0, 2.0, (1.0, 2.0), (3.0, 4.0), 1e-3)
    assert lo.shape == hi.shape == ()
    assert lo < 1.0
    assert hi > 2.0
