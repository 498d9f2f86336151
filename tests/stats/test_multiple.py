"""Multiple testing (deviations.stats.multiple) against statsmodels' multipletests."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from statsmodels.stats.multitest import multipletests

from deviations.stats.multiple import benjamini_hochberg, benjamini_hochberg_rejections, holm


def test_benjamini_hochberg_matches_statsmodels():
    p = np.random.default_rng(4).uniform(0, 1, 500) ** 3
    ref = multipletests(p, method="fdr_bh")[1]
    np.testing.assert_allclose(benjamini_hochberg(p), ref, rtol=1e-12)
    grid = np.array([[0.01, np.nan], [0.04, 0.03]])
    got = benjamini_hochberg(grid)
    assert np.isnan(got[0, 1])
    np.testing.assert_allclose(
        got[~np.isnan(grid)], multipletests([0.01, 0.04, 0.03], method="fdr_bh")[1]
    )
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        benjamini_hochberg([0.5, 1.5])


@settings(max_examples=200)
@given(seed=st.integers(0, 2**32 - 1), size=st.integers(0, 300),
       fdr=st.sampled_from([0.01, 0.05, 0.1, 0.5]), coarse=st.booleans())
def test_rejections_equal_q_values_at_most_fdr(seed, size, fdr, coarse):
    rng = np.random.default_rng(seed)
    p = rng.random(size) ** rng.uniform(1, 8)  # many small p-values
    if coarse:
        p = np.round(p, 2)  # ties, and p-values right at k * fdr / m
    p[rng.random(size) < 0.1] = np.nan
    p = p.reshape(-1, 3) if size % 3 == 0 else p
    np.testing.assert_array_equal(benjamini_hochberg_rejections(p, fdr),
                                  benjamini_hochberg(p) <= fdr)


def test_rejections_at_the_boundary_and_bad_input():
    # m = 4, fdr = 0.05: p_(2) = 2 * 0.05 / 4 exactly is rejected, with p_(1).
    p = np.array([0.025, 0.01, 0.9, np.nan, 0.6])
    assert benjamini_hochberg_rejections(p, 0.05).tolist() == [True, True, False, False, False]
    assert not benjamini_hochberg_rejections(np.full(3, np.nan), 0.05).any()
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        benjamini_hochberg_rejections([0.1, 1.5], 0.05)


# statsmodels' multipletests takes ~70 ms a call here: few examples, plus the edge cases
@settings(max_examples=20, deadline=None)
@example(np.array([0.01, 0.01, 0.04, 1.0, 0.0]))
@example(np.array([0.5]))
@given(arrays(np.float64, st.integers(1, 30), elements=st.floats(0, 1)))
def test_holm_matches_statsmodels(p):
    ours = holm(p, alpha=0.05)
    reject, adjusted, _, _ = multipletests(p, alpha=0.05, method="holm")
    np.testing.assert_allclose(ours.adjusted, adjusted, rtol=1e-12, atol=1e-15)
    np.testing.assert_array_equal(ours.reject, reject)
    assert np.all(ours.adjusted >= p)


def test_holm_hand_example_and_errors():
    # sorted p: .01, .02, .03, .5 with m = 4: 4*.01=.04, 3*.02=.06, 2*.03=.06, 1*.5=.5
    r = holm([0.03, 0.5, 0.01, 0.02])
    np.testing.assert_allclose(r.adjusted, [0.06, 0.5, 0.04, 0.06])
    assert r.reject.tolist() == [False, False, True, False]
    with pytest.raises(ValueError, match="NaN"):
        holm([0.1, np.nan])
    with pytest.raises(ValueError, match="non-empty"):
        holm([])
