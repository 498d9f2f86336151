"""The upload write path, durable (issue 23): a failed request leaves no file, concurrent
identical uploads answer a duplicate, a full disk answers 507, an empty file among several
fails alone, and a run whose process was killed is retried by sending its file again."""

from __future__ import annotations

import errno
import io
import json
import shutil
import threading
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.db import OperationalError, connection
from django.test import Client
from django.utils import timezone

from deviations.core.models import ApiToken
from deviations.traces.models import Run, RunTimes
from deviations.traces.uploads import files, runs
from deviations.traces.uploads.submit import submit_uploads
from tests.conftest import renderer_events

URL = "/api/series/web/releases/1.0/runs"


def trace(*functions: tuple[str, float, float]) -> bytes:
    return json.dumps({"traceEvents": renderer_events(list(functions))}).encode()


def stored_files(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file()] if root.exists() else []


@pytest.fixture
def media(settings: Any, tmp_path: Path) -> Path:
    settings.MEDIA_ROOT = tmp_path / "media"
    return tmp_path / "media"


@pytest.fixture
def token(db: None) -> str:
    return ApiToken.issue(get_user_model().objects.create_user("ci"), "CI")[1]


@pytest.fixture
def post(client: Client, token: str, committed: Any) -> Any:
    """post(data, name, **fields): the API's answer to an upload; what the request left
    for on-commit (its ingest, in-process) has run when it returns."""

    def send(data: bytes, name: str = "run.json", **fields: Any) -> Any:
        stream = io.BytesIO(data)
        stream.name = name
        return committed(client.post, URL, {"file": stream, **fields},
                         headers={"Authorization": f"Bearer {token}"})

    return send


@pytest.mark.django_db
def test_a_request_failing_after_the_file_is_written_leaves_no_file(
    media: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A database that restarts while the run is saved: the request fails, and the bytes it
    wrote are deleted with it (they stayed in the media folder for good)."""
    real = Run.save

    def database_restarts(self: Run, *args: Any, **kwargs: Any) -> None:
        raise OperationalError("server closed the connection unexpectedly")

    user = get_user_model().objects.create_user("ci")
    monkeypatch.setattr(Run, "save", database_restarts)
    with pytest.raises(OperationalError):
        submit_uploads("web", "1.0", [("run.json", io.BytesIO(trace(("Paint", 0, 10))))],
                       runs.ThreadOptions(), user=user)
    assert stored_files(media) == []
    assert not Run.objects.exists()
    monkeypatch.setattr(Run, "save", real)
    entry = submit_uploads("web", "1.0", [("run.json", io.BytesIO(trace(("Paint", 0, 10))))],
                           runs.ThreadOptions(), user=user).registered[0]
    assert not entry.duplicate  # sending it again is a new upload, stored whole
    assert len(stored_files(media)) == 1


@pytest.mark.django_db
def test_a_nul_in_a_thread_name_is_refused_before_anything_is_stored(
    media: Path, post: Any
) -> None:
    """PostgreSQL cannot store a NUL: the run's save failed (500) after the file was
    written. Now refused with a 400 naming the field, nothing written."""
    response = post(trace(("Paint", 0, 10)), thread_name="Cr\x00Main")
    assert response.status_code == 400, response.content
    assert "thread name" in response.json()["detail"]
    assert "NUL" in response.json()["detail"]
    assert stored_files(media) == []
    assert not Run.objects.exists()


@pytest.mark.django_db
def test_a_full_disk_answers_507_naming_the_file_and_leaves_nothing(
    media: Path, client: Client, post: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    def fill_up(source: Any, target: Any, length: int = 0) -> None:
        target.write(source.read(50))
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(shutil, "copyfileobj", fill_up)
    response = post(trace(("Paint", 0, 10)), name="big.json")
    assert response.status_code == 507, response.content
    detail = response.json()["detail"]
    assert detail.startswith("big.json: the server has no room left to store this file")
    assert "nothing was stored" in detail
    assert stored_files(media) == []
    assert not Run.objects.exists()

    client.force_login(get_user_model().objects.get(username="ci"))
    stream = io.BytesIO(trace(("Paint", 0, 11)))
    stream.name = "page.json"
    page = client.post("/upload/", {"series": "web", "release": "1.0",
                                    "thread_name": "CrRendererMain",
                                    "process_name": "Renderer", "files": [stream]})
    assert page.status_code == 507
    assert "page.json: the server has no room left" in page.content.decode()
    assert stored_files(media) == []


@pytest.mark.django_db
def test_an_empty_file_among_several_fails_alone_on_the_upload_page(
    media: Path, client: Client, committed: Any
) -> None:
    """The page refused all the files with "The submitted file is empty." naming none;
    the API and the CLI take them file by file, and now the page does too."""
    client.force_login(get_user_model().objects.create_user("u"))
    uploads = []
    for name, data in (("a.json", trace(("Paint", 0, 10))), ("empty.json", b""),
                       ("b.json", trace(("Paint", 0, 12)))):
        stream = io.BytesIO(data)
        stream.name = name
        uploads.append(stream)
    response = committed(client.post, "/upload/", {
        "series": "web", "release": "1.0", "thread_name": "CrRendererMain",
        "process_name": "Renderer", "files": uploads,
    }, headers={"Accept": "application/json"})
    assert response.status_code == 200, response.content
    batch_id = response.json()["status_url"].strip("/").rsplit("/", 1)[-1]
    batch = client.get(f"/api/uploads/{batch_id}")
    by_name = {r["file_name"]: r for r in batch.json()}
    assert by_name["a.json"]["status"] == by_name["b.json"]["status"] == Run.DONE
    assert by_name["empty.json"]["status"] == Run.FAILED
    assert by_name["empty.json"]["error"] == "empty.json: empty file"
    assert len(stored_files(media)) == 2  # nothing kept of the empty one


@pytest.mark.django_db
def test_sending_again_the_file_of_a_run_whose_server_was_killed_retries_it(
    media: Path, post: Any, settings: Any
) -> None:
    """Embedded default: a server killed while it ingested left the run pending with its
    claim, and sending the same file again answered "duplicate" for good."""
    data = trace(("Paint", 0, 10))
    release = runs.get_release("web", "1.0")
    run = runs.register_run(release, io.BytesIO(data), "run.json", runs.ThreadOptions()).run
    lease = settings.DEVIATIONS_CLAIM_LEASE_SECONDS
    # Claimed by the killed process, never renewed since.
    Run.objects.filter(pk=run.pk).update(started=timezone.now() - timedelta(seconds=2 * lease))
    response = post(data)
    assert response.status_code == 200
    assert response.json()["duplicate"] is True
    run.refresh_from_db()
    assert run.status == Run.DONE
    assert RunTimes.objects.filter(run=run).count() == 1


@pytest.mark.django_db
def test_a_run_held_by_a_live_process_is_not_taken_twice(media: Path, post: Any) -> None:
    data = trace(("Paint", 0, 10))
    run = runs.register_run(runs.get_release("web", "1.0"), io.BytesIO(data), "run.json",
                            runs.ThreadOptions()).run
    Run.objects.filter(pk=run.pk).update(started=timezone.now())  # renewed just now
    response = post(data)
    assert response.json()["duplicate"] is True
    run.refresh_from_db()
    assert run.status == Run.PENDING  # its holder finishes it


@pytest.mark.django_db(transaction=True)
def test_concurrent_identical_uploads_answer_one_run_and_a_duplicate(
    media: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two requests with the same bytes, both past the duplicate check before either
    commits: on PostgreSQL the second hit the unique index (IntegrityError, 500) and left
    its copy of the file behind."""
    if connection.vendor != "postgresql":
        pytest.skip("concurrent writers: PostgreSQL (SQLite serialises whole transactions)")
    both_checked = threading.Barrier(2, timeout=30)
    both_inside = threading.Barrier(2, timeout=3)
    real_put, real_ensure = files.put, files.ensure

    def put_when_both_are_here(*args: Any) -> bool:
        both_checked.wait()  # each request has found no run for these bytes
        return real_put(*args)

    def ensure_when_both_are_here(*args: Any) -> None:
        # Each request has looked for the run inside its transaction. Without the digest's
        # lock both get here having found none; with it the second waits for the first's
        # commit, so the first goes on alone after the timeout.
        try:
            both_inside.wait()
        except threading.BrokenBarrierError:
            pass
        real_ensure(*args)

    monkeypatch.setattr(files, "put", put_when_both_are_here)
    monkeypatch.setattr(files, "ensure", ensure_when_both_are_here)
    data = trace(("Paint", 0, 10))
    runs.get_release("web", "1.0")
    user = get_user_model().objects.create_user("ci")
    answers: list[Any] = []

    def upload() -> None:
        try:
            answers.append(submit_uploads("web", "1.0", [("run.json", io.BytesIO(data))],
                                          runs.ThreadOptions(), user=user).registered[0])
        except Exception as exc:  # what the request would have answered 500 with
            answers.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=upload) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert all(isinstance(a, runs.Registered) for a in answers), answers
    assert sorted(a.duplicate for a in answers) == [False, True]
    assert Run.objects.count() == 1
    assert len(stored_files(media)) == 1
