"""Benchmark: the vectorised comparison matrix against a Python loop over cells.

Run alone with ``python -m tests.benchmarks.stats_matrix``; ``measure()`` returns the
figures for tests/benchmarks/stats.py.

The matrix is 1,000 functions × 100 releases × 50 runs (seed 003's 100 releases and
50 runs per release). The loop calls the scalar :func:`deviations.stats.compare`
for every consecutive pair of every function (99,000 calls); it is timed on a
random sample of cells and extrapolated, which the printed lines say.
"""

from __future__ import annotations

import time

import numpy as np

from deviations.stats.releases import compare, compare_matrix

FUNCTIONS = 1_000
RELEASES = 100
RUNS = 50
LOOP_SAMPLE = 2_000
"""Cells timed in the scalar loop (of 99,000); enough for a stable per-call time."""


def _samples(seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    level = np.exp(rng.uniform(np.log(50.0), np.log(5000.0), (FUNCTIONS, 1, 1)))
    x = level * rng.lognormal(0.0, 0.3, (FUNCTIONS, RELEASES, RUNS))
    # Ragged releases: about 10% of the releases lost a few runs.
    lost = rng.random((FUNCTIONS, RELEASES)) < 0.1
    x[lost, RUNS - 5 :] = np.nan
    return x


def _best_of(repeats: int, fn: object) -> float:
    assert callable(fn)
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def measure(*, repeats: int = 3, loop_sample: int = LOOP_SAMPLE) -> dict[str, float]:
    """Time the matrix and the scalar loop.

    Returns
    -------
    dict
        ``matrix_s``: paper rule, median estimator, whole matrix (best of
        ``repeats``); ``matrix_recommended_s``: the recommended rule (one run);
        ``loop_s``: scalar ``compare`` over all 99,000 pairs, extrapolated from
        ``loop_sample`` random pairs; ``loop_per_call_s``; ``matrix_vs_loop`` =
        ``matrix_s / loop_s`` (target <= 0.02).
    """
    x = _samples()
    matrix_s = _best_of(repeats, lambda: compare_matrix(x))
    start = time.perf_counter()
    compare_matrix(x, rule="recommended")
    recommended_s = time.perf_counter() - start

    rng = np.random.default_rng(1)
    pairs = FUNCTIONS * (RELEASES - 1)
    cells = rng.choice(pairs, size=min(loop_sample, pairs), replace=False)
    rows = [
        (x[f, r][~np.isnan(x[f, r])], x[f, r + 1][~np.isnan(x[f, r + 1])])
        for f, r in zip(cells // (RELEASES - 1), cells % (RELEASES - 1), strict=True)
    ]
    start = time.perf_counter()
    for a, b in rows:
        compare(a, b)
    per_call = (time.perf_counter() - start) / len(rows)
    loop_s = per_call * pairs
    return {
        "matrix_s": matrix_s,
        "matrix_recommended_s": recommended_s,
        "loop_s": loop_s,
        "loop_per_call_s": per_call,
        "loop_cells_timed": float(len(rows)),
        "matrix_vs_loop": matrix_s / loop_s,
    }


def main() -> None:
    figures = measure()
    print(
        f"matrix {FUNCTIONS} functions x {RELEASES} releases x {RUNS} runs, paper rule: "
        f"{figures['matrix_s']:.3f} s (best of 3)"
    )
    print(f"matrix, recommended rule: {figures['matrix_recommended_s']:.3f} s")
    print(
        f"scalar compare loop: {figures['loop_per_call_s'] * 1e6:.0f} us per call, timed on "
        f"{figures['loop_cells_timed']:.0f} random cells and extrapolated to "
        f"{FUNCTIONS * (RELEASES - 1)} cells: {figures['loop_s']:.1f} s"
    )
    print(f"matrix_vs_loop = {figures['matrix_vs_loop']:.4f} (target <= 0.02)")


if __name__ == "__main__":
    main()
