"""Accuracy and finality of release-verdict rules on simulated series (issue 19, item 6).

Run from the project root::

    .venv/bin/python -m tests.simulations.verdict_accuracy --quick       # a couple of minutes
    .venv/bin/python -m tests.simulations.verdict_accuracy               # the full tables
    .venv/bin/python -m tests.simulations.verdict_accuracy --replay      # finality (slow)
    .venv/bin/python -m tests.simulations.verdict_accuracy --rules segments,my.module:rule

Prints markdown tables, one row per scenario × runs per release × releases (× step size),
one column per rule; every cell is a percentage with its count and denominator. The
series come from :mod:`tests.simulations.release_series` (scenarios ``realistic`` and
``machine`` by default, run-to-run noise resampled from the TracerBench traces: see
there), scored by :mod:`tests.simulations.verdict_scoring`; ``--replay`` adds the
finality figures of :mod:`tests.simulations.finality`. Seeded: the same command prints
the same numbers (the seed of each matrix is printed with its scenario).

Rules (``--rules``, comma-separated): the dashboard's (``paper``, ``paper_mean``,
``recommended``, ``segments``, each with the default minimum practical change, and
``*_raw`` without it: :mod:`tests.simulations.dashboard_rules`), the baselines
``perfherder``, ``perfherder_runs`` and ``otava`` (:mod:`tests.simulations.baselines`;
Otava is skipped, with the reason, without ``.venv-otava``), or ``module.path:callable``:
any callable from ``samples`` (functions × releases × runs, µs, NaN-padded) to int8
verdict codes (functions × releases - 1; 2 regression, 3 improvement), imported, so a
new rule plugs in as it is (it applies its own minimum practical change, if any).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import numpy as np

from tests.simulations import baselines, dashboard_rules, finality, release_series
from tests.simulations.release_series import ROLE_NAMES, STEP, STEP_SIZES, Runs
from tests.simulations.verdict_scoring import Tally, score, size_label

Rule = Callable[[np.ndarray], np.ndarray]

BUILT_IN: dict[str, Rule] = {**dashboard_rules.RULES, **baselines.RULES}
DEFAULT_RULES = ("paper", "paper_mean", "recommended", "segments", "paper_raw",
                 "paper_mean_raw", "recommended_raw", "segments_raw", "perfherder",
                 "perfherder_runs", "otava")
REPLAY_RULES = ("segments", "recommended")


def cpu() -> float:
    """CPU seconds of this process and its finished children (Otava runs in one)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def load_rule(spec: str) -> Rule:
    """A built-in rule by name, or ``module.path:callable`` imported."""
    if spec in BUILT_IN:
        return BUILT_IN[spec]
    if ":" not in spec:
        raise SystemExit(f"unknown rule {spec!r}: one of {', '.join(BUILT_IN)} or "
                         "module.path:callable")
    module, name = spec.split(":", 1)
    found = getattr(importlib.import_module(module), name, None)
    if not callable(found):
        raise SystemExit(f"{spec}: {name!r} is not a callable of {module}")
    return found  # type: ignore[no-any-return]


def parse_runs(text: str) -> list[Runs]:
    """``"1,3,5,10,1-5"`` → ``[1, 3, 5, 10, (1, 5)]``."""
    out: list[Runs] = []
    for part in text.split(","):
        if "-" in part:
            lo, hi = part.split("-")
            out.append((int(lo), int(hi)))
        else:
            out.append(int(part))
    return out


def runs_label(runs: Runs) -> str:
    return f"{runs[0]}–{runs[1]}" if isinstance(runs, tuple) else str(runs)


def matrix_seed(base: int, scenario: int, runs: int, releases: int, i: int) -> int:
    """The seed of one matrix: every (scenario, runs, releases, replicate) its own."""
    return base + 1_000_000 * i + 10_000 * scenario + 1_000 * runs + releases


Key = tuple[str, str, int]  # (scenario, runs label, releases)


def evaluate(
    rules: dict[str, Rule], scenarios: list[str], runs_list: list[Runs], lengths: list[int],
    seeds: int, functions: int, noise: release_series.NoiseName,
    donors: list | None, base_seed: int, timings: dict[str, float],
) -> dict[Key, dict[str, Tally]]:
    """Score every rule on every matrix (the same matrices for every rule)."""
    results: dict[Key, dict[str, Tally]] = {}
    for si, scenario in enumerate(scenarios):
        for ri, runs in enumerate(runs_list):
            for releases in lengths:
                per_rule: dict[str, Tally] = defaultdict(Tally)
                for i in range(seeds):
                    seed = matrix_seed(base_seed, si, ri, releases, i)
                    series = release_series.simulate(
                        scenario, runs, releases, functions=functions, noise=noise,
                        seed=seed, donors=donors,
                    )
                    for name, rule in rules.items():
                        t0 = cpu()
                        verdict = rule(series.samples)
                        timings[name] += cpu() - t0
                        per_rule[name].merge(score(series.truth, verdict))
                results[(scenario, runs_label(runs), releases)] = per_rule
    return results


def _print_table(title: str, rules: list[str], rows: list[tuple[list[str], dict[str, str]]],
                 head: list[str]) -> None:
    print(f"\n{title}\n")
    print("| " + " | ".join(head + rules) + " |")
    print("|" + "---|" * (len(head) + len(rules)))
    for label, cells in rows:
        print("| " + " | ".join(label + [cells[r] for r in rules]) + " |")


def print_tables(results: dict[Key, dict[str, Tally]], rules: list[str],
                 sizes: tuple[float, ...]) -> None:
    keys = [k for k in results if k[0] != "machine"]
    head = ["scenario", "runs", "releases"]
    step_rows = []
    for key in keys:
        for s in sizes:
            k = f"found {ROLE_NAMES[STEP]} {size_label(s)}"
            if any(results[key][r].counts.get(k) for r in rules):
                step_rows.append(([*map(str, key), size_label(s)],
                                  {r: results[key][r].cell(k) for r in rules}))
    _print_table("**Steps found on their boundary, right direction** (by step size)", rules,
                 step_rows, [*head, "step"])

    def simple(title: str, metric: str, which: list[Key], digits: int = 1) -> None:
        rows = [([*map(str, key)], {r: results[key][r].cell(metric, digits) for r in rules})
                for key in which if any(results[key][r].counts.get(metric) for r in rules)]
        if rows:
            _print_table(title, rules, rows, head)

    simple("**Digression ends found** (each end on its boundary, right direction)",
           "found digression end", keys)
    simple("**Digressions with both ends found**", "both ends", keys)
    simple("**False flags per stable boundary** (stable functions)", "false flags", keys, 2)
    simple("**Misplaced flags** (boundaries of step and digression functions where nothing "
           "was planted)", "misplaced", keys, 2)
    simple("**Planted boundaries flagged the wrong way**", "wrong direction", keys, 2)
    simple("**Spread-only functions: flags per boundary** (all false)", "spread", keys, 2)
    simple("**Spread-only functions: flags where the spread widens**",
           "spread at its release", keys)
    simple("**Outlier bursts: flags on boundaries touching a burst** (all false)", "burst",
           keys)
    simple("**Outlier bursts: flags on the other boundaries of those functions**",
           "burst elsewhere", keys, 2)
    simple("**Drifts: flags per boundary inside a drift** (reported apart)", "drift", keys, 2)
    simple("**Drifts with at least one flag inside**", "drifts flagged", keys)
    drift_rows = []
    for key in keys:
        cells = {}
        for r in rules:
            first = results[key][r].values.get("drift first flag %", [])
            into = results[key][r].values.get("drift releases in", [])
            cells[r] = (f"{np.median(first):.1f}% after {np.median(into):.0f} rel. "
                        f"(n = {len(into)})" if first else "–")
        if any(results[key][r].counts.get("drift") for r in rules):
            drift_rows.append(([*map(str, key)], cells))
    if drift_rows:
        _print_table("**Drifts: where flags fall** (median cumulative change at a drift's "
                     "first flag, median releases into the drift of all flags)", rules,
                     drift_rows, head)
    machine = [k for k in results if k[0] == "machine"]
    simple("**Machine change found** (every function shifted ×1.15 or ×0.9 at one release)",
           "found machine change", machine)
    simple("**False flags per stable boundary, machine scenario** (all but the machine "
           "change's)", "false flags", machine, 2)
    first = rules[0]
    touching = [([*map(str, key)], {"planted": results[key][first].cell("one-run side")})
                for key in keys + machine if results[key][first].counts["one-run side"][0]]
    if touching:
        _print_table("**Planted boundaries touching a one-run release** (the dashboard's "
                     "rules give them no verdict: not found)", ["planted"], touching, head)


def _ages(a: np.ndarray) -> str:
    """``"count: 95% quantile / max"`` of change ages."""
    return f"{len(a)}: {finality.Finality.quantile(a)} / {a.max()}" if len(a) else "0"


def replay_tables(rules: dict[str, Rule], lengths: list[int], runs: Runs, seeds: int,
                  functions: int, noise: release_series.NoiseName, donors: list | None,
                  base_seed: int, timings: dict[str, float]) -> None:
    """Finality figures of each rule on the realistic scenario (``finality``)."""
    print(f"\n**Finality** (realistic scenario, {runs_label(runs)} runs, {functions} "
          f"functions, {seeds} matrices a cell; releases added one at a time; ages in "
          "releases after the boundary's later release)\n")
    print("| rule | releases | changes (every class): 95% / max age | flag changes: 95% / "
          "max age | last change per boundary: 95% / max | flags shown at age ≥ 6 later "
          "lost or flipped | at age ≥ 12 | final flags |")
    print("|---|---|---|---|---|---|---|---|")
    for name, rule in rules.items():
        for releases in lengths:
            got: finality.Finality | None = None
            for i in range(seeds):
                seed = matrix_seed(base_seed, 99, 0, releases, i)
                series = release_series.simulate("realistic", runs, releases,
                                                 functions=functions, noise=noise, seed=seed,
                                                 donors=donors)
                t0 = cpu()
                one = finality.finality(finality.replay(rule, series.samples))
                timings[f"{name} (replay)"] += cpu() - t0
                got = one if got is None else got.merge(one)
            assert got is not None
            q = finality.Finality.quantile
            print(f"| {name} | {releases} | {_ages(got.change_ages)} | "
                  f"{_ages(got.flag_change_ages)} | {q(got.last_change_ages)} / "
                  f"{got.last_change_ages.max() if len(got.last_change_ages) else '–'} | "
                  f"{got.lost[6]} | {got.lost[12]} | {got.final_flags} |")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rules", default=",".join(DEFAULT_RULES),
                        help="comma-separated rules (default: %(default)s)")
    parser.add_argument("--seeds", type=int, default=3, help="matrices per cell (default 3)")
    parser.add_argument("--seed", type=int, default=19, help="base seed (default 19)")
    parser.add_argument("--quick", action="store_true",
                        help="1 and 5 runs, 24 and 60 releases, 200 functions, one matrix a "
                        "cell")
    parser.add_argument("--replay", action="store_true",
                        help="only the finality figures (of --replay-rules)")
    parser.add_argument("--replay-rules", default=",".join(REPLAY_RULES))
    parser.add_argument("--replay-releases", default="60,120")
    parser.add_argument("--noise", choices=("tracerbench", "fitted", "shapes"),
                        default="tracerbench")
    parser.add_argument("--traces", type=Path, default=None,
                        help="TracerBench traces folder (default ../shared/data/traces)")
    parser.add_argument("--functions", type=int, default=None,
                        help="functions per matrix (default 400, 200 with --quick or --replay)")
    parser.add_argument("--runs", default=None, help="runs per release, e.g. 1,3,5,10,1-5")
    parser.add_argument("--releases", default=None, help="series lengths, e.g. 24,60,120")
    parser.add_argument("--scenarios", default="realistic,machine",
                        help=f"of {', '.join(release_series.SCENARIOS)}")
    args = parser.parse_args(argv)

    started = time.perf_counter()
    noise, donors, why = release_series.noise_source(args.noise, args.traces)
    if why:
        print(f"note: {why}", file=sys.stderr)
    timings: dict[str, float] = defaultdict(float)
    if args.replay:
        functions = args.functions or 200
        rules = {}
        for spec in args.replay_rules.split(","):
            rules[spec] = load_rule(spec)
        lengths = [int(x) for x in args.replay_releases.split(",")]
        runs = parse_runs(args.runs or "5")[0]
        replay_tables(rules, lengths, runs, 1 if args.quick else args.seeds, functions, noise,
                      donors, args.seed, timings)
    else:
        functions = args.functions or (200 if args.quick else 400)
        runs_list = parse_runs(args.runs or ("1,5" if args.quick else "1,3,5,10,1-5"))
        lengths = [int(x) for x in (args.releases or ("24,60" if args.quick
                                                      else "24,60,120")).split(",")]
        seeds = 1 if args.quick else args.seeds
        rules = {}
        for spec in args.rules.split(","):
            rule = load_rule(spec)
            if isinstance(rule, baselines.Otava) and not rule.python.is_file():
                print(f"note: otava skipped: {rule.python} is absent (python3 -m venv "
                      ".venv-otava && .venv-otava/bin/pip install apache-otava==0.8.0)",
                      file=sys.stderr)
                continue
            rules[spec] = rule
        scenarios = args.scenarios.split(",")
        print(f"Noise: {noise}; {functions} functions a matrix, {seeds} matrices a cell "
              f"(seeds from {args.seed}); scenarios: "
              + "; ".join(f"{s} {release_series.SCENARIOS[s].mix}"
                          + (" + machine change" if release_series.SCENARIOS[s].machine else "")
                          for s in scenarios))
        results = evaluate(rules, scenarios, runs_list, lengths, seeds, functions, noise,
                           donors, args.seed, timings)
        print_tables(results, list(rules), STEP_SIZES)
    elapsed = time.perf_counter() - started
    print(f"\nTime: {elapsed:.0f} s wall; CPU per rule: "
          + ", ".join(f"{k} {v:.0f} s" for k, v in timings.items()))


if __name__ == "__main__":
    main()
