"""Type I error and stopping sample sizes of the quantile decisions (issue 22, items 1–2;
docs/statistics.md, "Canaries: decisions on chosen quantiles").

Latencies: lognormal with median 800 ms and log-sd 0.4, and gamma with the same median
and coefficient of variation 0.4 (shape 6.25). Each stream feeds batches of ``STEP`` = 20
per arm to ``QuantileSequentialTest`` (p50, p90, p99, α = 0.05, Bonferroni over the
three) and looks after every batch; the stopping n is the first look where any quantile
is decided. Scenarios:

* A/A (both arms alike), up to ``AA_N`` per arm: the share of streams with any decision
  is the family's type I error under continuous monitoring;
* the p99 alone +25 %: B's log-values beyond A's p90 are stretched so that B's p50 and
  p90 equal A's and B's p99 is 1.25 × A's;
* the median (the whole distribution) ×1.05 and ×1.10.

The fixed-n comparison: Mann–Whitney and Kolmogorov–Smirnov (two-sided, α = 0.05,
scipy, one look at a planned n), power from ``FIXED_REPS`` repetitions per n; the table
gives the n at which each reaches the sequential test's power at its median stop (50 %)
and at 80 % and 90 % (linear interpolation on the n grid).

    python -m tests.simulations.canary_quantiles [--streams 200] [--aa-streams 500]
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable

import numpy as np
from scipy import stats

from deviations.stats.quantiles import QuantileSequentialTest

ALPHA = 0.05
STEP = 20
MEDIAN = 800.0
LOG_SD = 0.4
GAMMA_SHAPE = 6.25  # coefficient of variation 1/sqrt(6.25) = 0.4
GAMMA_SCALE = MEDIAN / float(stats.gamma.ppf(0.5, GAMMA_SHAPE))
AA_N = 5_000
MAX_N = 20_000
FIXED_REPS = 1_000
FIXED_NS = (100, 200, 300, 500, 750, 1_000, 1_500, 2_000, 3_000, 4_000, 6_000, 8_000)

Sampler = Callable[[np.random.Generator, int], np.ndarray]


def lognormal(scale: float = 1.0) -> Sampler:
    return lambda rng, n: rng.lognormal(math.log(MEDIAN * scale), LOG_SD, n)


def gamma(scale: float = 1.0) -> Sampler:
    return lambda rng, n: rng.gamma(GAMMA_SHAPE, GAMMA_SCALE * scale, n)


def tail_only(p99_ratio: float = 1.25) -> Sampler:
    """Lognormal whose p99 is ``p99_ratio`` × the base's, p50 and p90 unchanged: beyond
    the p90 (z > z_90) the standard score is stretched linearly."""
    z90, z99 = stats.norm.ppf(0.9), stats.norm.ppf(0.99)
    stretch = (z99 + math.log(p99_ratio) / LOG_SD - z90) / (z99 - z90)

    def draw(rng: np.random.Generator, n: int) -> np.ndarray:
        z = rng.standard_normal(n)
        z = np.where(z > z90, z90 + (z - z90) * stretch, z)
        return MEDIAN * np.exp(LOG_SD * z)

    return draw


def stopping_n(rng: np.random.Generator, draw_a: Sampler, draw_b: Sampler,
               max_n: int, quantiles: tuple[float, ...] = (0.5, 0.9, 0.99)) -> tuple[
                   int | None, float | None]:
    """Observations per arm at the first decision (None: none by ``max_n``) and the
    quantile that decided."""
    test = QuantileSequentialTest(quantiles, alpha=ALPHA)
    for n in range(STEP, max_n + 1, STEP):
        result = test.update(draw_a(rng, STEP), draw_b(rng, STEP))
        if result.decided_by:
            return n, result.decided_by[0]
    return None, None


def _fixed_p_values(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Row-wise two-sided p-values of Mann–Whitney (normal approximation with continuity
    correction, no ties) and KS (``kstwo.sf(D, n/2)``, scipy's ``method="asymp"``), for
    equal n per arm; the same as scipy's, without its per-row loop."""
    n = a.shape[1]
    pooled = np.concatenate((a, b), axis=1)
    order = np.argsort(pooled, axis=1)
    is_a = order < n
    ranks_a = np.where(is_a, np.arange(1, 2 * n + 1), 0).sum(axis=1)
    u = ranks_a - n * (n + 1) / 2
    sd = math.sqrt(n * n * (2 * n + 1) / 12)
    z = (np.abs(u - n * n / 2) - 0.5) / sd
    mw = np.minimum(1.0, 2 * stats.norm.sf(z))
    steps = np.where(is_a, 1, -1).cumsum(axis=1)
    d = np.abs(steps).max(axis=1) / n
    ks = np.minimum(1.0, stats.kstwo.sf(d, round(n / 2)))
    return mw, ks


def fixed_power(rng: np.random.Generator, draw_a: Sampler, draw_b: Sampler) -> dict[
        str, list[float]]:
    """Power of one-look Mann–Whitney and KS tests at each n of ``FIXED_NS``."""
    out: dict[str, list[float]] = {"mann-whitney": [], "ks": []}
    chunk = 100
    for n in FIXED_NS:
        mw_hits = ks_hits = 0
        for _ in range(FIXED_REPS // chunk):
            a = draw_a(rng, chunk * n).reshape(chunk, n)
            b = draw_b(rng, chunk * n).reshape(chunk, n)
            mw, ks = _fixed_p_values(a, b)
            mw_hits += int(np.sum(mw <= ALPHA))
            ks_hits += int(np.sum(ks <= ALPHA))
        out["mann-whitney"].append(mw_hits / FIXED_REPS)
        out["ks"].append(ks_hits / FIXED_REPS)
    return out


def n_at_power(power: list[float], target: float) -> float | None:
    """Smallest n (interpolated on ``FIXED_NS``) with the target power."""
    for i, p in enumerate(power):
        if p >= target:
            if i == 0:
                return float(FIXED_NS[0])
            p0, n0 = power[i - 1], FIXED_NS[i - 1]
            return n0 + (target - p0) / (p - p0) * (FIXED_NS[i] - n0)
    return None


def fmt(n: float | None) -> str:
    return "—" if n is None else f"{n:,.0f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, default=200)
    parser.add_argument("--aa-streams", type=int, default=500)
    parser.add_argument("--seed", type=int, default=22)
    parser.add_argument("--quantiles", default="0.5,0.9,0.99",
                        help="the family judged on (Bonferroni over it)")
    parser.add_argument("--skip-tail", action="store_true",
                        help="leave out the p99-only scenario")
    args = parser.parse_args()
    family = tuple(float(q) for q in args.quantiles.split(","))
    rng = np.random.default_rng(args.seed)
    started = time.perf_counter()

    print(f"Quantiles {family}")
    print(f"A/A, {args.aa_streams} streams per family, looked at every {STEP} up to "
          f"{AA_N:,} per arm, alpha = {ALPHA}")
    print("| latencies | streams with any decision | share |")
    print("|---|---|---|")
    for name, draw in (("lognormal", lognormal()), ("gamma", gamma())):
        if not args.aa_streams:
            continue
        stops = [stopping_n(rng, draw, draw, AA_N, family)[0]
                 for _ in range(args.aa_streams)]
        wrong = sum(s is not None for s in stops)
        print(f"| {name} | {wrong} / {args.aa_streams} | {wrong / args.aa_streams:.1%} |")

    print(f"\nShifts, {args.streams} streams each, up to {MAX_N:,} per arm; fixed-n tests "
          f"{FIXED_REPS} repetitions per n")
    print("| B against A | sequential: stopped by 20,000 | stop n quartiles (25/50/75/90 %) "
          "| decided by | MW n at 50/80/90 % power | KS n at 50/80/90 % power |")
    print("|---|---|---|---|---|---|")
    scenarios = (
        ("lognormal, p99 +25 % (p50, p90 unchanged)", lognormal(), tail_only(1.25)),
        ("lognormal, ×1.05", lognormal(), lognormal(1.05)),
        ("lognormal, ×1.10", lognormal(), lognormal(1.10)),
        ("gamma, ×1.05", gamma(), gamma(1.05)),
        ("gamma, ×1.10", gamma(), gamma(1.10)),
    )
    for name, draw_a, draw_b in scenarios[1:] if args.skip_tail else scenarios:
        runs = [stopping_n(rng, draw_a, draw_b, MAX_N, family) for _ in range(args.streams)]
        stops = np.array([n if n is not None else np.inf for n, _ in runs])
        deciders = [q for _, q in runs if q is not None]
        counts = {q: deciders.count(q) for q in sorted(set(deciders))}
        quart = np.quantile(stops, [0.25, 0.5, 0.75, 0.9])
        fixed = fixed_power(rng, draw_a, draw_b)
        mw = "/".join(fmt(n_at_power(fixed["mann-whitney"], t)) for t in (0.5, 0.8, 0.9))
        ks = "/".join(fmt(n_at_power(fixed["ks"], t)) for t in (0.5, 0.8, 0.9))
        decided = ", ".join(f"p{100 * q:g}: {c}" for q, c in counts.items())
        print(f"| {name} | {np.isfinite(stops).mean():.0%} | "
              f"{' / '.join(fmt(x) if np.isfinite(x) else '—' for x in quart)} | "
              f"{decided} | {mw} | {ks} |")
    print(f"\n({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
