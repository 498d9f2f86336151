"""Two arbitrary releases compared per function (deviations.stats.twosample), checked
against scipy's Mann–Whitney and t distributions and statsmodels' Benjamini–Hochberg."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as sps
from statsmodels.stats.multitest import multipletests

from deviations.stats.intervals import median_ci_array, median_diff_ci
from deviations.stats.twosample import (
    TWO_SAMPLE_VERDICTS,
    compare_two,
    rank_test_resolves,
)


def _verdicts(result):
    return [TWO_SAMPLE_VERDICTS[c] for c in result.verdict.tolist()]


def _lognormal(rng, functions, runs, scale=1000.0, sigma=0.05):
    return scale * rng.lognormal(0.0, sigma, (functions, runs))


def test_one_planted_change_among_many_is_the_only_flag():
    rng = np.random.default_rng(7)
    a = _lognormal(rng, 200, 20)
    b = _lognormal(rng, 200, 20)
    b[17] *= 1.5   # regression
    b[40] /= 1.5   # improvement
    result = compare_two(a, b)
    assert result.test == "rank"  # 20 runs a side: the exact rank test resolves 200 tests
    verdicts = _verdicts(result)
    assert verdicts[17] == "regression"
    assert verdicts[40] == "improvement"
    others = [v for i, v in enumerate(verdicts) if i not in (17, 40)]
    assert set(others) <= {"unchanged", "below_threshold"}
    assert result.diff.estimate[17] > 0 > result.diff.estimate[40]  # later − earlier


def test_rank_p_values_match_scipy_exact_and_q_values_statsmodels():
    rng = np.random.default_rng(3)
    a = rng.normal(100, 5, (30, 8))
    b = rng.normal(103, 5, (30, 9))
    result = compare_two(a, b, test="rank")
    ref = [sps.mannwhitneyu(b[i], a[i], method="exact").pvalue for i in range(30)]
    np.testing.assert_allclose(result.p_value, ref, rtol=1e-10)
    np.testing.assert_allclose(result.q_value, multipletests(ref, method="fdr_bh")[1],
                               rtol=1e-10)


def test_median_test_is_the_t_test_behind_the_difference_interval():
    rng = np.random.default_rng(5)
    a = rng.normal(100, 5, (4, 5))
    b = rng.normal(110, 5, (4, 5))
    result = compare_two(a, b, test="median")
    for i in range(4):
        iv = median_diff_ci(a[i], b[i])
        assert result.diff.estimate[i] == pytest.approx(iv.estimate)
        assert result.diff.lo[i] == pytest.approx(iv.lo)
        assert result.diff.hi[i] == pytest.approx(iv.hi)
        # The 95% interval excludes 0 exactly when the t p-value is below 0.05.
        assert (iv.lo > 0 or iv.hi < 0) == (result.p_value[i] < 0.05)
    ia, ib = median_ci_array(a), median_ci_array(b)
    se = np.sqrt(ia.se**2 + ib.se**2)
    df = (ia.se**2 + ib.se**2) ** 2 / (ia.se**4 / ia.df + ib.se**4 / ib.df)
    ref = 2 * sps.t.sf(np.abs(ib.estimate - ia.estimate) / se, df)
    np.testing.assert_allclose(result.p_value, ref, rtol=1e-9)


def test_welch_p_values_match_scipy():
    rng = np.random.default_rng(9)
    a = rng.normal(100, 5, (6, 5))
    b = rng.normal(106, 9, (6, 7))
    result = compare_two(a, b, test="welch")
    ref = [sps.ttest_ind(b[i], a[i], equal_var=False).pvalue for i in range(6)]
    np.testing.assert_allclose(result.p_value, ref, rtol=1e-9)


def test_auto_uses_welch_when_few_runs_cannot_pass_bh_with_ranks():
    # Five runs a side: the smallest exact p-value is 2/252, above 0.05/16.
    assert not rank_test_resolves(5, 5, 16, 0.05)
    assert rank_test_resolves(5, 5, 6, 0.05)
    assert rank_test_resolves(10, 10, 2000, 0.05)
    rng = np.random.default_rng(11)
    a = _lognormal(rng, 16, 5)
    b = _lognormal(rng, 16, 5)
    b[3] *= 2.0
    result = compare_two(a, b)
    assert result.test == "welch"
    assert _verdicts(result)[3] == "regression"
    assert _verdicts(result).count("regression") == 1


def test_absent_functions_appear_or_vanish_and_are_never_tested():
    rng = np.random.default_rng(1)
    a = _lognormal(rng, 4, 5)
    b = _lognormal(rng, 4, 5)
    a[1] = np.nan   # only in b
    b[2] = np.nan   # only in a
    result = compare_two(a, b)
    verdicts = _verdicts(result)
    assert verdicts[1] == "appeared"
    assert verdicts[2] == "vanished"
    assert np.isnan(result.p_value[[1, 2]]).all()
    assert np.isnan(result.q_value[[1, 2]]).all()
    assert np.isfinite(result.median_b.estimate[1])
    assert np.isnan(result.median_a.estimate[1])


def test_minimal_changes_keep_small_significant_shifts_out():
    a = np.tile(np.arange(20.0) / 100, (2, 1)) + np.array([[1000.0], [3.0]])
    b = a + np.array([[50.0], [2.0]])  # +5% of a large function, +2 µs of a tiny one
    loud = compare_two(a, b, min_relative_change=0.0)
    assert _verdicts(loud) == ["regression", "regression"]
    quiet = compare_two(a, b, min_relative_change=0.1, min_absolute_change=5.0)
    assert _verdicts(quiet) == ["below_threshold", "below_threshold"]
    assert quiet.relative[0] == pytest.approx(50 / np.median(a[0]))
    assert quiet.relative[1] > 0.5  # +60%, but 2 µs


def test_direction_decides_which_sign_is_a_regression():
    rng = np.random.default_rng(2)
    a = _lognormal(rng, 1, 20)
    b = a * 2.0
    assert _verdicts(compare_two(a, b))[0] == "regression"
    assert _verdicts(compare_two(a, b, direction="higher_is_better"))[0] == "improvement"


@pytest.mark.parametrize(
    ("a", "b", "message"),
    [
        (np.ones((2, 1)), np.ones((2, 3)), "at least 2 runs"),
        (np.ones((2, 3)), np.ones((3, 3)), "same functions"),
        (np.array([[1.0, np.nan, 2.0]]), np.ones((1, 3)), "whole row"),
        (np.ones(3), np.ones((1, 3)), "shape"),
        (np.array([[1.0, np.inf]]), np.ones((1, 3)), "infinite"),
    ],
)
def test_bad_input_raises(a, b, message):
    with pytest.raises(ValueError, match=message):
        compare_two(a, b)


def test_bad_parameters_raise():
    x = np.ones((1, 3))
    with pytest.raises(ValueError, match="fdr"):
        compare_two(x, x, fdr=0)
    with pytest.raises(ValueError, match="test"):
        compare_two(x, x, test="t")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="minimal"):
        compare_two(x, x, min_relative_change=-1)


def test_identical_tied_samples_are_unchanged():
    x = np.full((3, 5), 7.0)
    result = compare_two(x, x.copy())
    assert _verdicts(result) == ["unchanged"] * 3
