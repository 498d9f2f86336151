"""Web and workers on different hosts (issue 24): they share the database, the broker and
the S3-compatible trace storage, and no filesystem. The web side (this process) and a
real Celery worker process have media folders of their own; the upload waits in S3, the
worker ingests it from there, and nothing lands on either disk.

Second pass of ``make test`` (PostgreSQL, Redis, a real worker); the S3 server is moto's
on loopback."""

from __future__ import annotations

import gzip
import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from deviations.core.models import ApiToken
from deviations.traces.models import Run
from deviations.traces.uploads import files
from tests.conftest import renderer_events
from tests.core.test_services import running_worker, wait_for

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]
ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def worker_elsewhere(s3: Any, tmp_path: Path, settings: Any) -> Iterator[Path]:
    """A worker whose media folder is not the web's: only S3 is shared. Yields its folder."""
    settings.MEDIA_ROOT = tmp_path / "web-media"
    worker_media = tmp_path / "worker-media"
    with running_worker(tmp_path, worker_media, s3.env()):
        yield worker_media


def files_under(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if p.is_file()] if folder.exists() else []


def test_the_worker_ingests_from_object_storage_with_no_shared_folder(
    worker_elsewhere: Path, s3: Any, client: Client, tmp_path: Path, settings: Any
) -> None:
    token = ApiToken.issue(get_user_model().objects.create_user("ci"), "CI")[1]
    data = gzip.compress(json.dumps({"traceEvents": renderer_events(
        [("Paint", 0, 1000), ("Layout", 100, 300)])}).encode(), mtime=0)
    stream = io.BytesIO(data)
    stream.name = "run.json.gz"
    response = client.post("/api/series/hosts/releases/1.0/runs", {"file": stream},
                           headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 201, response.content
    assert response.json()["status"] == "pending"  # waits in S3 for the worker
    run = wait_for(response.json()["run"])
    assert run.status == Run.DONE, (run.error, (tmp_path / "worker.log").read_text()[-3000:])
    assert s3.keys() == [files.key(run.sha256)]
    assert s3.read(files.key(run.sha256)) == data
    assert files_under(Path(settings.MEDIA_ROOT)) == []
    assert files_under(worker_elsewhere) == []
    download = client.get(f"/runs/{run.pk}/file")
    assert b"".join(download.streaming_content) == data
