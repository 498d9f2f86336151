"""Load benchmark (hardening #10): gunicorn with 2 workers on loopback, 20 users reading
the matrix page of a 100 releases × 2,000 functions series for 30 s while 10 clients
upload traces, on PostgreSQL + Redis (a real Celery worker) and on the embedded default
(SQLite, tasks in-process).

Run from the project root (PostgreSQL on 127.0.0.1:5432 and Redis on 6379, trust auth)::

    python -m tests.benchmarks.load [--form postgres|embedded|both] [--seconds 30]
                                    [--users 20] [--uploaders 10] [--releases 100]
                                    [--functions 2000] [--runs 20] [--threads N]

gunicorn runs 2 workers, with 8 threads each on the embedded default (uploads are ingested
and analysed inside their request there, as under ``make demo``'s threaded runserver) and
sync workers (1 thread) on the distributed form; ``--threads`` sets both.

It builds the series as ``tests.benchmarks.pages`` does (a database of its own:
``deviations_load`` on PostgreSQL, a temporary SQLite file for the embedded form), then
starts the processes and the clients; each reader loops ``GET /series/<name>/`` over one
keep-alive connection, each uploader sends traces of ~2,000 functions to a release of its
own of another series, one after the other. Printed per form: requests, errors, p50 and
p99 of the page and of the uploads, the CPU time the web processes (and the Celery
worker) used during the load, then ``<form>: page_p50_ms=… page_p99_ms=… errors=…``
(target: no errors, page p99 <= 1,000 ms).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np

from tests.benchmarks.pages import PG, PROJECT_ROOT, SERIES, free_port, recreate_database, wait_for

REDIS = "redis://127.0.0.1:6379/12"


def build(env: dict[str, str], releases: int, functions: int, runs: int) -> str:
    """Migrate, fill and analyse the series in a child process; returns an API token."""
    code = f"""
import django, os
django.setup()
from django.core.management import call_command
call_command("migrate", verbosity=0)
from tests.benchmarks.pages import Filler
from deviations.traces.analysis import analyse_series
from django.contrib.auth import get_user_model
from deviations.core.models import ApiToken
filler = Filler({functions}, {runs}, {releases}, 20261122)
for r in range({releases}):
    filler.add_release(f"1.{{r}}", r, r)
analyse_series(filler.series.pk, force=True)
user = get_user_model().objects.create_user("load", is_staff=True)
print(ApiToken.issue(user, "load")[1])
"""
    out = subprocess.run([sys.executable, "-c", code], cwd=PROJECT_ROOT, env=env, check=True,
                         capture_output=True, text=True)
    return out.stdout.strip().splitlines()[-1]


def trace(functions: int, seed: int) -> bytes:
    rng = np.random.default_rng(seed)
    events: list[dict[str, Any]] = [
        {"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "Renderer"}},
        {"ph": "M", "name": "thread_name", "pid": 1, "tid": 1,
         "args": {"name": "CrRendererMain"}},
    ]
    ts = 0.0
    for k in range(functions):
        dur = float(rng.lognormal(4, 1))
        events.append({"ph": "X", "name": f"F{k}", "pid": 1, "tid": 1, "ts": ts, "dur": dur})
        ts += dur + 1
    return json.dumps({"traceEvents": events}).encode()


def process_cpu(root: int) -> float:
    """CPU seconds (user + system) used so far by process ``root`` and its live descendants
    (Linux ``/proc``; 0 elsewhere): the gunicorn master and workers, or the Celery worker
    and its pool. Other jobs on a shared machine stretch latency, not these."""
    parents: dict[int, int] = {}
    times: dict[int, float] = {}
    tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        pid = int(entry.name)
        parents[pid] = int(fields[1])
        times[pid] = (int(fields[11]) + int(fields[12])) / tick
    total, todo = 0.0, [root]
    while todo:
        pid = todo.pop()
        total += times.get(pid, 0.0)
        todo += [child for child, parent in parents.items() if parent == pid]
    return total


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else float("nan")


def run_load(port: int, token: str, seconds: float, users: int, uploaders: int,
             functions: int) -> dict[str, Any]:
    stop = time.monotonic() + seconds
    page_ms: list[float] = []
    upload_ms: list[float] = []
    errors: list[str] = []
    lock = threading.Lock()

    def reader() -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        while time.monotonic() < stop:
            start = time.perf_counter()
            try:
                conn.request("GET", f"/series/{SERIES}/")
                response = conn.getresponse()
                response.read()
                ok = response.status == 200
            except OSError as exc:
                ok, response = False, exc
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            with lock:
                if ok:
                    page_ms.append((time.perf_counter() - start) * 1000)
                else:
                    errors.append(f"page: {response}")

    def uploader(u: int) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
        k = 0
        while time.monotonic() < stop:
            boundary = uuid.uuid4().hex
            body = (
                f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; "
                f"filename=\"u{u}-{k}.json\"\r\nContent-Type: application/json\r\n\r\n"
            ).encode() + trace(functions, u * 1000 + k) + f"\r\n--{boundary}--\r\n".encode()
            start = time.perf_counter()
            try:
                conn.request("POST", f"/api/series/load.uploads/releases/1.{u}/runs", body, {
                    "Authorization": f"Bearer {token}",
                    "Content-Type": f"multipart/form-data; boundary={boundary}",
                })
                response = conn.getresponse()
                text = response.read()
                ok = response.status in (200, 201)
            except OSError as exc:
                ok, text = False, str(exc).encode()
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
            with lock:
                if ok:
                    upload_ms.append((time.perf_counter() - start) * 1000)
                else:
                    errors.append(f"upload: {text[:200]!r}")
            k += 1

    threads = [threading.Thread(target=reader) for _ in range(users)]
    threads += [threading.Thread(target=uploader, args=(u,)) for u in range(uploaders)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return {"page_ms": page_ms, "upload_ms": upload_ms, "errors": errors}


def threads(form: str, args: argparse.Namespace) -> int:
    """Threads per gunicorn worker: ``--threads``, else 8 on the embedded default (an
    upload's ingest and analysis run inside its request there, as under ``make demo``'s
    threaded runserver: with one thread a page waits behind them) and 1 (sync workers) on
    the distributed form, where a Celery worker does that work."""
    if args.threads:
        return int(args.threads)
    return 8 if form == "embedded" else 1


def bench(form: str, args: argparse.Namespace) -> str:
    tmp = Path(tempfile.mkdtemp(prefix=f"load-{form}-"))
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CELERY_BROKER_URL")}
    env.update(DJANGO_SETTINGS_MODULE="deviations.settings", DJANGO_MEDIA_ROOT=str(tmp / "m"),
               DJANGO_SECRET_KEY_FILE=str(tmp / "secret"))
    procs: list[subprocess.Popen[bytes]] = []
    try:
        if form == "postgres":
            recreate_database("deviations_load")
            env.update(DATABASE_URL=PG.format("deviations_load"), CELERY_BROKER_URL=REDIS)
        else:
            env.update(DATABASE_URL=f"sqlite:///{tmp / 'db.sqlite3'}")
        started = time.monotonic()
        token = build(env, args.releases, args.functions, args.runs)
        print(f"{form}: series built and analysed in {time.monotonic() - started:.0f} s; "
              f"gunicorn -w 2 --threads {threads(form, args)}")
        port = free_port()
        log = (tmp / "processes.log").open("wb")
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "deviations.wsgi", "-b", f"127.0.0.1:{port}",
             "-w", "2", "--timeout", "300", "--threads", str(threads(form, args))],
            cwd=PROJECT_ROOT, env=env, stdout=log, stderr=subprocess.STDOUT))
        if form == "postgres":
            procs.append(subprocess.Popen(
                [sys.executable, "-m", "celery", "-A", "deviations.celery", "worker",
                 "--concurrency=2", "--loglevel=WARNING"],
                cwd=PROJECT_ROOT, env=env, stdout=log, stderr=subprocess.STDOUT))
        wait_for(port, procs[0], f"/series/{SERIES}/")
        cpu_before = [process_cpu(proc.pid) for proc in procs]
        client_before = time.process_time()
        result = run_load(port, token, args.seconds, args.users, args.uploaders,
                          args.functions)
        client_cpu = time.process_time() - client_before
        cpu = [process_cpu(proc.pid) - before for proc, before in zip(procs, cpu_before,
                                                                        strict=True)]
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(timeout=60)
        shutil.rmtree(tmp, ignore_errors=True)
    pages, uploads, errors = result["page_ms"], result["upload_ms"], result["errors"]
    print(f"  page:   {len(pages)} requests in {args.seconds:.0f} s "
          f"({len(pages) / args.seconds:.1f}/s), p50 {percentile(pages, 50):.0f} ms, "
          f"p99 {percentile(pages, 99):.0f} ms, max {max(pages, default=float('nan')):.0f} ms")
    print(f"  upload: {len(uploads)} answered, p50 {percentile(uploads, 50):.0f} ms, "
          f"p99 {percentile(uploads, 99):.0f} ms")
    print(f"  errors: {len(errors)}" + (f" (first: {errors[0]})" if errors else ""))
    requests = max(1, len(pages) + len(uploads))
    worker = ""
    if len(cpu) > 1:
        per_upload = 1000 * cpu[1] / max(1, len(uploads))
        worker = f", worker {cpu[1]:.1f} s ({per_upload:.0f} ms per upload)"
    print(f"  CPU: web processes {cpu[0]:.1f} s ({1000 * cpu[0] / requests:.1f} ms per page or "
          f"upload request){worker}; this client {client_cpu:.1f} s")
    if uploads:
        print(f"  (median upload {statistics.median(uploads):.0f} ms)")
    return (f"{form}: page_p50_ms={percentile(pages, 50):.0f} "
            f"page_p99_ms={percentile(pages, 99):.0f} upload_p99_ms="
            f"{percentile(uploads, 99):.0f} errors={len(errors)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--form", choices=["postgres", "embedded", "both"], default="both")
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--users", type=int, default=20)
    parser.add_argument("--uploaders", type=int, default=10)
    parser.add_argument("--threads", type=int, default=0,
                        help="threads per gunicorn worker (default: 8 embedded, 1 postgres)")
    parser.add_argument("--releases", type=int, default=100)
    parser.add_argument("--functions", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    forms = ["postgres", "embedded"] if args.form == "both" else [args.form]
    lines = [bench(form, args) for form in forms]
    for line in lines:
        print(line)


if __name__ == "__main__":
    main()
