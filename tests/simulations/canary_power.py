"""Power of the canary's sequential test against a fixed-n Kolmogorov–Smirnov test
(issue 11, item 7; docs/statistics.md, "Canaries: power against a fixed-n test").

Seed 000's Appendix E setting: Gamma(10, 10) in arm A, Gamma(10, 11) in arm B (shape 10,
scale 10 and 11), α = 0.05, streams stopped at 5,000 pairs. The sequential test
(``SequentialTest("equal")``, what a canary runs) is looked at after every ``--step``
pairs, as a canary looks after every batch; the stopping n is where it first rejects. The
fixed-n KS test (``scipy.stats.ks_2samp``, two-sided) is run once at each n of ``NS``: its
power is the share of rejections. A/A streams (Gamma(10, 10) in both arms) give the
type-I error of the sequential test under that monitoring.

    python -m tests.simulations.canary_power [--streams 200] [--step 50]
"""

from __future__ import annotations

import argparse

import numpy as np
from scipy import stats

from deviations.stats.sequential import SequentialTest

ALPHA = 0.05
PAIRS = 5000
NS = (100, 200, 300, 500, 750, 1000, 1500)


def stopping_n(rng: np.random.Generator, scale_b: float, step: int) -> int | None:
    a, b = rng.gamma(10, 10, PAIRS), rng.gamma(10, scale_b, PAIRS)
    test = SequentialTest("equal", alpha=ALPHA)
    for start in range(0, PAIRS, step):
        if test.update(a[start:start + step], b[start:start + step]).decision == "reject":
            return start + step
    return None


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
    found = np.array([s for s in stops if s is not None], dtype=float)
    print(f"sequential, Gamma(10,10) vs Gamma(10,11), looked at every {args.step} pairs: "
          f"rejected {found.size}/{args.streams} by {PAIRS}; stopping n quartiles "
          f"{np.percentile(found, 25):.0f} / {np.median(found):.0f} / "
          f"{np.percentile(found, 75):.0f}, mean {found.mean():.0f}")
    for n in NS:
        share = float(np.mean(found <= n)) * found.size / args.streams
        print(f"  n = {n}: sequential stopped in {share:.0%}, fixed-n KS power "
              f"{ks_power(rng, n, args.reps):.0%}")
    aa = [stopping_n(rng, 10.0, args.step) for _ in range(args.streams)]
    print(f"A/A: sequential rejected {sum(s is not None for s in aa)}/{args.streams} "
          f"streams by {PAIRS} pairs (looked at every {args.step})")


if __name__ == "__main__":
    main()
