"""Benchmark of deviations.stats.betting: the rank betting test's looks beside the DKW test's.

Both tests are fed the same observations, per arm ``N_PER_ARM`` in batches of ``BATCH``
(continuous values: every value a new support point, the worst case), alternating one
update of each so that load on the shared machine hits both alike; prints the seconds of
each, their ratio, and the milliseconds of one of the last looks of each. A canary with
``method="ranks"`` runs both (the DKW test draws the bands), so its cost per look is the
sum. Run with ``python -m tests.benchmarks.stats_betting [--n 1000000] [--batch 1000]
[--resolution 1e-4]``.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from deviations.stats.betting import RankBettingTest
from deviations.stats.resolution import to_grid
from deviations.stats.sequential import SequentialTest

N_PER_ARM = 1_000_000
BATCH = 1_000
SEED = 2022


def measure(n_per_arm: int = N_PER_ARM, batch: int = BATCH,
            resolution: float = 0.0) -> dict[str, float]:
    """Seconds of all looks of each test and milliseconds of the last tenth's mean look;
    ``resolution`` > 0 puts the values on a canary's grid first (``stats.resolution``)."""
    rng = np.random.default_rng(SEED)
    a, b = rng.gamma(10.0, 0.1, n_per_arm), rng.gamma(10.0, 1 / 10.2, n_per_arm)
    a, b = to_grid(a, resolution), to_grid(b, resolution)
    ranks, dkw = RankBettingTest(), SequentialTest("equal")
    spent = {"ranks": 0.0, "dkw": 0.0}
    last = {"ranks": 0.0, "dkw": 0.0}
    looks = n_per_arm // batch
    for i in range(looks):
        part = slice(i * batch, (i + 1) * batch)
        for name, test in (("ranks", ranks), ("dkw", dkw)):
            start = time.perf_counter()
            test.update(a[part], b[part])
            took = time.perf_counter() - start
            spent[name] += took
            if i >= looks - looks // 10:
                last[name] += took
    tail = max(1, looks // 10)
    return {
        "ranks_s": spent["ranks"], "dkw_s": spent["dkw"],
        "ranks_vs_dkw": spent["ranks"] / spent["dkw"],
        "ranks_last_ms": 1000 * last["ranks"] / tail, "dkw_last_ms": 1000 * last["dkw"] / tail,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=N_PER_ARM)
    parser.add_argument("--batch", type=int, default=BATCH)
    parser.add_argument("--resolution", type=float, default=0.0,
                        help="a canary's relative grid (default 0: exact values)")
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    figures = measure(args.n, args.batch, args.resolution)
    print(f"{args.n:,} per arm in looks of {args.batch:,} + {args.batch:,}, resolution "
          f"{args.resolution:g}")
    for key, value in figures.items():
        print(f"{key}: {value:.3f}")
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
