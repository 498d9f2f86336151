"""Trace files kept whole (``traces.uploads.files``), on the local folder and on S3:
download byte for byte, retention, deletion with the series and the run, orphans."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import re
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import Client
from django.utils import timezone

from deviations.core.models import ApiToken
from deviations.traces import services
from deviations.traces.models import Run, RunTimes, Series
from deviations.traces.uploads import files
from deviations.traces.uploads.tasks import expire_trace_files
from tests.conftest import renderer_events

pytestmark = pytest.mark.django_db


@pytest.fixture
def send(client: Client, committed: Any) -> Any:
    """send(data, name, series, release) -> the API's JSON answer of an upload."""
    token = ApiToken.issue(get_user_model().objects.create_user("ci"), "CI")[1]

    def upload(data: bytes, name: str = "run.json", series: str = "web",
               release: str = "1.0") -> dict[str, Any]:
        stream = io.BytesIO(data)
        stream.name = name
        response = committed(client.post, f"/api/series/{series}/releases/{release}/runs",
                             {"file": stream}, headers={"Authorization": f"Bearer {token}"})
        assert response.status_code in (200, 201), response.content
        # Tasks ran once the request committed: the run as it is now.
        return client.get(f"/api/runs/{response.json()['run']}").json()  # type: ignore[no-any-return]

    return upload


def trace(*functions: tuple[str, float, float]) -> bytes:
    return json.dumps({"traceEvents": renderer_events(list(functions))}).encode()


def download(client: Client, run_id: int) -> tuple[int, bytes, Any]:
    response = client.get(f"/runs/{run_id}/file")
    body = b"".join(response.streaming_content) if response.streaming else response.content
    return response.status_code, body, response


def test_an_upload_is_kept_byte_for_byte_under_its_digest(
    trace_storage: Any, send: Any, client: Client
) -> None:
    data = gzip.compress(trace(("Paint", 0, 100)), mtime=0)
    body = send(data, "run.json.gz")
    sha = hashlib.sha256(data).hexdigest()
    assert trace_storage.keys() == [f"traces/{sha[:2]}/{sha}"]
    assert trace_storage.read(f"traces/{sha[:2]}/{sha}") == data
    assert body["status"] == Run.DONE
    assert body["file_url"] == f"/runs/{body['run']}/file"
    status, got, response = download(client, body["run"])
    assert status == 200
    assert got == data
    assert response["Content-Type"] == "application/octet-stream"
    assert "Content-Encoding" not in response
    assert 'filename="run.json.gz"' in response["Content-Disposition"]
    assert response["Content-Length"] == str(len(data))
    html = client.get(f"/runs/{body['run']}/").content.decode()
    assert f'href="/runs/{body["run"]}/file"' in html


def test_the_same_bytes_in_two_series_are_one_object_until_both_runs_are_gone(
    trace_storage: Any, send: Any, committed: Any
) -> None:
    data = trace(("Paint", 0, 100))
    first = send(data, series="a")
    second = send(data, series="b")
    assert first["run"] != second["run"]
    assert len(trace_storage.keys()) == 1
    committed(services.delete_series, Series.objects.get(name="a"))
    assert len(trace_storage.keys()) == 1  # series b still refers to it
    committed(services.delete_run, Run.objects.get(pk=second["run"]))
    assert trace_storage.keys() == []


def test_deleting_a_series_or_a_release_deletes_its_files(
    trace_storage: Any, send: Any, committed: Any
) -> None:
    send(trace(("Paint", 0, 100)), release="1.0")
    send(trace(("Paint", 0, 101)), release="1.1")
    send(trace(("Paint", 0, 102)), series="other")
    assert len(trace_storage.keys()) == 3
    committed(services.delete_release, Series.objects.get(name="web").releases.get(
        version="1.0"))
    assert len(trace_storage.keys()) == 2
    committed(services.delete_series, Series.objects.get(name="web"))
    kept = Run.objects.get()
    assert trace_storage.keys() == [files.key(kept.sha256)]


def _age(run_id: int, days: float) -> None:
    Run.objects.filter(pk=run_id).update(created=timezone.now() - timedelta(days=days))


def test_retention_deletes_old_files_and_the_run_keeps_its_times(
    trace_storage: Any, send: Any, client: Client, settings: Any
) -> None:
    old = send(trace(("Paint", 0, 100)), "old.json")
    new = send(trace(("Paint", 0, 200)), "new.json")
    _age(old["run"], 10)
    _age(new["run"], 2)
    settings.DEVIATIONS_KEEP_TRACE_DAYS = None  # forever: nothing expires
    assert expire_trace_files() == {"expired": 0, "orphans": 0}
    settings.DEVIATIONS_KEEP_TRACE_DAYS = 7
    assert expire_trace_files()["expired"] == 1
    run = Run.objects.get(pk=old["run"])
    assert not run.file_stored
    assert run.file_removed is not None
    assert run.status == Run.DONE
    assert RunTimes.objects.filter(run=run).exists()
    assert trace_storage.keys() == [files.key(Run.objects.get(pk=new["run"]).sha256)]
    status, body, _ = download(client, run.pk)
    assert status == 404
    assert f"was deleted on {timezone.now():%Y-%m-%d}" in body.decode()
    html = client.get(f"/runs/{run.pk}/").content.decode()
    assert "Deleted on" in html
    assert "files are kept 7 days" in html
    assert f'href="/runs/{run.pk}/file"' not in html
    assert client.get(f"/api/runs/{run.pk}").json()["file_url"] is None
    assert expire_trace_files()["expired"] == 0  # a second pass changes nothing


def test_retention_keeps_an_object_another_run_still_refers_to(
    trace_storage: Any, send: Any, settings: Any
) -> None:
    data = trace(("Paint", 0, 100))
    old = send(data, series="a")
    send(data, series="b")
    _age(old["run"], 10)
    settings.DEVIATIONS_KEEP_TRACE_DAYS = 7
    assert expire_trace_files()["expired"] == 1
    assert len(trace_storage.keys()) == 1


def test_zero_days_keeps_a_file_only_until_its_run_is_ingested(
    trace_storage: Any, send: Any, settings: Any
) -> None:
    settings.DEVIATIONS_KEEP_TRACE_DAYS = 0
    body = send(trace(("Paint", 0, 100)))
    assert body["status"] == Run.DONE
    run = Run.objects.get(pk=body["run"])
    assert not run.file_stored
    assert run.file_removed is not None
    assert trace_storage.keys() == []


def test_the_cli_keeps_its_files_too(trace_storage: Any, tmp_path: Path, client: Client) -> None:
    path = tmp_path / "cli.json"
    path.write_bytes(trace(("Paint", 0, 100)))
    call_command("ingest_traces", "--series", "cli", "--release", "1", str(path),
                 stdout=io.StringIO())
    run = Run.objects.get()
    assert run.file_stored
    assert trace_storage.keys() == [files.key(run.sha256)]
    assert download(client, run.pk)[1] == path.read_bytes()


def test_objects_no_run_refers_to_are_collected_after_a_grace_period(
    trace_storage: Any, send: Any
) -> None:
    from django.core.files.storage import storages

    kept = send(trace(("Paint", 0, 100)))
    orphan = "ab" * 32
    storages["traces"].put(files.key(orphan), io.BytesIO(b"left by a killed process"))
    assert len(trace_storage.keys()) == 2
    assert files.collect_orphans() == 0  # young: maybe an upload still in progress
    later = timezone.now() + files.ORPHAN_GRACE + timedelta(minutes=1)
    assert files.collect_orphans(now=later) == 1
    assert trace_storage.keys() == [files.key(Run.objects.get(pk=kept["run"]).sha256)]


def test_partial_files_of_an_interrupted_write_are_collected(
    settings: Any, tmp_path: Path
) -> None:
    settings.MEDIA_ROOT = tmp_path / "media"
    partial = tmp_path / "media" / "traces" / "ab" / f"{'ab' * 32}.x1y2.partial"
    partial.parent.mkdir(parents=True)
    partial.write_bytes(b"half")
    later = timezone.now() + files.ORPHAN_GRACE + timedelta(minutes=1)
    assert files.collect_orphans(now=later) == 1
    assert not partial.exists()


def test_file_urls_name_the_runs_whose_file_is_kept(send: Any, settings: Any) -> None:
    first = send(trace(("Paint", 0, 100)))
    second = send(trace(("Paint", 0, 101)))
    Run.objects.filter(pk=second["run"]).update(file_stored=False)
    assert files.file_urls([first["run"], second["run"], 999]) == {
        first["run"]: f"/runs/{first['run']}/file"
    }


def test_each_run_point_of_a_function_page_opens_the_run_and_its_file(
    trace_storage: Any, send: Any, client: Client
) -> None:
    """Issue 21: a point of the chart (a run, with ?runs=1) links to its run's page, which
    downloads the file the run was measured from, byte for byte."""
    from deviations.traces.models import Function

    sent = {}
    for k, release in enumerate(("1.0", "1.0", "2.0", "2.0")):
        data = trace(("Paint", 0, 100 + k), ("Layout", 200, 30))
        sent[send(data, f"run{k}.json", release=release)["run"]] = data
    paint = Function.objects.get(series__name="web", name="Paint")
    html = client.get(f"/series/web/functions/{paint.pk}/?runs=1").content.decode()
    figure = json.loads(re.search(
        r'<script id="function-figure" type="application/json">(.*?)</script>', html,
        re.S).group(1))
    runs = next(t for t in figure["data"] if t["name"] == "runs")
    urls = [c[0] for c in runs["customdata"]]
    assert sorted(urls) == sorted(f"/runs/{r}/" for r in sent)
    assert "click: the run and its file" in runs["hovertemplate"]
    for url in urls:
        run_id = int(url.strip("/").split("/")[1])
        assert f'href="/runs/{run_id}/file"' in client.get(url).content.decode()
        assert download(client, run_id)[1] == sent[run_id]
