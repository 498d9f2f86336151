"""Server-rendered pages and the upload form (without a browser)."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from deviations.traces.models import Run

pytestmark = pytest.mark.django_db


@pytest.fixture
def user_client(client: Client) -> Client:
    user = get_user_model().objects.create_user("u", password="pw-for-tests")
    client.force_login(user)
    return client


def upload_file(name: str, data: bytes) -> io.BytesIO:
    f = io.BytesIO(data)
    f.name = name
    return f


def form(**extra: Any) -> dict[str, Any]:
    return {"series": "web", "release": "1.0", "thread_name": "CrRendererMain",
            "process_name": "Renderer", **extra}


def test_upload_needs_login(client: Client) -> None:
    response = client.get("/upload/")
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/")


def test_upload_several_files_then_status(user_client: Client, simple_events, committed) -> None:
    good = upload_file("good.json", json.dumps(simple_events).encode())
    bad = upload_file("bad.json", b"nope")
    response = committed(user_client.post, "/upload/", form(files=[good, bad]),
                         headers={"Accept": "application/json"})
    assert response.status_code == 200, response.content
    status_url = response.json()["status_url"]
    assert user_client.get(status_url).status_code == 200
    batch = status_url.rstrip("/").rsplit("/", 1)[1]
    runs = {r["file_name"]: r for r in user_client.get(f"/api/uploads/{batch}").json()}
    assert runs["good.json"]["status"] == "done"
    assert runs["bad.json"]["status"] == "failed"
    assert runs["bad.json"]["error"].startswith("bad.json: ")


@pytest.mark.parametrize(
    ("field", "value", "says"),
    [("order", str(2**63), "less than or equal to"), ("order", "-1", "greater than or equal"),
     ("release", "1." + "9" * 31, "longer than 30 digits")],
)
def test_upload_form_refuses_what_would_answer_500(
    user_client: Client, simple_events, field: str, value: str, says: str
) -> None:
    """Hardening #7: an order of 2^63 or more, a number of more than 30 digits."""
    trace = upload_file("t.json", json.dumps(simple_events).encode())
    response = user_client.post("/upload/", form(files=[trace], **{field: value}))
    assert response.status_code == 400
    assert says in response.content.decode()
    assert not Run.objects.exists()


def test_upload_form_errors(user_client: Client) -> None:
    response = user_client.post("/upload/", form(release="a/b"))
    assert response.status_code == 400
    assert b"release version" in response.content
    assert b"Choose at least one trace file" in response.content
    json_errors = user_client.post("/upload/", form(), headers={"Accept": "application/json"})
    assert json_errors.status_code == 400
    assert "files" in json_errors.json()["errors"]


def test_pages_render_and_escape_names(user_client: Client, committed) -> None:
    from tests.conftest import renderer_events

    hostile = "<img src=x onerror=alert(1)>"
    data = json.dumps(renderer_events([(hostile, 0, 100), ("Paint", 200, 50)])).encode()
    committed(user_client.post, "/upload/", form(files=[upload_file("<b>x</b>.json", data)]))
    run = Run.objects.get()
    assert run.status == Run.DONE
    for url in ["/", "/series/web/", "/series/web/releases/1.0/", f"/runs/{run.pk}/"]:
        page = user_client.get(url)
        assert page.status_code == 200, url
        html = page.content.decode()
        assert "<img src=x" not in html, url
        assert "<b>x</b>" not in html, url
    release_page = user_client.get("/series/web/releases/1.0/").content.decode()
    assert "&lt;img src=x onerror=alert(1)&gt;" in release_page
    assert user_client.get("/series/nope/").status_code == 404


def test_upload_page_names_a_file_over_the_limit(user_client: Client, settings) -> None:
    settings.DEVIATIONS_MAX_TRACE_BYTES = 100
    response = user_client.post("/upload/", form(files=[upload_file("big.json", b"[" * 500)]))
    assert response.status_code == 400
    assert "big.json: over the limit of 100 bytes" in response.content.decode()
    assert not Run.objects.exists()


def test_the_embedded_secret_key_is_made_once_per_installation(tmp_path) -> None:
    from deviations.settings import _secret_key

    path = tmp_path / "key"
    first = _secret_key(path)
    assert len(first) >= 50
    assert first == _secret_key(path)  # kept
    assert path.stat().st_mode & 0o777 == 0o600
    assert _secret_key(tmp_path / "other") != first  # random per installation
