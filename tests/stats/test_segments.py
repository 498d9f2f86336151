"""Issue 12: the penalised L1 segmentation confirmed by rank tests (stats.releases)."""

from __future__ import annotations

from itertools import combinations

import numpy as np
import pytest

from deviations.stats.releases import (
    IMPROVEMENT,
    NO_VERDICT,
    REGRESSION,
    _nanmedian_rows,
    optimal_segments,
    segment_verdicts,
)


def _brute_force(y: np.ndarray, penalty: float) -> np.ndarray:
    """The minimum of the penalised cost over every segmentation of one row."""
    R = y.shape[0]  # noqa: N806
    centre = np.nanmedian(y, axis=1)
    within = float(np.median(np.nanmean(np.abs(y - centre[:, None]), axis=1)))
    jitter = float(np.median(np.abs(np.diff(centre))))
    spread = max(within, jitter, 0.01)

    def cost(a: int, b: int) -> float:
        v = y[a:b].ravel()
        v = v[~np.isnan(v)]
        return float(np.abs(v - np.median(v)).sum()) / spread if len(v) else 0.0

    best, arg = np.inf, ()
    for m in range(R):
        for cuts in combinations(range(1, R), m):
            edges = (0, *cuts, R)
            total = sum(cost(a, b) for a, b in zip(edges[:-1], edges[1:], strict=True))
            total += penalty * m
            if total < best - 1e-9:
                best, arg = total, cuts
    out = np.zeros(R - 1, dtype=bool)
    out[[c - 1 for c in arg]] = True
    return out


@pytest.mark.parametrize("seed", range(12))
def test_optimal_segments_equal_every_segmentation_tried(seed):
    rng = np.random.default_rng(seed)
    y = rng.normal(0.0, 0.3, (7, 4))
    y[int(rng.integers(1, 6)) :] += rng.choice([0.0, 0.5, 1.0])
    penalty = float(rng.choice([1.0, 3.0, 5.0]))
    got = optimal_segments(y[np.newaxis], penalty)[0]
    assert np.array_equal(got, _brute_force(y, penalty))


def test_nanmedian_rows_equal_numpy():
    rng = np.random.default_rng(1)
    a = rng.normal(size=(50, 9))
    a[rng.random(a.shape) < 0.3] = np.nan
    a[0] = np.nan
    got = _nanmedian_rows(a)
    assert np.isnan(got[0])
    np.testing.assert_array_equal(got[1:], np.nanmedian(a[1:], axis=1))


def _series(levels: list[float], runs: int = 5, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    level = np.array(levels)[np.newaxis, :, np.newaxis]
    return 100.0 * level * np.exp(rng.normal(0.0, 0.05, (40, len(levels), runs)))


def test_a_step_is_flagged_on_its_boundary_only():
    v = segment_verdicts(_series([1.0] * 8 + [2.0] * 8)).verdict
    assert (v[:, 7] == REGRESSION).all()
    assert not np.isin(np.delete(v, 7, axis=1), (REGRESSION, IMPROVEMENT)).any()


def test_both_ends_of_a_two_release_digression():
    v = segment_verdicts(_series([1.0] * 8 + [2.0] * 2 + [1.0] * 8)).verdict
    assert (v[:, 7] == REGRESSION).all()
    assert (v[:, 9] == IMPROVEMENT).all()
    assert not np.isin(np.delete(v, [7, 9], axis=1), (REGRESSION, IMPROVEMENT)).any()


def test_direction_decides_the_name():
    v = segment_verdicts(_series([1.0] * 6 + [2.0] * 6), direction="higher_is_better").verdict
    assert (v[:, 5] == IMPROVEMENT).all()


def test_stable_series_get_no_flag():
    v = segment_verdicts(_series([1.0] * 20, seed=3)).verdict
    assert not np.isin(v, (REGRESSION, IMPROVEMENT)).any()


def test_missing_runs_absent_releases_and_single_runs():
    x = _series([1.0] * 6 + [2.0] * 6)
    x[:, 2, 3:] = np.nan  # fewer runs
    x[:, 4, 1:] = np.nan  # one run: no verdict on its pairs
    x[0, :3] = 0.0  # absent from the first releases
    s = segment_verdicts(x)
    assert (s.verdict[:, 3] == NO_VERDICT).all()
    assert (s.verdict[:, 4] == NO_VERDICT).all()
    assert (s.verdict[:, 5] == REGRESSION).all()
    assert np.isnan(s.p_value[~s.change]).all()


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="shape"):
        segment_verdicts(np.ones((3, 4)))
    with pytest.raises(ValueError, match="fdr"):
        segment_verdicts(np.ones((1, 3, 3)), fdr=0.0)
    with pytest.raises(ValueError, match="penalty"):
        optimal_segments(np.zeros((1, 3, 3)), penalty=-1.0)
