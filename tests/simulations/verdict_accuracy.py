"""Accuracy and finality of release-verdict rules on simulated series (issue 19, item 6).

Run from the project root::

    .venv/bin/python -m tests.simulations.verdict_accuracy --quick       # a couple of minutes
    .venv/bin/python -m tests.simulations.verdict_accuracy               # the full tables
    .venv/bin/python -m tests.simulations.verdict_accuracy --replay      # finality (slow)
    .venv/bin/python -m tests.simulations.verdict_accuracy --rules shifts,my.module:rule

Prints markdown tables, one row per scenario × runs per release × releases (× step size),
one column per rule; every cell is a percentage with its count and denominator. The
series come from :mod:`tests.simulations.release_series` (scenarios ``realistic`` and
``machine`` by default, run-to-run noise resampled from the TracerBench traces: see
there), scored by :mod:`tests.simulations.verdict_scoring`; ``--replay`` adds the
finality figures of :mod:`tests.simulations.finality`. Seeded: the same command prints
the same numbers (the seed of each matrix is printed with its scenario).

Rules (``--rules``, comma-separated): the dashboard's (``shifts``, ``paper``,
``paper_mean``, each with a new series' default minimum practical change, and ``*_raw``
without it: :mod:`tests.simulations.dashboard_rules`), the baselines ``perfherder``,
``perfherder_runs`` and ``otava`` (:mod:`tests.simulations.baselines`; Otava is skipped,
with the reason, without ``.venv-otava``), or ``module.path:callable``: any callable from
``samples`` (functions × releases × runs, µs, NaN-padded) to int8 verdict codes
(functions × releases - 1; 2 regression, 3 improvement), imported, so a new rule plugs in
as it is (it applies its own minimum practical change, if any).
"""

from __future__ import annotations

import argparse
import importlib
import json
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
DEFAULT_RULES = ("shifts", "paper", "paper_mean", "shifts_raw", "paper_raw", "paper_mean_raw",
                 "perfherder", "perfherder_runs", "otava")
REPLAY_RULES = ("shifts", "shifts_raw", "perfherder", "perfherder_runs")


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


#: Issue 19's accuracy targets (item 6), each pooled over the series lengths of one run
#: count (realistic scenario): (label, runs, step size or None for false flags, target).
TARGETS: tuple[tuple[str, str, float | None, str], ...] = (
    ("×1.5 steps found, 1 run", "1", 1.5, "≥ 90%"),
    ("×1.2 steps found, 1 run", "1", 1.2, "≥ 60%"),
    ("×1.5 steps found, 3 runs", "3", 1.5, "≥ 98%"),
    ("×1.1 steps found, 5 runs", "5", 1.1, "≥ 70%"),
    ("×1.2 steps found, 5 runs", "5", 1.2, "≥ 95%"),
    ("×1.5 steps found, 5 runs", "5", 1.5, "≥ 98%"),
    ("×1.5 steps found, 10 runs", "10", 1.5, "≥ 98%"),
    ("false flags per stable boundary, 1 run", "1", None, "≤ 0.05%"),
    ("false flags per stable boundary, 3 runs", "3", None, "≤ 0.05%"),
    ("false flags per stable boundary, 5 runs", "5", None, "≤ 0.05%"),
    ("false flags per stable boundary, 10 runs", "10", None, "≤ 0.05%"),
)


class Report:
    """The markdown tables of :func:`evaluate`'s results. ``compact``: cells are
    percentages and each row names its denominator (the same for every rule: the same
    matrices), instead of ``"95.0% (190/200)"`` cells."""

    def __init__(self, results: dict[Key, dict[str, Tally]], rules: list[str],
                 compact: bool = False) -> None:
        self.results = results
        self.rules = rules
        self.compact = compact
        self.keys = [k for k in results if k[0] != "machine"]
        self.machine = [k for k in results if k[0] == "machine"]

    def table(self, title: str, head: list[str],
              rows: list[tuple[list[str], dict[str, Tally], str, int]]) -> None:
        """Rows of (labels, tally per rule, counted key, digits); rows counting nothing are
        left out, a table without rows too."""
        kept = [r for r in rows if any(t.counts.get(r[2], (0, 0))[1] for t in r[1].values())]
        if not kept:
            return
        extra = ["of"] if self.compact else []
        print(f"\n{title}\n")
        print("| " + " | ".join(head + extra + self.rules) + " |")
        print("|" + "---|" * (len(head) + len(extra) + len(self.rules)))
        for labels, tallies, key, digits in kept:
            if self.compact:
                total = max(t.counts.get(key, (0, 0))[1] for t in tallies.values())
                cells = [str(total)]
                for r in self.rules:
                    rate = tallies[r].rate(key)
                    cells.append("–" if rate is None else f"{100 * rate:.{digits}f}%")
            else:
                cells = [tallies[r].cell(key, digits) for r in self.rules]
            print("| " + " | ".join(labels + cells) + " |")

    def simple(self, title: str, key: str, which: list[Key], digits: int = 1) -> None:
        self.table(title, ["scenario", "runs", "releases"],
                   [([*map(str, k)], self.results[k], key, digits) for k in which])

    def targets(self) -> None:
        """Issue 19's targets, each pooled over the lengths of its run count."""
        rows = []
        for label, runs, size, target in TARGETS:
            pooled: dict[str, Tally] = defaultdict(Tally)
            for k in self.keys:
                if k[0] == "realistic" and k[1] == runs:
                    for r in self.rules:
                        pooled[r].merge(self.results[k][r])
            if pooled:
                key = "false flags" if size is None else (
                    f"found {ROLE_NAMES[STEP]} {size_label(size)}")
                rows.append(([label, target], dict(pooled), key, 2 if size is None else 1))
        lengths = sorted({k[2] for k in self.keys})
        self.table("**Issue 19's targets** (realistic scenario, pooled over "
                   f"{', '.join(map(str, lengths))} releases)", ["measure", "target"], rows)

    def print(self) -> None:
        step_rows = []
        for k in self.keys:
            for s in STEP_SIZES:
                step_rows.append(([*map(str, k), size_label(s)], self.results[k],
                                  f"found {ROLE_NAMES[STEP]} {size_label(s)}", 1))
        self.targets()
        self.table("**Steps found on their boundary, right direction** (by step size)",
                   ["scenario", "runs", "releases", "step"], step_rows)
        keys, simple = self.keys, self.simple
        simple("**Digression ends found** (each end on its boundary, right direction)",
               "found digression end", keys)
        simple("**Digressions with both ends found**", "both ends", keys)
        simple("**False flags per stable boundary** (stable functions)", "false flags", keys, 2)
        simple("**Misplaced flags** (boundaries of step and digression functions where "
               "nothing was planted)", "misplaced", keys, 2)
        simple("**Planted boundaries flagged the wrong way**", "wrong direction", keys, 2)
        simple("**Spread-only functions: flags per boundary** (all false)", "spread", keys, 2)
        simple("**Spread-only functions: flags where the spread widens**",
               "spread at its release", keys)
        simple("**Outlier bursts: flags on boundaries touching a burst** (all false)", "burst",
               keys)
        simple("**Outlier bursts: flags on the other boundaries of those functions**",
               "burst elsewhere", keys, 2)
        simple("**Drifts: flags per boundary inside a drift** (reported apart)", "drift",
               keys, 2)
        simple("**Drifts with at least one flag inside**", "drifts flagged", keys)
        self.drift_positions()
        simple("**Machine change found** (every function shifted ×1.15 or ×0.9 at one "
               "release)", "found machine change", self.machine)
        simple("**False flags per stable boundary, machine scenario** (all but the machine "
               "change's)", "false flags", self.machine, 2)
        first = self.rules[0]
        touching = [([*map(str, k)], {"planted": self.results[k][first]}, "one-run side", 1)
                    for k in keys + self.machine
                    if self.results[k][first].counts.get("one-run side", (0, 0))[0]]
        if touching:
            rules, self.rules = self.rules, ["planted"]
            self.table("**Planted boundaries touching a one-run release** (the dashboard's "
                       "rules give them no verdict: not found)",
                       ["scenario", "runs", "releases"], touching)
            self.rules = rules

    def drift_positions(self) -> None:
        rows = []
        for k in self.keys:
            if not any(self.results[k][r].counts.get("drift") for r in self.rules):
                continue
            cells = []
            for r in self.rules:
                first = self.results[k][r].values.get("drift first flag %", [])
                into = self.results[k][r].values.get("drift releases in", [])
                cells.append(f"{np.median(first):.1f}% after {np.median(into):.0f} rel. "
                             f"(n = {len(into)})" if first else "–")
            rows.append([*map(str, k), *cells])
        if rows:
            print("\n**Drifts: where flags fall** (median cumulative change at a drift's first "
                  "flag, median releases into the drift of all flags, flags)\n")
            print("| " + " | ".join(["scenario", "runs", "releases", *self.rules]) + " |")
            print("|" + "---|" * (3 + len(self.rules)))
            for row in rows:
                print("| " + " | ".join(row) + " |")


def save(results: dict[Key, dict[str, Tally]], path: Path) -> None:
    """The counts and values of every (scenario, runs, releases) and rule, as JSON."""
    out = [{"scenario": k[0], "runs": k[1], "releases": k[2],
            "rules": {r: {"counts": dict(t.counts), "values": dict(t.values)}
                      for r, t in per_rule.items()}} for k, per_rule in results.items()]
    path.write_text(json.dumps(out))


def load(path: Path) -> dict[Key, dict[str, Tally]]:
    """What :func:`save` wrote."""
    results: dict[Key, dict[str, Tally]] = {}
    for row in json.loads(path.read_text()):
        per_rule: dict[str, Tally] = {}
        for r, got in row["rules"].items():
            t = Tally()
            for key, (hits, total) in got["counts"].items():
                t.add(key, hits, total)
            for key, values in got["values"].items():
                t.values[key].extend(values)
            per_rule[r] = t
        results[(row["scenario"], row["runs"], int(row["releases"]))] = per_rule
    return results


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
    parser.add_argument("--compact", action="store_true",
                        help="percentages, with each row's denominator in a column")
    parser.add_argument("--save", type=Path, default=None,
                        help="also write the counts to this JSON file")
    parser.add_argument("--load", type=Path, default=None,
                        help="print the tables of a --save file instead of simulating")
    args = parser.parse_args(argv)

    if args.load:
        results = load(args.load)
        rules_seen = list(next(iter(results.values()))) if results else []
        Report(results, rules_seen, args.compact).print()
        return
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
        if args.save:
            save(results, args.save)
        Report(results, list(rules), args.compact).print()
    elapsed = time.perf_counter() - started
    print(f"\nTime: {elapsed:.0f} s wall; CPU per rule: "
          + ", ".join(f"{k} {v:.0f} s" for k, v in timings.items()))


if __name__ == "__main__":
    main()
