"""Cost of the stored analysis: a full recompute and one new release, wall and CPU time.

Run from the project root (PostgreSQL on 127.0.0.1:5432, trust auth)::

    python -m tests.benchmarks.analysis [--releases 40] [--functions 1000] [--runs 10]
                                        [--database deviations_bench] [--repeat 3]

It recreates the database ``--database`` and fills one series as ``tests.benchmarks.pages``
does (its ``Filler``: the same seed gives the same runs), analyses it once, then alternates
``analyse --full`` and one release appended at the end with its runs followed by the
analysis a task would run (incremental), ``--repeat`` times. It prints, for both, the
median wall time and the median CPU time of this process (``time.process_time``: every
thread of the process, not PostgreSQL's), and where the analysis spent it: loading the
runs (``analysis.load_columns``), the shift rule (``analysis._shift``) and the
per-release statistics with the paper rule's pairs (``analysis._release_and_pairs``).
CPU time is what to compare on a shared machine: wall time moves
with the other jobs' load.

The last line printed is
``full_s=<wall> full_cpu_s=<cpu> incremental_s=<wall> incremental_cpu_s=<cpu>``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from tests.benchmarks.pages import PROJECT_ROOT, Filler, recreate_database, setup_django

SPENT: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])


def _timed_calls(module: Any, name: str) -> None:
    """Wrap ``module.name`` so that its wall and CPU time add up in ``SPENT[name]``."""
    inner = getattr(module, name, None)
    if inner is None:
        return

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        wall, cpu = time.perf_counter(), time.process_time()
        try:
            return inner(*args, **kwargs)
        finally:
            SPENT[name][0] += time.perf_counter() - wall
            SPENT[name][1] += time.process_time() - cpu

    setattr(module, name, wrapper)


def measured(fn: Callable[..., str], *args: Any, **kwargs: Any) -> tuple[float, float, str]:
    SPENT.clear()
    wall, cpu = time.perf_counter(), time.process_time()
    message = fn(*args, **kwargs)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    parts = ", ".join(f"{k} {w:.2f} s / CPU {c:.2f} s" for k, (w, c) in SPENT.items())
    print(f"    {wall:.3f} s, CPU {cpu:.3f} s ({parts}) {message}")
    return wall, cpu, message


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--releases", type=int, default=40)
    parser.add_argument("--functions", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--database", default="deviations_bench")
    parser.add_argument("--seed", type=int, default=20261122)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    os.chdir(PROJECT_ROOT)
    recreate_database(args.database)
    setup_django(args.database)
    from django.core.management import call_command

    from deviations.traces import analysis

    print(f"deviations from {os.path.dirname(analysis.__file__)}")
    for name in ("load_columns", "_shift", "_release_and_pairs"):
        _timed_calls(analysis, name)
    call_command("migrate", verbosity=0)
    filler = Filler(args.functions, args.runs, args.releases, args.seed)
    for k in range(args.releases):
        filler.add_release(f"1.{k}", order=10 * k, position=k)
    series = filler.series
    print(f"{args.releases} releases × {args.functions} functions × {args.runs} runs; first:")
    measured(analysis.analyse_series, series.pk)
    fulls, updates = [], []
    for k in range(args.releases, args.releases + args.repeat):
        print("  full:")
        fulls.append(measured(analysis.analyse_series, series.pk, force=True)[:2])
        filler.add_release(f"1.{k}", order=10 * k, position=k)
        print("  one new release:")
        updates.append(measured(analysis.analyse_series, series.pk)[:2])
    full = [statistics.median(x) for x in zip(*fulls, strict=True)]
    update = [statistics.median(x) for x in zip(*updates, strict=True)]
    print(f"full_s={full[0]:.3f} full_cpu_s={full[1]:.3f} incremental_s={update[0]:.3f} "
          f"incremental_cpu_s={update[1]:.3f} incremental_vs_full_cpu={update[1] / full[1]:.3f}")


if __name__ == "__main__":
    main()
