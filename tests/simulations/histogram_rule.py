"""Simulation: Mozilla's fixed histogram change rule vs the adaptive rule.

Run from the project root::

    .venv/bin/python -m tests.simulations.histogram_rule

Prints markdown: the parameters ``tune`` picks on a training set, then per scenario the
recall (lasting changes found within one build of their start) and the false alerts of
both rules on an independent test set (different seed). Seeded: the output is
reproducible. See docs/statistics.md ("The change rule over a build series") for the design.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats

from deviations.stats.histograms import ChangeScan, detect_changes, detect_changes_adaptive
from deviations.stats.tuning import score_detections, tune

BUCKETS = 50  # exponential Telemetry histograms have 20-100 buckets; one bucket = one step in log
BUILDS = 60  # two months of Nightly builds
REPLICATES = 100  # series per scenario in the test set
TRAIN_REPLICATES = 30  # per scenario in the training set given to tune()
TRAIN_SEED, TEST_SEED = 20260101, 20261122


@dataclass(frozen=True)
class Scenario:
    """One kind of probe. Sample sizes are log-uniform in [n_lo, n_hi] per build; the true
    histogram of each build is a discretised normal (in bucket units, i.e. log-normal
    latencies) whose centre and spread also jitter from build to build (population mix)."""

    name: str
    lasting: bool  # a change that stays (counts towards recall)
    n_lo: float
    n_hi: float
    loc_jitter: float = 0.05  # sd of the build-to-build centre jitter, buckets
    spread_jitter: float = 0.02  # sd of the log spread jitter
    change: str = "none"  # none | shift | swap | spread
    size: float = 0.0  # shift in buckets, new weight of the 2nd mode, or spread factor
    duration: int = 0  # builds the change lasts (0 = to the end)


SCENARIOS = (
    Scenario("lasting shift, 1 bucket, large n", True, 50e3, 200e3, change="shift", size=1.0),
    Scenario(
        "lasting shift, 2 buckets, n and spread vary",
        True,
        25e3,
        250e3,
        loc_jitter=0.15,
        spread_jitter=0.05,
        change="shift",
        size=2.0,
    ),
    Scenario("lasting shift, 4 buckets", True, 20e3, 200e3, change="shift", size=4.0),
    Scenario("bimodal weight swap 35% -> 45%", True, 25e3, 250e3, change="swap", size=0.45),
    Scenario("bimodal weight swap 35% -> 60%", True, 20e3, 200e3, change="swap", size=0.60),
    Scenario("lasting spread x1.25, n varies", True, 25e3, 250e3, change="spread", size=1.25),
    Scenario(
        "one-build spike, 4 buckets", False, 20e3, 200e3, change="shift", size=4.0, duration=1
    ),
    Scenario(
        "one-build spike, n varies",
        False,
        10e3,
        150e3,
        loc_jitter=0.15,
        spread_jitter=0.05,
        change="swap",
        size=0.6,
        duration=1,
    ),
    Scenario(
        "two-build spike (as in GLAM)", False, 20e3, 200e3, change="shift", size=3.0, duration=2
    ),
    Scenario("low-data probe with a lasting shift", False, 200, 3000, change="shift", size=4.0),
    Scenario("stable, n varies 10k-300k", False, 10e3, 300e3, loc_jitter=0.15, spread_jitter=0.05),
    Scenario("stable, n varies 25k-250k", False, 25e3, 250e3, loc_jitter=0.1, spread_jitter=0.03),
    Scenario("stable, large n, population jitter", False, 100e3, 500e3, 0.25, 0.06),
)


def _discretised_normal(loc: np.ndarray, sd: np.ndarray) -> np.ndarray:
    edges = np.arange(BUCKETS + 1, dtype=np.float64)
    cdf = stats.norm.cdf((edges - loc[..., None]) / sd[..., None])
    cdf[..., 0], cdf[..., -1] = 0.0, 1.0  # open end buckets keep the tails
    return np.diff(cdf, axis=-1)


def simulate(sc: Scenario, replicates: int, rng: np.random.Generator):
    """Counts (replicates, BUILDS, BUCKETS) and bool change starts (replicates, BUILDS)."""
    R, T = replicates, BUILDS  # noqa: N806 (sizes named as in the docs)
    centre = rng.uniform(16, 26, size=(R, 1))
    sd = rng.uniform(3, 6, size=(R, 1))
    start = rng.integers(25, 46, size=R)
    t = np.arange(T)
    end = np.where(sc.duration > 0, start + sc.duration, T)
    on = (t >= start[:, None]) & (t < end[:, None])
    loc = centre + sc.loc_jitter * rng.standard_normal((R, T))
    spread = sd * np.exp(sc.spread_jitter * rng.standard_normal((R, T)))
    if sc.change == "shift":
        loc = loc + sc.size * on
    if sc.change == "spread":
        spread = spread * np.where(on, sc.size, 1.0)
    p = _discretised_normal(loc, spread)
    if sc.change == "swap":
        second = _discretised_normal(loc + 12.0, spread)
        w = np.where(on, sc.size, 0.35)[..., None]
        p = (1 - w) * p + w * second
    n = np.exp(rng.uniform(np.log(sc.n_lo), np.log(sc.n_hi), size=(R, T))).astype(np.int64)
    counts = rng.multinomial(n, p / p.sum(axis=-1, keepdims=True)).astype(np.float64)
    starts = np.zeros((R, T), dtype=bool)
    if sc.lasting:
        starts[np.arange(R), start] = True
    return counts, starts


def _row(sc: Scenario, scan: ChangeScan, starts: np.ndarray) -> str:
    if sc.lasting:
        found, labelled, fa = score_detections(scan.changed, starts, tolerance=1)
        return f"{found}/{labelled} ({found / labelled:.0%})", f"{fa}"
    series = int(np.any(scan.changed, axis=-1).sum())
    return "-", f"{int(scan.changed.sum())} ({series} series)"


def _kind_right(sc: Scenario, scan: ChangeScan, starts: np.ndarray) -> str:
    """Share of found lasting changes whose kind is the simulated one."""
    if not sc.lasting:
        return "-"
    expected = "shift" if sc.change == "shift" else "shape"
    window = starts | np.roll(starts, 1, axis=-1)
    kinds = scan.kind[scan.changed & window]
    right = int(np.sum(kinds == expected))
    return f"{right}/{kinds.size}"


def main() -> None:
    train = [
        simulate(sc, TRAIN_REPLICATES, np.random.default_rng([TRAIN_SEED, i]))
        for i, sc in enumerate(SCENARIOS)
    ]
    counts = np.concatenate([c for c, _ in train])
    starts = np.concatenate([s for _, s in train])
    tuned = tune(counts, starts)
    print(f"## Tuning (training set, seed {TRAIN_SEED}, {TRAIN_REPLICATES} series/scenario)\n")
    print(
        f"`tune` picks k = {tuned.k:g}, floor = {tuned.floor:g}, "
        f"stability_ratio = {tuned.stability_ratio:g}: training recall {tuned.recall:.0%} "
        "at zero false alerts.\n"
    )

    print(
        f"## Test set (seed {TEST_SEED}, {REPLICATES} series per scenario, "
        f"{BUILDS} builds, {BUCKETS} buckets)\n"
    )
    print(
        "| scenario | fixed (Mozilla) recall | fixed false alerts "
        "| adaptive recall | adaptive false alerts | adaptive kind right |"
    )
    print("|---|---|---|---|---|---|")
    totals = {"fixed": [0, 0, 0], "adaptive": [0, 0, 0]}
    for i, sc in enumerate(SCENARIOS):
        c, s = simulate(sc, REPLICATES, np.random.default_rng([TEST_SEED, i]))
        fixed = detect_changes(c)
        adaptive = detect_changes_adaptive(
            c, k=tuned.k, floor=tuned.floor, stability_ratio=tuned.stability_ratio
        )
        cells = []
        for name, scan in (("fixed", fixed), ("adaptive", adaptive)):
            cells.extend(_row(sc, scan, s))
            found, labelled, fa = score_detections(scan.changed, s, tolerance=1)
            totals[name][0] += found
            totals[name][1] += labelled
            totals[name][2] += fa
        cells.append(_kind_right(sc, adaptive, s))
        print(f"| {sc.name} | " + " | ".join(cells) + " |")
    f, a = totals["fixed"], totals["adaptive"]
    print(
        f"| **all** | {f[0]}/{f[1]} ({f[0] / f[1]:.0%}) | {f[2]} "
        f"| {a[0]}/{a[1]} ({a[0] / a[1]:.0%}) | {a[2]} | |"
    )
    print(
        "\nRecall: lasting changes reported at their first build or the next. False alerts:"
        " reports outside that window (in quiet scenarios: reports, and series with one)."
        " Kind right: reported kind (shift for translations, shape for weight swaps and"
        " spread changes) among the changes found."
    )


if __name__ == "__main__":
    main()
