"""Benchmark of the stored analysis and the matrix page on a large PostgreSQL series.

Run from the project root (PostgreSQL on 127.0.0.1:5432, trust auth)::

    python -m tests.benchmarks.pages [--releases 100] [--functions 2000] [--runs 20]
                                     [--database deviations_bench] [--seed 20261122]
                                     [--pages-only] [--reuse]

The issue's scale case is ``--releases 300 --functions 5000 --pages-only`` (matrix page
target: <= 80 ms HTML and <= 100 ms JSON); ``--reuse`` keeps the database if this benchmark
filled it before (whatever its sizes: filling 300 × 5,000 takes minutes).

It recreates the database ``--database``, migrates it and fills it directly (bulk inserts
of Series, Release, Function, Run and RunTimes rows; no traces are parsed) with one series
of ``--releases`` releases × ``--functions`` functions × ``--runs`` runs: lognormal
per-function levels and run-to-run noise, a coarse clock for the shortest functions
(ties), functions missing from some runs, and planted steps (lasting ×1.6 regressions and
improvements, and digressions that come back). Then it measures:

- ``full_s``: ``analyse --full`` (every matrix recomputed from every run), median of 3;
- ``incremental_s``: a release arrives at the end with its runs, then the analysis a
  task would run (incremental), median of 3 (alternating with the full recomputes);
  ``incremental_vs_full`` = the ratio (target <= 0.05); ``insert_s``: the same for a
  release inserted in the middle of the series; ``incremental_cold_s``: one more release
  analysed by a process that does not remember what it stored last (another worker);
- ``--pages-only`` skips the three items above (only the first analysis is made);
- ``matrix_page_ms``: warm server time of ``GET /series/<name>/`` plus that of its JSON
  ``/series/<name>/matrix.json`` (django.test.Client in-process, median of several
  requests each, after two warm-up requests; target <= 300), printed as
  ``matrix_html_ms`` and ``matrix_json_ms``, after the same with the page cache off
  (``matrix_html_uncached_ms``, ``matrix_json_uncached_ms``: what the first request after
  a new analysis pays);
- ``matrix_render_ms``: ``manage.py runserver --noreload`` on a free loopback port, then
  Debian's Chromium (Playwright, ``/usr/bin/chromium``) opens the page in a fresh context
  (empty cache); the time from navigation until ``#matrix`` holds Plotly's ``.main-svg``
  or carries ``data-rendered="true"`` (median of three; target <= 2,000).

The last line printed is
``matrix_page_ms=<x> incremental_s=<y> incremental_vs_full=<z> matrix_render_ms=<w>``.
"""

from __future__ import annotations

import argparse
import hashlib
import http.client
import os
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np

PROJECT_ROOT = Path(__file__).resolve().parents[2]
SERIES = "bench.matrix-load"
REPEATS = 3  # full recomputes and new releases measured (medians)
PG = "postgres://postgres@127.0.0.1:5432/{}"


def recreate_database(name: str) -> None:
    import psycopg

    with psycopg.connect(PG.format("postgres"), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')


def setup_django(name: str) -> None:
    os.environ["DATABASE_URL"] = PG.format(name)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "deviations.settings")
    import django

    django.setup()


class Filler:
    """Bulk inserts of one synthetic series; ``add_release`` writes one release's runs."""

    def __init__(self, functions: int, runs: int, releases: int, seed: int) -> None:
        from deviations.traces.models import Function, Series

        self.rng = np.random.default_rng(seed)
        self.runs = runs
        self.made = 0
        self.series = Series.objects.create(name=SERIES)
        names = [f"Blink.Function{k:04d}::Run" for k in range(functions)]
        Function.objects.bulk_create(
            [Function(series=self.series, name=n, name_sha1=Function.digest(n)) for n in names],
            batch_size=1000,
        )
        self.fids = np.array(
            Function.objects.filter(series=self.series).order_by("id").values_list("id", flat=True)
        )
        # Per-function level (µs) and noise; a tenth of the functions are rarely called.
        self.level = self.rng.lognormal(np.log(200), 1.5, functions)
        self.noise = self.rng.uniform(0.03, 0.15, functions)
        self.rare = self.rng.random(functions) < 0.1
        self.step = np.ones((functions, releases + REPEATS + 2))
        for f in self.rng.choice(functions, min(60, functions), replace=False):  # lasting steps
            at = int(self.rng.integers(1, releases))
            self.step[f, at:] *= self.rng.choice([1.6, 1 / 1.6])
        for f in self.rng.choice(functions, min(20, functions), replace=False):  # digressions
            at = int(self.rng.integers(1, max(2, releases - 10)))
            self.step[f, at : at + 8] *= 1.6

    def add_release(self, version: str, order: int, position: int) -> int:
        from django.utils import timezone

        from deviations.traces.models import Release, Run, RunTimes

        release = Release.objects.create(series=self.series, version=version, order=order)
        now = timezone.now()
        runs = []
        for _ in range(self.runs):
            self.made += 1
            runs.append(Run(
                series=self.series, release=release, file_name=f"{version}-{self.made}.json",
                sha256=hashlib.sha256(str(self.made).encode()).hexdigest(), size_bytes=1,
                status=Run.DONE, started=now, finished=now,
            ))
        Run.objects.bulk_create(runs)
        times = []
        for run in runs:
            present = ~self.rare | (self.rng.random(len(self.fids)) < 0.5)
            self_us = self.level * self.step[:, position] * self.rng.lognormal(
                0.0, self.noise
            )
            self_us = np.where(self_us < 20, np.round(self_us), self_us)  # coarse clock: ties
            total_us = self_us * (1.0 + self.rng.lognormal(-1.0, 0.5, len(self.fids)))
            calls = self.rng.integers(1, 50, len(self.fids))
            times.append(RunTimes.pack(run, self.fids[present], self_us[present],
                                       total_us[present], calls[present]))
        RunTimes.objects.bulk_create(times, batch_size=20)
        return release.pk


def timed(fn, *args, **kwargs):  # type: ignore[no-untyped-def]
    start = time.perf_counter()
    result = fn(*args, **kwargs)
    return time.perf_counter() - start, result


def page_times(repeat: int) -> tuple[float, float]:
    """Median warm server time (ms) of the matrix page and of its JSON, first with the
    page cache off (every request reads the stored blocks: a new analysis' first request),
    then on (the default), side by side in one run."""
    from django.test import override_settings

    from deviations.core import memo

    with override_settings(DEVIATIONS_PAGE_CACHE_MB=0):
        memo.forget()
        print("  page cache off:")
        off = _page_times(repeat)
    print("  page cache on:")
    on = _page_times(repeat)
    print(f"matrix_html_uncached_ms={off[0]:.0f} matrix_json_uncached_ms={off[1]:.0f}")
    return on


def _page_times(repeat: int) -> tuple[float, float]:
    from django.test import Client

    client = Client(HTTP_HOST="127.0.0.1")
    out = []
    for url in (f"/series/{SERIES}/", f"/series/{SERIES}/matrix.json"):
        for _ in range(2):
            response = client.get(url)
            if response.status_code != 200:
                raise RuntimeError(f"GET {url}: HTTP {response.status_code}")
        samples = []
        for _ in range(repeat):
            elapsed, response = timed(client.get, url)
            assert response.status_code == 200
            samples.append(elapsed * 1000)
        out.append(statistics.median(samples))
        print(f"  GET {url}: {len(response.content):,} bytes, median of {repeat} "
              f"{out[-1]:.0f} ms (min {min(samples):.0f}, max {max(samples):.0f})")
    return out[0], out[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for(port: int, proc: subprocess.Popen[bytes], path: str) -> None:
    """Until ``GET path`` on the server at ``port`` answers 200 (2 minutes at most, or the
    server process exits)."""
    deadline = time.monotonic() + 120
    while True:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            conn.request("GET", path)
            if conn.getresponse().status == 200:
                return
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError("gunicorn did not answer")
        time.sleep(0.5)


def render_time(database: str, repeat: int) -> float:
    """Median ms from navigation until the matrix is drawn in headless Chromium."""
    from playwright.sync_api import sync_playwright

    port = free_port()
    env = dict(os.environ, DATABASE_URL=PG.format(database))
    server = subprocess.Popen(
        [sys.executable, "manage.py", "runserver", "--noreload", f"127.0.0.1:{port}"],
        cwd=PROJECT_ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )
    url = f"http://127.0.0.1:{port}/series/{SERIES}/"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(url, timeout=30) as response:  # noqa: S310
                    response.read()  # warms the server as well
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("runserver did not answer") from None
                time.sleep(0.2)
        with sync_playwright() as p:
            browser = p.chromium.launch(
                executable_path="/usr/bin/chromium",
                args=["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                      "--disable-component-update", "--disable-sync"],
            )
            samples = []
            for _ in range(repeat + 1):  # the first one warms the server's static files
                context = browser.new_context()
                page = context.new_page()
                start = time.perf_counter()
                page.goto(url, wait_until="commit")
                page.wait_for_selector(
                    "#matrix .main-svg, #matrix[data-rendered='true']", state="attached",
                    timeout=60_000,
                )
                samples.append((time.perf_counter() - start) * 1000)
                context.close()
            browser.close()
        print(f"  render: {', '.join(f'{s:.0f}' for s in samples[1:])} ms "
              f"(warm-up {samples[0]:.0f} ms)")
        return statistics.median(samples[1:])
    finally:
        server.terminate()
        server.wait(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--releases", type=int, default=100)
    parser.add_argument("--functions", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--database", default="deviations_bench")
    parser.add_argument("--seed", type=int, default=20261122)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--pages-only", action="store_true",
                        help="measure only the matrix page (and its drawing)")
    parser.add_argument("--reuse", action="store_true",
                        help="keep the database if this benchmark filled it before")
    args = parser.parse_args()

    os.chdir(PROJECT_ROOT)
    if args.reuse and filled(args.database):
        setup_django(args.database)
        print(f"reusing the database {args.database}")
        pages(args)
        return
    recreate_database(args.database)
    setup_django(args.database)
    from django.core.management import call_command

    from deviations.traces import analysis
    from deviations.traces.analysis import analyse_series

    call_command("migrate", verbosity=0)
    start = time.perf_counter()
    filler = Filler(args.functions, args.runs, args.releases, args.seed)
    for k in range(args.releases):
        filler.add_release(f"1.{k}", order=10 * k, position=k)
    print(f"filled {args.releases} releases × {args.functions} functions × {args.runs} runs "
          f"in {time.perf_counter() - start:.1f} s")
    series = filler.series

    first_s, message = timed(analyse_series, series.pk)
    print(f"first analysis: {first_s:.2f} s ({message})")
    if args.pages_only:
        pages(args)
        return
    # Full recomputes and appended releases alternate, so both see the same machine.
    fulls, updates = [], []
    for k in range(args.releases, args.releases + REPEATS):
        elapsed, message = timed(analyse_series, series.pk, force=True)
        fulls.append(elapsed)
        print(f"  full: {elapsed:.2f} s ({message})")
        filler.add_release(f"1.{k}", order=10 * k, position=k)
        elapsed, message = timed(analyse_series, series.pk)
        updates.append(elapsed)
        print(f"  one new release: {elapsed:.3f} s ({message})")
    full_s, incremental_s = statistics.median(fulls), statistics.median(updates)
    print(f"full_s={full_s:.2f} incremental_s={incremental_s:.3f} (medians of {REPEATS})")
    ratio = incremental_s / full_s
    print(f"incremental_vs_full={ratio:.4f}")

    middle = args.releases // 2
    filler.add_release(f"1.{middle}.5", order=10 * middle + 5, position=middle)
    insert_s, message = timed(analyse_series, series.pk)
    print(f"insert_s={insert_s:.3f} ({message})")
    # Another worker: what this process stored last is forgotten and read back.
    k = args.releases + REPEATS
    filler.add_release(f"1.{k}", order=10 * k, position=k)
    analysis._last.clear()
    cold_s, message = timed(analyse_series, series.pk)
    print(f"incremental_cold_s={cold_s:.3f} ({message}; stored analysis read back)")
    up_to_date_s, message = timed(analyse_series, series.pk)
    print(f"again_s={up_to_date_s:.3f} ({message})")
    page_ms, render_ms = pages(args)
    print(f"matrix_page_ms={page_ms} incremental_s={incremental_s:.3f} "
          f"incremental_vs_full={ratio:.4f} matrix_render_ms={render_ms}")


def filled(database: str) -> bool:
    """Whether ``database`` exists and holds this benchmark's analysed series."""
    import psycopg

    try:
        with psycopg.connect(PG.format(database)) as conn:
            found = conn.execute(
                "SELECT count(*) FROM deviations_seriesanalysis a "
                "JOIN deviations_series s ON s.id = a.series_id WHERE s.name = %s", [SERIES]
            ).fetchone()
    except psycopg.Error:
        return False
    return bool(found and found[0])


def pages(args: argparse.Namespace) -> tuple[str, str]:
    """The matrix page's server times and its drawing time, as printed figures."""
    try:
        html_ms, json_ms = page_times(args.repeat)
        page_ms = f"{html_ms + json_ms:.0f}"
        print(f"matrix_html_ms={html_ms:.0f} matrix_json_ms={json_ms:.0f}")
    except Exception as exc:  # the figures that could be measured are still printed
        print(f"matrix page not measured: {type(exc).__name__}: {exc}")
        page_ms = "n/a"
    try:
        render_ms = f"{render_time(args.database, 3):.0f}"
    except Exception as exc:
        print(f"matrix render not measured: {type(exc).__name__}: {exc}")
        render_ms = "n/a"
    return page_ms, render_ms


if __name__ == "__main__":
    main()
