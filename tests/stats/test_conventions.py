"""The package's one sign convention: every difference is later − earlier (B − A)."""

from __future__ import annotations

import numpy as np
import pytest

from deviations.stats import (
    Interval,
    compare,
    mean_diff_ci,
    median_diff_ci,
    paired_ci,
    welch_ci,
)

RNG = np.random.default_rng(21)
A = 10.0 + RNG.normal(0, 0.3, 30)
B = A + 2.0 + RNG.normal(0, 0.1, 30)  # B larger than A, slice by slice


@pytest.mark.parametrize(
    "difference",
    [
        lambda a, b: compare(a, b).difference,
        lambda a, b: compare(a, b, estimator="mean").difference,
        median_diff_ci,
        mean_diff_ci,
        lambda a, b: welch_ci(a, b).interval,
        lambda a, b: paired_ci(a, b).interval,
    ],
    ids=["compare", "compare_mean", "median_diff_ci", "mean_diff_ci", "welch_ci", "paired_ci"],
)
def test_b_larger_than_a_gives_a_positive_difference(difference):
    d = difference(A, B)
    assert isinstance(d, Interval)
    assert 0 < d.lo < d.estimate < d.hi
    assert d.estimate == pytest.approx(2.0, abs=0.3)
    swapped = difference(B, A)
    assert swapped.hi < 0


def test_comparison_difference_is_its_three_fields():
    c = compare(A, B)
    assert c.difference == Interval(c.diff, c.diff_lo, c.diff_hi)
    assert c.diff > 0
    assert c.verdict == "regression"  # larger run times: worse by default
