"""Hardening #2: uploads made while the broker is down are stored, said to be queued, and
processed once it is back; nothing is lost, and sending a file again is a retry.

A Redis of the test's own on another port plays the broker (never the shared one): the
test stops it, uploads through the API and the page, starts it again, runs the sweeper and
waits for a real worker. Second pass of ``make test`` (PostgreSQL, real Celery worker).
"""

from __future__ import annotations

import io
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client

from deviations.core.models import ApiToken
from deviations.histograms.models import Probe
from deviations.histograms.tasks import detect_stale_probes
from deviations.traces.models import Run
from deviations.traces.uploads.tasks import requeue_pending
from tests.conftest import plain_histogram, renderer_events
from tests.core.test_services import wait_for

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]
ROOT = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class OwnRedis:
    """A redis-server on its own port, started and stopped by the test."""

    def __init__(self, tmp: Path) -> None:
        self.port = _free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.tmp = tmp
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", str(self.tmp)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                time.sleep(0.05)
        raise AssertionError("own redis-server did not start")

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(timeout=10)
            self.proc = None


@pytest.fixture
def broker(tmp_path: Path, settings: Any) -> Iterator[OwnRedis]:
    """Point this process's Celery app at a Redis of the test's own (stopped at first)."""
    from deviations.celery import app

    own = OwnRedis(tmp_path)
    before = app.conf.broker_write_url
    settings.MEDIA_ROOT = tmp_path / "media"

    def use(url: str | None) -> None:
        # The URL tasks are sent to (broker_url itself is read once, when configured).
        app.conf.broker_write_url = url
        app._pool = None  # connections and producers are cached per broker URL
        app.amqp._producer_pool = None

    use(own.url)
    try:
        yield own
    finally:
        use(before)
        own.stop()


def _worker(own: OwnRedis, media: Path, log: Any) -> subprocess.Popen[bytes]:
    db = connection.settings_dict
    env = {
        **os.environ,
        "DATABASE_URL": (
            f"postgres://{db['USER']}:{db['PASSWORD'] or ''}@{db['HOST']}:{db['PORT']}/{db['NAME']}"
        ),
        "DJANGO_MEDIA_ROOT": str(media),
        "CELERY_BROKER_URL": own.url,
    }
    return subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "deviations.celery", "worker", "--pool=solo",
         "--loglevel=INFO", "--without-gossip", "--without-mingle", "--without-heartbeat"],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
    )


def _trace(i: int) -> io.BytesIO:
    data = io.BytesIO(json.dumps(renderer_events([("Paint", i, 1000 + i)])).encode())
    data.name = f"run{i}.json"
    return data


def test_uploads_while_the_broker_is_down_are_processed_once_it_is_back(
    broker: OwnRedis, client: Client, tmp_path: Path, settings: Any
) -> None:
    user = get_user_model().objects.create_user("ci", password="pw")
    token = ApiToken.issue(user, "CI")[1]
    auth = {"Authorization": f"Bearer {token}"}
    url = "/api/series/outage/releases/1.0/runs"

    started = time.monotonic()
    response = client.post(url, {"file": _trace(0)}, headers=auth)
    answered_s = time.monotonic() - started
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["status"] == "pending"
    assert body["note"].startswith("queued:")
    assert answered_s < 10

    # Sending the same bytes again is a retry, not a dead end.
    again = client.post(url, {"file": _trace(0)}, headers=auth)
    assert again.status_code == 200
    assert again.json()["duplicate"] is True
    assert again.json()["note"].startswith("queued:")

    # The upload page with two files stores both.
    client.force_login(user)
    page = client.post("/upload/", {"series": "outage", "release": "1.1",
                                    "thread_name": "CrRendererMain", "process_name": "Renderer",
                                    "files": [_trace(1), _trace(2)]})
    assert page.status_code == 302, page.content
    # A histogram upload stores its file, and the detection it could not queue is found
    # again by the sweeper.
    histograms = [plain_histogram("GC_MS", str(b), [10, 20, 30]) for b in (1, 2, 3)]
    hist = io.BytesIO(json.dumps(histograms).encode())
    hist.name = "h.json"
    stored = client.post("/api/histograms/upload", {"file": hist}, headers=auth)
    assert stored.status_code == 201, stored.content

    pending = list(Run.objects.order_by("pk"))
    assert [r.status for r in pending] == [Run.PENDING] * 3
    assert all(r.file_stored and r.queued_at is None for r in pending)
    assert Probe.objects.get().detected_at is None

    broker.start()
    log_file = (tmp_path / "worker.log").open("wb")
    worker = _worker(broker, Path(settings.MEDIA_ROOT), log_file)
    try:
        back = time.monotonic()
        assert sorted(requeue_pending()) == [r.pk for r in pending]
        assert detect_stale_probes() == [Probe.objects.get().pk]
        done = [wait_for(r.pk, timeout=60) for r in pending]
        recovered_s = time.monotonic() - back
        log = (tmp_path / "worker.log").read_text()
        assert [r.status for r in done] == [Run.DONE] * 3, log
        assert all(r.file_stored for r in done)  # kept after the ingest
        deadline = time.monotonic() + 60
        while Probe.objects.get().detected_at is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert Probe.objects.get().detected_at is not None, log
        assert requeue_pending() == []  # nothing left to send
        assert detect_stale_probes() == []
    finally:
        worker.terminate()
        worker.wait(timeout=30)
        log_file.close()
    print(f"answered while down in {answered_s:.2f} s; all processed {recovered_s:.1f} s "
          "after the broker returned")
