"""Exact Mann–Whitney p-values and the Brunner–Munzel test behind the shift rule
(deviations.stats.ranks), checked against scipy and against brute-force enumeration."""

from __future__ import annotations

import warnings
from itertools import combinations

import numpy as np
import pytest
from scipy import stats

from deviations.stats.ranks import _brunner_munzel_rows, _mann_whitney_rows, _midranks
from tests.stats.samples import ragged


@pytest.mark.parametrize(
    ("runs", "ties", "method"),
    # Exact without ties and n_left * n_right <= 2500; tie-corrected normal otherwise.
    # (Tied samples of up to 40 runs get an exact permutation p, tested below.)
    [(6, False, "exact"), (60, False, "asymptotic"), (25, True, "asymptotic")],
)
def test_p_values_equal_scipy_mann_whitney(runs, ties, method):
    x = ragged(9, (40, 2, runs)) * 100
    if runs >= 25:
        x = np.nan_to_num(x, nan=100.0)
    if ties:
        x = np.round(x / 20)
    left, right = x[:, 0], x[:, 1]
    _, p, _ = _mann_whitney_rows(left, right)
    checked = 0
    for f in range(40):
        a, b = left[f][~np.isnan(left[f])], right[f][~np.isnan(right[f])]
        if not len(a) or not len(b):
            assert np.isnan(p[f])
            continue
        checked += 1
        ref = stats.mannwhitneyu(b, a, method=method).pvalue
        assert p[f] == pytest.approx(ref, rel=1e-9)
    assert checked > 25


def test_tied_small_samples_get_the_exact_permutation_p_value():
    # Brute force: every way to choose the right sample among the pooled runs.
    rng = np.random.default_rng(12)
    checked = 0
    for _ in range(60):
        left = np.round(rng.lognormal(1.0, 0.3, 6) * 2)
        right = np.round(rng.lognormal(1.4, 0.3, 4) * 2)
        pooled = np.concatenate([left, right])
        if np.unique(pooled).size == pooled.size:
            continue
        _, p, _ = _mann_whitney_rows(left[None], right[None])
        normal = stats.mannwhitneyu(right, left, method="asymptotic").pvalue
        if normal >= 0.2:  # EXACT_TIES_BELOW: such samples keep the normal p-value
            assert p[0] == pytest.approx(normal)
            continue
        ranks = stats.rankdata(pooled)
        observed = ranks[6:].sum()
        sums = np.array([ranks[list(c)].sum() for c in combinations(range(10), 4)])
        ref = min(1.0, 2 * min(np.mean(sums <= observed + 1e-9), np.mean(sums >= observed - 1e-9)))
        assert p[0] == pytest.approx(ref, rel=1e-12)
        # rows not asked for keep the normal p-value
        _, p_normal, _ = _mann_whitney_rows(left[None], right[None],
                                            exact_rows=np.array([False]))
        assert p_normal[0] == pytest.approx(normal)
        checked += 1
    assert checked > 10


def test_midranks_equal_scipy():
    rng = np.random.default_rng(3)
    a = np.round(rng.normal(size=(30, 12)), 1)
    a[rng.random(a.shape) < 0.2] = np.nan
    got = _midranks(a)
    for f in range(30):
        ok = ~np.isnan(a[f])
        np.testing.assert_allclose(got[f, ok], stats.rankdata(a[f, ok]))
        assert np.isnan(got[f, ~ok]).all()


@pytest.mark.parametrize(("m", "n"), [(10, 12), (30, 7), (50, 25), (4, 4)])
def test_brunner_munzel_equals_scipy(m, n):
    rng = np.random.default_rng(m + n)
    a = np.round(rng.lognormal(0.0, 0.3, (40, m)), 1)
    b = np.round(rng.lognormal(0.1, 0.6, (40, n)), 1)
    a[0, : m - 1] = np.nan  # one value: no test
    got = _brunner_munzel_rows(a, b)
    assert np.isnan(got[0])
    for f in range(1, 40):
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")  # scipy warns where both samples are apart
            ref = stats.brunnermunzel(a[f], b[f])
        if np.isfinite(ref.pvalue):
            assert got[f] == pytest.approx(ref.pvalue, rel=1e-9)


def test_brunner_munzel_holds_its_level_when_only_the_spread_changes():
    """The reason the shift rule asks it too: with unequal sizes and a change of spread
    alone, Mann–Whitney rejects far more often than its level."""
    rng = np.random.default_rng(7)
    left = rng.normal(0.0, 1.0, (20_000, 50))
    right = rng.normal(0.0, 3.0, (20_000, 10))
    _, p_mw, _ = _mann_whitney_rows(left, right, exact_rows=np.zeros(20_000, dtype=bool))
    p_bm = _brunner_munzel_rows(left, right)
    mw, bm = np.mean(p_mw <= 0.01), np.mean(p_bm <= 0.01)
    assert mw > 0.03
    assert bm <= 0.02  # a little above its level at 10 runs: the t approximation
    assert bm < mw / 2
