"""Power and false flags of ``stats.twosample.compare_two`` (docs/statistics.md, §9).

Run from the repository root::

    .venv/bin/python -m tests.simulations.compare_two

Each comparison: 100 functions at 1 ms with lognormal run noise (σ = 0.1), 5 of them
multiplied by ``change`` in the new release; 200 seeded comparisons per row. Then 400
comparisons with no change at all, lognormal and bimodal with outliers (the demo's
``GetRenderStyleForStrike``: 40% of runs ×2.5, 5% ×8).
"""

from __future__ import annotations

import numpy as np

from deviations.stats.twosample import IMPROVEMENT, REGRESSION, compare_two

FUNCTIONS, CHANGED = 100, 5


def _flags(result) -> np.ndarray:  # type: ignore[no-untyped-def]
    return (result.verdict == REGRESSION) | (result.verdict == IMPROVEMENT)


def power_table(reps: int = 200) -> None:
    print("| runs a side | change | test | power | false flags per comparison |")
    print("|---|---|---|---|---|")
    for runs, change, test in ((5, 1.3, "median"), (5, 2.0, "median"), (5, 1.3, "welch"),
                               (5, 1.5, "welch"), (5, 2.0, "welch"), (10, 1.3, "rank"),
                               (20, 1.3, "rank")):
        rng = np.random.default_rng(runs * 100 + int(change * 10))
        found = false = 0
        for _ in range(reps):
            a = 1000 * rng.lognormal(0, 0.1, (FUNCTIONS, runs))
            b = 1000 * rng.lognormal(0, 0.1, (FUNCTIONS, runs))
            b[:CHANGED] *= change
            flags = _flags(compare_two(a, b, test=test))  # type: ignore[arg-type]
            found += int(flags[:CHANGED].sum())
            false += int(flags[CHANGED:].sum())
        print(f"| {runs} | ×{change} | {test} | {found / (reps * CHANGED):.2f} | "
              f"{false / reps:.2f} |")


def null_rates(reps: int = 400, runs: int = 5) -> None:
    rng = np.random.default_rng(2)
    for kind in ("lognormal", "bimodal with outliers"):
        any_flag = 0
        for _ in range(reps):
            sides = []
            for _side in range(2):
                x = 1000 * rng.lognormal(0, 0.1, (FUNCTIONS, runs))
                if kind != "lognormal":
                    x = np.where(rng.random(x.shape) < 0.4, x * 2.5, x)
                    x = np.where(rng.random(x.shape) < 0.05, x * 8, x)
                sides.append(x)
            any_flag += bool(_flags(compare_two(*sides)).any())
        print(f"no change, {kind}, {runs} runs: {any_flag / reps:.3f} of the comparisons "
              "flag anything")


if __name__ == "__main__":
    power_table()
    null_rates()
