"""Benchmark of histogram ingest and the full change-detection pass.

Run from the project root::

    python -m tests.benchmarks.histograms [--probes 1000] [--builds 60] [--buckets 50]
        [--database-url sqlite:///...|postgres://...]

It generates 1,000 probes x 60 builds x 50 buckets (seeded; one file per build in the
plain form, ~1,000 histograms a file; one probe in ten gets a lasting 2-bucket shift),
into a fresh database (a temporary SQLite file unless ``--database-url`` names an empty
one), then measures:

1. ingest: ``deviations.histograms.store.store_histogram_file`` on every file (parse, one
   transaction per file: what ``manage.py ingest_histograms`` does before it queues
   detection), reported as histograms per second;
2. ``detect_s``: one full detection pass, ``deviations.histograms.detection.detect()``
   (load every probe's series, the adaptive rule vectorised over probes of the same
   shape, store the scans and the changes), and the statistics call alone.

The last line printed is ``ingest_per_s=<x> detect_s=<y>``; the target is detect_s <= 5.

Figures on the 2-CPU development machine (shared, loaded; 2026-11-22, SQLite): ingest of
60,000 histograms in 35-43 s, ``ingest_per_s`` 1,390-1,740 (about half of it is the
pure-Python parser's validation of every count); ``detect_s=1.72`` for the full pass, of
which 0.34 s is the statistics (one vectorised call on 1000 x 60 x 50) and the rest reading
60,000 packed rows and writing 1,000 probe scans; all 104 planted shifts found at their
first build, no other report. A second pass (nothing new) takes 1.9 s.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def generate(
    folder: Path, probes: int, builds: int, buckets: int, seed: int
) -> tuple[list[Path], dict[str, str]]:
    """The files, and the build id where each shifted probe's shift starts."""
    rng = np.random.default_rng(seed)
    x = np.arange(buckets)
    centre = rng.uniform(0.35, 0.55, probes) * buckets
    sd = rng.uniform(0.06, 0.12, probes) * buckets
    shifted = rng.random(probes) < 0.1
    start = rng.integers(builds // 2, builds - 10, probes)
    paths = []
    for b in range(builds):
        c = centre + np.where(shifted & (b >= start), 2.0, 0.0) + rng.normal(0, 0.05, probes)
        p = np.exp(-0.5 * ((x[None, :] - c[:, None]) / sd[:, None]) ** 2)
        p /= p.sum(axis=1, keepdims=True)
        n = np.exp(rng.uniform(np.log(20_000), np.log(200_000), probes)).astype(np.int64)
        counts = rng.multinomial(n, p)
        edges = list(range(buckets + 1))
        records = [
            {"probe": f"BENCH_PROBE_{i:04d}", "build_id": f"{20260101000000 + b * 1000000}",
             "edges": edges, "counts": counts[i].tolist()}
            for i in range(probes)
        ]
        path = folder / f"build-{b:03d}.json"
        path.write_text(json.dumps(records))
        paths.append(path)
    planted = {
        f"BENCH_PROBE_{i:04d}": f"{20260101000000 + int(start[i]) * 1000000}"
        for i in np.flatnonzero(shifted)
    }
    return paths, planted


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--probes", type=int, default=1000)
    parser.add_argument("--builds", type=int, default=60)
    parser.add_argument("--buckets", type=int, default=50)
    parser.add_argument("--seed", type=int, default=20261122)
    parser.add_argument("--database-url", default=None)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        os.environ["DATABASE_URL"] = args.database_url or f"sqlite:///{folder / 'bench.sqlite3'}"
        os.environ.pop("CELERY_BROKER_URL", None)
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "deviations.settings")
        import django

        django.setup()
        from django.core.management import call_command

        from deviations.histograms import detection as histogram_analysis
        from deviations.histograms.models import HistogramChange, HistogramSnapshot, Probe
        from deviations.histograms.store import store_histogram_file
        from deviations.stats.histograms import detect_changes_adaptive

        call_command("migrate", verbosity=0)
        t0 = time.perf_counter()
        paths, planted = generate(folder, args.probes, args.builds, args.buckets, args.seed)
        print(f"generated {len(paths)} files in {time.perf_counter() - t0:.1f} s")

        t0 = time.perf_counter()
        for path in paths:
            store_histogram_file(path)
        ingest_s = time.perf_counter() - t0
        n = HistogramSnapshot.objects.count()
        assert n == args.probes * args.builds, n
        print(f"ingest: {n:,} histograms in {ingest_s:.2f} s = {n / ingest_s:,.0f} /s")

        t0 = time.perf_counter()
        new = histogram_analysis.detect()
        detect_s = time.perf_counter() - t0
        print(f"detection pass: {detect_s:.2f} s, {len(new)} changes stored, "
              f"{Probe.objects.count():,} probes")

        found = set(HistogramChange.objects.values_list("probe__name", "build_id"))
        hits = sum((p, b) in found for p, b in planted.items())
        print(f"  planted lasting shifts found at their first build: {hits}/{len(planted)}; "
              f"other reports: {len(found) - hits}")

        series = histogram_analysis.load_series(Probe.objects.values_list("pk", flat=True))
        counts = np.stack([s.counts for s in series])
        t0 = time.perf_counter()
        detect_changes_adaptive(counts)
        print(f"  of which the statistics (one vectorised call, {counts.shape}): "
              f"{time.perf_counter() - t0:.2f} s")
        t0 = time.perf_counter()
        again = histogram_analysis.detect()
        print(f"second pass (nothing new to store): {time.perf_counter() - t0:.2f} s, "
              f"{len(again)} new; {HistogramChange.objects.count()} changes in all")
        print(f"ingest_per_s={n / ingest_s:.0f} detect_s={detect_s:.2f}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
