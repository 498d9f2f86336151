"""Benchmark of deviations.stats.sequential: batched updates against recomputing from scratch.

``measure()`` feeds a :class:`SequentialTest` 1,000,000 observations per arm in
batches of 1,000 (continuous data: every value is a new support point, the worst
case for the state's size) and times it; it then times recomputing the test from
all data so far (a fresh test fed everything at once, i.e. sorting all of it) at
a subset of the 1,000 batch points and extrapolates to all of them. Run alone with
``python -m tests.benchmarks.stats_sequential``.
"""

from __future__ import annotations

import time

import numpy as np

from deviations.stats.sequential import SequentialTest

N_PER_ARM = 1_000_000
BATCH = 1_000
# Recomputing at all 1,000 batch points costs minutes; time every 50th and extrapolate.
RECOMPUTE_EVERY = 50
SEED = 20220814


def _data() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(SEED)
    return rng.gamma(10.0, 0.1, N_PER_ARM), rng.gamma(10.0, 1 / 10.2, N_PER_ARM)


def measure() -> dict[str, float]:
    """Time the sequential test and the recompute-from-scratch baseline.

    Returns
    -------
    dict
        ``sequential_s``: seconds for 1,000 batched updates of 1,000 + 1,000
        values; ``update_last_ms``: milliseconds of one of the last updates
        (2,000,000 values held); ``recompute_s``: extrapolated seconds to
        recompute from scratch after every batch; ``sequential_vs_recompute``:
        ``sequential_s / recompute_s`` (below 1 means the batched state is faster).
    """
    a, b = _data()
    batches = N_PER_ARM // BATCH
    test = SequentialTest("equal")
    start = time.perf_counter()
    for i in range(batches):
        sl = slice(i * BATCH, (i + 1) * BATCH)
        test.update(a[sl], b[sl])
    sequential_s = time.perf_counter() - start

    last = time.perf_counter()
    test.update(a[:BATCH] + 1e-9, b[:BATCH] + 1e-9)  # a representative update at full size
    update_last_ms = (time.perf_counter() - last) * 1e3

    sampled = np.arange(RECOMPUTE_EVERY - 1, batches, RECOMPUTE_EVERY)
    cost = np.empty(sampled.size)
    for j, batch_index in enumerate(sampled):
        end = (int(batch_index) + 1) * BATCH
        t0 = time.perf_counter()
        SequentialTest("equal").update(a[:end], b[:end])
        cost[j] = time.perf_counter() - t0
    # cost grows ~linearly with the data held: interpolate over all batch points
    recompute_s = float(np.interp(np.arange(batches), sampled, cost).sum())
    print(
        f"recompute timed at {sampled.size} of {batches} batch points "
        f"(every {RECOMPUTE_EVERY}th) and extrapolated by linear interpolation"
    )
    return {
        "sequential_s": sequential_s,
        "update_last_ms": update_last_ms,
        "recompute_s": recompute_s,
        "sequential_vs_recompute": sequential_s / recompute_s,
    }


if __name__ == "__main__":
    for key, value in measure().items():
        print(f"{key}: {value:.4g}")
