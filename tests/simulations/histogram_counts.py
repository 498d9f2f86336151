"""Simulation: the count rule (proportion and volume changes) against the shape rule.

Run from the project root::

    .venv/bin/python -m tests.simulations.histogram_counts

Prints markdown tables: the power of ``detect_count_changes`` (a lasting move of a boolean
share, by move size and clients per build; a share of an enumerated probe's clients moving
to another bucket), the false flags on stable overdispersed series (per series and per
build) next to the adaptive shape rule's, and the real GLAM series as they are and with
planted changes (skipped without /work/shared/data), and the level alpha against power and
false flags, and where a lasting move is reported against where it starts. Seeded: the
output is reproducible.
docs/statistics.md ("Changes in counts") describes the design and holds the tables.

The series: 60 builds (stable series: 40 of history, then 60 judged); clients per build
``N`` times a log-normal factor (sd 0.3 in log, as GLAM's ``total_users``); the true
shares wander from build to build (overdispersion):
a build effect ``u_t`` per bucket, AR(1) with coefficient 0.5 (runs of similar builds, as
GLAM's regimes) and sd ``sqrt(rho * pi (1 - pi))``, rho calibrated on GLAM (boolean 6e-5:
sd 0.3 points at a 20 % share; enumerated 3e-4), plus isolated one-build spikes (3 % of
builds, 2-4 points); the counts are multinomial given the build's shares.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from deviations.stats.histograms import detect_changes_adaptive
from deviations.stats.proportions import CountScan, detect_count_changes

BUILDS, CHANGE_AT, REPLICATES, SEED = 60, 40, 200, 20260522
RHO_BOOLEAN, RHO_ENUMERATED = 6e-5, 3e-4
SPIKE_RATE = 0.03
ENUMERATED = np.array(  # GLAM's enumerated probe: mean shares of its 13 used buckets
    [0.171, 0.030, 0.003, 0.0014, 0.694, 0.0074, 0.0093, 0.050, 0.0094, 0.0, 0.016,
     0.0068, 0.0008]
)
ROOT = Path(__file__).resolve().parents[2]
DATA = Path(os.environ.get("DEVIATIONS_SHARED_DATA", ROOT.parent / "shared" / "data"))


def simulate(
    rng: np.random.Generator,
    base: np.ndarray,
    clients: float,
    rho: float,
    *,
    series: int = REPLICATES,
    move: float = 0.0,
    source: int = 0,
    target: int = 1,
    volume: float = 1.0,
    builds: int = BUILDS,
) -> np.ndarray:
    """Counts (series, builds, buckets); from CHANGE_AT on, ``move`` of the share goes from
    bucket ``source`` to ``target`` and the clients are multiplied by ``volume``."""
    B = base.size
    sd = np.sqrt(rho * base * (1 - base))
    e = rng.normal(size=(series, builds, B)) * sd
    u = np.empty_like(e)
    u[:, 0] = e[:, 0]
    for t in range(1, builds):  # AR(1), stationary sd = sd
        u[:, t] = 0.5 * u[:, t - 1] + np.sqrt(1 - 0.25) * e[:, t]
    spikes = rng.random((series, builds)) < SPIKE_RATE
    size = rng.uniform(0.02, 0.04, (series, builds)) * rng.choice([-1, 1], (series, builds))
    p = base + u
    p[..., source] += np.where(spikes, size, 0.0)
    p[..., target] -= np.where(spikes, size, 0.0)
    p[:, CHANGE_AT:, source] -= move
    p[:, CHANGE_AT:, target] += move
    p = np.clip(p, 0.0, None)
    p /= p.sum(axis=-1, keepdims=True)
    n = np.round(clients * np.exp(rng.normal(0, 0.3, (series, builds)))).astype(np.int64)
    n[:, CHANGE_AT:] = np.round(n[:, CHANGE_AT:] * volume).astype(np.int64)
    return np.asarray(rng.multinomial(n, p), dtype=np.float64)


def found(scan: CountScan, kind: str = "proportion") -> float:
    """Share of series with a change of ``kind`` reported at the planted build or the 2
    after (the located start of a change the rule's looks confirmed: windows of up to
    ``max_future_builds`` later builds from the first build that passed)."""
    hit = scan.changed[:, CHANGE_AT : CHANGE_AT + 3] & (
        scan.kind[:, CHANGE_AT : CHANGE_AT + 3] == kind
    )
    return float(hit.any(axis=1).mean())


def confirmed_after(scan: CountScan) -> np.ndarray:
    """Per series, the builds after the planted one by which a proportion change reported at
    the planted build or the 2 after was confirmed (its report build + its delay), -1 where
    none was."""
    sl = slice(CHANGE_AT, CHANGE_AT + 3)
    hit = scan.changed[:, sl] & (scan.kind[:, sl] == "proportion")
    when = np.where(hit, scan.delay[:, sl] + np.arange(3), 10**6).min(axis=1)
    return np.where(hit.any(axis=1), when, -1)


def delay_summary(scan: CountScan) -> tuple[float, float, float]:
    """(found, confirmed within 3 builds, median builds to confirm) of a lasting move."""
    when = confirmed_after(scan)
    ok = when >= 0
    median = float(np.median(when[ok])) if ok.any() else float("nan")
    return float(ok.mean()), float(((when >= 0) & (when <= 2)).mean()), median


#: Stable series: a history of HISTORY builds (the rule's noise window), then JUDGED builds
#: on which flags are counted ("false flags per 60 builds" counts builds the rule judges).
HISTORY, JUDGED = 40, 60


def false_flags(changed: np.ndarray) -> tuple[float, float]:
    """(share of series with a flag, flags per 1,000 builds) over the judged builds."""
    judged = changed[:, HISTORY : HISTORY + JUDGED]
    return float(judged.any(axis=1).mean()), 1000 * float(judged.mean())


def power_boolean(rng: np.random.Generator) -> None:
    moves, clients = (0.01, 0.02, 0.03, 0.05), (2_000, 5_000, 20_000, 300_000)
    print("Boolean share 20 %: lasting move reported at its build or the 2 after (looks of "
          "up to 8 later builds); in brackets confirmed within 3 builds "
          f"({REPLICATES} series a cell)\n")
    print("| move | " + " | ".join(f"{n:,} clients" for n in clients) + " |")
    print("|---|" + "---:|" * len(clients))
    base = np.array([0.8, 0.2])
    for move in moves:
        row = []
        for n in clients:
            counts = simulate(rng, base, n, RHO_BOOLEAN, move=move)
            f, f3, _ = delay_summary(detect_count_changes(counts))
            row.append(f"{f:.0%} ({f3:.0%})")
        print(f"| {move:.0%} points | " + " | ".join(row) + " |")
    print()


def power_enumerated(rng: np.random.Generator) -> None:
    print("Enumerated (GLAM's shares, 13 buckets): share moving from the largest bucket to "
          "another\n")
    print("| move | to bucket | clients | count rule | shape rule (adaptive) |")
    print("|---|---|---:|---:|---:|")
    for move in (0.02, 0.03, 0.05):
        for target in (0, 7):
            for n in (20_000, 200_000):
                counts = simulate(rng, ENUMERATED, n, RHO_ENUMERATED, move=move, source=4,
                                  target=target)
                shape = detect_changes_adaptive(counts).changed[:, CHANGE_AT : CHANGE_AT + 3]
                print(f"| {move:.0%} | {target} | {n:,} | "
                      f"{found(detect_count_changes(counts)):.0%} | "
                      f"{shape.any(axis=1).mean():.0%} |")
    print()


def stable(rng: np.random.Generator) -> None:
    print(f"Stable overdispersed series (no change; {HISTORY} builds of history, flags counted "
          f"on the next {JUDGED}; spikes in 3 % of builds): series with a flag, flags per "
          "1,000 builds\n")
    print("| probe | clients | count rule | of which volume | shape rule (adaptive) |")
    print("|---|---:|---:|---:|---:|")
    cases = [("boolean", np.array([0.8, 0.2]), RHO_BOOLEAN, 0, 1),
             ("enumerated", ENUMERATED, RHO_ENUMERATED, 4, 0)]
    for name, base, rho, s, t in cases:
        for n in (5_000, 20_000, 300_000):
            counts = simulate(rng, base, n, rho, series=4 * REPLICATES, source=s, target=t,
                              builds=HISTORY + JUDGED + 8)
            scan = detect_count_changes(counts)
            a = false_flags(scan.changed)
            v = false_flags(scan.changed & (scan.kind == "volume"))
            b = false_flags(detect_changes_adaptive(counts).changed)
            print(f"| {name} | {n:,} | {a[0]:.1%}, {a[1]:.2f} | {v[0]:.1%}, {v[1]:.2f} | "
                  f"{b[0]:.1%}, {b[1]:.2f} |")
    print()


def volume_delay(scan: CountScan) -> float:
    """Median later builds that confirmed the volume changes reported at the planted build
    or the 2 after (counted from the planted build)."""
    sl = slice(CHANGE_AT, CHANGE_AT + 3)
    hit = scan.changed[:, sl] & (scan.kind[:, sl] == "volume")
    when = (scan.delay[:, sl] + np.arange(3))[hit]
    return float(np.median(when)) if when.size else float("nan")


def volume(rng: np.random.Generator) -> None:
    print("Client volume: the clients reporting change by a factor from the planted build on, "
          f"shares unchanged (50,000 clients a build, {REPLICATES} series a row; found = a "
          "volume change reported at the planted build or the 2 after; delay = median later "
          "builds from the planted one to the confirming one)\n")
    print("| factor | volume change found | median delay | proportion flags |")
    print("|---|---:|---:|---:|")
    # The ×1.5 row draws from its own generator: the tables after this one keep their series.
    rows = {}
    for factor, gen in ((0.7, rng), (0.5, rng), (0.33, rng), (2.0, rng), (3.0, rng),
                        (1.5, np.random.default_rng(SEED + 1))):
        counts = simulate(gen, np.array([0.8, 0.2]), 50_000, RHO_BOOLEAN, volume=factor)
        scan = detect_count_changes(counts)
        prop = (scan.kind == "proportion").any(axis=1).mean()
        rows[factor] = (f"| ×{factor:g} | {found(scan, 'volume'):.0%} | "
                        f"{volume_delay(scan):g} | {prop:.1%} |")
    print("\n".join(rows[f] for f in sorted(rows)))
    print()


def glam(kind: str) -> np.ndarray | None:
    path = DATA / "histograms" / f"glam__{kind}_histogram_build_id.json"
    if not path.exists():
        return None
    with path.open() as f:
        rows = sorted(json.load(f)["response"], key=lambda r: r["build_id"])
    buckets = sorted({int(b) for r in rows for b in r["histogram"]})
    share = np.array([[r["histogram"].get(str(b), 0.0) for b in buckets] for r in rows])
    users = np.array([r["total_users"] for r in rows], dtype=float)
    return np.asarray(share * users[:, None], dtype=np.float64)


def plant(counts: np.ndarray, at: int, move: float, source: int, target: int) -> np.ndarray:
    """Move ``move`` of every build's clients from ``source`` to ``target`` from ``at`` on
    (a lasting change), keeping each build's clients."""
    out = counts.copy()
    n = counts.sum(axis=-1)
    moved = np.minimum(move * n[at:], out[at:, source])
    out[at:, source] -= moved
    out[at:, target] += moved
    return out


def plant_volume(counts: np.ndarray, at: int, factor: float) -> np.ndarray:
    """Multiply every bucket's clients by ``factor`` from ``at`` on (a lasting volume
    change, shares kept)."""
    out = counts.copy()
    out[at:] *= factor
    return out


def real_glam() -> None:
    print("Real GLAM series (134 Nightly builds): alerts as they are, and planted lasting "
          "changes found at their build or the 2 after (26 positions)\n")
    print("| series | shape rule alerts | count rule alerts | planted change | found |")
    print("|---|---:|---:|---|---:|")
    cases = [("boolean", [(0.02, 1, 0), (0.05, 1, 0), (0.02, 0, 1)]),
             ("enumerated", [(0.05, 4, 7), (0.05, 4, 0), (0.03, 4, 7)])]
    for kind, plants in cases:
        counts = glam(kind)
        if counts is None:
            print(f"| {kind} | GLAM data not found under {DATA} | | | |")
            continue
        shape = int(detect_changes_adaptive(counts).changed.sum())
        base = int(detect_count_changes(counts).changed.sum())
        positions = range(20, counts.shape[0] - 10, 4)[:26]
        for move, s, t in plants:
            hits = 0
            for at in positions:
                scan = detect_count_changes(plant(counts, at, move, s, t))
                hits += bool((scan.changed[at : at + 3] & (scan.kind[at : at + 3]
                                                           == "proportion")).any())
            print(f"| {kind} | {shape} | {base} | {move:.0%} of clients, bucket {s} → {t} | "
                  f"{hits} of {len(positions)} |")
        for factor in (0.5, 2.0):
            hits = 0
            for at in positions:
                scan = detect_count_changes(plant_volume(counts, at, factor))
                hits += bool((scan.changed[at : at + 3] & (scan.kind[at : at + 3]
                                                           == "volume")).any())
            print(f"| {kind} | {shape} | {base} | clients ×{factor:g}, shares kept | "
                  f"{hits} of {len(positions)} |")
    print()


def frontier(rng: np.random.Generator) -> None:
    print("The price of power: the longest look K (max_future_builds) and the level alpha "
          "of one build's family of looks, against the boolean 2-point move at 5,000 clients "
          f"({3 * REPLICATES} series; found = reported at its build or the 2 after, "
          "looks of up to K later builds; within 3 = confirmed by the planted build + 2; delay = "
          "later builds from the planted one to the confirming one), the stable "
          f"series' flags ({4 * REPLICATES} series, 60 judged builds) and the real GLAM series\n")
    print("| K | alpha | found within K | within 3 builds | median delay | "
          "stable boolean 5,000 | stable enumerated 5,000 | GLAM alerts (boolean, enumerated) |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    base = np.array([0.8, 0.2])
    moved = simulate(rng, base, 5_000, RHO_BOOLEAN, move=0.02, series=3 * REPLICATES)
    builds = HISTORY + JUDGED + 8
    flat_b = simulate(rng, base, 5_000, RHO_BOOLEAN, series=4 * REPLICATES, builds=builds)
    flat_e = simulate(rng, ENUMERATED, 5_000, RHO_ENUMERATED, series=4 * REPLICATES,
                      source=4, target=0, builds=builds)
    real = [glam(k) for k in ("boolean", "enumerated")]
    judged = slice(HISTORY, HISTORY + JUDGED)
    for K, alpha in ((2, 1e-3), (2, 1e-2), (4, 1e-3), (6, 1e-3), (8, 5e-4), (8, 1e-3),
                     (8, 2e-3)):
        kw = {"alpha": alpha, "max_future_builds": K}
        f, f3, med = delay_summary(detect_count_changes(moved, **kw))
        fb = detect_count_changes(flat_b, **kw).changed[:, judged].any(axis=1).mean()
        fe = detect_count_changes(flat_e, **kw).changed[:, judged].any(axis=1).mean()
        alerts = ", ".join("-" if r is None else
                           str(int(detect_count_changes(r, **kw).changed.sum()))
                           for r in real)
        print(f"| {K} | {alpha:g} | {f:.0%} | {f3:.0%} | {med:g} | {fb:.1%} | {fe:.1%} | "
              f"{alerts} |")
    print()


def placement_counts(scan: CountScan) -> tuple[float, float, float, float]:
    """Shares of series whose first proportion report from 8 builds before the planted one
    on is (early: before it, found: at it or the 2 after, late: 3 or more after, never)."""
    hit = scan.changed[:, CHANGE_AT - 8 :] & (scan.kind[:, CHANGE_AT - 8 :] == "proportion")
    rel = np.where(hit.any(axis=1), hit.argmax(axis=1) - 8, 10**6)
    return (float((rel < 0).mean()), float(((rel >= 0) & (rel <= 2)).mean()),
            float(((rel >= 3) & (rel < 10**6)).mean()), float((rel == 10**6).mean()))


def step_fit_start(shares: np.ndarray, before: float, after: float) -> np.ndarray:
    """Per series, the least-squares start of a step from ``before`` to ``after`` (both
    known) over builds CHANGE_AT - 10 .. BUILDS - 1: a bound no located start beats."""
    x = shares[:, CHANGE_AT - 10 :]
    looks_after = (x - before) ** 2 - (x - after) ** 2  # > 0: closer to the new level
    cost = np.concatenate([np.zeros((x.shape[0], 1)), np.cumsum(looks_after, axis=1)], axis=1)
    return np.asarray(np.argmin(cost[:, :-1], axis=1) + CHANGE_AT - 10)


def placement(rng: np.random.Generator) -> None:
    print("Where the boolean 2-point move at 5,000 clients is reported: the first proportion "
          f"report from 8 builds before the planted build on ({3 * REPLICATES} series; found "
          "= at the planted build or the 2 after, as in every table)\n")
    print("| rule | early | found | 3+ builds late | never |")
    print("|---|---:|---:|---:|---:|")
    moved = simulate(rng, np.array([0.8, 0.2]), 5_000, RHO_BOOLEAN, move=0.02,
                     series=3 * REPLICATES)
    for name, kw in (("first build whose looks pass (`locate=False`)", {"locate": False}),
                     ("located start (default)", {})):
        a = placement_counts(detect_count_changes(moved, **kw))
        print(f"| {name} | " + " | ".join(f"{v:.1%}" for v in a) + " |")
    start = step_fit_start(moved[..., 1] / moved.sum(axis=-1), 0.20, 0.22)
    rel = start - CHANGE_AT
    print(f"| a step fitted knowing both levels, every series detected | {(rel < 0).mean():.1%} "
          f"| {((rel >= 0) & (rel <= 2)).mean():.1%} | {(rel >= 3).mean():.1%} | — |")
    print()


def main() -> None:
    rng = np.random.default_rng(SEED)
    power_boolean(rng)
    power_enumerated(rng)
    stable(rng)
    frontier(rng)
    volume(rng)
    real_glam()
    placement(rng)


if __name__ == "__main__":
    main()
