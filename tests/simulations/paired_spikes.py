"""Paired A/B intervals when B alone has rare spikes (issue 22, part 3; docs/statistics.md,
"Rare spikes").

Run from the project root::

    .venv/bin/python -m tests.simulations.paired_spikes            # the documented table
    .venv/bin/python -m tests.simulations.paired_spikes --quick    # what the test runs

Prints a markdown table: per scenario and number of slice pairs n, how often each 95 %
interval covers **its own estimand**, and its median width relative to the interval the
A/B page used before (``robust``, the hull of the t interval and the bootstrap-t, of the
mean), then the spike flag's false flags and detections. Seeded: the same command prints
the same numbers.

Scenarios (slice values in ms, per-slice level 10 ms, B 2 % slower than A, A's slice at
time 2i and B's at 2i + 1 of an interleaved run):

* ``normal``: the differences alone, N(0.02, 1): the textbook clean case;
* ``shared``: a host factor exp(N(0, 0.3²)) shared by the pair times each arm's own
  exp(N(0, 0.05²)) (seed 002's shared multiplicative noise);
* ``spikes``: ``shared``, and each B slice stalls x10 with probability 1/10 (a GC pause
  in 1 slice of 10), independently;
* ``drift``: the host's log-level an AR(1) across the 2n slices (phi = 0.9, stationary
  sd 0.3), so A's and B's slices of a pair see neighbouring, not equal, levels; plus each
  arm's own exp(N(0, 0.05²));
* ``drift+spikes``: ``drift`` with ``spikes``' stalls;
* ``p99``: each slice's p99 of 1,000 lognormal(log 10, 0.5) requests (the 990th order
  statistic, drawn exactly as a Beta(990, 11) quantile), times a host factor
  exp(N(0, 0.1²)) shared by the pair;
* ``p99+spikes``: ``p99`` with a GC pause in 1 B slice of 10 that multiplies its p99 by 10.

Methods and their estimands (the truth of each is computed from 2,000,000 seeded
differences of the same scenario: the mean, the median, and the median of the average of
two independent differences):

* ``robust`` (mean): the interval the page used before (``paired_ci(method="robust")``);
* ``t`` (mean): Student's t interval;
* ``sign`` (median): the order-statistic interval of the median (``sign_interval``);
* ``walsh`` (pseudo-median): the Hodges–Lehmann location's Walsh-average interval
  (``walsh_intervals``), the A/B page's interval now.
"""

from __future__ import annotations

import argparse

import numpy as np
from scipy import stats

from deviations.stats.paired import SPIKE_CUTOFF, mean_intervals, walsh_intervals

Array = np.ndarray

LEVEL = 10.0  # ms
EFFECT = 0.02  # B 2 % slower
SPIKE_P, SPIKE_X = 0.1, 10.0

SCENARIOS = ("normal", "shared", "spikes", "drift", "drift+spikes", "p99", "p99+spikes")
CLEAN = ("normal", "shared", "drift", "p99")
SPIKY = ("spikes", "drift+spikes", "p99+spikes")
METHODS = ("robust", "t", "sign", "walsh")
ESTIMAND = {"robust": "mean", "t": "mean", "sign": "median", "walsh": "pseudo-median"}
NS = (5, 10, 30)


def draw(scenario: str, rng: np.random.Generator, reps: int, n: int) -> tuple[Array, Array]:
    """``(a, b)``, each (reps, n): A's and B's slice values of ``reps`` runs."""
    def own() -> Array:
        return np.exp(rng.normal(0.0, 0.05, (reps, n)))

    def stalls() -> Array:
        return np.where(rng.random((reps, n)) < SPIKE_P, SPIKE_X, 1.0)

    base = scenario.removesuffix("+spikes")
    if scenario == "normal":
        return np.zeros((reps, n)), rng.normal(EFFECT, 1.0, (reps, n))
    if base in ("shared", "spikes"):
        host = np.exp(rng.normal(0.0, 0.3, (reps, n)))
        a, b = LEVEL * host * own(), LEVEL * (1 + EFFECT) * host * own()
    elif base == "drift":
        phi, sd = 0.9, 0.3
        x = np.empty((reps, 2 * n))
        x[:, 0] = rng.normal(0.0, sd, reps)
        step = rng.normal(0.0, sd * np.sqrt(1 - phi**2), (reps, 2 * n))
        for t in range(1, 2 * n):
            x[:, t] = phi * x[:, t - 1] + step[:, t]
        a = LEVEL * np.exp(x[:, 0::2]) * own()
        b = LEVEL * (1 + EFFECT) * np.exp(x[:, 1::2]) * own()
    elif base == "p99":
        m, k = 1000, 990

        def p99() -> Array:
            u = rng.beta(k, m - k + 1, (reps, n))
            return np.asarray(np.exp(np.log(LEVEL) + 0.5 * stats.norm.ppf(u)))

        host = np.exp(rng.normal(0.0, 0.1, (reps, n)))
        a, b = host * p99(), (1 + EFFECT) * host * p99()
    else:
        raise ValueError(f"unknown scenario {scenario!r}")
    if scenario.endswith("spikes") or scenario == "spikes":
        b = b * stalls()
    return a, b


def truths(scenario: str, size: int = 2_000_000, seed: int = 99) -> dict[str, float]:
    """``{"mean", "median", "pseudo-median"}`` of the scenario's differences."""
    rng = np.random.default_rng([seed, SCENARIOS.index(scenario)])
    a, b = draw(scenario, rng, size // 10, 10)
    d = (b - a).ravel()
    half = d.size // 2
    return {"mean": float(d.mean()), "median": float(np.median(d)),
            "pseudo-median": float(np.median((d[:half] + d[half:2 * half]) / 2.0))}


def _sign_bounds(d: Array) -> tuple[Array, Array]:
    n = d.shape[1]
    ks = np.arange(1, n // 2 + 1)
    ok = ks[1.0 - 2.0 * stats.binom.cdf(ks - 1, n, 0.5) >= 0.95 - 1e-12]
    k = int(ok[-1]) if ok.size else 1
    s = np.sort(d, axis=1)
    return s[:, k - 1], s[:, n - k]


def spike_flags(d: Array, cutoff: float = SPIKE_CUTOFF) -> Array:
    """``stats.paired.spike_pairs`` of each row at once: True where a pair is a spike."""
    med = np.median(d, axis=1, keepdims=True)
    dev = np.abs(d - med)
    scale = 1.4826 * np.median(dev, axis=1, keepdims=True)
    scale = np.where(scale == 0, 1.2533 * dev.mean(axis=1, keepdims=True), scale)
    return np.asarray((scale > 0) & (dev > cutoff * scale))


def cell(scenario: str, n: int, reps: int, resamples: int, seed: int,
         truth: dict[str, float], methods: tuple[str, ...] = METHODS) -> dict[str, float]:
    """Coverage (``"<method>"``) and median width relative to ``robust``'s
    (``"<method> width"``) of one (scenario, n), plus the spike flag's rates:
    ``"flagged"`` (runs with at least one pair flagged) and, with spikes,
    ``"found"`` (stalled pairs flagged) and ``"wrong"`` (clean pairs flagged)."""
    rng = np.random.default_rng([seed, SCENARIOS.index(scenario), n])
    a, b = draw(scenario, rng, reps, n)
    d = b - a
    bounds: dict[str, tuple[Array, Array]] = {}
    for method in methods:
        if method in ("robust", "t"):
            r = mean_intervals(d, 0.95, method, resamples, seed=n)  # type: ignore[arg-type]
            bounds[method] = (r.lo, r.hi)
        elif method == "sign":
            bounds[method] = _sign_bounds(d)
        else:
            w = walsh_intervals(d, 0.95)
            bounds[method] = (w.lo, w.hi)
    out: dict[str, float] = {}
    ref = np.subtract(*bounds["robust"][::-1]) if "robust" in bounds else None
    for method, (lo, hi) in bounds.items():
        target = truth[ESTIMAND[method]]
        out[method] = float(np.mean((lo <= target) & (target <= hi)))
        if ref is not None:
            out[f"{method} width"] = float(np.median((hi - lo) / ref))
    flags = spike_flags(d)
    out["flagged"] = float(np.mean(flags.any(axis=1)))
    if scenario in SPIKY:
        stalled = (b / a) > 4.0  # a x10 stall; the clean ratio stays within 0.6-1.6
        out["found"] = float(flags[stalled].mean()) if stalled.any() else float("nan")
        out["wrong"] = float(flags[~stalled].mean())
    return out


def simulate(
    scenarios: tuple[str, ...] = SCENARIOS, ns: tuple[int, ...] = NS, reps: int = 10_000,
    resamples: int = 2_000, seed: int = 2022, methods: tuple[str, ...] = METHODS,
) -> dict[tuple[str, int], dict[str, float]]:
    """``{(scenario, n): cell}`` (see :func:`cell`)."""
    out = {}
    for scenario in scenarios:
        truth = truths(scenario)
        for n in ns:
            out[(scenario, n)] = cell(scenario, n, reps, resamples, seed, truth, methods)
    return out


def table(result: dict[tuple[str, int], dict[str, float]]) -> str:
    head = ("| scenario | n | robust (mean) | t (mean) | sign (median) | walsh (pseudo-median) "
            "| width t | width sign | width walsh | runs flagged | stalls flagged "
            "| clean pairs flagged |")
    lines = [head, "|---|---|" + "---|" * 10]
    def fmt(c: dict[str, float], key: str) -> str:
        v = c.get(key)
        return "—" if v is None or v != v else f"{v:.3f}"

    for (scenario, n), c in result.items():
        def f(key: str, c: dict[str, float] = c) -> str:
            return fmt(c, key)

        lines.append(
            f"| {scenario} | {n} | {f('robust')} | {f('t')} | {f('sign')} | {f('walsh')} "
            f"| {f('t width')} | {f('sign width')} | {f('walsh width')} | {f('flagged')} "
            f"| {f('found')} | {f('wrong')} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1,500 runs, 500 resamples")
    args = parser.parse_args()
    reps, resamples = (1_500, 500) if args.quick else (10_000, 2_000)
    print(table(simulate(reps=reps, resamples=resamples)))
    truth = {s: truths(s) for s in SCENARIOS}
    print()
    print("| scenario | mean | median | pseudo-median |")
    print("|---|---|---|---|")
    for s, t in truth.items():
        print(f"| {s} | {t['mean']:.3f} | {t['median']:.3f} | {t['pseudo-median']:.3f} |")


if __name__ == "__main__":
    main()
