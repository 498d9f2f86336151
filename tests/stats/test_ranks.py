"""Exact Mann–Whitney p-values of the recommended rule (deviations.stats.ranks), checked
through the windows of compare_matrix against scipy and against brute-force enumeration."""

from __future__ import annotations

from itertools import combinations

import numpy as np
import pytest
from scipy import stats

from deviations.stats.releases import NO_VERDICT, compare_matrix
from tests.stats.samples import ragged


def _window(x: np.ndarray, f: int, k: int, window: int) -> tuple[np.ndarray, np.ndarray]:
    left = x[f, max(0, k + 1 - window) : k + 1].ravel()
    right = x[f, k + 1 : k + 1 + window].ravel()
    return left[~np.isnan(left)], right[~np.isnan(right)]


@pytest.mark.parametrize(
    ("runs", "ties", "method"),
    # Exact without ties and n_left * n_right <= 2500; tie-corrected normal otherwise.
    # (Tied windows of up to 40 runs get an exact permutation p, tested below.)
    [(6, False, "exact"), (30, False, "asymptotic"), (15, True, "asymptotic")],
)
def test_window_p_values_equal_scipy_mann_whitney(runs, ties, method):
    x = ragged(9, (20, 9, runs))
    if runs >= 15:
        x = np.nan_to_num(x, nan=1.0)  # full windows: >= 60 pooled runs, 90 x 90 at 30
    if ties:
        x = np.round(x * 5)
    m = compare_matrix(x, rule="recommended", window=3)
    checked = 0
    for f in range(20):
        for k in range(8):
            if m.verdict[f, k] == NO_VERDICT:
                continue
            left, right = _window(x, f, k, 3)
            ref = stats.mannwhitneyu(right, left, method=method).pvalue
            assert m.p_value[f, k] == pytest.approx(ref, rel=1e-9)
            checked += 1
    assert checked > 50


def test_tied_small_windows_get_the_exact_permutation_p_value():
    # Brute force: every way to choose the right window among the pooled runs.
    rng = np.random.default_rng(12)
    checked = 0
    for _ in range(60):
        left = np.round(rng.lognormal(1.0, 0.3, 6) * 2)
        right = np.round(rng.lognormal(1.4, 0.3, 4) * 2)
        x = np.full((1, 2, 6), np.nan)
        x[0, 0], x[0, 1, :4] = left, right
        m = compare_matrix(x, rule="recommended", window=1)
        pooled = np.concatenate([left, right])
        if np.unique(pooled).size == pooled.size:
            continue
        normal = stats.mannwhitneyu(right, left, method="asymptotic").pvalue
        if normal >= 0.2:  # EXACT_TIES_BELOW: such windows keep the normal p-value
            assert m.p_value[0, 0] == pytest.approx(normal)
            continue
        ranks = stats.rankdata(pooled)
        observed = ranks[6:].sum()
        sums = np.array([ranks[list(c)].sum() for c in combinations(range(10), 4)])
        ref = min(1.0, 2 * min(np.mean(sums <= observed + 1e-9), np.mean(sums >= observed - 1e-9)))
        assert m.p_value[0, 0] == pytest.approx(ref, rel=1e-12)
        checked += 1
    assert checked > 10
