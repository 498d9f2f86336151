"""The REST API: token auth, upload, status, OpenAPI docs."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from deviations.core.models import ApiToken
from deviations.traces.models import Run, RunTimes, Series, SeriesAnalysis
from tests.conftest import renderer_events

pytestmark = pytest.mark.django_db
URL = "/api/series/chromium-linux/releases/56.0.2909.0/runs"


@pytest.fixture
def token() -> str:
    user = get_user_model().objects.create_user("ci", password="x")
    return ApiToken.issue(user, "CI")[1]


@pytest.fixture
def post(client: Client, committed: Any) -> Any:
    def send(
        token: str | None, data: bytes, name: str = "run.json", url: str = URL, **fields: Any
    ) -> Any:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        upload = io.BytesIO(data)
        upload.name = name
        return committed(client.post, url, {"file": upload, **fields}, headers=headers)

    return send


def trace_bytes(events: list[dict[str, Any]]) -> bytes:
    return json.dumps({"traceEvents": events}).encode()


def test_upload_needs_a_valid_token(post: Any, client: Client, simple_events) -> None:
    assert post(None, trace_bytes(simple_events)).status_code == 401
    assert post("wrong", trace_bytes(simple_events)).status_code == 401
    assert not Run.objects.exists()


def test_upload_ingests_and_reports_status(
    post: Any, client: Client, token: str, simple_events
) -> None:
    response = post(token, trace_bytes(simple_events))
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["status_url"] == f"/api/runs/{body['run']}"
    assert body["series"] == "chromium-linux"
    assert body["release"] == "56.0.2909.0"
    status = client.get(body["status_url"]).json()
    assert status["status"] == "done"
    assert status["summary"]["slices"] == 4
    assert RunTimes.objects.count() == 1
    assert ApiToken.objects.get().last_used is not None


def test_duplicate_upload_is_recognised(
    post: Any, client: Client, token: str, simple_events
) -> None:
    first = post(token, trace_bytes(simple_events)).json()
    again = post(token, trace_bytes(simple_events), name="other-name.json")
    assert again.status_code == 200
    assert again.json()["duplicate"] is True
    assert again.json()["run"] == first["run"]
    assert Run.objects.count() == 1


def test_bad_trace_gives_a_failed_run_with_its_reason(
    post: Any, client: Client, token: str
) -> None:
    body = client.get(post(token, b"[{", name="broken.json").json()["status_url"]).json()
    assert body["status"] == "failed"
    assert body["error"].startswith("broken.json: ")
    assert not RunTimes.objects.exists()


def test_bad_names_are_refused(post: Any, client: Client, token: str, simple_events) -> None:
    url = "/api/series/bad%20name/releases/1/runs"
    response = post(token, trace_bytes(simple_events), url=url)
    assert response.status_code == 400
    assert "series name" in response.json()["detail"]


def test_thread_options_as_form_fields(post: Any, client: Client, token: str) -> None:
    events = [
        {"ph": "M", "name": "thread_name", "pid": 1, "tid": 2, "args": {"name": "Worker"}},
        {"ph": "X", "name": "Job", "pid": 1, "tid": 2, "ts": 0, "dur": 10},
    ]
    body = post(
        token, trace_bytes(events), thread_name="Worker", process_name="x", all_threads="true"
    ).json()
    assert client.get(body["status_url"]).json()["status"] == "done"


def test_reads_are_open(post: Any, client: Client, token: str, simple_events) -> None:
    post(token, trace_bytes(simple_events))
    assert client.get("/api/series").json() == [
        {"name": "chromium-linux", "kind": "traces", "description": "", "releases": 1,
         "default_rule": "shifts", "min_relative_change": 0.02,
         "min_absolute_change_us": 2.0, "log_url_template": "",
         "analysis_failure": ""}
    ]
    releases = client.get("/api/series/chromium-linux/releases").json()
    assert releases == [
        {
            "version": "56.0.2909.0",
            "order": None,
            "revision": "",
            "runs_done": 1,
            "runs_failed": 0,
            "runs_pending": 0,
        }
    ]
    assert client.get("/api/runs/999").status_code == 404


def test_openapi_document(client: Client) -> None:
    doc = client.get("/api/openapi.json").json()
    assert "/api/series/{name}/releases/{version}/runs" in doc["paths"]
    assert client.get("/api/docs").status_code == 200


def test_create_api_token_command(capsys) -> None:
    from django.core.management import call_command

    get_user_model().objects.create_user("alice")
    call_command("create_api_token", "alice", "--name", "laptop")
    key = capsys.readouterr().out.strip()
    assert ApiToken.objects.get(key_sha256=ApiToken.hash_key(key)).name == "laptop"


def test_an_upload_over_the_limit_is_cut_off(
    post: Any, client: Client, token: str, settings: Any
) -> None:
    settings.DEVIATIONS_MAX_TRACE_BYTES = 1000
    response = post(token, b"[" + b" " * 5000 + b"]", name="huge.json")
    assert response.status_code == 413
    assert response.json()["detail"] == "huge.json: over the limit of 1,000 bytes"
    assert not Run.objects.exists()
    missing = client.post(URL, {}, headers={"Authorization": f"Bearer {token}"})
    assert missing.status_code == 400
    assert "multipart field 'file'" in missing.json()["detail"]


def test_absurd_times_fail_the_run_and_never_stop_the_series(
    post: Any, client: Client, token: str, simple_events
) -> None:
    """Hardening #1: ts + dur = 1e308 + 1e308 overflowed to infinity, was stored as done, and
    every later analysis of the series raised. Now the run fails with the reason, and the
    series goes on being analysed."""
    for i in range(2):  # two runs: a release the analysis would use
        poison = renderer_events([("Paint", i, 1000), ("Huge", 1e308, 1e308)])
        sent = post(token, trace_bytes(poison), name=f"poison{i}.json").json()
        body = client.get(sent["status_url"]).json()
        assert body["status"] == "failed"
        assert body["error"].startswith(f"poison{i}.json: event #3 has a time out of range")
    for i in range(4):  # two good runs in the poisoned release and two in the next one
        url = URL if i < 2 else URL.replace("56.0.2909.0", "56.0.2910.0")
        events = renderer_events([("Paint", i, 1000 + i), ("Layout", 2000, 50)])
        response = post(token, trace_bytes(events), name=f"good{i}.json", url=url)
        assert response.status_code == 201, response.content
        assert client.get(response.json()["status_url"]).json()["status"] == "done"
    series = Series.objects.get(name="chromium-linux")
    assert SeriesAnalysis.objects.filter(series=series).exists()
    assert RunTimes.objects.count() == 4


@pytest.mark.parametrize("order", ["-5", str(2**63), str(10**30)])
def test_order_out_of_range_is_a_400(post: Any, token: str, simple_events, order: str) -> None:
    """Hardening #7: these passed validation and answered 500."""
    response = post(token, trace_bytes(simple_events), order=order)
    assert response.status_code in (400, 422), response.content
    assert not Run.objects.exists()


def test_the_largest_order_is_accepted(post: Any, token: str, simple_events) -> None:
    response = post(token, trace_bytes(simple_events), order=str(2**63 - 1))
    assert response.status_code == 201, response.content


def test_a_version_with_a_huge_number_is_a_400(post: Any, token: str, simple_events) -> None:
    url = URL.replace("56.0.2909.0", "1." + "9" * 31)
    response = post(token, trace_bytes(simple_events), url=url)
    assert response.status_code == 400
    assert "longer than 30 digits" in response.json()["detail"]
    assert not Run.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_a_file_refused_in_process_is_a_400_with_its_reason(client: Client) -> None:
    """Issue 14: the API answered 201 for a file that failed to parse, so `curl --fail` in
    CI did not notice. With tasks in-process (the embedded default), the answer now says."""
    user = get_user_model().objects.create_user("ci2", password="x")
    key = ApiToken.issue(user, "CI")[1]
    upload = io.BytesIO(b"[{")
    upload.name = "broken.json"
    response = client.post(URL, {"file": upload}, headers={"Authorization": f"Bearer {key}"})
    assert response.status_code == 400
    body = response.json()
    assert body["status"] == "failed"
    assert body["detail"].startswith("broken.json: ")
    assert body["run"] == Run.objects.get().pk


def test_owners_set_the_default_rule_and_the_minimum_change(
    post: Any, client: Client, token: str, simple_events
) -> None:
    post(token, trace_bytes(simple_events))
    other = ApiToken.issue(get_user_model().objects.create_user("other", password="x"), "x")[1]
    url = "/api/series/chromium-linux"
    body = {"default_rule": "paper", "min_absolute_change_us": 5}
    assert client.patch(url, body, content_type="application/json").status_code == 401
    assert client.patch(url, body, content_type="application/json",
                        headers={"Authorization": f"Bearer {other}"}).status_code == 403
    got = client.patch(url, body, content_type="application/json",
                       headers={"Authorization": f"Bearer {token}"})
    assert got.status_code == 200
    assert got.json()["default_rule"] == "paper"
    assert got.json()["min_absolute_change_us"] == 5.0
    assert got.json()["min_relative_change"] == 0.02  # left out: kept
    for rule in ("shifts", "paper"):
        back = client.patch(url, {"default_rule": rule}, content_type="application/json",
                            headers={"Authorization": f"Bearer {token}"})
        assert back.json()["default_rule"] == rule
    for retired in ("mine", "segments", "recommended"):  # retired by issue 19
        bad = client.patch(url, {"default_rule": retired}, content_type="application/json",
                           headers={"Authorization": f"Bearer {token}"})
        assert bad.status_code == 422, retired
