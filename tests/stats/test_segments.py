"""The penalised empirical-distribution segmentation (stats.releases.segmentation), the
shift rule's first step: equal to its formula and to every segmentation tried."""

from __future__ import annotations

from itertools import combinations

import numpy as np
import pytest
from scipy.special import xlogy  # type: ignore[import-untyped]

from deviations.stats.releases.segmentation import (
    SEGMENT_PENALTY,
    SEGMENT_PENALTY_COST,
    _ed_quantiles,
    _log_times,
    _nanmedian_rows,
    _segment_penalty,
    _tables,
    optimal_segments,
)


def _cost(y: np.ndarray, a: int, b: int) -> float:
    """The empirical-distribution cost of releases ``a .. b-1`` of one row ``y`` (releases,
    runs), written out from its formula (Haynes et al. 2017)."""
    every = y[~np.isnan(y)]
    N = len(every)  # noqa: N806
    v = y[a:b].ravel()
    v = v[~np.isnan(v)]
    if N < 2 or not len(v):
        return 0.0
    K = int(np.ceil(4 * np.log(N)))  # noqa: N806
    c = -np.log(2 * N - 1)
    k = np.arange(1, K + 1)
    q = np.nanquantile(every, 1 / (1 + (2 * N - 1) * np.exp(c / K * (2 * k - 1))))
    F = ((v[:, None] < q).sum(axis=0) + 0.5 * (v[:, None] == q).sum(axis=0)) / len(v)  # noqa: N806
    return float(-len(v) * (xlogy(F, F) + xlogy(1 - F, 1 - F)).sum() * (-2 * c / K))


def _brute_force(y: np.ndarray, penalty: float, max_length: int | None) -> np.ndarray:
    """The minimum of the penalised cost over every segmentation of one row."""
    R = y.shape[0]  # noqa: N806
    best, arg = np.inf, ()
    for m in range(R):
        for cuts in combinations(range(1, R), m):
            edges = (0, *cuts, R)
            if max_length is not None and max(np.diff(edges)) > max_length:
                continue
            total = sum(_cost(y, a, b) for a, b in zip(edges[:-1], edges[1:], strict=True))
            total += penalty * m
            if total < best - 1e-9:
                best, arg = total, cuts
    out = np.zeros(R - 1, dtype=bool)
    out[[c - 1 for c in arg]] = True
    return out


def _optimal_partitioning(y: np.ndarray, penalty: float, max_length: int | None) -> np.ndarray:
    """The straightforward optimal partitioning of one row (every segment's cost from its
    formula, O(R²) of them), against which the prefix tables are checked."""
    R = y.shape[0]  # noqa: N806
    best = np.zeros(R + 1)
    last = np.zeros(R + 1, dtype=int)
    for t in range(1, R + 1):
        s0 = 0 if max_length is None else max(0, t - max_length)
        cand = [best[s] + _cost(y, s, t) + (penalty if s > 0 else 0.0) for s in range(s0, t)]
        last[t] = s0 + int(np.argmin(cand))
        best[t] = min(cand)
    out = np.zeros(R - 1, dtype=bool)
    t = R
    while last[t] > 0:
        out[last[t] - 1] = True
        t = last[t]
    return out


def _row(rng: np.random.Generator, releases: int, runs: int) -> np.ndarray:
    """A row with a step, some missing runs, and ties (rounded) for one seed in three."""
    y = rng.normal(0.0, 0.3, (releases, runs))
    y[int(rng.integers(1, releases)) :] += rng.choice([0.0, 0.5, 1.0])
    if rng.random() < 1 / 3:
        y = np.round(y * 5) / 5
    y[rng.random(y.shape) < 0.1] = np.nan
    return y


@pytest.mark.parametrize("seed", range(12))
def test_optimal_segments_equal_every_segmentation_tried(seed):
    rng = np.random.default_rng(seed)
    y = _row(rng, 7, 4)
    penalty = float(rng.choice([2.0, 8.0, 18.0]))
    max_length = [None, 2, 4][seed % 3]
    got = optimal_segments(y[np.newaxis], penalty, max_length=max_length)[0]
    assert np.array_equal(got, _brute_force(y, penalty, max_length))


def test_prefix_tables_equal_the_straightforward_partitioning():
    """The speed-up (prefix tables of counts, a table of x log x, int32 counts, chunks of
    functions) gives the segmentation of the formula exactly, ties and NaN included."""
    rng = np.random.default_rng(2017)
    rows = [_row(rng, int(rng.integers(2, 26)), 5) for _ in range(24)]
    width = max(r.shape[0] for r in rows)
    y = np.full((len(rows), width, 5), np.nan)  # shorter rows padded with missing releases
    for i, r in enumerate(rows):
        y[i, : r.shape[0]] = r
    for max_length in (None, 6):
        got = optimal_segments(y, SEGMENT_PENALTY, max_length=max_length)
        for i in range(len(rows)):
            want = _optimal_partitioning(y[i], SEGMENT_PENALTY, max_length)
            assert np.array_equal(got[i], want), (i, max_length)


def test_levels_are_numpys_quantiles():
    rng = np.random.default_rng(4)
    y = np.round(rng.normal(size=(40, 9, 6)) * 3) / 3
    y[rng.random(y.shape) < 0.2] = np.nan
    y[0] = np.nan
    y[1, :, :] = np.nan
    y[1, 0, :2] = 1.0
    levels, scale = _ed_quantiles(y)
    assert scale[0] == 0
    assert np.isneginf(levels[0]).all()
    for f in range(1, 40):
        v = y[f][~np.isnan(y[f])]
        N = len(v)  # noqa: N806
        K = int(np.ceil(4 * np.log(N)))  # noqa: N806
        c = -np.log(2 * N - 1)
        k = np.arange(1, K + 1)
        want = np.nanquantile(v, 1 / (1 + (2 * N - 1) * np.exp(c / K * (2 * k - 1))))
        np.testing.assert_array_equal(levels[f, :K], want)
        assert np.isneginf(levels[f, K:]).all()
        assert scale[f] == -2 * c / K


def test_nanmedian_rows_equal_numpy():
    rng = np.random.default_rng(1)
    a = rng.normal(size=(50, 9))
    a[rng.random(a.shape) < 0.3] = np.nan
    a[0] = np.nan
    got = _nanmedian_rows(a)
    assert np.isnan(got[0])
    np.testing.assert_array_equal(got[1:], np.nanmedian(a[1:], axis=1))


def test_whole_cost_is_the_formula_of_one_segment():
    rng = np.random.default_rng(3)
    y = _log_times(rng.lognormal(0.0, 0.3, (6, 9, 4)))
    y[2, 3] = np.nan
    whole = _tables(y).whole()
    for f in range(6):
        assert whole[f] == pytest.approx(_cost(y[f], 0, 9))


def test_small_series_get_a_penalty_their_gain_can_pay():
    """The penalty shrinks in proportion below SEGMENT_PENALTY_COST of whole-series cost
    (a window of few runs), and grows with the runs per release above 5."""
    rng = np.random.default_rng(4)
    small = _log_times(rng.lognormal(0.0, 0.2, (3, 4, 3)))
    big = _log_times(rng.lognormal(0.0, 0.2, (3, 30, 10)))
    for y in (small, big):
        whole = _tables(y).whole()
        got = _segment_penalty(y, SEGMENT_PENALTY)(slice(0, 3), whole)
        runs = np.sqrt(max(1.0, y.shape[2] / 5))
        want = SEGMENT_PENALTY * np.fmin(runs, whole / SEGMENT_PENALTY_COST)
        np.testing.assert_allclose(got, want)
    assert _segment_penalty(small, SEGMENT_PENALTY)(slice(0, 3), _tables(small).whole()).max() < 18
