"""Type I error and stopping sample sizes of the rank betting test (issue 22, part 1;
docs/statistics.md, "Canaries: the rank betting test").

Latencies: lognormal (median 800 ms, log-sd 0.4), gamma with the same median and
coefficient of variation 0.4 (shape 6.25), and a bimodal latency shaped like a cache
hit/miss mix (70 % lognormal median 600 ms, log-sd 0.2; 30 % lognormal median 1,300 ms,
log-sd 0.25). B is A scaled by 1.05 or 1.10 (the median shifts by 5 % or 10 %). Each
stream feeds batches of ``STEP`` = 20 per arm and looks after every batch; the stopping n
is the first look at which the test has rejected.

The streams are computed vectorised, as ``RankBettingTest`` computes them: per batch the
pooled order A, B, A, B, ... (the pairs; the values are i.i.d., so the random orders
within a batch change nothing), the smoothed sequential ranks of the whole
stream (``earlier_counts``), the scores and the mixture's log-wealth; a look rejects when
the running maximum reaches ``log(1/alpha)``. ``tests/stats/test_betting.py`` checks the
class against a direct loop, and this pipeline against the class.

The fixed-n comparison: Mann–Whitney and Kolmogorov–Smirnov (two-sided, α = 0.05, one look
at a planned n; ``canary_quantiles.fixed_power``, ``FIXED_REPS`` repetitions per n); the
table gives the n at which each reaches 50 / 80 / 90 % power.

    python -m tests.simulations.canary_ranks [--streams 200] [--aa-streams 500] [--seed 22]
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from deviations.stats.betting import bets, earlier_counts, log_wealth, scores
from tests.simulations.canary_quantiles import (
    GAMMA_SCALE,
    GAMMA_SHAPE,
    LOG_SD,
    MEDIAN,
    Sampler,
    fixed_power,
    fmt,
    n_at_power,
)

ALPHA = 0.05
STEP = 20
AA_N = 10_000
MAX_N = 10_000
CHUNK = 20  # streams at a time: the bets' log-wealth is 24 floats per observation


def lognormal(scale: float = 1.0) -> Sampler:
    return lambda rng, n: rng.lognormal(math.log(MEDIAN * scale), LOG_SD, n)


def gamma(scale: float = 1.0) -> Sampler:
    return lambda rng, n: rng.gamma(GAMMA_SHAPE, GAMMA_SCALE * scale, n)


def bimodal(scale: float = 1.0) -> Sampler:
    """70 % fast path (median 600 ms, log-sd 0.2), 30 % slow path (1,300 ms, 0.25)."""

    def draw(rng: np.random.Generator, n: int) -> np.ndarray:
        slow = rng.random(n) < 0.3
        median = np.where(slow, 1_300.0, 600.0)
        sd = np.where(slow, 0.25, 0.2)
        return scale * median * np.exp(sd * rng.standard_normal(n))

    return draw


DISTRIBUTIONS = {"lognormal": lognormal, "gamma": gamma, "bimodal": bimodal}


def stopping_ns(rng: np.random.Generator, draw_a: Sampler, draw_b: Sampler, streams: int,
                max_n: int, *, alpha: float = ALPHA, step: int = STEP) -> np.ndarray:
    """Observations per arm at the first look (every ``step`` per arm) at which the rank
    betting test rejected, per stream (``inf``: not by ``max_n``)."""
    out = np.full(streams, np.inf)
    for first in range(0, streams, CHUNK):
        rows = min(CHUNK, streams - first)
        z = np.empty((rows, 2 * max_n))
        z[:, 0::2] = draw_a(rng, rows * max_n).reshape(rows, max_n)
        z[:, 1::2] = draw_b(rng, rows * max_n).reshape(rows, max_n)
        out[first:first + rows] = first_rejections(z, rng.random(z.shape), alpha=alpha,
                                                   step=step)
    return out


def first_rejections(z: np.ndarray, v: np.ndarray, *, alpha: float = ALPHA,
                     step: int = STEP) -> np.ndarray:
    """Per row of scored sequences ``z`` (A, B, A, B, ...) with smoothing draws ``v``: the
    observations per arm at the first look (every ``step`` pairs) whose running maximum of
    the mixture reached ``1/alpha`` (``inf``: none)."""
    rows, length = z.shape
    lambdas = bets()
    level = math.log(1.0 / alpha)
    labels = np.tile([-1.0, 1.0], length // 2)
    t = np.arange(1, length + 1)
    # Integer keys with the same order and ties as the values.
    order = np.argsort(z, axis=1, kind="stable")
    ties = np.take_along_axis(z, order, axis=1)
    dense = np.cumsum(np.diff(ties, axis=1, prepend=-np.inf) > 0, axis=1)
    keys = np.empty_like(dense)
    np.put_along_axis(keys, order, dense, axis=1)
    below, equal = earlier_counts(keys)
    x = scores(below, equal, t, labels, v)
    out = np.full(rows, np.inf)
    for row in range(rows):
        _, mixture = log_wealth(x[row], lambdas)
        looks = np.maximum.accumulate(mixture)[2 * step - 1::2 * step]
        hit = np.flatnonzero(looks >= level)
        if hit.size:
            out[row] = (hit[0] + 1) * step
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, default=200)
    parser.add_argument("--aa-streams", type=int, default=500)
    parser.add_argument("--seed", type=int, default=22)
    parser.add_argument("--skip-fixed", action="store_true",
                        help="leave out the fixed-n Mann–Whitney and KS power")
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    started = time.perf_counter()

    print(f"A/A, {args.aa_streams} streams, looked at every {STEP} per arm up to {AA_N:,} "
          f"per arm, alpha = {ALPHA}")
    print("| latencies | rejected | share |")
    print("|---|---|---|")
    for name, family in DISTRIBUTIONS.items():
        if not args.aa_streams:
            continue
        stops = stopping_ns(rng, family(), family(), args.aa_streams, AA_N)
        wrong = int(np.isfinite(stops).sum())
        print(f"| {name} | {wrong} / {args.aa_streams} | {wrong / args.aa_streams:.1%} |",
              flush=True)

    print(f"\nShifts, {args.streams} streams each, up to {MAX_N:,} per arm")
    print("| B against A | stopped by 10,000 | stop n 25 / **50** / 75 / 80 / 90 % | "
          "MW n at 50 / 80 / 90 % power | KS n at 50 / 80 / 90 % power | "
          "median stop / MW n at 90 % | stop 80 % / MW 80 % | stop 90 % / MW 90 % |")
    print("|---|---|---|---|---|---|---|---|")
    for name, family in DISTRIBUTIONS.items():
        for scale in (1.05, 1.10):
            stops = stopping_ns(rng, family(), family(scale), args.streams, MAX_N)
            q = np.quantile(stops, [0.25, 0.5, 0.75, 0.8, 0.9])
            cells = " / ".join(fmt(x) if np.isfinite(x) else "—" for x in q)
            mw_text = ks_text = "—"
            ratios = "— | — | —"
            if not args.skip_fixed:
                fixed = fixed_power(rng, family(), family(scale))
                mw = [n_at_power(fixed["mann-whitney"], p) for p in (0.5, 0.8, 0.9)]
                ks = [n_at_power(fixed["ks"], p) for p in (0.5, 0.8, 0.9)]
                mw_text = " / ".join(fmt(n) for n in mw)
                ks_text = " / ".join(fmt(n) for n in ks)
                ratio = [None if ref is None else x / ref
                         for x, ref in ((q[1], mw[2]), (q[3], mw[1]), (q[4], mw[2]))]
                ratios = " | ".join("—" if r is None or not np.isfinite(r) else f"{r:.2f}"
                                    for r in ratio)
            print(f"| {name} ×{scale:.2f} | {np.isfinite(stops).mean():.0%} | {cells} | "
                  f"{mw_text} | {ks_text} | {ratios} |", flush=True)
    print(f"\n({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
