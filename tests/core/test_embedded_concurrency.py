"""Hardening #6: the embedded default (SQLite, tasks in-process) takes concurrent uploads.

A real server process on a SQLite file, 10 clients sending 3 traces each at once through
the API: every upload answered 201 and every run done, no file left waiting. (Before: 21
of 30 answered 500 "database is locked", 6 were lost, 15 stuck pending.)
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tests.conftest import renderer_events

ROOT = Path(__file__).resolve().parents[2]
CLIENTS, EACH = 10, 3


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _multipart(name: str, data: bytes) -> tuple[bytes, str]:
    boundary = uuid.uuid4().hex
    body = (
        f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{name}\"\r\n"
        "Content-Type: application/json\r\n\r\n"
    ).encode() + data + f"\r\n--{boundary}--\r\n".encode()
    return body, f"multipart/form-data; boundary={boundary}"


def test_ten_concurrent_clients_on_sqlite(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items()
           if k not in ("DATABASE_URL", "CELERY_BROKER_URL", "DJANGO_SETTINGS_MODULE")}
    env.update(DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite3'}",
               DJANGO_MEDIA_ROOT=str(tmp_path / "media"),
               DJANGO_SECRET_KEY_FILE=str(tmp_path / "secret"))
    manage = [sys.executable, str(ROOT / "manage.py")]

    def run(*args: str) -> str:
        return subprocess.run([*manage, *args], env=env, cwd=ROOT, check=True,
                              capture_output=True, text=True).stdout

    run("migrate", "--noinput")
    run("shell", "-c",
        "from django.contrib.auth.models import User; User.objects.create_user('ci')")
    token = run("create_api_token", "ci").strip().splitlines()[-1]
    port = _free_port()
    server = subprocess.Popen([*manage, "runserver", "--noreload", f"127.0.0.1:{port}"],
                              env=env, cwd=ROOT, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/api/series", timeout=2)
                break
            except OSError:
                assert time.monotonic() < deadline, "server did not start"
                time.sleep(0.2)

        def upload(k: int) -> tuple[int, int]:
            release, run_no = divmod(k, EACH)
            events = renderer_events([("Paint", run_no, 1000 + k), ("Layout", 5000, 40 + k)])
            body, ctype = _multipart(f"run{k}.json", json.dumps(events).encode())
            request = urllib.request.Request(
                f"http://127.0.0.1:{port}/api/series/conc/releases/1.{release}/runs", body,
                headers={"Authorization": f"Bearer {token}", "Content-Type": ctype},
            )
            try:
                with urllib.request.urlopen(request, timeout=120) as response:  # noqa: S310 (loopback http)
                    return response.status, json.load(response)["run"]
            except urllib.error.HTTPError as exc:
                return exc.code, -1

        started = time.monotonic()
        with ThreadPoolExecutor(CLIENTS) as pool:
            answers = list(pool.map(upload, range(CLIENTS * EACH)))
        took = time.monotonic() - started
        assert [code for code, _ in answers] == [201] * (CLIENTS * EACH), answers
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/series/conc/releases") as r:
            releases = json.load(r)
        assert sum(r["runs_done"] for r in releases) == CLIENTS * EACH, releases
        assert sum(r["runs_pending"] + r["runs_failed"] for r in releases) == 0
        # Each run's file is kept (one object per sha256), and nothing else: no partial
        # file, no copy of an upload.
        left = [p for p in (tmp_path / "media").rglob("*") if p.is_file()]
        assert len(left) == CLIENTS * EACH
        assert all(p.parent.parent.name == "traces" and len(p.name) == 64 for p in left)
        # One analysis of the series at a time (traces.tasks.send_once in-process): every
        # request left its run to the running one or ran it, so once all are answered the
        # stored analysis has seen every run.
        assert run("shell", "-c", (
            "from deviations.traces.analysis import is_up_to_date;"
            "from deviations.traces.models import Series;"
            "print(is_up_to_date(Series.objects.get(name='conc')))")).split()[-1] == "True"
        print(f"{CLIENTS * EACH} uploads from {CLIENTS} clients in {took:.1f} s")
    finally:
        server.terminate()
        server.wait(timeout=30)
