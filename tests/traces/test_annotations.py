"""Notes on releases (deviations.traces.annotations): the release page's form, the API,
who may delete, and the marks on the matrix and the function chart (escaped)."""

from __future__ import annotations

import html
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from deviations.core import access
from deviations.core.models import ApiToken, Ownership
from deviations.traces.analysis import analyse_series
from deviations.traces.models import Function, ReleaseAnnotation, Series
from deviations.traces.uploads.runs import ThreadOptions, get_release, ingest_local_file
from tests.conftest import renderer_events

pytestmark = pytest.mark.django_db
EVIL = '<b onmouseover="alert(1)">headless</b>'


@pytest.fixture
def series(write_trace) -> Series:
    for r, version in enumerate(("1.0", "2.0", "3.0")):
        for k in range(3):
            events = renderer_events([("Paint", 0, 1000 + 10 * k + r),
                                      ("Layout", 5000, 300 + k)])
            path = write_trace(f"{version}-{k}.json", events)
            ingest_local_file(get_release("web", version), path, ThreadOptions())
    found = Series.objects.get(name="web")
    analyse_series(found.pk)
    return found


def user(name: str, **extra: Any) -> Any:
    return get_user_model().objects.create_user(name, password="pw-for-tests", **extra)


def login(client: Client, name: str, **extra: Any) -> Any:
    u = user(name, **extra)
    client.force_login(u)
    return u


def test_note_from_the_release_page_shows_everywhere_escaped(client: Client, series) -> None:
    alice = login(client, "alice")
    response = client.post("/series/web/releases/2.0/annotations/", {"text": EVIL})
    assert response.status_code == 302
    assert response["Location"] == "/series/web/releases/2.0/#annotations"
    note = ReleaseAnnotation.objects.get()
    assert (note.author, note.release.version, note.text) == (alice, "2.0", EVIL)
    page = client.get("/series/web/releases/2.0/").content.decode()
    assert html.escape(EVIL, quote=False) in page or "&lt;b onmouseover" in page
    assert EVIL not in page
    matrix = client.get("/series/web/").context["figure"]["layout"]
    marks = [a for a in matrix["annotations"] if "headless" in a["hovertext"]]
    assert marks[0]["x"] == "2.0"
    assert "<b" not in marks[0]["text"]
    assert "<b" not in marks[0]["hovertext"]
    assert "alice" in marks[0]["hovertext"]
    assert any(s.get("x0") == "2.0" and s["type"] == "line" for s in matrix["shapes"])
    paint = Function.objects.get(series=series, name="Paint")
    chart = client.get(f"/series/web/functions/{paint.pk}/").context["figure"]["layout"]
    mark = next(a for a in chart["annotations"] if "headless" in a["hovertext"])
    assert mark["x"] == 1  # the second release's slot


def test_writing_needs_login_and_the_right_to_write(client: Client, series) -> None:
    response = client.post("/series/web/releases/2.0/annotations/", {"text": "x"})
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/")
    owner = user("owner")
    access.claim(owner, Ownership.SERIES, ["web"])
    login(client, "mallory")
    refused = client.post("/series/web/releases/2.0/annotations/", {"text": "x"})
    assert refused.status_code == 403
    assert "belongs to other users" in refused.content.decode()
    assert not ReleaseAnnotation.objects.exists()


@pytest.mark.parametrize(("text", "says"), [("   ", "needs a text"), ("x" * 501, "at most 500")])
def test_bad_text_is_refused(client: Client, series, text: str, says: str) -> None:
    login(client, "alice")
    response = client.post("/series/web/releases/2.0/annotations/", {"text": text})
    assert response.status_code == 400
    assert says in response.content.decode()


def test_delete_by_author_owner_or_staff_only(client: Client, series) -> None:
    alice, bob, owner = user("alice"), user("bob"), user("owner")
    release = series.releases.get(version="1.0")
    notes = [ReleaseAnnotation.objects.create(release=release, text=f"n{k}", author=alice)
             for k in range(3)]
    client.force_login(bob)
    url = "/series/web/annotations/{}/delete/"
    assert client.post(url.format(notes[0].pk)).status_code == 403
    client.force_login(alice)
    assert client.post(url.format(notes[0].pk)).status_code == 302
    access.claim(owner, Ownership.SERIES, ["web"])
    client.force_login(owner)
    assert client.post(url.format(notes[1].pk)).status_code == 302
    client.force_login(user("admin", is_staff=True))
    assert client.post(url.format(notes[2].pk)).status_code == 302
    assert not ReleaseAnnotation.objects.exists()


def test_api_create_list_delete(client: Client, series) -> None:
    alice = user("alice")
    _, key = ApiToken.issue(alice, "ci")
    auth = {"Authorization": f"Bearer {key}"}
    url = "/api/series/web/releases/3.0/annotations"
    assert client.post(url, {"text": "new bot"}, content_type="application/json"
                       ).status_code == 401
    created = client.post(url, {"text": "new bot"}, content_type="application/json",
                          headers=auth)
    assert created.status_code == 201
    body = created.json()
    assert (body["release"], body["text"], body["author"]) == ("3.0", "new bot", "alice")
    listed = client.get("/api/series/web/annotations").json()
    assert [n["text"] for n in listed] == ["new bot"]
    assert client.post(url, {"text": ""}, content_type="application/json",
                       headers=auth).status_code == 400
    _, other = ApiToken.issue(user("bob"), "ci")
    gone = f"/api/series/web/annotations/{body['id']}"
    assert client.delete(gone, headers={"Authorization": f"Bearer {other}"}).status_code == 403
    assert client.delete(gone, headers=auth).status_code == 200
    assert client.get("/api/series/web/annotations").json() == []


def test_notes_go_with_their_release(series) -> None:
    release = series.releases.get(version="1.0")
    ReleaseAnnotation.objects.create(release=release, text="gone soon")
    release.delete()
    assert not ReleaseAnnotation.objects.exists()
