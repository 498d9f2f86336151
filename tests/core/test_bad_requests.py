"""Requests a page cannot answer (issue 23): a NUL character in a URL or form is a 400
naming where it is, never a 500 (PostgreSQL's text cannot hold it; the second pass of
``make test`` runs this there); an unknown page is the site's 404 with a way back."""

from __future__ import annotations

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(("url", "where"), [
    ("/series/a%00b/", "the URL path"),
    ("/alerts/?family=%00", "URL parameter 'family'"),
    ("/alerts/?status=new&assignee=x%00y", "URL parameter 'assignee'"),
    ("/series/s/compare/?base=%00&new=1", "URL parameter 'base'"),
    ("/?q%00=1", "URL parameter 'q?'"),
    ("/api/series/a%00b", "the URL path"),
    ("/api/alerts/?family=%00", "URL parameter 'family'"),
])
def test_a_nul_in_the_url_is_a_clear_400(client: Client, url: str, where: str) -> None:
    response = client.get(url)
    assert response.status_code == 400
    text = response.json()["detail"] if url.startswith("/api/") else response.content.decode()
    assert text.startswith(f"{where} holds a NUL character")


def test_a_nul_in_a_form_field_is_a_clear_400(client: Client) -> None:
    """Forms as browsers send them: url-encoded, and multipart (a page's upload form; a
    note sent as multipart reached PostgreSQL: a 500 the form fuzzing found)."""
    response = client.post("/accounts/login/", "username=a%00b&password=x",
                           content_type="application/x-www-form-urlencoded")
    assert response.status_code == 400
    assert "form field 'username'" in response.content.decode()
    response = client.post("/accounts/login/", {"username": "a\x00b", "password": "x"})
    assert response.status_code == 400
    assert "form field 'username'" in response.content.decode()


def test_a_body_that_is_not_multipart_is_not_a_500(client: Client) -> None:
    for body in (b"garbage", b"--xyz\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nb"):
        response = client.generic("POST", "/accounts/login/", body,
                                  content_type="multipart/form-data; boundary=xyz")
        assert response.status_code < 500
    response = client.generic("POST", "/accounts/login/", b"x",
                              content_type="multipart/form-data")  # no boundary
    assert response.status_code < 500


def test_urls_without_nul_still_work(client: Client) -> None:
    assert client.get("/alerts/?family=x").status_code == 200
    assert client.get("/series/nope/").status_code == 404


def test_an_unknown_page_is_the_sites_404_with_a_way_back(client: Client) -> None:
    """Issue 23: an unknown series answered Django's bare "Not Found"."""
    response = client.get("/series/no-such-series/")
    assert response.status_code == 404
    page = response.content.decode()
    assert 'id="not-found"' in page
    assert "No series, release, function or run by that name" in page
    assert 'href="/"' in page  # the site's navigation and a link home
    hostile = client.get("/series/%3Cimg%20src=x%3E/").content.decode()
    assert "<img src=x>" not in hostile


def test_a_nul_in_a_json_string_is_a_4xx_on_every_database(client: Client) -> None:
    """JSON bodies can carry \\u0000 in any text field; PostgreSQL's text cannot hold it
    (the second pass of make test runs this there): refused with a 4xx, or cleaned
    (annotations replace control characters), never a 500."""
    from django.contrib.auth import get_user_model

    from deviations.core.models import ApiToken
    from deviations.traces.models import Release, Series

    user = get_user_model().objects.create_user("ci", "ci@example.org", "pw", is_staff=True)
    token = ApiToken.issue(user, "CI")[1]
    series = Series.objects.create(name="s")
    for v in ("1", "2", "3"):
        Release.objects.create(series=series, version=v)
    from deviations.alerts.models import Alert
    from deviations.alerts.recording import record
    from deviations.experiments.canaries import services as canaries
    from tests.alerts.test_groups import trace

    record([trace(series, "Paint", "2", "3")])
    alert = Alert.objects.get().pk
    canary = canaries.create_canary("c0", bad="higher", user=user).pk
    client.raise_request_exception = False
    nul = "a\\u0000b"
    bodies = {
        "/api/series/s/releases/1/annotations": f'{{"text": "{nul}"}}',
        "/api/canaries": f'{{"name": "{nul}", "bad": "higher"}}',
        "/api/canaries#metric": f'{{"name": "c", "bad": "higher", "metric": "{nul}"}}',
        "/api/histograms/subscriptions": f'{{"email": "ci@example.org", "pattern": "{nul}", '
                                         '"target": "histogram", "digest": false}',
        "/api/histograms/annotations": f'{{"probe": "{nul}", "build_id": "1", "text": "x"}}',
        "/api/alerts/triage": f'{{"alerts": [{alert}], "note": "{nul}"}}',
        "/api/alerts/triage#bug": f'{{"alerts": [{alert}], "bug_url": "https://b/{nul}"}}',
        "/api/alerts/triage#assignee": f'{{"alerts": [{alert}], "assignee": "{nul}"}}',
        f"/api/canaries/{canary}/observations": f'{{"batch": "{nul}", "arm": "A", '
                                                 '"values": [1.0]}',
    }
    for url, body in bodies.items():
        response = client.post(url.split("#")[0], body, content_type="application/json",
                               headers={"Authorization": f"Bearer {token}"})
        assert response.status_code < 500, (url, response.status_code, response.content[:300])
        assert "\\u0000" not in response.content.decode()
