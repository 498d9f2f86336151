"""End to end on the real services: PostgreSQL, Redis and a Celery worker process.

Runs in the second pass of ``make test`` (DATABASE_URL=postgres://..., CELERY_BROKER_URL=
redis://...). The worker is a separate process on the same test database, so these tests
commit their data (transaction=True) for it to see.
"""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.db import connection
from django.test import Client

from deviations.core.models import ApiToken
from deviations.traces.models import Run

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]
ROOT = Path(__file__).resolve().parents[2]


@contextmanager
def running_worker(tmp_path: Path, media: Path, env: dict[str, str] | None = None,
                   pool: tuple[str, ...] = ("--pool=solo",),
                   ) -> Iterator[subprocess.Popen[bytes]]:
    """A real `celery worker` process on the test database (PostgreSQL), its media folder
    ``media``, its log in ``tmp_path``; ``env`` adds to the environment, ``pool`` chooses
    the pool (solo: one process, the tasks run in it)."""
    db = connection.settings_dict
    assert db["ENGINE"].endswith("postgresql"), "the services pass runs on PostgreSQL"
    full = {
        **os.environ, **(env or {}),
        "DATABASE_URL": (
            f"postgres://{db['USER']}:{db['PASSWORD'] or ''}@{db['HOST']}:{db['PORT']}/{db['NAME']}"
        ),
        "DJANGO_MEDIA_ROOT": str(media),
    }
    log = (tmp_path / "worker.log").open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "deviations.celery", "worker", *pool,
         "--loglevel=INFO", "--without-gossip", "--without-mingle", "--without-heartbeat"],
        cwd=ROOT, env=full, stdout=log, stderr=subprocess.STDOUT,
    )
    try:
        yield proc
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()


@pytest.fixture
def worker(tmp_path: Path, settings: Any) -> Iterator[subprocess.Popen[bytes]]:
    """A real `celery worker` process on the test database and a shared media folder."""
    settings.MEDIA_ROOT = tmp_path / "media"
    with running_worker(tmp_path, settings.MEDIA_ROOT) as proc:
        yield proc


def wait_for(run_id: int, timeout: float = 120) -> Run:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        run = Run.objects.get(pk=run_id)
        if run.status != Run.PENDING:
            return run
        time.sleep(0.2)
    raise AssertionError(f"run {run_id} still pending after {timeout} s")


def test_tasks_go_through_the_broker() -> None:
    assert not settings.CELERY_TASK_ALWAYS_EAGER
    assert settings.CELERY_BROKER_URL.startswith("redis://")


def test_a_worker_process_past_its_memory_limit_is_replaced(
    client: Client, simple_events: Any, tmp_path: Path, settings: Any,
) -> None:
    """DEVIATIONS_WORKER_MAX_MEMORY_MB reaches the prefork pool (Celery's
    worker_max_memory_per_child): a process whose high-water mark passed it during a task is
    replaced before its next task (here 1 MB: every task), and the tasks still complete."""
    settings.MEDIA_ROOT = tmp_path / "media"
    user = get_user_model().objects.create_user("ci")
    token = ApiToken.issue(user, "CI")[1]
    with running_worker(tmp_path, settings.MEDIA_ROOT,
                        env={"DEVIATIONS_WORKER_MAX_MEMORY_MB": "1"},
                        pool=("--pool=prefork", "--concurrency=1")):
        ids = []
        for k in range(2):
            data = io.BytesIO(json.dumps({"traceEvents": simple_events}).encode()
                              + b" " * k)  # another file, not a duplicate
            data.name = f"run{k}.json"
            response = client.post("/api/series/recycled/releases/1.0/runs", {"file": data},
                                   headers={"Authorization": f"Bearer {token}"})
            assert response.status_code == 201, response.content
            ids.append(response.json()["run"])
        for run_id in ids:
            assert wait_for(run_id).status == Run.DONE
    log = (tmp_path / "worker.log").read_text()
    # Each ingest ran in a process of its own (the pool names them ForkPoolWorker-N in turn;
    # without the limit both run in ForkPoolWorker-1).
    ran = re.findall(r"INFO/(ForkPoolWorker-\d+)\] Task deviations\.ingest_run\[[-\w]+\] "
                     r"succeeded", log)
    assert len(ran) == 2, log[-3000:]
    assert len(set(ran)) == len(ran), ran


def test_upload_api_worker_export(worker, client: Client, simple_events, tmp_path) -> None:
    user = get_user_model().objects.create_user("ci")
    token = ApiToken.issue(user, "CI")[1]
    ids = []
    for name, payload in [("run1.json", simple_events), ("bad.json", None)]:
        data = io.BytesIO(json.dumps({"traceEvents": payload}).encode() if payload else b"{")
        data.name = name
        response = client.post(
            "/api/series/e2e/releases/56.0.2909.0/runs", {"file": data},
            headers={"Authorization": f"Bearer {token}"},
        )
        assert response.status_code == 201, response.content
        assert response.json()["status"] == "pending"  # queued, not run in-process
        ids.append(response.json()["run"])
    done, failed = wait_for(ids[0]), wait_for(ids[1])
    assert done.status == Run.DONE, (done.error, (tmp_path / "worker.log").read_text())
    assert failed.status == Run.FAILED
    assert failed.error.startswith("bad.json: ")
    assert done.file_stored
    assert failed.file_stored
    out = io.StringIO()
    call_command("export", "--series", "e2e", "--what", "selftimes", stdout=out)
    rows = {r["function"]: r for r in json.loads(out.getvalue())}
    assert rows["Paint"]["self_us"] == pytest.approx(800)
    assert rows["Layout"]["self_us"] == pytest.approx(250)
    assert {r["run"] for r in rows.values()} == {"run1.json"}
