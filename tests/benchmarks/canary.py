"""Canary benchmark (issue 11): observations posted in batches through the API (gunicorn)
with a real Celery worker on PostgreSQL and Redis.

Run from the project root (PostgreSQL on 127.0.0.1:5432 and Redis on 6379, trust auth)::

    python -m tests.benchmarks.canary [--per-arm 1000000] [--batch 1000] [--clients 4]
                                      [--database deviations_canary]
                                      [--redis redis://127.0.0.1:6379/13]

The database named is dropped and created again. A canary (``bad=higher``, α = 0.05, no
τ) receives Gamma(10, 10) values in both arms (continuous values, so every observation is
a new point of the test's support: the worst case), ``--per-arm`` per arm in batches of
``--batch`` values, alternating arms, from ``--clients`` threads (each on one
``http.client`` connection, which reconnects when gunicorn's sync workers close it after a
response). A prober thread posts one of those batches every half second and then polls
the page's JSON every 10 ms (``/canaries/<id>/live.json?seen=N``, what the live page
reads; the figures come only when something was applied since ``N``) until it shows the
batch applied: ``batch_to_decision_ms`` is the median of those times. ``batches_per_s``
counts every batch from the first POST until the worker has applied the last one (the
posting rate alone is printed too). Targets: >= 200 batches/s, <= 250 ms.

Before anything is timed, a second canary receives ``WARM_UP`` batches from the same
clients (and the page's JSON is read once), until the worker has applied them: each
process has then loaded its code (the first request imports the URL configuration, SciPy
and the API, ~1.5 s of CPU per gunicorn worker), so the rates and the CPU per batch are
those of a running service, not of its start. CPU per batch is counted in the gunicorn
processes, the Celery worker, this process (the posting clients and the prober) and the
PostgreSQL backends connected to the database (/proc): on a shared machine it is the
figure that other load disturbs least.
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
from pathlib import Path
from typing import Any

import numpy as np

from tests.benchmarks.pages import PG, PROJECT_ROOT, free_port, recreate_database, wait_for


def _tree_cpu(root: int) -> float:
    """CPU seconds (user + system) of a live process and its live descendants (/proc)."""
    tick = os.sysconf("SC_CLK_TCK")
    parents: dict[int, int] = {}
    times: dict[int, float] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(entry.name)] = int(fields[1])
        times[int(entry.name)] = (int(fields[11]) + int(fields[12])) / tick
    total, todo = 0.0, [root]
    while todo:
        pid = todo.pop()
        total += times.get(pid, 0.0)
        todo += [child for child, parent in parents.items() if parent == pid]
    return total


def _cpu(pid: int) -> float | None:
    """CPU seconds (user + system) of one process, None if it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _backends_cpu(database: str) -> dict[int, float]:
    """CPU seconds of each PostgreSQL backend connected to ``database`` (by pid)."""
    import psycopg

    with psycopg.connect(PG.format("postgres"), autocommit=True) as conn:
        pids = [row[0] for row in conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = %s", [database])]
    return {pid: cpu for pid in pids if (cpu := _cpu(pid)) is not None}


def _updates(database: str, canary_id: int) -> int:
    """How many updates of the state applied the canary's batches (one point each)."""
    import psycopg

    with psycopg.connect(PG.format(database), autocommit=True) as conn:
        row = conn.execute("SELECT count(*) FROM deviations_canarypoint WHERE canary_id = %s",
                           [canary_id]).fetchone()
    return int(row[0]) if row else 0


def build(env: dict[str, str]) -> tuple[str, int, int]:
    """Migrate, create a user, a token, the canary and the warm-up canary in a child
    process."""
    code = """
import django
django.setup()
from django.core.management import call_command
call_command("migrate", verbosity=0)
from django.contrib.auth import get_user_model
from deviations.core.models import ApiToken
from deviations.experiments.canaries.services import create_canary
user = get_user_model().objects.create_user("bench")
canary = create_canary("bench", bad="higher", unit="ms")
warm = create_canary("warm-up", bad="higher", unit="ms")
print(ApiToken.issue(user, "bench")[1], canary.pk, warm.pk)
"""
    out = subprocess.run([sys.executable, "-c", code], cwd=PROJECT_ROOT, env=env, check=True,
                         capture_output=True, text=True)
    token, canary_id, warm_id = out.stdout.strip().splitlines()[-1].split()
    return token, int(canary_id), int(warm_id)


class Feeder:
    """Hands out batches to the posting threads; batch k is arm A if k is even. The bodies
    are encoded before the run (the same values, drawn in order): the load generator's
    JSON encoding is no part of the service measured and would take CPU from it."""

    def __init__(self, total: int, batch: int, seed: int) -> None:
        rng = np.random.default_rng(seed)
        self.bodies = [
            json.dumps({"batch": f"b{k}", "arm": "AB"[k % 2],
                        "values": rng.gamma(10, 10, batch).tolist()}).encode()
            for k in range(total)
        ]
        self.next = 0
        self.lock = threading.Lock()
        self.errors: list[str] = []

    def take(self) -> tuple[int, bytes] | None:
        with self.lock:
            if self.next >= len(self.bodies) or self.errors:
                return None
            k = self.next
            self.next += 1
        return k, self.bodies[k]


def post(conn: http.client.HTTPConnection, path: str, body: bytes,
         headers: dict[str, str]) -> dict[str, Any]:
    conn.request("POST", path, body, headers)
    response = conn.getresponse()
    data = response.read()
    if response.status != 202:
        raise RuntimeError(f"POST {path}: {response.status} {data[:200]!r}")
    return dict(json.loads(data))


#: Batches sent to the warm-up canary before the timed run (a few per client and process).
WARM_UP = 40


def warm_up(port: int, token: str, canary_id: int, clients: int) -> None:
    """Post ``WARM_UP`` batches to the warm-up canary from ``clients`` threads at once (so
    that every gunicorn worker serves some), read its page's JSON, wait until applied."""
    feeder = Feeder(WARM_UP, 1000, 1)
    path = f"/api/canaries/{canary_id}/observations"
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}

    def client() -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        while (item := feeder.take()) is not None:
            post(conn, path, item[1], headers)

    threads = [threading.Thread(target=client) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    while True:
        conn.request("GET", f"/canaries/{canary_id}/live.json?seen=-1")
        if json.loads(conn.getresponse().read())["view"]["batches_applied"] >= WARM_UP:
            return
        time.sleep(0.05)


def run(port: int, token: str, canary_id: int, feeder: Feeder, clients: int) -> dict[str, Any]:
    path = f"/api/canaries/{canary_id}/observations"
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    latencies: list[float] = []
    polls: list[int] = []  # the page's JSON read by the prober (its CPU is the web's)
    done = threading.Event()

    def client() -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        while (item := feeder.take()) is not None:
            try:
                post(conn, path, item[1], headers)
            except Exception as exc:  # noqa: BLE001  (reported, the run stops)
                feeder.errors.append(str(exc))

    def prober() -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        live = f"/canaries/{canary_id}/live.json?seen="
        while not done.is_set():
            time.sleep(0.5)
            item = feeder.take()
            if item is None:
                return
            started = time.perf_counter()
            try:
                seq = post(conn, path, item[1], headers)["seq"]
                seen = -1
                while True:  # as the page polls: figures only once something changed
                    conn.request("GET", f"{live}{seen}")
                    polls.append(seen)
                    view = json.loads(conn.getresponse().read())["view"]
                    if view["batches_applied"] >= seq:
                        break
                    seen = view["batches_applied"]
                    time.sleep(0.01)
            except Exception as exc:  # noqa: BLE001
                feeder.errors.append(str(exc))
                return
            latencies.append((time.perf_counter() - started) * 1000)

    threads = [threading.Thread(target=client) for _ in range(clients)]
    probe = threading.Thread(target=prober)
    started = time.perf_counter()
    for t in [*threads, probe]:
        t.start()
    for t in threads:
        t.join()
    posted_s = time.perf_counter() - started
    done.set()
    probe.join()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    while True:
        conn.request("GET", f"/api/canaries/{canary_id}")
        status = json.loads(conn.getresponse().read())
        if status["batches_applied"] >= status["batches_received"] or feeder.errors:
            break
        time.sleep(0.05)
    applied_s = time.perf_counter() - started
    return {"batches": status["batches_received"], "posted_s": posted_s,
            "applied_s": applied_s, "latencies": latencies, "polls": len(polls),
            "status": status,
            "errors": feeder.errors}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--per-arm", type=int, default=1_000_000)
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--gunicorn-workers", type=int, default=2)
    parser.add_argument("--database", default="deviations_canary")
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/13")
    parser.add_argument("--conn-max-age", type=int, default=60,
                        help="seconds a process keeps its database connection (the "
                        "DATABASE_URL option conn_max_age; 0: a connection per request)")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="canary-bench-"))
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CELERY_BROKER_URL")}
    env.update(DJANGO_SETTINGS_MODULE="deviations.settings", DJANGO_MEDIA_ROOT=str(tmp / "m"),
               DJANGO_SECRET_KEY_FILE=str(tmp / "secret"),
               DATABASE_URL=PG.format(args.database) + f"?conn_max_age={args.conn_max_age}",
               CELERY_BROKER_URL=args.redis)
    recreate_database(args.database)
    token, canary_id, warm_id = build(env)
    procs: list[subprocess.Popen[bytes]] = []
    log = (tmp / "processes.log").open("wb")
    try:
        port = free_port()
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "deviations.wsgi", "-b", f"127.0.0.1:{port}",
             "-w", str(args.gunicorn_workers), "--timeout", "300"],
            cwd=PROJECT_ROOT, env=env, stdout=log, stderr=subprocess.STDOUT))
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "deviations.celery", "worker",
             "--concurrency=1", "--loglevel=WARNING", "--without-gossip", "--without-mingle"],
            cwd=PROJECT_ROOT, env=env, stdout=log, stderr=subprocess.STDOUT))
        wait_for(port, procs[0], "/api/canaries")
        warm_up(port, token, warm_id, args.clients)
        cpu_before = [_tree_cpu(p.pid) for p in procs]
        backends_before = _backends_cpu(args.database)
        feeder = Feeder(2 * args.per_arm // args.batch, args.batch, 20261124)
        clients_before = time.process_time()
        result = run(port, token, canary_id, feeder, args.clients)
        result["cpu"] = [_tree_cpu(p.pid) - before for p, before in zip(procs, cpu_before,
                                                                          strict=True)]
        result["cpu"].append(time.process_time() - clients_before)
        result["updates"] = _updates(args.database, canary_id)
        # Backends that closed during the run are missed (with conn_max_age, none should).
        result["cpu"].append(sum(cpu - backends_before.get(pid, 0.0)
                                 for pid, cpu in _backends_cpu(args.database).items()))
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(timeout=60)
        log.close()
        if os.environ.get("KEEP_LOG"):
            print(f"log: {tmp / 'processes.log'}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    status, lat = result["status"], result["latencies"]
    print(f"{result['batches']} batches of {args.batch} ({args.per_arm:,} per arm), "
          f"{args.clients} clients, {args.gunicorn_workers} gunicorn workers, 1 Celery "
          f"worker process")
    print(f"  posted in {result['posted_s']:.1f} s "
          f"({result['batches'] / result['posted_s']:.0f} batches/s accepted by the API)")
    print(f"  applied by the worker {result['applied_s']:.1f} s after the first POST, in "
          f"{result['updates']} updates of the state "
          f"({result['batches'] / max(result['updates'], 1):.1f} batches each)")
    print(f"  final: decision {status['decision']}, n A {status['n_a']}, n B {status['n_b']}, "
          f"p-value {status['p_value']:.3g}")
    if lat:
        print(f"  batch to decision on the page: {len(lat)} probes, median "
              f"{statistics.median(lat):.0f} ms, p90 {np.percentile(lat, 90):.0f} ms, "
              f"max {max(lat):.0f} ms ({result['polls']} reads of the page's JSON)")
    per_batch = [cpu / result["batches"] * 1000 for cpu in result["cpu"]]
    print("  CPU per batch: web {:.1f} ms, worker {:.1f} ms, clients {:.1f} ms, PostgreSQL "
          "backends {:.1f} ms; total {:.1f} ms (after {} warm-up batches)".format(
              *per_batch, sum(per_batch), WARM_UP))
    if result["errors"]:
        print(f"  errors: {len(result['errors'])} (first: {result['errors'][0]})")
    print(f"batches_per_s={result['batches'] / result['applied_s']:.0f} "
          f"batch_to_decision_ms={statistics.median(lat) if lat else float('nan'):.0f} "
          f"errors={len(result['errors'])}")


if __name__ == "__main__":
    main()
