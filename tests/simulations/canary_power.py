"""Power of the canary's sequential test against a fixed-n Kolmogorov–Smirnov test
(issue 11, item 7; docs/statistics.md, "Canaries: power against a fixed-n test").

Seed 000's Appendix E setting: Gamma(10, 10) in arm A, Gamma(10, 11) in arm B (shape 10,
scale 10 and 11), α = 0.05, streams stopped at 5,000 pairs. The sequential test
(``SequentialTest("equal")``, what a canary runs) is looked at after every ``--step``
pairs, as a canary looks after every batch; the stopping n is where it first rejects. The
fixed-n KS test (``scipy.stats.ks_2samp``, two-sided) is run once at each n of ``NS``: its
power is the share of rejections. The sign test (``stats.signs.SequentialSignTest``, the
canaries' ``method="signs"``) runs on the same streams. A/A streams (Gamma(10, 10) in both
arms) give the type-I error of both sequential tests under that monitoring.

    python -m tests.simulations.canary_power [--streams 200] [--step 50]
"""

from __future__ import annotations

import argparse

import numpy as np
from scipy import stats

from deviations.stats.sequential import SequentialTest
from deviations.stats.signs import SequentialSignTest

ALPHA = 0.05
PAIRS = 5000
NS = (100, 200, 300, 500, 750, 1000, 1500)


def stopping_n(rng: np.random.Generator, scale_b: float, step: int) -> tuple[
        int | None, int | None]:
    """Pairs at which each test first rejects on one stream (None: not by PAIRS):
    the distribution-function test, then the sign test, on the same data."""
    a, b = rng.gamma(10, 10, PAIRS), rng.gamma(10, scale_b, PAIRS)
    found: list[int | None] = []
    for test in (SequentialTest("equal", alpha=ALPHA), SequentialSignTest(ALPHA)):
        stop = None
        for start in range(0, PAIRS, step):
            if test.update(a[start:start + step], b[start:start + step]).decision == "reject":
                stop = start + step
                break
        found.append(stop)
    return found[0], found[1]


def describe(name: str, stops: list[int | None], streams: int) -> np.ndarray:
    found = np.array([s for s in stops if s is not None], dtype=float)
    if found.size:
        print(f"{name}: rejected {found.size}/{streams} by {PAIRS}; stopping n quartiles "
              f"{np.percentile(found, 25):.0f} / {np.median(found):.0f} / "
              f"{np.percentile(found, 75):.0f}, mean {found.mean():.0f}")
    else:
        print(f"{name}: rejected 0/{streams} by {PAIRS}")
    return found


def ks_power(rng: np.random.Generator, n: int, reps: int) -> float:
    hits = 0
    for _ in range(reps):
        p = stats.ks_2samp(rng.gamma(10, 10, n), rng.gamma(10, 11, n)).pvalue
        hits += p <= ALPHA
    return hits / reps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--streams", type=int, default=200)
    parser.add_argument("--step", type=int, default=50)
    parser.add_argument("--reps", type=int, default=1000)
    args = parser.parse_args()
    rng = np.random.default_rng(20221)
    stops = [stopping_n(rng, 11.0, args.step) for _ in range(args.streams)]
    print(f"Gamma(10,10) vs Gamma(10,11), looked at every {args.step} pairs:")
    dkw = describe("  distribution functions (DKW)", [s[0] for s in stops], args.streams)
    signs = describe("  sign test (mixture)", [s[1] for s in stops], args.streams)
    for n in NS:
        print(f"  n = {n}: DKW stopped in {np.sum(dkw <= n) / args.streams:.0%}, sign test "
              f"in {np.sum(signs <= n) / args.streams:.0%}, fixed-n KS power "
              f"{ks_power(rng, n, args.reps):.0%}")
    aa = [stopping_n(rng, 10.0, args.step) for _ in range(args.streams)]
    print(f"A/A, looked at every {args.step} pairs:")
    describe("  distribution functions (DKW)", [s[0] for s in aa], args.streams)
    describe("  sign test (mixture)", [s[1] for s in aa], args.streams)

if __name__ == "__main__":
    main()
