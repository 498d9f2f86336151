"""Sample data shared by several test modules: run-time matrices and histogram series."""

import numpy as np
from scipy import stats


def ragged(seed: int, shape: tuple[int, int, int]) -> np.ndarray:
    """Lognormal run times (functions, releases, runs) with per-release levels; each release
    keeps a random number of runs (0 to all), NaN-padded."""
    rng = np.random.default_rng(seed)
    f, r, k = shape
    x = rng.lognormal(0.0, 0.3, shape) * np.exp(rng.normal(0, 0.4, (f, r, 1)))
    n = rng.integers(0, k + 1, (f, r))
    x[np.arange(k) >= n[..., None]] = np.nan
    return x


def expected_series(builds=40, n=1e5, shift_at=None, shift=3.0, duration=None, sd=4.0):
    """Noise-free series: expected counts of a discretised normal on 40 buckets."""
    edges = np.arange(41, dtype=float)
    t = np.arange(builds)
    loc = np.full(builds, 15.0)
    if shift_at is not None:
        end = builds if duration is None else shift_at + duration
        loc[(t >= shift_at) & (t < end)] += shift
    cdf = stats.norm.cdf((edges[None, :] - loc[:, None]) / sd)
    cdf[:, 0], cdf[:, -1] = 0, 1
    return n * np.diff(cdf, axis=1)


def noisy(series, rng):
    """Multinomial draws around an expected series, one sample per build."""
    n = series.sum(axis=1).astype(np.int64)
    return rng.multinomial(n, series / series.sum(axis=1, keepdims=True)).astype(float)
