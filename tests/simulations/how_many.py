""""How many more samples?" at the stop (issue 22, part 4; docs/statistics.md, §3.11).

Run from the project root::

    .venv/bin/python -m tests.simulations.how_many            # the documented table
    .venv/bin/python -m tests.simulations.how_many --quick    # what the test runs

Seed 004's loop, looked at after every observation: decide the smallest change that
matters T, add observations until the anytime-valid interval is narrower than T, stop, and
ask whether the interval covers the truth then. Every stream is i.i.d. (one value per slice
pair, or the differences themselves); looks start at n = 10 (the pilot) and a stream that
has not stopped by ``max_n`` is counted at ``max_n`` (``censored``). T is half the standard
deviation of one value on the scale the method works on (issue 22: "T = 0.5 sd").

Scenarios: ``normal`` N(10, 1); ``t3`` 10 + t₃; ``exponential`` Exp(1); ``lognormal``
lognormal(0, 1); ``spiky`` N(10, 1) multiplied by 10 with probability 1/10 (a GC pause in
1 slice of 10).

Methods (estimand in brackets; the truth of each from 4,000,000 seeded values):

* ``mean, plug-in`` [mean]: what the pages used before: :func:`sequence_halfwidth` at the
  plug-in :math:`s_n`;
* ``mean, guarded`` [mean]: :func:`scaled_halfwidth` at the guarded spread
  :func:`guarded_sd` (running maximum of :math:`s_k` from the pilot on), stopping no
  earlier than ``MIN_N`` = 30:
  ``precision_paired`` / ``precision_two_sample`` now;
* ``log, plug-in`` [mean of logs]: the sequence on log values at the plug-in :math:`s_n`;
* ``log, guarded`` [mean of logs]: ``precision_ratio_paired`` /
  ``precision_ratio_two_sample`` now (positive metrics; ``normal`` and ``t3`` values can
  be <= 0 for t₃, so the log rows cover the three positive scenarios).

Prediction: at n = 30 (seed 002's run), the method's own ``more_needed`` against the
number of further observations its stopping rule then took (streams that stopped before
30 are left out): the median ratio predicted / needed and the share within ±25 %. The
guarded rows predict at ``predicted_sd`` (the guarded spread with the allowance for its
growth); a second table compares with and without it, at n = 30 and 60.
"""

from __future__ import annotations

import argparse

import numpy as np

from deviations.stats._typing import FloatArray
from deviations.stats.paired import (
    MIN_N,
    PILOT_N,
    predicted_sd,
    scaled_halfwidth,
    sequence_halfwidth,
)

SCENARIOS = ("normal", "t3", "exponential", "lognormal", "spiky")
POSITIVE = ("exponential", "lognormal", "spiky")
METHODS = ("mean, plug-in", "mean, guarded", "log, plug-in", "log, guarded")
PREDICT_AT = 30


def draw(rng: np.random.Generator, kind: str, size: int | tuple[int, int]) -> FloatArray:
    if kind == "normal":
        return rng.normal(10.0, 1.0, size)
    if kind == "t3":
        return 10.0 + rng.standard_t(3, size)
    if kind == "exponential":
        return rng.exponential(1.0, size)
    if kind == "lognormal":
        return rng.lognormal(0.0, 1.0, size)
    if kind == "spiky":
        return rng.normal(10.0, 1.0, size) * np.where(rng.random(size) < 0.1, 10.0, 1.0)
    raise ValueError(kind)


def truth(kind: str, log: bool, seed: int = 99, size: int = 4_000_000) -> tuple[float, float]:
    x = draw(np.random.default_rng(seed), kind, size)
    if log:
        x = np.log(x)
    return float(x.mean()), float(x.std())


def prefix_sd(x: FloatArray) -> FloatArray:
    k = np.arange(1, x.shape[1] + 1, dtype=np.float64)
    c = x - x[:, :1]
    c1, c2 = np.cumsum(c, 1), np.cumsum(c * c, 1)
    var = (c2 - c1**2 / k) / np.maximum(k - 1.0, 1.0)
    return np.asarray(np.sqrt(np.maximum(var, 0.0)), dtype=np.float64)


def simulate(kind: str, method: str, runs: int, max_n: int, seed: int,
             predict_at: int = PREDICT_AT, growth: bool = True) -> dict[str, float]:
    log = method.startswith("log")
    guarded = method.endswith("guarded")
    mu, sigma = truth(kind, log)
    target = 0.5 * sigma
    x = draw(np.random.default_rng(seed), kind, (runs, max_n))
    if log:
        x = np.log(x)
    n = np.arange(1, max_n + 1, dtype=np.float64)
    mean = np.cumsum(x, 1) / n
    sd = prefix_sd(x)
    if guarded:
        sd[:, : PILOT_N - 1] = 0.0
        sd = np.maximum.accumulate(sd, axis=1)
        unit = scaled_halfwidth(n, 1.0)
        h = sd * unit
    else:
        h = sequence_halfwidth(n, sd)
    ok = 2.0 * h <= target
    ok[:, : (MIN_N if guarded else PILOT_N) - 1] = False
    stop = np.where(ok.any(1), ok.argmax(1), max_n - 1)
    rows = np.arange(runs)
    cover = np.abs(mean[rows, stop] - mu) <= h[rows, stop]
    # the method's own prediction at n = predict_at: the smallest total n with 2 h_n <= T
    # at the spread seen then (h is decreasing in n at a fixed spread); the guarded rule's
    # with the allowance for the growth of its running maximum (``predicted_sd``) unless
    # ``growth`` is False (the prediction before issue 22 part 4 was finished)
    s_now = sd[:, predict_at - 1]
    if guarded:
        if growth:
            s_now = predicted_sd(s_now, predict_at)
        total = np.searchsorted(-2.0 * unit, -target / np.maximum(s_now, 1e-300)) + 1
    else:
        total = np.array([np.searchsorted(-2.0 * sequence_halfwidth(n, s), -target) + 1
                          for s in s_now])
    predicted = np.maximum(total, MIN_N if guarded else 0) - predict_at
    predicted = np.maximum(predicted, 0)
    needed = stop + 1 - predict_at
    late = needed > 0
    ratio = predicted[late] / needed[late]
    return {
        "coverage": float(cover.mean()), "stop": float(np.median(stop + 1)),
        "censored": float(np.mean(~ok.any(1))), "ratio": float(np.median(ratio)),
        "within": float(np.mean(np.abs(ratio - 1.0) <= 0.25)),
        "predicted": float(np.median(predicted[late])), "needed": float(np.median(needed[late])),
    }


def table(runs: int, max_n: int, seed: int = 22) -> list[tuple[str, str, dict[str, float]]]:
    out = []
    for i, kind in enumerate(SCENARIOS):
        for j, method in enumerate(METHODS):
            if method.startswith("log") and kind not in POSITIVE:
                continue
            out.append((kind, method, simulate(kind, method, runs, max_n, seed + 10 * i + j)))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    runs, max_n = (300, 2_000) if args.quick else (2_000, 5_000)
    print(f"{runs} seeded streams per row, looks after every observation from n = {PILOT_N} "
          f"to {max_n}; T = 0.5 sd; prediction at n = {PREDICT_AT}\n")
    print("| scenario | method | coverage at the stop | median stop n | censored | "
          "median predicted | median needed | median ratio | within ±25 % |")
    print("|---|---|---|---|---|---|---|---|---|")
    for kind, method, r in table(runs, max_n):
        print(f"| {kind} | {method} | {r['coverage']:.3f} | {r['stop']:.0f} | "
              f"{r['censored']:.3f} | {r['predicted']:.0f} | {r['needed']:.0f} | "
              f"{r['ratio']:.2f} | {r['within']:.2f} |")
    print("\nThe guarded rule's prediction with and without the allowance for the growth of "
          "its running maximum (``predicted_sd``): share within ±25 % of the number then "
          "needed, predicted at n = 30 and n = 60\n")
    print("| scenario | method | n = 30, none | n = 30, allowance | n = 60, none | "
          "n = 60, allowance | median ratio n = 30, allowance |")
    print("|---|---|---|---|---|---|---|")
    for i, kind in enumerate(SCENARIOS):
        for j, method in enumerate(METHODS):
            if not method.endswith("guarded") or (method.startswith("log")
                                                  and kind not in POSITIVE):
                continue
            seed = 22 + 10 * i + j
            cells, ratio = [], 0.0
            for at in (30, 60):
                for growth in (False, True):
                    r = simulate(kind, method, runs, max_n, seed, predict_at=at, growth=growth)
                    cells.append(f"{r['within']:.2f}")
                    if at == 30 and growth:
                        ratio = r["ratio"]
            print(f"| {kind} | {method} | " + " | ".join(cells) + f" | {ratio:.2f} |")


if __name__ == "__main__":
    main()
