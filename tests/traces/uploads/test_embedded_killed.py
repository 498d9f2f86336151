"""`make demo` stopped with Ctrl-C during an upload (issue 23): the embedded default's
server (runserver, SQLite, tasks in-process) is interrupted while it ingests an upload;
started again, it ingests the run by itself (the start-up sweep of ``core.beat``). Before,
the run stayed pending for good and sending the file again answered "duplicate".

A real server process on a SQLite file of the test's own; the interrupt is SIGINT, what
Ctrl-C sends."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any

from tests.conftest import _free_port, renderer_events

ROOT = Path(__file__).resolve().parents[3]
LEASE_S = 2


def _multipart(name: str, data: bytes) -> tuple[bytes, str]:
    boundary = uuid.uuid4().hex
    body = (
        f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{name}\"\r\n"
        "Content-Type: application/json\r\n\r\n"
    ).encode() + data + f"\r\n--{boundary}--\r\n".encode()
    return body, f"multipart/form-data; boundary={boundary}"


class Site:
    def __init__(self, tmp: Path) -> None:
        self.db = tmp / "db.sqlite3"
        self.media = tmp / "media"
        self.env = {k: v for k, v in os.environ.items()
                    if k not in ("DATABASE_URL", "CELERY_BROKER_URL", "DJANGO_SETTINGS_MODULE")}
        self.env.update(DATABASE_URL=f"sqlite:///{self.db}", DJANGO_MEDIA_ROOT=str(self.media),
                        DJANGO_SECRET_KEY_FILE=str(tmp / "secret"),
                        DEVIATIONS_CLAIM_LEASE_SECONDS=str(LEASE_S))
        self.manage = [sys.executable, str(ROOT / "manage.py")]
        self.port = _free_port()
        self.log = (tmp / "server.log").open("ab")

    def run(self, *args: str) -> str:
        return subprocess.run([*self.manage, *args], env=self.env, cwd=ROOT, check=True,
                              capture_output=True, text=True).stdout

    def serve(self) -> subprocess.Popen[bytes]:
        server = subprocess.Popen([*self.manage, "runserver", "--noreload",
                                   f"127.0.0.1:{self.port}"], env=self.env, cwd=ROOT,
                                  stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{self.port}/api/series", timeout=2)
                return server
            except OSError:
                assert server.poll() is None, "the server exited"
                assert time.monotonic() < deadline, "the server did not start"
                time.sleep(0.2)

    def runs(self) -> list[tuple[int, str, Any]]:
        with sqlite3.connect(self.db, timeout=30) as db:
            return db.execute(
                "SELECT id, status, started FROM deviations_run ORDER BY id").fetchall()


def test_an_upload_interrupted_by_ctrl_c_is_ingested_when_the_server_starts_again(
    tmp_path: Path,
) -> None:
    site = Site(tmp_path)
    site.run("migrate", "--noinput")
    site.run("shell", "-c",
             "from django.contrib.auth.models import User; User.objects.create_user('ci')")
    token = site.run("create_api_token", "ci").strip().splitlines()[-1]
    # ~50 MB: its parse takes seconds, time to interrupt the server in the middle of it.
    events = renderer_events([(f"F{i % 400}", i * 10, 5) for i in range(600_000)])
    body, ctype = _multipart("big.json", json.dumps(events).encode())
    del events
    server = site.serve()
    answers: list[Any] = []

    def upload() -> None:
        request = urllib.request.Request(
            f"http://127.0.0.1:{site.port}/api/series/demo/releases/1.0/runs", body,
            headers={"Authorization": f"Bearer {token}", "Content-Type": ctype})
        try:
            answers.append(urllib.request.urlopen(request, timeout=300).status)  # noqa: S310
        except (urllib.error.URLError, ConnectionError, OSError) as exc:
            answers.append(exc)  # the server went away mid-request

    sender = threading.Thread(target=upload)
    second = None
    try:
        sender.start()
        deadline = time.monotonic() + 120
        while not any(status == "pending" and started for _, status, started in site.runs()):
            assert time.monotonic() < deadline, "the upload was never being ingested"
            assert server.poll() is None
            time.sleep(0.02)
        server.send_signal(signal.SIGINT)  # Ctrl-C
        server.wait(timeout=30)
        sender.join(60)
        assert not isinstance(answers[0], int), "the ingest ended before the interrupt"
        [(run_id, status, _)] = site.runs()
        assert status == "pending"  # interrupted mid-ingest, its file kept

        time.sleep(LEASE_S + 0.5)  # the dead server's claim is stale by now
        second = site.serve()
        deadline = time.monotonic() + 120
        while (status := site.runs()[0][1]) == "pending":
            assert time.monotonic() < deadline, "the run was never ingested again"
            time.sleep(0.2)
        assert status == "done"
        reply = json.load(urllib.request.urlopen(
            f"http://127.0.0.1:{site.port}/api/runs/{run_id}", timeout=30))
        assert reply["status"] == "done"
        assert reply["file_url"] == f"/runs/{run_id}/file"
    finally:
        for proc in (server, second):
            if proc is not None and proc.poll() is None:
                proc.terminate()
                proc.wait(timeout=30)
        site.log.close()
