"""Hardening #9: writes scoped to what a user owns; scoped tokens made and revoked in the
UI; browsing login-only by setting."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from deviations.core.models import ApiToken, Ownership
from deviations.histograms.models import HistogramChange, Probe
from deviations.traces.models import Release, Run
from tests.conftest import plain_histogram, renderer_events

pytestmark = pytest.mark.django_db


def _user(name: str, **extra: Any) -> Any:
    return get_user_model().objects.create_user(name, f"{name}@example.org", "pw", **extra)


def _post_trace(client: Client, token: str, series: str, version: str = "1.0",
                i: int = 0, **fields: Any) -> Any:
    upload = io.BytesIO(json.dumps(renderer_events([("Paint", i, 100 + i)])).encode())
    upload.name = f"run{i}.json"
    return client.post(f"/api/series/{series}/releases/{version}/runs",
                       {"file": upload, **fields}, headers={"Authorization": f"Bearer {token}"})


def _post_histograms(client: Client, token: str, probe: str, emails: list[str]) -> Any:
    records = [plain_histogram(probe, str(b), [10, 20, 30], alert_emails=emails)
               for b in (1, 2, 3)]
    upload = io.BytesIO(json.dumps(records).encode())
    upload.name = "h.json"
    return client.post("/api/histograms/upload", {"file": upload},
                       headers={"Authorization": f"Bearer {token}"})


def test_the_first_writer_owns_a_series_and_others_are_refused(client: Client) -> None:
    alice, mallory = ApiToken.issue(_user("alice"), "ci")[1], ApiToken.issue(_user("mallory"),
                                                                             "x")[1]
    assert _post_trace(client, alice, "web").status_code == 201
    assert Ownership.objects.get().user.username == "alice"
    refused = _post_trace(client, mallory, "web", i=1)
    assert refused.status_code == 403
    assert "belongs to other users" in refused.json()["detail"]
    # Nor may mallory re-order a release of it.
    assert _post_trace(client, mallory, "web", i=2, order="0").status_code == 403
    assert Release.objects.get().order is None
    assert Run.objects.count() == 1
    # Mallory's own series is mallory's.
    assert _post_trace(client, mallory, "other", i=3).status_code == 201


def test_staff_and_added_owners_may_write(client: Client) -> None:
    alice = _user("alice")
    assert _post_trace(client, ApiToken.issue(alice, "ci")[1], "web").status_code == 201
    bob = _user("bob")
    bob_token = ApiToken.issue(bob, "ci")[1]
    assert _post_trace(client, bob_token, "web", i=1).status_code == 403
    Ownership.objects.create(kind=Ownership.SERIES, name="web", user=bob)
    assert _post_trace(client, bob_token, "web", i=1).status_code == 201
    ops = ApiToken.issue(_user("ops", is_staff=True), "ops")[1]
    assert _post_trace(client, ops, "web", i=2).status_code == 201


def test_a_scoped_token_writes_only_where_its_scope_says(client: Client) -> None:
    token = ApiToken.issue(_user("alice"), "ci", scope="chromium-*")[1]
    assert _post_trace(client, token, "chromium-linux").status_code == 201
    refused = _post_trace(client, token, "firefox", i=1)
    assert refused.status_code == 403
    assert "may write only to names matching 'chromium-*'" in refused.json()["detail"]


def test_probes_histograms_and_their_owner_emails_belong_to_their_owners(
    client: Client,
) -> None:
    alice, mallory = ApiToken.issue(_user("alice"), "ci")[1], ApiToken.issue(_user("mallory"),
                                                                             "x")[1]
    assert _post_histograms(client, alice, "GC_MS", ["gc@example.org"]).status_code == 201
    refused = _post_histograms(client, mallory, "GC_MS", ["mallory@evil.example"])
    assert refused.status_code == 403
    assert Probe.objects.get().alert_emails == ["gc@example.org"]


def test_triage_belongs_to_the_probes_owners(client: Client) -> None:
    alice = _user("alice")
    _post_histograms(client, ApiToken.issue(alice, "ci")[1], "GC_MS", [])
    probe = Probe.objects.get()
    change = HistogramChange.objects.create(
        probe=probe, build_id="2", sort_key="2", previous_build_id="1", distance=0.3,
        cutoff=0.1, kind="shift", rule="adaptive", edges=b"", before=b"", after=b"",
    )
    client.force_login(_user("mallory"))
    response = client.post(f"/histograms/changes/{change.pk}/state/", {"state": "invalid"})
    assert response.status_code == 403
    client.force_login(alice)
    assert client.post(f"/histograms/changes/{change.pk}/state/",
                       {"state": "invalid"}).status_code == 302


def test_tokens_are_made_and_revoked_in_the_ui(client: Client) -> None:
    alice = _user("alice")
    client.force_login(alice)
    page = client.post("/tokens/", {"name": "CI", "scope": "web*"}).content.decode()
    token = ApiToken.objects.get()
    assert token.scope == "web*"
    key = page.split('id="new-token">New token: <code>')[1].split("</code>")[0]
    assert ApiToken.hash_key(key) == token.key_sha256
    assert key not in client.get("/tokens/").content.decode()  # shown once
    assert _post_trace(client, key, "web").status_code == 201
    other = Client()
    other.force_login(_user("mallory"))
    assert other.post(f"/tokens/{token.pk}/revoke/").status_code == 404
    assert client.post(f"/tokens/{token.pk}/revoke/").status_code == 302
    assert not ApiToken.objects.exists()
    assert _post_trace(Client(), key, "web", i=1).status_code == 401


def test_browsing_can_be_login_only(client: Client, settings: Any) -> None:
    settings.DEVIATIONS_LOGIN_REQUIRED = True
    response = client.get("/")
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/")
    assert client.get("/api/series").status_code == 401
    assert client.get("/accounts/login/").status_code == 200
    key = ApiToken.issue(_user("alice"), "ci")[1]
    assert client.get("/api/series", headers={"Authorization": f"Bearer {key}"}
                      ).status_code == 200
    client.force_login(get_user_model().objects.get(username="alice"))
    assert client.get("/").status_code == 200
    settings.DEVIATIONS_LOGIN_REQUIRED = False
    assert Client().get("/").status_code == 200
