"""Coverage of the paired A/B intervals at small n (docs/statistics.md, "Coverage").

Run from the project root::

    .venv/bin/python -m tests.simulations.paired_coverage            # the documented table
    .venv/bin/python -m tests.simulations.paired_coverage --quick    # what the test runs

Prints a markdown table: per distribution of the paired differences and number of slice
pairs n, how often each 95 % interval covers its target: the mean for the interval of the
mean (``percentile``, the earlier default; ``t``; ``studentized``; ``robust``, the new
default), the median for the sign-test interval. Seeded: the same command prints the same
numbers. Every interval of a cell shares one bootstrap index draw (as one call of
``mean_intervals`` does); each replicate's sample is independent.

Distributions of d = b - a (the target is known exactly):

* ``normal``: N(0, 1);
* ``exponential``: Exp(1) (skewness 2: B sometimes much slower than A, never faster);
* ``gamma(2)``: Gamma(2, 1) (skewness 1.4);
* ``lognormal(0.5)``: exp(N(0, 0.5²)) (skewness 1.75);
* ``t3``, ``t2``: Student t with 3 and 2 degrees of freedom (heavy tails; t2 has no
  variance);
* ``lognormal(1)``: exp(N(0, 1)) (skewness 6.2), reported as the limit: no interval of
  the mean from 5 values holds there.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import numpy as np
from scipy import stats

from deviations.stats.paired import mean_intervals

Draw = Callable[[np.random.Generator, tuple[int, int]], np.ndarray]

DISTRIBUTIONS: dict[str, tuple[Draw, float, float]] = {
    # name: (draw, mean, median)
    "normal": (lambda g, s: g.normal(0.0, 1.0, s), 0.0, 0.0),
    "exponential": (lambda g, s: g.exponential(1.0, s), 1.0, float(np.log(2.0))),
    "gamma(2)": (lambda g, s: g.gamma(2.0, 1.0, s), 2.0, float(stats.gamma.median(2.0))),
    "lognormal(0.5)": (lambda g, s: g.lognormal(0.0, 0.5, s), float(np.exp(0.125)), 1.0),
    "t3": (lambda g, s: g.standard_t(3, s), 0.0, 0.0),
    "t2": (lambda g, s: g.standard_t(2, s), 0.0, 0.0),
    "lognormal(1)": (lambda g, s: g.lognormal(0.0, 1.0, s), float(np.exp(0.5)), 1.0),
}
#: Distributions the robust interval is required to hold on (>= 93 % from n = 5).
REQUIRED = ("normal", "exponential", "gamma(2)", "lognormal(0.5)", "t3", "t2")
METHODS = ("percentile", "t", "studentized", "robust")


def sign_coverage(d: np.ndarray, median: float, confidence: float = 0.95) -> float:
    """Coverage of the sign-test interval (``stats.paired.sign_interval``), vectorised."""
    n = d.shape[1]
    ks = np.arange(1, n // 2 + 1)
    attained = 1.0 - 2.0 * stats.binom.cdf(ks - 1, n, 0.5)
    ok = ks[attained >= confidence - 1e-12]
    k = int(ok[-1]) if ok.size else 1
    s = np.sort(d, axis=1)
    return float(np.mean((s[:, k - 1] <= median) & (median <= s[:, n - k])))


def coverage(
    ns: tuple[int, ...] = (5, 10, 15, 30), reps: int = 10_000, resamples: int = 2_000,
    seed: int = 2026, methods: tuple[str, ...] = METHODS,
    distributions: tuple[str, ...] = tuple(DISTRIBUTIONS),
) -> dict[tuple[str, int], dict[str, float]]:
    """``{(distribution, n): {method: coverage}}`` (methods plus ``"sign (median)"``)."""
    out: dict[tuple[str, int], dict[str, float]] = {}
    for k, (name, (draw, mean, median)) in enumerate(DISTRIBUTIONS.items()):
        if name not in distributions:
            continue
        for n in ns:
            rng = np.random.default_rng([seed, k, n])
            d = draw(rng, (reps, n))
            cell = {}
            for method in methods:
                r = mean_intervals(d, 0.95, method, resamples, seed=n)
                cell[method] = float(np.mean((r.lo <= mean) & (mean <= r.hi)))
            cell["sign (median)"] = sign_coverage(d, median)
            out[(name, n)] = cell
    return out


def table(result: dict[tuple[str, int], dict[str, float]]) -> str:
    columns = [*METHODS, "sign (median)"]
    lines = ["| differences | n | " + " | ".join(columns) + " |",
             "|---|---|" + "---|" * len(columns)]
    for (name, n), cell in result.items():
        lines.append(f"| {name} | {n} | " + " | ".join(f"{cell[c]:.3f}" for c in columns) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2,000 replicates, 1,000 resamples")
    args = parser.parse_args()
    reps, resamples = (2_000, 1_000) if args.quick else (10_000, 2_000)
    print(table(coverage(reps=reps, resamples=resamples)))


if __name__ == "__main__":
    main()
