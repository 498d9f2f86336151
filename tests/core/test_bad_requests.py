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
    """Forms as browsers send them (url-encoded; multipart bodies are left to the views,
    which stream uploads)."""
    response = client.post("/accounts/login/", "username=a%00b&password=x",
                           content_type="application/x-www-form-urlencoded")
    assert response.status_code == 400
    assert "form field 'username'" in response.content.decode()


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
