"""Benchmark of the stored analysis and the pages on a large PostgreSQL series.

Run from the project root (PostgreSQL on 127.0.0.1:5432, trust auth)::

    python -m tests.benchmarks.pages [--releases 100] [--functions 2000] [--runs 20]
                                     [--database deviations_bench] [--seed 20261122]
                                     [--pages-only] [--reuse] [--synthetic] [--fill-only]
                                     [--metrics self,total] [--runtimes-releases 3]

Issue 24's scale case is ``--synthetic --releases 2000 --functions 20000 --runs 10``
(targets: each page <= 200 ms on the server, the matrix JSON of a page of 100 functions
<= 2 MB, the first Plotly draw of the matrix <= 1 s in Chromium); ``--reuse`` keeps the
database if this benchmark filled it before (whatever its sizes), ``--fill-only`` stops
after filling.

It recreates the database ``--database`` and migrates it. Then either

- (default) it fills it directly (bulk inserts of Series, Release, Function, Run and
  RunTimes rows; no traces are parsed) with one series of ``--releases`` releases ×
  ``--functions`` functions × ``--runs`` runs: lognormal per-function levels and run-to-run
  noise, a coarse clock for the shortest functions (ties), functions missing from some
  runs, and planted steps (lasting ×1.6 regressions and improvements, and digressions that
  come back), and analyses it; or
- (``--synthetic``, ``StoredFiller``) it writes the stored analysis itself (summary row and
  every block, split by ``store.BLOCK_ROWS``, in the layout ``traces.store`` writes) from
  synthetic levels, steps and noise whose verdicts follow their intervals, with Release,
  Run and Function rows, and RunTimes for the newest ``--runtimes-releases`` releases
  (what the release, compare and ``?runs=1`` pages read): 2,000 × 20,000 in ~5 minutes
  and ~16 GB, where analysing 400 million run values would take hours. Implies
  ``--pages-only``.

Then it measures:

- ``full_s``: ``analyse --full`` (every matrix recomputed from every run), median of 3;
- ``incremental_s``: a release arrives at the end with its runs, then the analysis a
  task would run (incremental), median of 3 (alternating with the full recomputes);
  ``incremental_vs_full`` = the ratio (target <= 0.05); ``insert_s``: the same for a
  release inserted in the middle of the series; ``incremental_cold_s``: one more release
  analysed by a process that does not remember what it stored last (another worker);
- ``--pages-only`` skips the three items above (only the first analysis is made);
- server time of each page (django.test.Client in-process, median of ``--repeat``
  requests after two warm-up requests), first with the page cache off (every request
  reads the stored blocks: what the first request after a new analysis pays, "uncached"),
  then on ("warm"), side by side in one run: home ``/``, the matrix ``/series/<name>/`` and
  its JSON ``matrix.json`` (with its size), a function page in the middle of the matrix
  and the same with ``?runs=1``, the newest release's page, and the newest two releases
  compared; printed as a table against the targets, with the load average;
- ``matrix_render_ms``: ``manage.py runserver --noreload`` on a free loopback port, then
  Debian's Chromium (Playwright, ``/usr/bin/chromium``) opens the page in a new tab with
  its cache emptied (HTTP and code cache: a first visit); the time from navigation until
  ``#matrix`` holds Plotly's ``.main-svg`` or carries ``data-rendered="true"`` (median of
  three). Printed beside it, the same in a new browser context each time (the measure
  before session 12, slower by the browser UI a new context loads: ``render_time``).
  Without ``node_modules/`` the full plotly bundle is served (4.8 MB instead of 1.2 MB):
  run ``npm ci`` first.

The last line printed is
``matrix_page_ms=<x> incremental_s=<y> incremental_vs_full=<z> matrix_render_ms=<w>``
(without ``--synthetic``), and always a line of the matrix's figures
``matrix_html_ms=… matrix_json_ms=… matrix_html_uncached_ms=… matrix_json_uncached_ms=…
matrix_json_bytes=…``.
"""

from __future__ import annotations

import argparse
import hashlib
import http.client
import os
import secrets
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

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


class StoredFiller:
    """Writes a stored analysis directly (``--synthetic``): the Release, Run and Function
    rows, a summary row and every ``AnalysisBlock`` in the layout ``traces.store`` writes
    (split by ``store.BLOCK_ROWS``, binary COPY), from synthetic per-function levels,
    steps and noise: no run is analysed, so 2,000 releases × 20,000 functions fill in
    minutes instead of days. Verdicts follow the intervals (a regression or improvement
    where they do not overlap), so matrices and their JSON have realistic contents.
    ``RunTimes`` are written for the newest ``runtimes_releases`` releases only (the
    release, compare and ``?runs=1`` pages read runs there).
    """

    def __init__(self, functions: int, releases: int, runs: int, seed: int,
                 metrics: tuple[str, ...], name: str = SERIES) -> None:
        from deviations.traces.models import Function, Series

        self.rng = np.random.default_rng(seed)
        self.F, self.R, self.runs, self.metrics = functions, releases, runs, metrics
        self.series = Series.objects.create(name=name)
        names = [f"Blink.Function{k:05d}::Run" for k in range(functions)]
        Function.objects.bulk_create(
            [Function(series=self.series, name=n, name_sha1=Function.digest(n)) for n in names],
            batch_size=2000,
        )
        self.fids = np.array(Function.objects.filter(series=self.series).order_by("id")
                             .values_list("id", flat=True), dtype=np.int64)
        self.level = self.rng.lognormal(np.log(200), 1.5, functions)
        self.noise = self.rng.uniform(0.01, 0.08, functions)
        # Lasting steps: about one function in 50 changes level somewhere in the history;
        # digressions: one in ten goes ×1.6 for five releases, then back.
        steps = [
            (int(self.rng.integers(1, releases)), int(f), float(self.rng.choice([1.6, 1 / 1.6])))
            for f in self.rng.choice(functions, functions // 50, replace=False)
        ]
        for f in self.rng.choice(functions, max(1, functions // 10), replace=False):
            at = int(self.rng.integers(1, max(2, releases - 6)))
            steps += [(at, int(f), 1.6), (at + 5, int(f), 1 / 1.6)]
        self.steps = sorted(steps)

    def fill(self, runtimes_releases: int) -> None:
        from django.db import connection
        from django.utils import timezone

        from deviations.core import versions as version_keys
        from deviations.traces import analysis, store
        from deviations.traces.models import Release, Run, RunTimes, SeriesAnalysis

        now = timezone.now()
        made = [
            Release(series=self.series, version=f"1.{k}", order=10 * k,
                    sort_key=version_keys.sort_key(f"1.{k}", 10 * k))
            for k in range(self.R)
        ]
        Release.objects.bulk_create(made, batch_size=1000)
        release_ids = np.array(Release.objects.filter(series=self.series)
                               .order_by("sort_key", "id").values_list("id", flat=True))
        runs = [Run(series=self.series, release_id=int(rid), file_name=f"r{rid}-{j}.json",
                    sha256=hashlib.sha256(f"{rid}-{j}".encode()).hexdigest(), size_bytes=1,
                    status=Run.DONE, started=now, finished=now)
                for rid in release_ids for j in range(self.runs)]
        Run.objects.bulk_create(runs, batch_size=2000)
        run_ids = np.array(Run.objects.filter(series=self.series).order_by("release_id", "id")
                           .values_list("id", flat=True), dtype=np.int64)
        per_release = tuple(np.split(run_ids, self.R))
        # Rows sorted by release order: release ids were made in that order.
        level = self.level.copy()
        steps = list(self.steps)
        previous: dict[str, np.ndarray] | None = None
        start = time.perf_counter()
        for c, rid in enumerate(release_ids.tolist()):
            while steps and steps[0][0] == c:
                _, f, factor = steps.pop(0)
                level[f] *= factor
            column = self._column(level, c, previous)
            store._copy(store.AnalysisBlock, store._BLOCK_COLUMNS,
                        self._blocks(rid, c, column, previous))
            previous = column
            if c in (self.R - 1,) or (c + 1) % 200 == 0:
                print(f"  blocks of {c + 1} releases written "
                      f"({time.perf_counter() - start:.0f} s)", flush=True)
        for rid, ids in zip(release_ids[-runtimes_releases:].tolist(),
                            per_release[-runtimes_releases:], strict=True):
            times = []
            for run_id in ids.tolist():
                self_us = self.level * self.rng.lognormal(0.0, self.noise)
                times.append(RunTimes.pack(Run(pk=run_id, release_id=rid), self.fids, self_us,
                                           self_us * 1.3, np.ones(self.F, dtype=np.int64)))
            RunTimes.objects.bulk_create(times, batch_size=10)
        store._copy(SeriesAnalysis, store._SUMMARY_COLUMNS, [[
            self.series.pk, secrets.randbits(62), release_ids.astype("<i8").tobytes(),
            self.fids.astype("<i8").tobytes(), run_ids.astype("<i8").tobytes(),
            np.full(self.R, self.runs, dtype="<i8").tobytes(),
            analysis.PARAMS.astype("<f8").tobytes(), timezone.now(),
        ]])
        # Planner statistics, as autovacuum gathers them in a running deployment: freshly
        # filled, the blocks' table had none, and PostgreSQL filtered a window's releases
        # out of every block of the series (29 ms instead of 3 ms for 580 blocks).
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")

    def _column(self, level: np.ndarray, c: int, previous: dict[str, np.ndarray] | None
                ) -> dict[str, np.ndarray]:
        """Every block field of one release (whole column, every metric's shape alike)."""
        from deviations.stats.releases import (
            IMPROVEMENT,
            NONSIGNIFICANT_OVERLAP,
            REGRESSION,
            SIGNIFICANT_OVERLAP,
        )

        F, rng = self.F, self.rng  # noqa: N806
        estimate = level * rng.lognormal(0.0, self.noise / 3, F)
        half = estimate * self.noise * rng.uniform(0.5, 1.0, F)
        col: dict[str, np.ndarray] = {
            "estimate": estimate, "lo": estimate - half, "hi": estimate + half,
            "order_lo": estimate - 1.2 * half, "order_hi": estimate + 1.2 * half,
            "n": np.full(F, self.runs, dtype=np.int64),
        }
        if previous is None:
            return col
        diff = estimate - previous["estimate"]
        gap = np.maximum(col["lo"] - previous["hi"], previous["lo"] - col["hi"])
        verdict = np.where(gap > 0, np.where(diff > 0, REGRESSION, IMPROVEMENT),
                           np.where(rng.random(F) < 0.3, SIGNIFICANT_OVERLAP,
                                    NONSIGNIFICANT_OVERLAP)).astype(np.int8)
        p = np.where(gap > 0, rng.uniform(0, 0.01, F), rng.uniform(0.01, 1, F))
        width = half + previous["hi"] - previous["estimate"]
        reach = np.int32(min(c - 1, 4))
        col |= {
            "gap": gap, "diff": diff, "diff_lo": diff - width, "diff_hi": diff + width,
            "paper_p": p, "paper_verdict": verdict, "shift_verdict": verdict,
            "shift_diff": diff, "shift_lo": diff - width, "shift_hi": diff + width,
            "shift_p": p, "shift_before": previous["estimate"],
            "shift_reach_before": np.full(F, reach, dtype=np.int32),
            "shift_reach_after": np.full(F, min(self.R - 1 - c, 4), dtype=np.int32),
            "shift_n_before": np.full(F, self.runs * (reach + 1), dtype=np.int32),
            "shift_n_after": np.full(F, self.runs * (min(self.R - 1 - c, 4) + 1),
                                     dtype=np.int32),
            "shift_flags": np.where(gap > 0, 1, 0).astype(np.uint8),
        }
        return col

    def _blocks(self, release_id: int, c: int, column: dict[str, np.ndarray],
                previous: dict[str, np.ndarray] | None) -> Iterator[list[Any]]:
        """The block rows of one release, with the deviation records and the median
        blocks' row records ``traces.store`` writes (the paper rule's ``before``: the
        previous release's estimate)."""
        from deviations.traces import store

        encoded = {k: np.ascontiguousarray(v, store.DTYPES[k]) for k, v in column.items()}
        for metric in self.metrics:
            for estimator in store.ESTIMATORS:
                for start in range(0, self.F, store.BLOCK_ROWS):
                    stop = min(start + store.BLOCK_ROWS, self.F)
                    row: list[Any] = [self.series.pk, release_id, metric, estimator, start,
                                      stop - start, 0]  # stage 0: published
                    for field in store.BLOCK_FIELDS:
                        empty = (store.per_pair(field) and c == 0) or (
                            field in store.SHIFT_FIELDS and estimator != store.ESTIMATORS[0])
                        row.append(b"" if empty else encoded[field][start:stop].tobytes())
                    rows = slice(start, stop)
                    if previous is None:
                        row += [b"", b""]
                    else:
                        row.append(store.deviation_entries(
                            column["paper_verdict"][rows], column["diff"][rows],
                            previous["estimate"][rows]))
                        row.append(store.deviation_entries(
                            column["shift_verdict"][rows], column["shift_diff"][rows],
                            column["shift_before"][rows]) if estimator == store.ESTIMATORS[0]
                            else b"")
                    # The median blocks' row-major records of the default view's fields.
                    row.append(store.records(
                        {k: None if store.per_pair(k) and c == 0 else encoded[k][rows]
                         for k in store.RECORD_FIELDS}, stop - start)
                        if estimator == store.ESTIMATORS[0] else None)
                    yield row


def timed(fn, *args, **kwargs):  # type: ignore[no-untyped-def]
    start = time.perf_counter()
    result = fn(*args, **kwargs)
    return time.perf_counter() - start, result


def page_urls() -> dict[str, str]:
    """The pages issue 24 times, on the benchmark's series: a function in the middle of the
    matrix, the newest release, and the newest two compared."""
    from deviations.traces.models import Function, Release

    versions = list(Release.objects.filter(series__name=SERIES).order_by("-sort_key", "-id")
                    .values_list("version", flat=True)[:2])
    functions = Function.objects.filter(series__name=SERIES).order_by("id")
    fid = functions.values_list("id", flat=True)[functions.count() // 2]
    base = f"/series/{SERIES}"
    return {
        "home": "/",
        "matrix_html": f"{base}/",
        "matrix_json": f"{base}/matrix.json",
        "function": f"{base}/functions/{fid}/",
        "function_runs": f"{base}/functions/{fid}/?runs=1",
        "release": f"{base}/releases/{versions[0]}/",
        "compare": f"{base}/compare/?base={versions[1]}&new={versions[0]}",
    }


def page_times(repeat: int) -> dict[str, tuple[float, float, int]]:
    """Per page: median server time (ms) with the page cache off (every request reads the
    stored blocks: a new analysis' first request) and on (the default, warm), side by side
    in one run, and the response's size in bytes."""
    from django.test import override_settings

    from deviations.core import memo

    urls = page_urls()
    with override_settings(DEVIATIONS_PAGE_CACHE_MB=0):
        memo.forget()
        print("  page cache off:")
        off = _page_times(urls, repeat)
    print("  page cache on:")
    on = _page_times(urls, repeat)
    return {k: (off[k][0], on[k][0], on[k][1]) for k in urls}


def _page_times(urls: dict[str, str], repeat: int) -> dict[str, tuple[float, int]]:
    from django.test import Client

    client = Client(HTTP_HOST="127.0.0.1")
    out = {}
    for name, url in urls.items():
        for _ in range(2):
            response = client.get(url)
            if response.status_code != 200:
                raise RuntimeError(f"GET {url}: HTTP {response.status_code}")
        samples = []
        for _ in range(repeat):
            elapsed, response = timed(client.get, url)
            assert response.status_code == 200
            samples.append(elapsed * 1000)
        out[name] = (statistics.median(samples), len(response.content))
        print(f"  GET {url}: {len(response.content):,} bytes, median of {repeat} "
              f"{out[name][0]:.0f} ms (min {min(samples):.0f}, max {max(samples):.0f})",
              flush=True)
    return out


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


def render_time(database: str, repeat: int, query: str = "") -> float:
    """Median ms from navigation until the matrix is drawn in headless Chromium (the matrix
    page with the query string ``query``), as a visitor with an empty cache sees it: each
    sample opens a new tab of a running browser after clearing its HTTP cache (which holds
    V8's code cache too): the page, the bundle and its compilation are all cold.

    Also printed, not returned: each sample in a new browser context, as this benchmark
    measured before session 12. On this 2-core machine every new context opens a window
    whose Chromium UI (the omnibox popup, a "WebUI Top Renderer" process) loads its own
    scripts during the measured navigation: ~0.5-1 s of CPU beside the page's, which
    a browser already open does not spend per page (seen in a Chromium trace).
    """
    from playwright.sync_api import sync_playwright

    port = free_port()
    env = dict(os.environ, DATABASE_URL=PG.format(database))
    server = subprocess.Popen(
        [sys.executable, "manage.py", "runserver", "--noreload", f"127.0.0.1:{port}"],
        cwd=PROJECT_ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )
    url = f"http://127.0.0.1:{port}/series/{SERIES}/" + (f"?{query}" if query else "")
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
            context = browser.new_context()
            cdp = context.new_cdp_session(context.new_page())

            def new_tab() -> Any:
                cdp.send("Network.clearBrowserCache")
                return context.new_page()

            def new_context() -> Any:
                return browser.new_context().new_page()

            samples: dict[str, list[float]] = {"new tab": [], "new context": []}
            # The first of each warms the server's static files; the two ways alternate.
            for _ in range(repeat + 1):
                for way, opened in (("new tab", new_tab), ("new context", new_context)):
                    page = opened()
                    start = time.perf_counter()
                    page.goto(url, wait_until="commit")
                    page.wait_for_selector(
                        "#matrix .main-svg, #matrix[data-rendered='true']", state="attached",
                        timeout=60_000,
                    )
                    samples[way].append((time.perf_counter() - start) * 1000)
                    if way == "new tab":
                        page.close()
                    else:
                        page.context.close()
            context.close()
            browser.close()
        for way, values in samples.items():
            print(f"  render ({way}, empty cache): {', '.join(f'{s:.0f}' for s in values[1:])}"
                  f" ms, median {statistics.median(values[1:]):.0f} (warm-up {values[0]:.0f})")
        return statistics.median(samples["new tab"][1:])
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
    parser.add_argument("--synthetic", action="store_true",
                        help="write the stored analysis directly (no runs analysed): the "
                             "issue's 2,000 × 20,000 in minutes; implies --pages-only")
    parser.add_argument("--metrics", default="self,total",
                        help="with --synthetic: the metrics whose blocks are written")
    parser.add_argument("--runtimes-releases", type=int, default=3,
                        help="with --synthetic: the newest releases given run times")
    parser.add_argument("--fill-only", action="store_true",
                        help="fill the database and stop (measure later with --reuse)")
    parser.add_argument("--render-only", default=None, metavar="QUERY",
                        help="with --reuse: only the drawing time of the matrix page with "
                             "this query string ('' for the default page)")
    args = parser.parse_args()

    os.chdir(PROJECT_ROOT)
    if args.reuse and filled(args.database):
        setup_django(args.database)
        print(f"reusing the database {args.database}")
        if args.render_only is not None:
            load = " ".join(f"{x:.2f}" for x in os.getloadavg())
            ms = render_time(args.database, args.repeat, args.render_only)
            print(f"matrix_render_ms={ms:.0f} (?{args.render_only}; load average {load})")
            return
        pages(args)
        return
    recreate_database(args.database)
    setup_django(args.database)
    from django.core.management import call_command

    from deviations.traces import analysis
    from deviations.traces.analysis import analyse_series

    call_command("migrate", verbosity=0)
    start = time.perf_counter()
    if args.synthetic:
        stored = StoredFiller(args.functions, args.releases, args.runs, args.seed,
                              tuple(args.metrics.split(",")))
        stored.fill(args.runtimes_releases)
        print(f"filled (stored analysis written directly) {args.releases} releases × "
              f"{args.functions} functions × {args.runs} runs in "
              f"{time.perf_counter() - start:.1f} s")
        if not args.fill_only:
            pages(args)
        return
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


#: Issue 24's targets: server time of each page (ms), the matrix JSON of a page of 100
#: functions (bytes), the first Plotly draw of the matrix in Chromium (ms).
PAGE_MS, JSON_BYTES, DRAW_MS = 200, 2_000_000, 1000


def pages(args: argparse.Namespace) -> tuple[str, str]:
    """Every page's server times and the matrix's drawing time, printed as a table with the
    targets; returns the matrix page's (HTML + JSON, warm) and drawing figures."""
    times: dict[str, tuple[float, float, int]] = {}
    try:
        times = page_times(args.repeat)
    except Exception as exc:  # the figures that could be measured are still printed
        print(f"pages not measured: {type(exc).__name__}: {exc}")
    try:
        render = render_time(args.database, 3)
        render_ms = f"{render:.0f}"
    except Exception as exc:
        print(f"matrix render not measured: {type(exc).__name__}: {exc}")
        render, render_ms = float("nan"), "n/a"
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"\npage            uncached_ms  warm_ms       bytes  target (load average {load})")
    for name, (off, on, size) in times.items():
        met = "met" if max(off, on) <= PAGE_MS else (
            "warm met, uncached not" if on <= PAGE_MS else "NOT met")
        extra = ""
        if name == "matrix_json":
            extra = (f"; JSON <= {JSON_BYTES:,} bytes: "
                     f"{'met' if size <= JSON_BYTES else 'NOT met'}")
        print(f"{name:<15} {off:>11.0f} {on:>8.0f} {size:>11,}  <= {PAGE_MS} ms: {met}{extra}")
    print(f"matrix_render_ms={render_ms}  <= {DRAW_MS} ms: "
          f"{'met' if render <= DRAW_MS else 'NOT met'}")
    if "matrix_html" not in times:
        return "n/a", render_ms
    print(f"matrix_html_ms={times['matrix_html'][1]:.0f} "
          f"matrix_json_ms={times['matrix_json'][1]:.0f} "
          f"matrix_html_uncached_ms={times['matrix_html'][0]:.0f} "
          f"matrix_json_uncached_ms={times['matrix_json'][0]:.0f} "
          f"matrix_json_bytes={times['matrix_json'][2]}")
    return f"{times['matrix_html'][1] + times['matrix_json'][1]:.0f}", render_ms


if __name__ == "__main__":
    main()
