"""Hardening #3: a worker killed in the middle of an ingest is replaced within a lease.

Before, the run waited for Redis's visibility timeout (~16 minutes measured). Now a worker
renews its claim every quarter lease; a claim not renewed for a whole lease is stale, and
the sweeper (beat, every minute; called here every second) sends the run again. Second
pass of ``make test``: PostgreSQL and real worker processes, one of them killed with
SIGKILL while it parses a 130 MB trace.
"""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client

from deviations.core.models import ApiToken
from deviations.traces.models import Run, RunTimes
from deviations.traces.uploads.tasks import requeue_pending
from tests.conftest import renderer_events

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]
ROOT = Path(__file__).resolve().parents[2]
LEASE_S = 3


def _worker(media: Path, log: Any) -> subprocess.Popen[bytes]:
    db = connection.settings_dict
    env = {
        **os.environ,
        "DATABASE_URL": (
            f"postgres://{db['USER']}:{db['PASSWORD'] or ''}@{db['HOST']}:{db['PORT']}/{db['NAME']}"
        ),
        "DJANGO_MEDIA_ROOT": str(media),
        "DEVIATIONS_CLAIM_LEASE_SECONDS": str(LEASE_S),
    }
    return subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "deviations.celery", "worker", "--pool=solo",
         "--loglevel=INFO", "--without-gossip", "--without-mingle", "--without-heartbeat"],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
    )


def test_a_killed_worker_is_replaced_within_a_lease(
    client: Client, tmp_path: Path, settings: Any
) -> None:
    settings.MEDIA_ROOT = tmp_path / "media"
    settings.DEVIATIONS_CLAIM_LEASE_SECONDS = LEASE_S
    token = ApiToken.issue(get_user_model().objects.create_user("ci"), "CI")[1]
    events = renderer_events([(f"F{i % 500}", i * 10, 5) for i in range(1_500_000)])
    log = (tmp_path / "workers.log").open("wb")
    first = _worker(Path(settings.MEDIA_ROOT), log)
    second = None
    try:
        upload = io.BytesIO(json.dumps(events).encode())
        upload.name = "big.json"
        response = client.post("/api/series/killed/releases/1.0/runs", {"file": upload},
                               headers={"Authorization": f"Bearer {token}"})
        assert response.status_code == 201, response.content
        run_id = response.json()["run"]

        deadline = time.monotonic() + 120
        while Run.objects.get(pk=run_id).started is None:
            assert time.monotonic() < deadline, "the first worker never claimed the run"
            time.sleep(0.02)
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=30)
        killed = time.monotonic()
        assert Run.objects.get(pk=run_id).status == Run.PENDING  # killed mid-ingest

        second = _worker(Path(settings.MEDIA_ROOT), log)
        sent_again = False
        while (run := Run.objects.get(pk=run_id)).status == Run.PENDING:
            assert time.monotonic() - killed < 120, "nobody took over the run"
            sent_again |= run_id in requeue_pending()
            time.sleep(1)
        recovered_s = time.monotonic() - killed
        assert run.status == Run.DONE, (tmp_path / "workers.log").read_text()[-3000:]
        assert sent_again
        assert RunTimes.objects.filter(run_id=run_id).count() == 1
        assert run.file_stored  # the file stays (one copy) for downloads and reingest
        # Lease (3 s) + the parse of 130 MB + a worker's start, far below the ~16 minutes
        # of the visibility timeout.
        assert recovered_s < 90
        print(f"killed mid-ingest; done {recovered_s:.1f} s later (lease {LEASE_S} s)")
    finally:
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                proc.terminate()
                proc.wait(timeout=30)
        log.close()
