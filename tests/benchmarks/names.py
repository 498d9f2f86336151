"""Benchmark of a trace with a million distinct function names: ingest and the release page.

Run from the project root (PostgreSQL on 127.0.0.1:5432, trust auth)::

    python -m tests.benchmarks.names [--functions 1000000] [--runs 2]
                                     [--database deviations_bench_names] [--seed 20261124]

It recreates the database ``--database``, migrates it, and writes ``--runs`` synthetic
traces (a ``Renderer`` process whose ``CrRendererMain`` thread has one complete event per
function, every name distinct, lognormal durations; the runs share their names). Each run
is then ingested as a worker does (``deviations.traces.uploads.runs.process_run`` of a
registered run: parse, then store the functions and the packed times in one transaction),
timed as a whole and split into parse and store, with the CPU time of this process and of
its PostgreSQL server process (read from ``/proc``; robust to other load on the machine); then
``GET /series/<name>/releases/<version>/`` (the release page: its runs and its functions
by median self time) is timed with django.test.Client, median of three after one
warm-up. Issue 14's targets: ingest <= 20 s, release page <= 1 s (it measured 132-173 s
and 9.6 s). The last line printed is
``ingest_s=<first run> ingest_known_s=<a run whose names are known> release_page_s=<x>``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from tests.benchmarks.pages import recreate_database, setup_django

PROJECT_ROOT = Path(__file__).resolve().parents[2]
SERIES, VERSION = "bench.names", "1.0"


def write_trace(path: Path, functions: int, rng: np.random.Generator) -> None:
    """One X event per function on CrRendererMain, one after the other."""
    durations = np.maximum(1, rng.lognormal(3.0, 1.0, functions)).astype(np.int64)
    starts = np.concatenate([[0], np.cumsum(durations + 1)[:-1]])
    with path.open("w") as out:
        out.write('{"traceEvents":[{"ph":"M","name":"process_name","pid":7,"tid":0,'
                  '"args":{"name":"Renderer"}},{"ph":"M","name":"thread_name","pid":7,'
                  '"tid":1,"args":{"name":"CrRendererMain"}}')
        for k, (ts, dur) in enumerate(zip(starts.tolist(), durations.tolist(), strict=True)):
            out.write(f',{{"ph":"X","name":"blink::Element{k:07d}::Update","cat":"blink",'
                      f'"pid":7,"tid":1,"ts":{ts},"dur":{dur}}}')
        out.write("]}")


def backend_cpu_s() -> float:
    """CPU seconds (user + system) of the PostgreSQL process serving Django's connection;
    NaN where ``/proc`` does not show it (another machine, another OS)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        pid = cursor.fetchone()[0]
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--functions", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--database", default="deviations_bench_names")
    parser.add_argument("--seed", type=int, default=20261124)
    args = parser.parse_args()

    os.chdir(PROJECT_ROOT)
    recreate_database(args.database)
    # The runs' files are kept in the trace storage: a folder that goes with this run.
    media = tempfile.TemporaryDirectory(prefix="deviations-bench-names-")
    os.environ["DJANGO_MEDIA_ROOT"] = media.name
    setup_django(args.database)
    from django.core.management import call_command
    from django.test import Client

    from deviations.traces.uploads import runs as ingest_runs
    from deviations.traces.uploads.runs import ThreadOptions, get_release

    call_command("migrate", verbosity=0)
    rng = np.random.default_rng(args.seed)
    release = get_release(SERIES, VERSION)
    options = ThreadOptions("CrRendererMain", "Renderer", False)
    ingest_s = []
    with tempfile.TemporaryDirectory() as tmp:
        for k in range(args.runs):
            path = Path(tmp) / f"run-{k}.json"
            write_trace(path, args.functions, rng)
            size = path.stat().st_size
            entry = ingest_runs.register_run(release, path, path.name, options,
                                             digest=ingest_runs.file_sha256(path))
            server_cpu = backend_cpu_s()
            start, cpu = time.perf_counter(), time.process_time()
            parsed = ingest_runs.parse_file(path, path.name, options.as_dict())
            parse_s = time.perf_counter() - start
            run = ingest_runs.process_run(entry.run.pk, parsed=parsed)
            total = time.perf_counter() - start
            cpu = time.process_time() - cpu
            server_cpu = backend_cpu_s() - server_cpu
            assert run.status == run.DONE, run.error
            ingest_s.append(total)
            print(f"run {k}: {size / 1e6:.0f} MB, {len(parsed.names):,} functions: "
                  f"ingest {total:.1f} s (parse {parse_s:.1f} s, store {total - parse_s:.1f} s); "
                  f"CPU: this process {cpu:.1f} s, PostgreSQL {server_cpu:.1f} s")

    client = Client(HTTP_HOST="127.0.0.1")
    url = f"/series/{SERIES}/releases/{VERSION}/"
    samples = []
    for _ in range(4):
        start = time.perf_counter()
        response = client.get(url)
        samples.append(time.perf_counter() - start)
        assert response.status_code == 200, response.status_code
    page_s = statistics.median(samples[1:])
    print(f"  GET {url}: {len(response.content):,} bytes, "
          f"{', '.join(f'{s:.2f}' for s in samples)} s (first is the warm-up)")
    known = ingest_s[1] if len(ingest_s) > 1 else float("nan")
    print(f"ingest_s={ingest_s[0]:.1f} ingest_known_s={known:.1f} release_page_s={page_s:.2f}")


if __name__ == "__main__":
    main()
