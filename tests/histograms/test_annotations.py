"""Notes on probe builds (deviations.histograms.annotations): API, probe page, chart marks."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from deviations.core import access
from deviations.core.models import ApiToken, Ownership
from deviations.histograms.models import BuildAnnotation, Probe
from deviations.histograms.store import queue_detection, store_histogram_file
from tests.conftest import plain_histogram

pytestmark = pytest.mark.django_db
EVIL = '<img src=x onerror="alert(1)">new bot'


@pytest.fixture
def probe(write_histograms, committed) -> Probe:
    records = [plain_histogram("GC_MS", f"2026010{k}", [1000, 2000, 3000]) for k in range(1, 6)]
    committed(store_histogram_file, write_histograms("h.json", records))
    found = Probe.objects.get(name="GC_MS")
    committed(queue_detection, [found.pk])
    found.refresh_from_db()
    assert "20260103" in found.scan["builds"]
    return found


def _user(name: str) -> Any:
    return get_user_model().objects.create_user(name, password="pw-for-tests")


def _figure(page: str) -> dict[str, Any]:
    return json.loads(page.split('id="distance-figure" type="application/json">')[1]
                      .split("</script>")[0])


def test_api_note_on_a_build_shows_on_the_probe_chart(client: Client, probe: Probe) -> None:
    _, key = ApiToken.issue(_user("alice"), "ci")
    auth = {"Authorization": f"Bearer {key}"}
    created = client.post("/api/histograms/annotations",
                          {"probe": "GC_MS", "build_id": "20260103", "text": EVIL},
                          content_type="application/json", headers=auth)
    assert created.status_code == 201, created.content
    assert created.json()["build_id"] == "20260103"
    listed = client.get("/api/histograms/annotations", {"probe": "GC_MS"}).json()
    assert [n["text"] for n in listed] == [EVIL]
    page = client.get(f"/histograms/probes/{probe.pk}/").content.decode()
    assert "<img src=x" not in page
    figure = _figure(page)
    mark = next(a for a in figure["layout"]["annotations"] if "new bot" in a["hovertext"])
    assert mark["x"] == "20260103"
    assert "<img" not in mark["text"]
    assert "<img" not in mark["hovertext"]
    unknown = client.post("/api/histograms/annotations",
                          {"probe": "GC_MS", "build_id": "1999", "text": "x"},
                          content_type="application/json", headers=auth)
    assert unknown.status_code == 404
    assert "has no build '1999'" in unknown.json()["detail"]
    note = BuildAnnotation.objects.get()
    _, other = ApiToken.issue(_user("bob"), "ci")
    url = f"/api/histograms/annotations/{note.pk}"
    assert client.delete(url, headers={"Authorization": f"Bearer {other}"}).status_code == 403
    assert client.delete(url, headers=auth).status_code == 200
    assert not BuildAnnotation.objects.exists()


def test_probe_page_form_and_delete(client: Client, probe: Probe) -> None:
    alice = _user("alice")
    client.force_login(alice)
    response = client.post(f"/histograms/probes/{probe.pk}/annotations/",
                           {"build_id": "20260102", "text": "switched to headless"})
    assert response.status_code == 302
    page = client.get(f"/histograms/probes/{probe.pk}/").content.decode()
    assert 'id="annotate-form"' in page
    assert "switched to headless" in page
    note = BuildAnnotation.objects.get()
    owner = _user("owner")
    access.claim(owner, Ownership.PROBE, ["GC_MS"])
    client.force_login(_user("mallory"))
    assert client.post(f"/histograms/probes/{probe.pk}/annotations/",
                       {"build_id": "20260102", "text": "x"}).status_code == 403
    assert client.post(f"/histograms/annotations/{note.pk}/delete/").status_code == 403
    client.force_login(owner)
    assert client.post(f"/histograms/annotations/{note.pk}/delete/").status_code == 302
    assert not BuildAnnotation.objects.exists()
