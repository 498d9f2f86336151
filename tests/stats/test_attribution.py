"""stats.attribution: the change of a total split among its parts, against direct numpy
and scipy computations, and on a planted callee change."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as sps

from deviations.stats.attribution import TOTAL, attribute_change
from deviations.stats.intervals import median_ci_array
from deviations.stats.twosample import APPEARED, REGRESSION, UNCHANGED

# RunTask = self + V8.Execute + Layout + Paint, as a run's call tree gives it (µs)
BASE_US = {"self": 900.0, "V8.Execute": 16_000.0, "Layout": 4_000.0, "Paint": 2_500.0}


def runtask_runs(rng: np.random.Generator, runs: int, factor: dict[str, float]) -> np.ndarray:
    """Rows total, self, V8.Execute, Layout, Paint; columns runs; total = sum exactly."""
    parts = np.array([rng.lognormal(np.log(mu * factor.get(name, 1.0)), 0.04, runs)
                      for name, mu in BASE_US.items()])
    return np.vstack([parts.sum(axis=0), parts])


OWNER = np.array([TOTAL, 0, 0, 0, 0])


def test_a_planted_callee_change_is_named_with_its_interval() -> None:
    rng = np.random.default_rng(20261126)
    a = runtask_runs(rng, 10, {})
    b = runtask_runs(rng, 10, {"V8.Execute": 1.4})
    result = attribute_change(a, b, OWNER)
    verdict = result.comparison.verdict
    assert verdict[0] == REGRESSION  # RunTask's total
    assert verdict[2] == REGRESSION  # V8.Execute
    assert list(verdict[[1, 3, 4]]) == [UNCHANGED] * 3
    assert result.significant.tolist() == [True, False, True, False, False]
    planted = 0.4 * BASE_US["V8.Execute"]
    assert result.comparison.diff.lo[2] < planted < result.comparison.diff.hi[2]
    assert result.share[2] == pytest.approx(1.0, abs=0.1)
    assert result.share[1:].sum() == pytest.approx(1.0)


def test_against_direct_numpy_and_scipy() -> None:
    rng = np.random.default_rng(7)
    a = runtask_runs(rng, 12, {})
    b = runtask_runs(rng, 9, {"Layout": 1.3, "Paint": 0.8})
    result = attribute_change(a, b, OWNER, test="rank")
    c = result.comparison
    med_a, med_b = np.median(a, axis=1), np.median(b, axis=1)
    np.testing.assert_allclose(c.diff.estimate, med_b - med_a, rtol=1e-12)
    np.testing.assert_allclose(result.mean_diff, b.mean(axis=1) - a.mean(axis=1), rtol=1e-12)
    np.testing.assert_allclose(result.share[1:],
                               (b.mean(1) - a.mean(1))[1:] / (b.mean(1) - a.mean(1))[0])
    assert result.remainder[0] == pytest.approx((med_b - med_a)[0] - (med_b - med_a)[1:].sum())
    assert np.isnan(result.remainder[1:]).all()
    assert np.isnan(result.share[0])
    p = np.array([sps.mannwhitneyu(b[i], a[i], method="exact").pvalue for i in range(5)])
    np.testing.assert_allclose(c.p_value, p, rtol=1e-9)
    np.testing.assert_allclose(c.q_value, sps.false_discovery_control(p), rtol=1e-9)
    # the interval of each median is Olive's, as everywhere else
    np.testing.assert_allclose(c.median_b.lo, median_ci_array(b).lo)


def test_two_functions_share_one_family() -> None:
    rng = np.random.default_rng(3)
    one_a, one_b = runtask_runs(rng, 8, {}), runtask_runs(rng, 8, {"Paint": 2.0})
    two_a, two_b = runtask_runs(rng, 8, {}), runtask_runs(rng, 8, {})
    owner = np.r_[OWNER, OWNER + np.where(OWNER == TOTAL, 0, 5)]
    result = attribute_change(np.vstack([one_a, two_a]), np.vstack([one_b, two_b]), owner,
                              test="welch")
    p = result.comparison.p_value
    np.testing.assert_allclose(result.comparison.q_value, sps.false_discovery_control(p))
    assert result.significant[4]
    assert not result.significant[5:].any()


def test_an_absent_total_makes_its_parts_absent() -> None:
    rng = np.random.default_rng(1)
    a = runtask_runs(rng, 5, {})
    b = runtask_runs(rng, 5, {})
    a[0] = np.nan  # the function was not measured in a: its parts' values do not count
    result = attribute_change(a, b, OWNER)
    assert result.comparison.verdict.tolist() == [APPEARED] * 5
    assert np.isnan(result.share).all()
    assert np.isnan(result.remainder[0])


@pytest.mark.parametrize(("owner", "message"), [
    ([TOTAL, 0, 0, 0, 9], "owner must be the row of a total"),
    ([TOTAL, 0, 1, 0, 0], "owner must be the row of a total"),
    ([TOTAL, TOTAL, 0, 0, 0], "every total needs at least one part"),
])
def test_bad_owners_are_refused(owner: list[int], message: str) -> None:
    rng = np.random.default_rng(2)
    a = runtask_runs(rng, 5, {})
    with pytest.raises(ValueError, match=message):
        attribute_change(a, a, owner)


def test_a_total_that_is_not_the_sum_of_its_parts_is_refused() -> None:
    rng = np.random.default_rng(4)
    a, b = runtask_runs(rng, 5, {}), runtask_runs(rng, 5, {})
    b[0, 3] += 1.0
    with pytest.raises(ValueError, match="row 0 of b is not the sum of its parts"):
        attribute_change(a, b, OWNER)
