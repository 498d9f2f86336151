"""Benchmark: ``segment_verdicts`` (issue 12's segmentation rule) against the window rule.

Run with ``python -m tests.benchmarks.stats_segments`` (``--sizes 500x50x5,2000x100x5``
to choose functions × releases × runs; ``--old PATH`` also times another copy of
``deviations/stats/releases.py``, e.g. one written by ``git show main:...``, side by side).

Each size is one seeded matrix: lognormal runs (σ = 0.3) on per-function levels of
50 µs–5 ms, a quarter of the functions with a ×1.6 step at a random release, 5% of the
runs missing. For each rule it prints wall seconds and process CPU seconds (the machine
may be shared: CPU time is the steadier figure), best of ``--repeats``:

- ``segments``: the default, segments of at most ``SEGMENT_MAX_LENGTH`` releases;
- ``segments, unbounded``: ``max_length=None`` (cost quadratic in releases);
- ``window``: ``compare_matrix(rule="recommended")``, for scale;
- ``old``: ``segment_verdicts`` of the ``--old`` file, when given.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from deviations.stats.releases import compare_matrix, segment_verdicts

SIZES = "500x50x5,2000x100x5,5000x300x5"


def samples(functions: int, releases: int, runs: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    level = np.exp(rng.uniform(np.log(50.0), np.log(5000.0), (functions, 1, 1)))
    x = level * rng.lognormal(0.0, 0.3, (functions, releases, runs))
    step = rng.integers(1, releases, functions)
    moved = (np.arange(releases)[None, :] >= step[:, None]) & (
        np.arange(functions)[:, None] % 4 == 0
    )
    x[moved] *= 1.6
    x[rng.random(x.shape) < 0.05] = np.nan
    return x


def timed(fn: Callable[[], object], repeats: int) -> tuple[float, float]:
    """Best wall and best process-CPU seconds of ``repeats`` calls."""
    wall = cpu = float("inf")
    for _ in range(repeats):
        w, c = time.perf_counter(), time.process_time()
        fn()
        wall = min(wall, time.perf_counter() - w)
        cpu = min(cpu, time.process_time() - c)
    return wall, cpu


def _load(path: str) -> Callable[[np.ndarray], object]:
    # Named inside the package, so its relative imports resolve to the current modules.
    spec = importlib.util.spec_from_file_location("deviations.stats._old_releases", Path(path))
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    fn: Callable[[np.ndarray], object] = module.segment_verdicts
    return fn


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default=SIZES, help=f"default {SIZES}")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--old", help="another releases.py whose segment_verdicts to time")
    parser.add_argument("--old-max", type=int, default=2000 * 100,
                        help="time --old only up to this many functions × releases")
    parser.add_argument("--unbounded-max", type=int, default=5000 * 300,
                        help="time max_length=None only up to this many functions × releases")
    args = parser.parse_args(argv)
    old = _load(args.old) if args.old else None
    print("| functions × releases × runs | rule | wall s | CPU s |")
    print("|---|---|---|---|")
    for size in args.sizes.split(","):
        f, r, n = (int(v) for v in size.split("x"))
        x = samples(f, r, n)
        rules: list[tuple[str, Callable[[], object]]] = [
            ("segments", lambda x=x: segment_verdicts(x)),
        ]
        if f * r <= args.unbounded_max:
            rules.append(("segments, unbounded",
                          lambda x=x: segment_verdicts(x, max_length=None)))
        rules.append(("window", lambda x=x: compare_matrix(x, rule="recommended")))
        if old is not None and f * r <= args.old_max:
            rules.append(("old", lambda x=x, old=old: old(x)))
        for name, fn in rules:
            wall, cpu = timed(fn, args.repeats)
            print(f"| {f:,} × {r} × {n} | {name} | {wall:.2f} | {cpu:.2f} |", flush=True)


if __name__ == "__main__":
    main()
