"""CPU time of one matrix page request and of one trace upload, in-process (issue 10's load).

The load benchmark (``tests.benchmarks.load``) measures latency under load, which on a
shared machine mostly measures the other jobs. This one measures what a request costs the
process that serves it: ``time.process_time`` around ``django.test.Client`` requests
(PostgreSQL's own CPU is not counted), and the number of queries. Run from the project root::

    python -m tests.benchmarks.cpu [--database h10] [--pages 40] [--uploads 40]
                                   [--releases 100] [--functions 2000] [--runs 20]
                                   [--profile page|upload] [--reuse]

It recreates ``--database`` (PostgreSQL, or ``--database sqlite`` for a temporary SQLite
file), fills the load benchmark's series (``tests.benchmarks.pages.Filler``), analyses it,
then:

- ``page_cpu_ms``: ``GET /series/<name>/`` (warm: the page cache holds the analysis),
  median CPU ms of ``--pages`` requests, alternating an anonymous and a signed-in client;
  ``page_queries``: queries per request;
- ``upload_cpu_ms``: ``POST /api/series/load.uploads/releases/1.<u>/runs`` of a trace of
  ``--functions`` functions, round robin over 10 releases as the load benchmark's
  uploaders do, with tasks in-process (no broker): the request, the ingest, the analysis
  of the small series and its alerts, i.e. what one upload costs in all; mean CPU ms of
  the uploads after the first round (the releases have runs to compare by then).

``--profile`` prints the 25 most expensive functions (cumulative) of the page requests or
of the uploads.
"""

from __future__ import annotations

import argparse
import atexit
import cProfile
import os
import pstats
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from tests.benchmarks.pages import PG, PROJECT_ROOT, SERIES, recreate_database


def setup(database: str, reuse: bool) -> None:
    os.chdir(PROJECT_ROOT)
    for name in ("CELERY_BROKER_URL",):
        os.environ.pop(name, None)
    tmp = Path(tempfile.mkdtemp(prefix="cpu-bench-"))
    atexit.register(shutil.rmtree, tmp, ignore_errors=True)
    os.environ["DJANGO_MEDIA_ROOT"] = str(tmp / "m")
    if database == "sqlite":
        os.environ["DATABASE_URL"] = f"sqlite:///{tmp / 'db.sqlite3'}"
    else:
        if not reuse:
            recreate_database(database)
        os.environ["DATABASE_URL"] = PG.format(database)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "deviations.settings")
    import django

    django.setup()


def fill(releases: int, functions: int, runs: int) -> None:
    from django.core.management import call_command

    from deviations.traces.analysis import analyse_series
    from deviations.traces.models import Series
    from tests.benchmarks.pages import Filler

    call_command("migrate", verbosity=0)
    if Series.objects.filter(name=SERIES).exists():
        return
    started = time.perf_counter()
    filler = Filler(functions, runs, releases, 20261122)
    for r in range(releases):
        filler.add_release(f"1.{r}", r, r)
    analyse_series(filler.series.pk, force=True)
    print(f"filled and analysed in {time.perf_counter() - started:.0f} s")


def measure(fn, count: int, profile: cProfile.Profile | None):  # type: ignore[no-untyped-def]
    """CPU ms and query count of each of ``count`` calls of ``fn(k)``."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    cpu, queries = [], []
    for k in range(count):
        with CaptureQueriesContext(connection) as captured:
            if profile is not None:
                profile.enable()
            start = time.process_time()
            fn(k)
            cpu.append((time.process_time() - start) * 1000)
            if profile is not None:
                profile.disable()
        queries.append(len(captured))
    return cpu, queries


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--database", default="h10")
    parser.add_argument("--pages", type=int, default=40)
    parser.add_argument("--uploads", type=int, default=40)
    parser.add_argument("--releases", type=int, default=100)
    parser.add_argument("--functions", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--profile", choices=["page", "upload"])
    parser.add_argument("--reuse", action="store_true", help="keep a database filled before")
    args = parser.parse_args()
    setup(args.database, args.reuse)
    fill(args.releases, args.functions, args.runs)

    from django.contrib.auth import get_user_model
    from django.test import Client

    from deviations.core.models import ApiToken
    from deviations.traces.models import Run
    from tests.benchmarks.load import trace

    user_model = get_user_model()
    user = user_model.objects.filter(username="cpu").first() or user_model.objects.create_user(
        "cpu", is_staff=True)
    token = ApiToken.issue(user, "cpu")[1]
    anonymous = Client(HTTP_HOST="127.0.0.1")
    signed_in = Client(HTTP_HOST="127.0.0.1")
    signed_in.force_login(user)
    url = f"/series/{SERIES}/"

    def page(k: int) -> None:
        response = (signed_in if k % 2 else anonymous).get(url)
        assert response.status_code == 200, response.status_code

    for k in range(4):  # warm-up: the page cache, the templates
        page(k)
    profile = cProfile.Profile() if args.profile == "page" else None
    cpu, queries = measure(page, args.pages, profile)
    page_cpu, page_queries = statistics.median(cpu), statistics.median(queries)
    print(f"page: {args.pages} requests, CPU median {statistics.median(cpu):.1f} ms "
          f"(min {min(cpu):.1f}, max {max(cpu):.1f}), queries {statistics.median(queries):.0f}")
    if profile is not None:
        pstats.Stats(profile).sort_stats("cumulative").print_stats(25)

    if not args.uploads:
        print(f"page_cpu_ms={page_cpu:.1f} page_queries={page_queries:.0f}")
        return
    api = Client(HTTP_HOST="127.0.0.1", HTTP_AUTHORIZATION=f"Bearer {token}")
    bodies = [trace(args.functions, 7_000_000 + k) for k in range(args.uploads)]
    seen = Run.objects.filter(series__name="load.uploads").count()

    def upload(k: int) -> None:
        from django.core.files.uploadedfile import SimpleUploadedFile

        n = seen + k
        response = api.post(f"/api/series/load.uploads/releases/1.{n % 10}/runs",
                            {"file": SimpleUploadedFile(f"u{n}.json", bodies[k],
                                                        "application/json")})
        assert response.status_code in (200, 201), response.content[:300]
        assert response.json()["status"] == "done", response.json()

    profile = cProfile.Profile() if args.profile == "upload" else None
    cpu, queries = measure(upload, args.uploads, profile)
    later = cpu[10:] or cpu
    print(f"upload: {args.uploads} uploads, CPU mean {statistics.mean(cpu):.0f} ms, "
          f"after the first round mean {statistics.mean(later):.0f} ms "
          f"(median {statistics.median(later):.0f}), queries median "
          f"{statistics.median(queries):.0f}")
    if profile is not None:
        pstats.Stats(profile).sort_stats("cumulative").print_stats(30)
    print(f"page_cpu_ms={page_cpu:.1f} page_queries={page_queries:.0f} "
          f"upload_cpu_ms={statistics.mean(later):.0f}")


if __name__ == "__main__":
    main()
