"""Verdicts between consecutive releases (deviations.stats.releases): the paper's two
conditions, the matrix under both rules, digressions, the metric's direction. The shift
rule's own tests are in test_shifts.py."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from deviations.stats.intervals import (
    IntervalArray,
    mean_ci,
    mean_ci_array,
    median_ci,
    median_ci_array,
    median_diff_ci,
)
from deviations.stats.releases import (
    APPEARED,
    DIGRESSION_SPAN,
    IMPROVEMENT,
    NO_VERDICT,
    NONSIGNIFICANT_OVERLAP,
    REGRESSION,
    SIGNIFICANT_OVERLAP,
    VANISHED,
    VERDICTS,
    Comparison,
    absent_releases,
    compare,
    compare_matrix,
    digressions,
    pair_statistics,
    verdict_name,
)
from deviations.stats.releases import codes as codes_module
from deviations.stats.releases import fallback as fallback_module
from tests.stats.samples import ragged

# --- the scalar compare ----------------------------------------------------------------

BASE = np.array([10.0, 10.4, 9.7, 10.1, 9.9, 10.2, 10.3, 9.8, 10.0, 10.1])


def test_clear_regression_and_improvement():
    slower = compare(BASE, BASE * 1.5)
    assert slower.verdict == "regression"
    assert slower.diff == pytest.approx(np.median(BASE) * 0.5)
    assert slower.gap == pytest.approx(median_ci(BASE * 1.5).lo - median_ci(BASE).hi)
    assert slower.gap > 0
    assert slower.diff_lo > 0
    faster = compare(BASE * 1.5, BASE)
    assert faster.verdict == "improvement"
    assert faster.gap < 0
    assert faster.diff_hi < 0


def test_same_data_is_nonsignificant_overlap():
    got = compare(BASE, BASE[::-1])
    assert got == Comparison("nonsignificant_overlap", 0.0, 0.0, got.diff_lo, got.diff_hi)
    assert got.diff_lo < 0 < got.diff_hi


def test_significant_but_overlapping_means():
    # Shift by 1.7 half-widths: the Welch interval (~1.41 half-widths) excludes zero,
    # the two Student intervals (2 half-widths apart at most) still overlap.
    ci = mean_ci(BASE)
    half = (ci.hi - ci.lo) / 2
    got = compare(BASE, BASE + 1.7 * half, estimator="mean")
    assert got.verdict == "significant_overlap"
    assert got.gap == 0.0
    assert got.diff_lo > 0


def test_compare_median_difference_is_olive_welch_interval():
    got = compare(BASE, BASE + 0.3)
    ref = median_diff_ci(BASE, BASE + 0.3)
    assert (got.diff, got.diff_lo, got.diff_hi) == (ref.estimate, ref.lo, ref.hi)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ([1.0], [1.0, 2.0]),
        ([1.0, 2.0], []),
        ([1.0, np.nan], [1.0, 2.0]),
        ([1.0, 2.0], [np.inf, 1.0]),
    ],
)
def test_compare_refuses_what_has_no_interval(a, b):
    with pytest.raises(ValueError, match="runs|NaN"):
        compare(a, b)


def test_compare_refuses_unknown_estimator():
    with pytest.raises(ValueError, match="estimator"):
        compare(BASE, BASE, estimator="mode")  # type: ignore[arg-type]


SWAP = {
    "regression": "improvement",
    "improvement": "regression",
    "significant_overlap": "significant_overlap",
    "nonsignificant_overlap": "nonsignificant_overlap",
    "appeared": "vanished",
    "vanished": "appeared",
}


@pytest.mark.parametrize("estimator", ["median", "mean"])
@settings(max_examples=150, deadline=None)
@given(
    a=st.lists(st.floats(1.0, 100.0), min_size=2, max_size=20),
    b=st.lists(st.floats(1.0, 100.0), min_size=2, max_size=20),
)
def test_swapping_releases_flips_the_verdict(estimator, a, b):
    ab = compare(a, b, estimator=estimator)
    ba = compare(b, a, estimator=estimator)
    assert ba.verdict == SWAP[ab.verdict]
    assert ba.diff == pytest.approx(-ab.diff, abs=1e-9)
    assert ba.gap == pytest.approx(-ab.gap, abs=1e-9)
    assert ba.diff_lo == pytest.approx(-ab.diff_hi, abs=1e-9)


def test_verdict_names():
    assert [
        verdict_name(c)
        for c in (NONSIGNIFICANT_OVERLAP, SIGNIFICANT_OVERLAP, REGRESSION, IMPROVEMENT,
                  APPEARED, VANISHED)
    ] == list(VERDICTS)
    assert verdict_name(NO_VERDICT) is None
    with pytest.raises(ValueError, match="unknown verdict"):
        verdict_name(7)


# --- the matrix equals the scalar compare -------------------------------------------


@pytest.mark.parametrize("estimator", ["median", "mean"])
def test_matrix_matches_scalar_compare_cell_by_cell(estimator):
    x = ragged(5, (30, 12, 8))
    m = compare_matrix(x, 0.9, estimator=estimator)
    for f in range(x.shape[0]):
        for r in range(1, x.shape[1]):
            a = x[f, r - 1][~np.isnan(x[f, r - 1])]
            b = x[f, r][~np.isnan(x[f, r])]
            if a.size < 2 or b.size < 2:
                assert m.verdict[f, r - 1] == NO_VERDICT
                assert np.isnan(m.diff[f, r - 1])
                assert np.isnan(m.p_value[f, r - 1])
                continue
            ref = compare(a, b, 0.9, estimator=estimator)
            assert VERDICTS[m.verdict[f, r - 1]] == ref.verdict
            for field in ("gap", "diff", "diff_lo", "diff_hi"):
                assert getattr(m, field)[f, r - 1] == pytest.approx(
                    getattr(ref, field), rel=1e-12, abs=1e-12
                )
    for f, r in np.ndindex(m.n.shape):
        cell = x[f, r][~np.isnan(x[f, r])]
        if cell.size < 2:
            assert np.isnan(m.median.estimate[f, r])
            assert np.isnan(m.mean.lo[f, r])
        else:
            assert m.median.lo[f, r] == pytest.approx(median_ci(cell, 0.9).lo, rel=1e-12)
            assert m.mean.hi[f, r] == pytest.approx(mean_ci(cell, 0.9).hi, rel=1e-12)


def test_paper_p_value_agrees_with_the_difference_interval():
    m = compare_matrix(ragged(8, (50, 10, 10)))
    ok = m.verdict >= 0
    excludes_zero = (m.diff_lo > 0) | (m.diff_hi < 0)
    assert np.array_equal((m.p_value < 0.05)[ok], excludes_zero[ok])


def test_matrix_refuses_bad_input():
    with pytest.raises(ValueError, match="shape"):
        compare_matrix(np.ones((3, 4)))
    with pytest.raises(ValueError, match="infinite"):
        compare_matrix(np.full((1, 2, 3), np.inf))
    with pytest.raises(ValueError, match="rule"):
        compare_matrix(np.ones((1, 2, 3)), rule="magic")  # type: ignore[arg-type]


def test_matrix_is_warning_free_on_empty_releases():
    # pytest turns warnings into errors: all-NaN releases must not warn.
    x = np.full((2, 4, 5), np.nan)
    x[0, 0] = [1.0, 2.0, 3.0, 4.0, 5.0]
    m = compare_matrix(x, rule="paper")
    assert (m.verdict == NO_VERDICT).all()
    m = compare_matrix(x, rule="shifts")
    assert (m.verdict[1] == NO_VERDICT).all()  # never measured


# --- the shift rule through the matrix -----------------------------------------------


def test_one_step_gives_one_flag():
    rng = np.random.default_rng(1)
    x = rng.lognormal(0.0, 0.2, (1, 30, 5))
    x[0, 10:] *= 2.0
    m = compare_matrix(x, rule="shifts")
    flagged = np.flatnonzero(m.verdict[0] >= REGRESSION)
    assert flagged.tolist() == [9]
    assert m.verdict[0, 9] == REGRESSION
    assert m.relative[0, 9] > 0.5
    down = compare_matrix(x[:, ::-1], rule="shifts")
    assert np.flatnonzero(down.verdict[0] >= REGRESSION).tolist() == [19]
    assert down.verdict[0, 19] == IMPROVEMENT


def test_the_matrix_shows_the_comparison_behind_each_shift_verdict():
    rng = np.random.default_rng(2)
    x = rng.lognormal(0.0, 0.05, (2, 30, 5))
    x[0, 15:] *= 1.3
    m = compare_matrix(x, rule="shifts")
    assert m.verdict[0, 14] == REGRESSION
    assert m.diff_lo[0, 14] > 0
    assert m.diff[0, 14] > 0
    assert m.p_value[0, 14] < 1e-3
    assert m.provisional[0, -1]
    assert not m.provisional[0, 0]
    # the paper rule is never provisional
    assert not compare_matrix(x, rule="paper").provisional.any()


# --- digressions ----------------------------------------------------------------------


def test_digression_marks_the_start_of_a_temporary_deviation():
    # Levels 1, 1, 2, 3, 3, 1 (Fig. 7: two regressions, one improvement back to 1).
    lo = np.array([0.9, 0.9, 1.9, 2.9, 2.9, 0.95])
    hi = lo + 0.2
    v = np.array(
        [NONSIGNIFICANT_OVERLAP, REGRESSION, REGRESSION, NONSIGNIFICANT_OVERLAP, IMPROVEMENT]
    )
    got = digressions(v, lo, hi)
    assert got.tolist() == [False, True, False, False, False]


def test_no_digression_when_the_level_does_not_come_back():
    lo = np.array([0.9, 1.9, 1.4])
    hi = lo + 0.2
    got = digressions(np.array([REGRESSION, IMPROVEMENT]), lo, hi)
    assert not got.any()
    with pytest.raises(ValueError, match="one more release"):
        digressions(np.array([REGRESSION]), lo, hi)


def _digressions_by_definition(v, lo, hi):
    """The docstring's definition, one pair at a time."""
    out = np.zeros(v.shape, dtype=bool)
    for f in range(v.shape[0]):
        for i in range(v.shape[1]):
            if v[f, i] not in (REGRESSION, IMPROVEMENT):
                continue
            for j in range(i + 1, min(v.shape[1], i + 1 + DIGRESSION_SPAN)):
                opposite = v[f, j] in (REGRESSION, IMPROVEMENT) and v[f, j] != v[f, i]
                if opposite and lo[f, j + 1] <= hi[f, i] and hi[f, j + 1] >= lo[f, i]:
                    out[f, i] = True
    return out


@settings(max_examples=60)
@given(seed=st.integers(0, 2**32 - 1), functions=st.integers(0, 6),
       pairs=st.integers(0, 12), dense=st.floats(0.0, 1.0))
def test_digressions_match_their_definition(seed, functions, pairs, dense):
    rng = np.random.default_rng(seed)
    v = np.where(rng.random((functions, pairs)) < dense,
                 rng.choice([REGRESSION, IMPROVEMENT], (functions, pairs)),
                 rng.choice([NONSIGNIFICANT_OVERLAP, SIGNIFICANT_OVERLAP, -1],
                            (functions, pairs))).astype(np.int8)
    lo = np.round(rng.normal(0, 1, (functions, pairs + 1)), 1)
    lo[rng.random(lo.shape) < 0.1] = np.nan
    hi = lo + np.round(rng.uniform(0, 1, lo.shape), 1)
    np.testing.assert_array_equal(digressions(v, lo, hi), _digressions_by_definition(v, lo, hi))


def test_digressions_in_chunks(monkeypatch):
    # Every pair deviating, in chunks smaller than one row's candidate pairs.
    rng = np.random.default_rng(7)
    v = rng.choice([REGRESSION, IMPROVEMENT], (5, 30)).astype(np.int8)
    lo = rng.normal(0, 1, (5, 31))
    hi = lo + 0.5
    whole = digressions(v, lo, hi)
    monkeypatch.setattr(fallback_module, "_PAIRS_PER_CHUNK", 7)
    np.testing.assert_array_equal(digressions(v, lo, hi), whole)
    np.testing.assert_array_equal(whole, _digressions_by_definition(v, lo, hi))


def test_digressions_look_only_so_far_ahead():
    lo = np.array([0.9, 1.9, 1.9, 1.9, 0.9])
    hi = lo + 0.2
    v = np.array([REGRESSION, NONSIGNIFICANT_OVERLAP, NONSIGNIFICANT_OVERLAP, IMPROVEMENT])
    assert digressions(v, lo, hi).tolist() == [True, False, False, False]
    assert digressions(v, lo, hi, span=2).tolist() == [False] * 4


@pytest.mark.parametrize("rule", ["paper", "shifts"])
def test_matrix_flags_a_planted_digression(rule):
    rng = np.random.default_rng(3)
    x = rng.lognormal(0.0, 0.05, (2, 24, 10))
    x[0, 8:16] *= 2.5  # up at pair 7, back down at pair 15
    m = compare_matrix(x, rule=rule)
    assert m.verdict[0, 7] == REGRESSION
    assert m.verdict[0, 15] == IMPROVEMENT
    assert np.flatnonzero(m.digression[0]).tolist() == [7]
    assert not m.digression[1].any()


# --- the pieces a stored matrix recomputes (deviations/traces/analysis.py) ---------------


def _stepped_samples(seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.lognormal(5.0, 0.2, size=(60, 14, 6))
    x[:20, 7:] *= 1.6
    x[20:30, 4:9] *= 0.6
    x[30:40] = np.round(x[30:40] / 30)  # ties
    x[:, 3, 4:] = np.nan  # a release with fewer runs
    return x


@pytest.mark.parametrize("estimator", ["median", "mean"])
def test_pieces_rebuild_compare_matrix(estimator):
    x = _stepped_samples(2)
    chosen = (median_ci_array if estimator == "median" else mean_ci_array)(x)
    a = IntervalArray(*(getattr(chosen, f)[:, :-1] for f in IntervalArray.__dataclass_fields__))
    b = IntervalArray(*(getattr(chosen, f)[:, 1:] for f in IntervalArray.__dataclass_fields__))
    pairs = pair_statistics(a, b)
    paper = compare_matrix(x, rule="paper", estimator=estimator)
    np.testing.assert_array_equal(pairs.paper_verdict, paper.verdict)
    np.testing.assert_array_equal(pairs.paper_p_value, paper.p_value)
    for name in ("gap", "diff", "diff_lo", "diff_hi"):
        np.testing.assert_array_equal(getattr(pairs, name), getattr(paper, name))


# --- the metric's direction -------------------------------------------------------------


def test_direction_decides_which_increase_is_a_regression():
    up = compare(BASE, BASE * 1.5, direction="higher_is_better")
    assert up.verdict == "improvement"
    assert up.diff > 0  # the difference stays later − earlier
    assert up.diff == compare(BASE, BASE * 1.5).diff
    down = compare(BASE * 1.5, BASE, direction="higher_is_better")
    assert down.verdict == "regression"
    assert down.diff < 0
    same = compare(BASE, BASE, direction="higher_is_better")
    assert same.verdict == "nonsignificant_overlap"
    with pytest.raises(ValueError, match="direction"):
        compare(BASE, BASE, direction="up")  # type: ignore[arg-type]


@pytest.mark.parametrize("rule", ["paper", "shifts"])
def test_matrix_direction_swaps_only_the_deviation_codes(rule):
    rng = np.random.default_rng(3)
    x = rng.lognormal(0.0, 0.05, (3, 24, 10))
    x[0, 8:16] *= 2.5  # up at pair 7, back down at pair 15
    x[1, 12:] *= 0.5  # down at pair 11
    lower = compare_matrix(x, rule=rule)
    higher = compare_matrix(x, rule=rule, direction="higher_is_better")
    assert lower.direction == "lower_is_better"
    assert higher.direction == "higher_is_better"
    swap = {REGRESSION: IMPROVEMENT, IMPROVEMENT: REGRESSION}
    expected = np.vectorize(lambda c: swap.get(int(c), int(c)))(lower.verdict)
    np.testing.assert_array_equal(higher.verdict, expected)
    assert higher.verdict[0, 7] == IMPROVEMENT
    assert higher.verdict[0, 15] == REGRESSION
    assert higher.verdict[1, 11] == REGRESSION
    for name in ("gap", "diff", "diff_lo", "diff_hi", "p_value", "relative"):
        np.testing.assert_array_equal(getattr(higher, name), getattr(lower, name))
    # A temporary rise is a digression whichever direction is better.
    np.testing.assert_array_equal(higher.digression, lower.digression)
    assert np.flatnonzero(higher.digression[0]).tolist() == [7]
    with pytest.raises(ValueError, match="direction"):
        compare_matrix(x, rule=rule, direction="sideways")  # type: ignore[arg-type]


# --- absent releases: appeared and vanished ----------------------------------------------


def test_absent_releases():
    x = np.array([[0.0, 0.0, np.nan], [0.0, 1.0, 0.0], [0.0, np.nan, np.nan]])
    assert absent_releases(x).tolist() == [True, False, False]  # one run: not enough


def test_compare_appeared_and_vanished():
    rng = np.random.default_rng(12)
    present = rng.lognormal(3.0, 0.2, 10)
    zeros = np.zeros(10)
    assert compare(zeros, present).verdict == "appeared"
    assert compare(present, zeros).verdict == "vanished"
    assert compare(zeros, zeros).verdict == "nonsignificant_overlap"
    # Some zeros are measurements (a function not called in some runs): compared as usual.
    assert compare(np.r_[zeros[:5], present[:5]], present).verdict != "appeared"


def test_absent_releases_never_regressions_under_the_paper_rule():
    """A function missing from every run of some releases (headless switch, rename) gets
    appeared/vanished at those boundaries, never a regression or improvement, and no
    p-value there."""
    rule = "paper"
    rng = np.random.default_rng(3)
    F, R, n = 20, 10, 10  # noqa: N806
    x = rng.lognormal(4.0, 0.1, (F, R, n))
    x[0, :4] = 0.0      # appears at boundary 3
    x[1, 6:] = 0.0      # vanishes at boundary 5
    x[2, 3:5] = 0.0     # absent for two releases in the middle
    m = compare_matrix(x, rule=rule)
    assert m.verdict[0].tolist() == [0, 0, 0, APPEARED, 0, 0, 0, 0, 0]
    assert m.verdict[1, 5] == VANISHED
    assert m.verdict[1, 6:].tolist() == [0, 0, 0]
    assert m.verdict[2, 2] == VANISHED
    assert m.verdict[2, 4] == APPEARED
    assert m.verdict[2, 3] == NONSIGNIFICANT_OVERLAP
    assert not np.isin(m.verdict[:3], [REGRESSION, IMPROVEMENT]).any()
    # no p-value where a side is absent
    assert np.isnan(m.p_value[0, :4]).all()
    assert np.isnan(m.p_value[1, 5:]).all()
    assert np.isnan(m.p_value[2, 2:5]).all()


def test_absent_releases_never_regressions_under_the_shift_rule():
    rng = np.random.default_rng(3)
    x = rng.lognormal(4.0, 0.1, (20, 30, 10))
    x[0, :4] = 0.0  # appears at boundary 3
    x[1, 20:] = 0.0  # vanishes at boundary 19
    m = compare_matrix(x, rule="shifts")
    assert m.verdict[0, 3] == APPEARED
    assert m.verdict[1, 19] == VANISHED
    assert not np.isin(m.verdict[:2], [REGRESSION, IMPROVEMENT]).any()
    assert (m.verdict[1, 20:] == NO_VERDICT).all()


# --- minimum practical change, provisional verdicts ----------------------------------------


def test_practical_verdicts_demote_small_deviations_only():
    verdict = np.array([REGRESSION, IMPROVEMENT, REGRESSION, REGRESSION, APPEARED, NO_VERDICT])
    diff = np.array([3.0, -40.0, 25.0, 500.0, 3.0, np.nan])
    before = np.array([10.0, 1000.0, 100.0, 1000.0, 0.0, np.nan])
    got = codes_module.practical_verdicts(verdict, diff, before, min_relative=0.1,
                                             min_absolute=20.0)
    # 3 µs: under 20 µs; -40 µs of 1000: 4%; 25 µs of 100 and 500 of 1000: kept.
    assert got.tolist() == [SIGNIFICANT_OVERLAP, SIGNIFICANT_OVERLAP, REGRESSION, REGRESSION,
                            APPEARED, NO_VERDICT]
    same = codes_module.practical_verdicts(verdict, diff, before, min_relative=0,
                                              min_absolute=0)
    assert same.tolist() == verdict.tolist()
    with pytest.raises(ValueError, match=">= 0"):
        codes_module.practical_verdicts(verdict, diff, before, min_relative=-1,
                                           min_absolute=0)
