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

With ``--adaptive`` the oracle and the fixed tuned sets give way to bets tuned to a stated
change ``s`` of the median **in the values' unit** (``d = s × median``), their rank effect
estimated from arm A's values instead of the true distribution (``betting.shifted_effect``,
:func:`adaptive_lambdas`: per side the tuned factors and the default grid, K and the
weights fixed), run at ``s`` = the true change, half of it and twice it:

* ``adaptive 1s`` / ``adaptive 2s``: ``theta_hat(±d)`` per look from the A values scored
  before it (none below ``ADAPTIVE_MIN_A`` = 50: the tuned components then bet
  ``ADAPTIVE_FALLBACK``); one-sided ("B larger") or two-sided;
* ``held-out 1s``: ``tuned_bets`` from ``theta_hat(d)`` of ``HELD_OUT`` = 20 A values drawn
  apart and never scored (a canary would take its first batch of A for it): the stop n
  counts them, the bets are fixed before the scored data;
* ``tuned 1s`` / ``tuned 2s s=true (true shape)``: ``tuned_bets`` at the true θ, as before.

The strict reading: the n by which the test has stopped in p % of streams against the n at
which a one-look Mann–Whitney (and KS) test has p % power, p = 50, 80, 90. A/A: each bet set
on the same A/A streams, looked at after every batch up to ``AA_N`` per arm (Ville's
inequality bounds each by α: every set and its weights are fixed before the data).

    python -m tests.simulations.canary_ranks_oracle [--streams 200] [--aa-streams 500]
        [--seed 22] [--max-n 10000] [--families lognormal,gamma,bimodal] [--adaptive]
"""

from __future__ import annotations

import argparse
import math
import os
import time
from collections.abc import Callable

import numpy as np
import numpy.typing as npt
from scipy import integrate, stats

from deviations.stats._typing import FloatArray
from deviations.stats.betting import (
    HELD_OUT,
    LAMBDA_MAX,
    STEPS,
    TUNED_FACTORS,
    TUNED_TAIL,
    TUNED_WEIGHTS,
    bets,
    earlier_counts,
    log_wealth,
    scores,
    shifted_effect,
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
from tests.simulations.canary_ranks import AA_N, ALPHA, CHUNK, DISTRIBUTIONS, STEP

#: Adaptive tuned bets (:func:`adaptive_lambdas`; measured here, not part of
#: ``deviations.stats``: what they bet is not covered by Ville's bound, see
#: ``betting``'s docstring): arm A's scored values needed before the tuned components bet
#: on the effect estimated from them (until then they bet ``ADAPTIVE_FALLBACK``).
ADAPTIVE_MIN_A = 50
#: What the tuned components bet before ``ADAPTIVE_MIN_A`` (the default grid's bets
#: 0.044 ... 0.177, one per factor, in the factors' order).
ADAPTIVE_FALLBACK = tuple(float(v) for v in bets()[[7, 6, 5, 4, 3]])


def adaptive_weights(sides: int, weights: tuple[float, ...] = TUNED_WEIGHTS,
                     tail: float = TUNED_TAIL) -> FloatArray:
    """The fixed weights of :func:`adaptive_lambdas`'s components: per side the tuned
    factors ``(1 - tail) w_f`` and the default grid's ``STEPS`` bets ``tail / STEPS`` each;
    ``sides`` = +1 or -1 one side, 0 both (each half)."""
    w = np.asarray(weights, dtype=np.float64)
    side = np.concatenate(((1.0 - tail) * w / w.sum(), np.full(STEPS, tail / STEPS)))
    out: FloatArray = side if sides else np.concatenate((side, side)) / 2.0
    return out


def adaptive_lambdas(effect_up: npt.ArrayLike, effect_down: npt.ArrayLike, sides: int,
                     factors: tuple[float, ...] = TUNED_FACTORS,
                     lambda_max: float = LAMBDA_MAX) -> FloatArray:
    """Bets of the adaptive tuned mixture, shape ``(..., K)`` (K fixed: per side
    ``len(factors)`` tuned components then the default grid's ``STEPS`` bets).

    ``effect_up`` = ``theta_hat(+d) - 1/2`` (the effect of B larger by the stated change),
    ``effect_down`` = ``1/2 - theta_hat(-d)`` (B smaller), NaN where not yet estimated (the
    tuned components then bet ``ADAPTIVE_FALLBACK``). Tuned bets ``3 f effect``, clipped
    to ``[smallest grid bet, lambda_max]``. ``sides``: +1 the positive side only ("B
    larger"), -1 the negative only, 0 both (positive side first)."""
    f = np.asarray(factors, dtype=np.float64)
    grid = bets(lambda_max)[:STEPS]
    low = float(grid[-1])

    def side(effect: npt.ArrayLike) -> FloatArray:
        e = np.asarray(effect, dtype=np.float64)[..., None]
        fallback = np.asarray(ADAPTIVE_FALLBACK, dtype=np.float64)
        tuned = np.where(np.isnan(e), fallback, np.clip(3.0 * f * np.nan_to_num(e), low,
                                                        lambda_max))
        tail = np.broadcast_to(grid, (*tuned.shape[:-1], STEPS))
        out: FloatArray = np.concatenate((tuned, tail), axis=-1)
        return out

    if sides > 0:
        return side(effect_up)
    if sides < 0:
        return -side(effect_down)
    both: FloatArray = np.concatenate((side(effect_up), -side(effect_down)), axis=-1)
    return both


ORACLE_FACTORS = (0.7, 1.0)
POWERS = (0.5, 0.8, 0.9)

BetSet = tuple[np.ndarray, np.ndarray]  # bets, weights
#: Adaptive bets: (stated change in the values' unit, sides: +1 "B larger" only, 0 both).
Adaptive = tuple[float, int]
#: Held-out bets: (stated change, sides); fixed from the first ``HELD_OUT`` A values of the
#: stream, which are not scored (the stop n counts them).
HeldOut = tuple[float, int]


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


def _dense_keys(z: np.ndarray) -> np.ndarray:
    """Integer keys per row with the order and ties of the values."""
    order = np.argsort(z, axis=1, kind="stable")
    ties = np.take_along_axis(z, order, axis=1)
    dense = np.cumsum(np.diff(ties, axis=1, prepend=-np.inf) > 0, axis=1)
    keys = np.empty_like(dense)
    np.put_along_axis(keys, order, dense, axis=1)
    return keys


def median_of(name: str) -> float:
    from scipy import optimize

    cdf, _ = _cdf_pdf(name)
    return float(optimize.brentq(lambda x: cdf(x) - 0.5, 1.0, 10_000.0))


def adaptive_effects(a: np.ndarray, shift: float, step: int = STEP) -> np.ndarray:
    """Per row of A values (in arrival order) and per look k: ``theta_hat(shift)`` over the
    first ``step k`` values (``betting.shifted_effect``, continuous values), NaN below
    ``ADAPTIVE_MIN_A``. Counted for all prefixes at once: for each j the earlier values
    below ``a_j + d`` and the earlier ``a_i + d`` above ``a_j`` (``earlier_counts`` on the
    sequence ``a_0 + d, a_0, a_1 + d, a_1, ...``, minus the counts among the a's)."""
    rows, n = a.shape
    mixed = np.empty((rows, 2 * n))
    mixed[:, 0::2] = a + shift
    mixed[:, 1::2] = a
    below_mixed, _ = earlier_counts(_dense_keys(mixed))
    below_a, _ = earlier_counts(_dense_keys(a))
    j = np.arange(n)
    c1 = below_mixed[:, 0::2] - below_a  # #{i < j : a_i < a_j + d}
    q_below = below_mixed[:, 1::2] - below_a - (shift < 0)  # #{i < j : a_i + d < a_j}
    c2 = j - q_below  # #{i < j : a_i + d > a_j}
    total = np.cumsum(c1 + c2, axis=1)
    looks = n // step
    held = step * np.arange(looks)
    out = np.full((rows, looks), np.nan)
    ok = held >= max(ADAPTIVE_MIN_A, 2)
    out[:, ok] = total[:, held[ok] - 1] / (held[ok] * (held[ok] - 1.0))
    return out


def first_looks_adaptive(x: np.ndarray, lambdas: np.ndarray, weights: np.ndarray, *,
                         alpha: float = ALPHA, step: int = STEP) -> np.ndarray:
    """As :func:`first_looks` with bets changing per look: ``lambdas`` (rows, looks, K)."""
    level = math.log(1.0 / alpha)
    out = np.full(x.shape[0], np.inf)
    for row in range(x.shape[0]):
        lam = np.repeat(lambdas[row], 2 * step, axis=0).T  # (K, positions)
        per_bet = np.cumsum(np.log1p(lam * x[row][None, :]), axis=1)
        top = per_bet.max(axis=0)
        mixture = top + np.log(weights @ np.exp(per_bet - top))
        out[row] = _first_stop(mixture, step, level)
    return out


def _first_stop(mixture: np.ndarray, step: int, level: float) -> float:
    """Observations per arm at the first look (after every ``step`` pairs) whose running
    maximum of the log-wealth reaches ``level``; inf if none."""
    looks = np.maximum.accumulate(mixture)[2 * step - 1::2 * step]
    hit = np.flatnonzero(looks >= level)
    return float((hit[0] + 1) * step) if hit.size else math.inf


def stream_scores(rng: np.random.Generator, draw_a: Callable[..., np.ndarray],
                  draw_b: Callable[..., np.ndarray], rows: int, n: int) -> np.ndarray:
    """Scores of ``rows`` streams of ``n`` pairs, pooled A, B, A, B, ... (as
    ``canary_ranks.first_rejections`` computes them)."""
    z = stream_values(rng, draw_a, draw_b, rows, n)
    return values_scores(rng, z)


def stream_values(rng: np.random.Generator, draw_a: Callable[..., np.ndarray],
                  draw_b: Callable[..., np.ndarray], rows: int, n: int) -> np.ndarray:
    z = np.empty((rows, 2 * n))
    z[:, 0::2] = draw_a(rng, rows * n).reshape(rows, n)
    z[:, 1::2] = draw_b(rng, rows * n).reshape(rows, n)
    return z


def values_scores(rng: np.random.Generator, z: np.ndarray) -> np.ndarray:
    v = rng.random(z.shape)
    below, equal = earlier_counts(_dense_keys(z))
    labels = np.tile([-1.0, 1.0], z.shape[1] // 2)
    return scores(below, equal, np.arange(1, z.shape[1] + 1), labels, v)


def first_looks(x: np.ndarray, bet_set: BetSet, *, alpha: float = ALPHA,
                step: int = STEP) -> np.ndarray:
    """Observations per arm at the first look whose running maximum of the weighted
    mixture reached ``1/alpha`` (``inf``: none), per row of scores."""
    lambdas, weights = bet_set
    level = math.log(1.0 / alpha)
    out = np.full(x.shape[0], np.inf)
    for row in range(x.shape[0]):
        _, mixture = log_wealth(x[row], lambdas, weights=weights)
        out[row] = _first_stop(mixture, step, level)
    return out


def run_sets(rng: np.random.Generator, draw_a: Callable[..., np.ndarray],
             draw_b: Callable[..., np.ndarray], streams: int, n: int,
             sets: dict[str, BetSet], adaptive: dict[str, Adaptive] | None = None,
             held_out: dict[str, HeldOut] | None = None) -> dict[str, np.ndarray]:
    """Stop n per stream for every bet set on the same streams: fixed ``sets``,
    ``adaptive`` ones (bets per look from arm A's values scored before it) and
    ``held_out`` ones (``tuned_bets`` from ``HELD_OUT`` A values drawn apart and not
    scored; the stop n counts them: the scored A values are the stream's after them)."""
    adaptive = adaptive or {}
    held_out = held_out or {}
    out = {name: np.full(streams, np.inf) for name in (*sets, *adaptive, *held_out)}
    for first in range(0, streams, CHUNK):
        rows = min(CHUNK, streams - first)
        z = stream_values(rng, draw_a, draw_b, rows, n)
        x = values_scores(rng, z)
        part = slice(first, first + rows)
        for name, bet_set in sets.items():
            out[name][part] = first_looks(x, bet_set)
        effects: dict[float, np.ndarray] = {}
        for name, (shift, sides) in adaptive.items():
            for d in (shift, -shift):
                if d not in effects:
                    effects[d] = adaptive_effects(z[:, 0::2], d)
            lam = adaptive_lambdas(effects[shift] - 0.5, 0.5 - effects[-shift], sides)
            out[name][part] = first_looks_adaptive(x, lam, adaptive_weights(sides))
        spare = draw_a(rng, rows * HELD_OUT).reshape(rows, HELD_OUT)
        for name, (shift, sides) in held_out.items():
            for row in range(rows):
                up = shifted_effect(spare[row], shift) - 0.5
                if sides:
                    bet_set = tuned_bets(min(max(up, 1e-3), 0.49), two_sided=False)
                else:
                    down = 0.5 - shifted_effect(spare[row], -shift)
                    bet_set = _two_sided(up, down)
                out[name][first + row] = first_looks(x[row:row + 1], bet_set)[0] + HELD_OUT
    return out


def _two_sided(up: float, down: float) -> BetSet:
    pos, w_pos = tuned_bets(min(max(up, 1e-3), 0.49), two_sided=False)
    neg, w_neg = tuned_bets(min(max(down, 1e-3), 0.49), two_sided=False)
    return np.concatenate((pos, -neg)), np.concatenate((w_pos, w_neg)) / 2.0


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
    parser.add_argument("--aa-n", type=int, default=AA_N, help="A/A streams' length per arm")
    parser.add_argument("--adaptive", action="store_true",
                        help="the adaptive tuned bets (and held-out ones) instead of the "
                        "oracle bets: stated change in the metric's unit, estimated "
                        "on arm A's values")
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

    medians = {name: median_of(name) for name in families}
    if args.adaptive:
        print("medians:", {k: round(v, 1) for k, v in medians.items()})

    def adaptive_sets(name: str, stated: dict[str, float]) -> tuple[
            dict[str, Adaptive], dict[str, HeldOut]]:
        adaptive: dict[str, Adaptive] = {}
        held: dict[str, HeldOut] = {}
        for label, s in stated.items():
            d = (s - 1.0) * medians[name]
            adaptive[f"adaptive 1s {label}"] = (d, 1)
            adaptive[f"adaptive 2s {label}"] = (d, 0)
            held[f"held-out 1s {label}"] = (d, 1)
        return adaptive, held

    if args.aa_streams:
        print(f"\nA/A, {args.aa_streams} streams per family, up to {args.aa_n:,} per arm")
        for name in families:
            family = DISTRIBUTIONS[name]
            if args.adaptive:
                aa_adaptive, aa_held = adaptive_sets(name, {"5%": 1.05, "10%": 1.10})
                stops = run_sets(rng, family(), family(), args.aa_streams, args.aa_n,
                                 {"default": equal(bets())}, aa_adaptive, aa_held)
                cells = ", ".join(f"{k} {int(np.isfinite(v).sum())}"
                                  for k, v in stops.items())
                print(f"| {name} | {cells} |  (of {args.aa_streams})", flush=True)
                continue
            aa_sets = {"default": equal(bets()), **tuned_sets(name)}
            for shift in (1.05, 1.10):
                lam = 3.0 * (theta[(name, shift)] - 0.5)
                aa_sets[f"oracle 2s x1 ({shift:.2f})"] = equal(np.array([lam, -lam]))
                aa_sets[f"oracle 1s x1 ({shift:.2f})"] = equal(np.array([lam]))
            stops = run_sets(rng, family(), family(), args.aa_streams, args.aa_n, aa_sets)
            cells = ", ".join(f"{k} {int(np.isfinite(v).sum())}" for k, v in stops.items())
            print(f"| {name} | {cells} |  (of {args.aa_streams})", flush=True)

    if not args.streams:
        print(f"\n({time.perf_counter() - started:.0f} s; load average {os.getloadavg()})")
        return
    print(f"\nShifts, {args.streams} streams each, up to {args.max_n:,} per arm")
    print("| B against A | bets | stopped | stop n at 50 / 80 / 90 % of streams | "
          "÷ MW n at 50 / 80 / 90 % power | ÷ KS n at 50 / 80 / 90 % power |")
    print("|---|---|---|---|---|---|")
    for name in families:
        family = DISTRIBUTIONS[name]
        for scale in (1.05, 1.10):
            lam = 3.0 * (theta[(name, scale)] - 0.5)
            sets: dict[str, BetSet] = {"default": equal(bets())}
            adaptive: dict[str, Adaptive] = {}
            held: dict[str, HeldOut] = {}
            if args.adaptive:
                effect = theta[(name, scale)] - 0.5
                sets["tuned 1s s=true (true shape)"] = tuned_bets(effect, two_sided=False)
                sets["tuned 2s s=true (true shape)"] = tuned_bets(effect)
                # Stated: the true change, half of it (true = 2s), twice it (true = s/2).
                stated = {"s=true": scale, "true=2s": 1.0 + (scale - 1.0) / 2,
                          "true=s/2": 1.0 + (scale - 1.0) * 2}
                adaptive, held = adaptive_sets(name, stated)
            else:
                for c in ORACLE_FACTORS:
                    sets[f"oracle 1s ×{c}"] = equal(np.array([c * lam]))
                    sets[f"oracle 2s ×{c}"] = equal(np.array([c * lam, -c * lam]))
                sets.update(tuned_sets(name))
            stops = run_sets(rng, family(), family(scale), args.streams, args.max_n, sets,
                             adaptive, held)
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
