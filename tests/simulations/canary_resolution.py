"""Type I error and power of the canary's tests on values rounded to a relative grid
(issue 24, part 3; docs/statistics.md, "Canaries: state in bounded memory").

Each stream draws lognormal latencies (median 800 ms, log-sd 0.4) in batches of ``step``
per arm and feeds the *same* draws, mapped by ``stats.resolution.to_grid`` at r = 0
(exact), 1e-4 and 1e-3, to the distribution-function test (``SequentialTest("equal")``,
the canary's default) and to the quantile test (p50, p90, p99), looking after every
batch. Reported per test and resolution: A/A streams with a rejection by ``aa_n`` per arm
(the type I error under continuous monitoring, ≤ α = 0.05 by Ville's inequality), and
for B's median ×1.05 the share stopped by ``max_n`` and the median stopping n.

    python -m tests.simulations.canary_resolution [--aa-streams 500] [--streams 200]
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Sequence

import numpy as np

from deviations.stats.quantiles import QuantileSequentialTest
from deviations.stats.resolution import to_grid
from deviations.stats.sequential import SequentialTest

ALPHA = 0.05
MEDIAN = 800.0
LOG_SD = 0.4
RESOLUTIONS = (0.0, 1e-4, 1e-3)
TESTS = ("dkw", "quantiles")


def stop_ns(scale: float, streams: int, max_n: int, step: int, seed: int,
            resolutions: Sequence[float] = RESOLUTIONS) -> dict[tuple[str, float], list[int]]:
    """Per (test, resolution) the stopping n of each stream (``0``: not stopped)."""
    rng = np.random.default_rng(seed)
    out: dict[tuple[str, float], list[int]] = {(t, r): [] for t in TESTS for r in resolutions}
    for _ in range(streams):
        dkw = {r: SequentialTest("equal", ALPHA) for r in resolutions}
        qts = {r: QuantileSequentialTest((0.5, 0.9, 0.99), ALPHA) for r in resolutions}
        stopped: dict[tuple[str, float], int] = {}
        n = 0
        while n < max_n and len(stopped) < len(out):
            a = rng.lognormal(math.log(MEDIAN), LOG_SD, step)
            b = rng.lognormal(math.log(MEDIAN * scale), LOG_SD, step)
            n += step
            for r in resolutions:
                ga, gb = to_grid(a, r), to_grid(b, r)
                if ("dkw", r) not in stopped and dkw[r].update(ga, gb).decision == "reject":
                    stopped["dkw", r] = n
                if ("quantiles", r) not in stopped and qts[r].update(ga, gb).decided_by:
                    stopped["quantiles", r] = n
        for key in out:
            out[key].append(stopped.get(key, 0))
    return out


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--aa-streams", type=int, default=500)
    parser.add_argument("--aa-n", type=int, default=5_000)
    parser.add_argument("--aa-step", type=int, default=100)
    parser.add_argument("--streams", type=int, default=200)
    parser.add_argument("--max-n", type=int, default=30_000)
    parser.add_argument("--step", type=int, default=500)
    parser.add_argument("--seed", type=int, default=24)
    args = parser.parse_args(argv)
    started = time.perf_counter()
    aa = stop_ns(1.0, args.aa_streams, args.aa_n, args.aa_step, args.seed)
    shift = stop_ns(1.05, args.streams, args.max_n, args.step, args.seed + 1)
    print(f"A/A: {args.aa_streams} streams up to {args.aa_n} per arm, batches of "
          f"{args.aa_step}; x1.05: {args.streams} streams up to {args.max_n}, batches of "
          f"{args.step}")
    print("| test | r | A/A rejected | x1.05 stopped | x1.05 median stop n | quartiles |")
    print("|---|---|---|---|---|---|")
    for key in aa:
        test, r = key
        rejected = sum(1 for x in aa[key] if x)
        stops = np.array([x for x in shift[key] if x])
        quart = (" / ".join(f"{int(v):,}" for v in np.percentile(stops, [25, 50, 75]))
                 if stops.size else "-")
        median = f"{int(np.median(stops)):,}" if stops.size else "-"
        print(f"| {test} | {r:g} | {rejected} / {args.aa_streams} | "
              f"{stops.size} / {args.streams} | {median} | {quart} |")
    print(f"{time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
