"""Bounded (chunked) analysis at scale: fill, full analysis, one new release, memory, bytes.

Run from the project root (PostgreSQL on 127.0.0.1:5432, trust auth)::

    python -m tests.benchmarks.analysis_scale fill [--releases 2000] [--functions 20000]
        [--runs 10] [--database bench_chunks]
    python -m tests.benchmarks.analysis_scale measure [--database bench_chunks]
        [--memory-mb 1536] [--workers 0] [--series NAME]

``fill`` recreates the database (unless ``--resume``: it continues a fill that stopped)
and fills one series as ``tests.benchmarks.pages`` does (its ``Filler``, bulk inserts; no
trace is parsed), printing its progress. ``measure`` then runs, on that series:

1. a full analysis (``analyse --full``), in chunks of functions bounded by
   ``DEVIATIONS_ANALYSIS_MEMORY_MB`` (``--memory-mb``), in this process (``--workers 0``,
   the embedded way: chunks one after another) or as a Celery chord on ``--workers``
   worker processes started here (``CELERY_BROKER_URL`` must name a Redis database);
2. one release appended with its runs, then the analysis a task would run (incremental);

and prints wall and CPU time of each (CPU: this process plus its finished children, i.e.
the workers when there are some), the peak RSS of the process that computed
(``resource.getrusage``: ``ru_maxrss`` of this process, or of the worker children), and the
stored bytes (``pg_total_relation_size`` of the analysis tables and of the runs' times).

The last line printed is ``full_s=… full_cpu_s=… incremental_s=… incremental_cpu_s=…
peak_rss_mb=… analysis_bytes=… runtimes_bytes=…``.
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

import numpy as np

from tests.benchmarks.pages import PROJECT_ROOT, SERIES, Filler, recreate_database, setup_django


def attach(functions: int, runs: int, releases: int, seed: int) -> tuple[Any, int]:
    """A ``Filler`` for the series a fill left (its functions and levels; new noise), and
    how many releases it holds."""
    from deviations.traces.models import Function, Release, Series

    filler = object.__new__(Filler)
    filler.rng = np.random.default_rng(seed)
    filler.runs = runs
    filler.series = Series.objects.get(name=SERIES)
    filler.fids = np.array(Function.objects.filter(series=filler.series).order_by("id")
                           .values_list("id", flat=True))
    count = len(filler.fids)
    filler.level = filler.rng.lognormal(np.log(200), 1.5, count)
    filler.noise = filler.rng.uniform(0.03, 0.15, count)
    filler.rare = filler.rng.random(count) < 0.1
    filler.step = np.ones((count, releases + 10))
    made = Release.objects.filter(series=filler.series).count()
    filler.made = made * runs + 1_000_000  # distinct file names and hashes
    return filler, made


def fill(args: argparse.Namespace) -> None:
    if not args.resume:
        recreate_database(args.database)
    setup_django(args.database)
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    start = time.perf_counter()
    from deviations.traces.models import Series

    if args.resume and Series.objects.filter(name=SERIES).exists():
        filler, first = attach(args.functions, args.runs, args.releases, args.seed)
    else:
        filler, first = Filler(args.functions, args.runs, args.releases, args.seed), 0
    for k in range(first, args.releases):
        filler.add_release(f"1.{k}", order=10 * k, position=k)
        if (k + 1) % 25 == 0:
            print(f"{k + 1} releases in {time.perf_counter() - start:.0f} s", flush=True)
    print(f"filled {args.releases} releases × {args.functions} functions × {args.runs} runs "
          f"in {time.perf_counter() - start:.1f} s", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("command", choices=("fill", "measure"))
    parser.add_argument("--releases", type=int, default=2000)
    parser.add_argument("--functions", type=int, default=20000)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--database", default="bench_chunks")
    parser.add_argument("--seed", type=int, default=20261122)
    parser.add_argument("--resume", action="store_true",
                        help="fill: continue the series a fill left in --database")
    args = parser.parse_args()
    os.chdir(PROJECT_ROOT)
    if args.command == "fill":
        fill(args)


if __name__ == "__main__":
    main()
