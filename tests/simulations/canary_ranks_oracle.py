"""The rank betting test's stopping n in the strict reading of issue 22's target, for the
default grid of bets, the oracle bet and a grid tuned to a stated effect (issue 22, item 1;
docs/statistics.md, "Canaries: the rank betting test", "Against the target").

Every bet set is run on the **same** streams (the scores of a stream are computed once):

* ``default``: :func:`deviations.stats.betting.bets`, equal weights (the canary's test);
* ``oracle 1s ×c``: the one bet ``c λ*``, ``λ* = 3 (θ − ½)`` with the true rank effect
  ``θ = P(B > A)`` (computed by quadrature from the distributions), positive only (a
  one-sided test at level α); ``c = 1`` is the bet growing fastest, smaller ``c`` stop
  the slow streams sooner;
* ``oracle 2s ×c``: the bets ``± c λ*`` with weight ½ each (two-sided, α/2 each side);
* ``tuned 2s s%`` / ``tuned 1s s%``: :func:`deviations.stats.betting.tuned_bets` for a
  stated smallest median shift that matters, ``s`` = 5 or 10 %, two-sided or one-sided
  ("B larger" only), run both when the true shift is the stated one and when it is twice
  or half of it. The stated shift is converted to θ with the true distribution's shape
  (the quadrature above): the user is assumed to know what 5 % means in θ for her
  latencies.

The strict reading: the n by which the test has stopped in p % of streams against the n at
which a one-look Mann–Whitney (and KS) test has p % power, p = 50, 80, 90. A/A: each bet set
on the same A/A streams, looked at after every batch up to ``AA_N`` per arm (Ville's
inequality bounds each by α: every set and its weights are fixed before the data).

    python -m tests.simulations.canary_ranks_oracle [--streams 200] [--aa-streams 500]
        [--seed 22] [--max-n 10000] [--families lognormal,gamma,bimodal]
"""

from __future__ import annotations

import argparse
import math
import os
import time
from collections.abc import Callable

import numpy as np
from scipy import integrate, stats

from deviations.stats.betting import (
    bets,
    earlier_counts,
    log_wealth,
    scores,
    tuned_bets,
)
from tests.simulations.canary_quantiles import (
    GAMMA_SCALE,
    GAMMA_SHAPE,
    LOG_SD,
    MEDIAN,
    fixed_power,
    fmt,
    n_at_power,
)
from tests.simulations.canary_ranks import DISTRIBUTIONS

ALPHA = 0.05
STEP = 20
AA_N = 10_000
CHUNK = 20
ORACLE_FACTORS = (0.7, 1.0)
POWERS = (0.5, 0.8, 0.9)

BetSet = tuple[np.ndarray, np.ndarray]  # bets, weights


def _cdf_pdf(name: str) -> tuple[Callable[[float], float], Callable[[float], float]]:
    if name == "lognormal":
        d = stats.lognorm(LOG_SD, scale=MEDIAN)
        return d.cdf, d.pdf
    if name == "gamma":
        d = stats.gamma(GAMMA_SHAPE, scale=GAMMA_SCALE)
        return d.cdf, d.pdf
    fast, slow = stats.lognorm(0.2, scale=600.0), stats.lognorm(0.25, scale=1_300.0)
    return (lambda x: 0.7 * fast.cdf(x) + 0.3 * slow.cdf(x),
            lambda x: 0.7 * fast.pdf(x) + 0.3 * slow.pdf(x))


def rank_effect_of(name: str, scale: float) -> float:
    """``θ = P(scale · A' > A) = ∫ F(scale y) f(y) dy`` for A, A' i.i.d. (continuous)."""
    cdf, pdf = _cdf_pdf(name)
    value, _ = integrate.quad(lambda y: cdf(scale * y) * pdf(y), 0.0, np.inf, limit=400,
                              points=None)
    return float(value)


def stream_scores(rng: np.random.Generator, draw_a: Callable[..., np.ndarray],
                  draw_b: Callable[..., np.ndarray], rows: int, n: int) -> np.ndarray:
    """Scores of ``rows`` streams of ``n`` pairs, pooled A, B, A, B, ... (as
    ``canary_ranks.first_rejections`` computes them)."""
    z = np.empty((rows, 2 * n))
    z[:, 0::2] = draw_a(rng, rows * n).reshape(rows, n)
    z[:, 1::2] = draw_b(rng, rows * n).reshape(rows, n)
    v = rng.random(z.shape)
    order = np.argsort(z, axis=1, kind="stable")
    ties = np.take_along_axis(z, order, axis=1)
    dense = np.cumsum(np.diff(ties, axis=1, prepend=-np.inf) > 0, axis=1)
    keys = np.empty_like(dense)
    np.put_along_axis(keys, order, dense, axis=1)
    below, equal = earlier_counts(keys)
    labels = np.tile([-1.0, 1.0], n)
    return scores(below, equal, np.arange(1, 2 * n + 1), labels, v)


def first_looks(x: np.ndarray, bet_set: BetSet, *, alpha: float = ALPHA,
                step: int = STEP) -> np.ndarray:
    """Observations per arm at the first look whose running maximum of the weighted
    mixture reached ``1/alpha`` (``inf``: none), per row of scores."""
    lambdas, weights = bet_set
    level = math.log(1.0 / alpha)
    out = np.full(x.shape[0], np.inf)
    for row in range(x.shape[0]):
        _, mixture = log_wealth(x[row], lambdas, weights=weights)
        looks = np.maximum.accumulate(mixture)[2 * step - 1::2 * step]
        hit = np.flatnonzero(looks >= level)
        if hit.size:
            out[row] = (hit[0] + 1) * step
    return out


def run_sets(rng: np.random.Generator, draw_a: Callable[..., np.ndarray],
             draw_b: Callable[..., np.ndarray], streams: int, n: int,
             sets: dict[str, BetSet]) -> dict[str, np.ndarray]:
    out = {name: np.full(streams, np.inf) for name in sets}
    for first in range(0, streams, CHUNK):
        rows = min(CHUNK, streams - first)
        x = stream_scores(rng, draw_a, draw_b, rows, n)
        for name, bet_set in sets.items():
            out[name][first:first + rows] = first_looks(x, bet_set)
    return out


def _ratios(at: np.ndarray, ref: list[float | None]) -> str:
    return " / ".join("—" if r is None or not np.isfinite(v) else f"{v / r:.2f}"
                      for v, r in zip(at, ref, strict=True))


def equal(lambdas: np.ndarray) -> BetSet:
    return lambdas, np.full(lambdas.size, 1.0 / lambdas.size)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, default=200)
    parser.add_argument("--aa-streams", type=int, default=500)
    parser.add_argument("--seed", type=int, default=22)
    parser.add_argument("--max-n", type=int, default=10_000)
    parser.add_argument("--families", default="lognormal,gamma,bimodal")
    parser.add_argument("--skip-fixed", action="store_true")
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    started = time.perf_counter()
    print(f"seed {args.seed}, alpha {ALPHA}, looks every {STEP} per arm; load average "
          f"{os.getloadavg()}")
    families = args.families.split(",")
    theta = {(name, s): rank_effect_of(name, s) for name in families for s in (1.05, 1.10)}
    print("theta:", {f"{k[0]} x{k[1]:.2f}": round(v, 4) for k, v in theta.items()})

    def tuned_sets(name: str) -> dict[str, BetSet]:
        out = {}
        for stated in (1.05, 1.10):
            effect = theta[(name, stated)] - 0.5
            label = round((stated - 1) * 100)
            out[f"tuned 2s {label}%"] = tuned_bets(effect)
            out[f"tuned 1s {label}%"] = tuned_bets(effect, two_sided=False)
        return out

    if args.aa_streams:
        print(f"\nA/A, {args.aa_streams} streams per family, up to {AA_N:,} per arm")
        for name in families:
            aa_sets = {"default": equal(bets()), **tuned_sets(name)}
            for shift in (1.05, 1.10):
                lam = 3.0 * (theta[(name, shift)] - 0.5)
                aa_sets[f"oracle 2s x1 ({shift:.2f})"] = equal(np.array([lam, -lam]))
                aa_sets[f"oracle 1s x1 ({shift:.2f})"] = equal(np.array([lam]))
            family = DISTRIBUTIONS[name]
            stops = run_sets(rng, family(), family(), args.aa_streams, AA_N, aa_sets)
            cells = ", ".join(f"{k} {int(np.isfinite(v).sum())}" for k, v in stops.items())
            print(f"| {name} | {cells} |  (of {args.aa_streams})", flush=True)

    print(f"\nShifts, {args.streams} streams each, up to {args.max_n:,} per arm")
    print("| B against A | bets | stopped | stop n at 50 / 80 / 90 % of streams | "
          "÷ MW n at 50 / 80 / 90 % power | ÷ KS n at 50 / 80 / 90 % power |")
    print("|---|---|---|---|---|---|")
    for name in families:
        family = DISTRIBUTIONS[name]
        for scale in (1.05, 1.10):
            lam = 3.0 * (theta[(name, scale)] - 0.5)
            sets: dict[str, BetSet] = {"default": equal(bets())}
            for c in ORACLE_FACTORS:
                sets[f"oracle 1s ×{c}"] = equal(np.array([c * lam]))
                sets[f"oracle 2s ×{c}"] = equal(np.array([c * lam, -c * lam]))
            sets.update(tuned_sets(name))
            stops = run_sets(rng, family(), family(scale), args.streams, args.max_n, sets)
            mw: list[float | None] = [None, None, None]
            ks: list[float | None] = [None, None, None]
            if not args.skip_fixed:
                fixed = fixed_power(rng, family(), family(scale))
                mw = [n_at_power(fixed["mann-whitney"], p) for p in POWERS]
                ks = [n_at_power(fixed["ks"], p) for p in POWERS]
                print(f"| {name} ×{scale:.2f} | MW n {' / '.join(fmt(n) for n in mw)}; "
                      f"KS n {' / '.join(fmt(n) for n in ks)} |")
            for set_name, stop in stops.items():
                at = np.quantile(stop, POWERS)
                cells = " / ".join(fmt(v) if np.isfinite(v) else "—" for v in at)
                print(f"| {name} ×{scale:.2f} | {set_name} | {np.isfinite(stop).mean():.0%} | "
                      f"{cells} | {_ratios(at, mw)} | {_ratios(at, ks)} |", flush=True)
    print(f"\n({time.perf_counter() - started:.0f} s; load average {os.getloadavg()})")


if __name__ == "__main__":
    main()
