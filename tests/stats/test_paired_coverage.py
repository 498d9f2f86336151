"""Issue 11 item 4: the paired interval holds at small n (seeded; docs/statistics.md,
"Coverage"). The simulation is ``tests/simulations/paired_coverage.py``, the one that
prints the documented table, with fewer replicates."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from deviations.stats.paired import mean_interval, mean_intervals, sign_interval
from tests.simulations import paired_coverage

REPS = 2_000


@pytest.fixture(scope="module")
def table() -> dict[tuple[str, int], dict[str, float]]:
    return paired_coverage.coverage(
        reps=REPS, resamples=1_000, methods=("robust",),
        distributions=paired_coverage.REQUIRED,
    )


@pytest.mark.parametrize("n", [5, 10, 15, 30])
@pytest.mark.parametrize("distribution", paired_coverage.REQUIRED)
def test_robust_interval_covers_the_mean_at_least_93_percent(table, distribution, n):
    assert table[(distribution, n)]["robust"] >= 0.93


@pytest.mark.parametrize("distribution", paired_coverage.REQUIRED)
def test_sign_interval_covers_the_median_whatever_the_shape(table, distribution):
    # Its level is exact (93.75 % at n = 5, >= 95 % from n = 6); the estimate may fall
    # below by Monte Carlo error only (3 standard errors).
    for n in (5, 10, 15, 30):
        level = sign_interval(np.arange(float(n))).confidence
        assert level >= (0.9375 if n == 5 else 0.95)
        se = np.sqrt(level * (1 - level) / REPS)
        assert table[(distribution, n)]["sign (median)"] >= level - 3 * se


def test_the_earlier_percentile_interval_was_too_narrow():
    # The figures: 84 % at n = 5 on normal differences.
    rng = np.random.default_rng(5)
    d = rng.normal(size=(2_000, 5))
    r = mean_intervals(d, 0.95, "percentile", 1_000, seed=1)
    assert 0.80 < np.mean((r.lo <= 0) & (0 <= r.hi)) < 0.88


def test_t_method_is_students_interval():
    rng = np.random.default_rng(3)
    x = rng.normal(1.0, 2.0, 7)
    lo, hi, p = mean_interval(x, 0.9, "t")
    ref = stats.ttest_1samp(x, 0.0)
    ci = ref.confidence_interval(confidence_level=0.9)
    assert (lo, hi) == pytest.approx((ci.low, ci.high), rel=1e-12)
    assert p == pytest.approx(ref.pvalue, rel=1e-12)


def test_studentized_matches_a_loop_implementation():
    """Bootstrap-t (Efron & Tibshirani 1993, 12.5) written the obvious way."""
    rng = np.random.default_rng(4)
    x = rng.exponential(1.0, 9)
    lo, hi, _ = mean_interval(x, 0.95, "studentized", resamples=500, seed=7)
    d = x[np.lexsort((x, np.abs(x)))]  # the canonical order the function draws from
    idx = np.random.default_rng(7).integers(0, d.size, size=(500, d.size))
    se = d.std(ddof=1) / np.sqrt(d.size)
    ts = []
    for row in idx:
        s = d[row]
        if s.std(ddof=1) > 0:
            ts.append((s.mean() - d.mean()) / (s.std(ddof=1) / np.sqrt(d.size)))
    q_lo, q_hi = np.percentile(ts, [2.5, 97.5])
    assert lo == pytest.approx(d.mean() - q_hi * se, rel=1e-10)
    assert hi == pytest.approx(d.mean() - q_lo * se, rel=1e-10)
    r_lo, r_hi, _ = mean_interval(x, 0.95, "robust", resamples=500, seed=7)
    t_lo, t_hi, _ = mean_interval(x, 0.95, "t")
    assert (r_lo, r_hi) == (min(lo, t_lo), max(hi, t_hi))


def test_sign_interval_is_the_order_statistics_interval():
    d = np.array([3.0, -1.0, 2.0, 5.0, 4.0, 0.5, 1.5, 2.5])
    r = sign_interval(d, 0.95)
    # n = 8: P(Bin(8, .5) <= 0) = 1/256 -> k = 1 gives 99.2 %; k = 2 gives 93.0 % < 95 %
    assert (r.lo, r.hi) == (-1.0, 5.0)
    assert r.confidence == pytest.approx(1 - 2 / 256)
    assert r.estimate == np.median(d)
    r5 = sign_interval(d[:5])
    assert (r5.lo, r5.hi, r5.confidence) == (-1.0, 5.0, pytest.approx(0.9375))
