"""The canary API and pages: create, batches (202 new, 200 duplicate, 4xx refused whole),
status, continue, subscribe; the live page and its JSON; user strings escaped."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
from django.test import Client

from deviations.experiments.canaries.models import Canary, CanaryBatch
from tests.ingest.mutations import cases

pytestmark = pytest.mark.django_db

XSS = '<img src=x onerror="alert(1)">'


def _create(api: Client, post: Any, **body: Any) -> dict[str, Any]:
    response = post(api, "/api/canaries", {"name": "play", "bad": "higher", **body})
    assert response.status_code == 201, response.content
    return response.json()


def test_writes_need_a_token(client: Client, post: Any) -> None:
    assert post(client, "/api/canaries", {"name": "x", "bad": "higher"}).status_code == 401
    assert not Canary.objects.exists()


def test_create_and_status(api: Client, post: Any) -> None:
    made = _create(api, post, unit="ms", tau=0.1, owners=["Owner@Example.com"])
    assert made["decision"] == "continue"
    assert made["headline_text"] == "keep going"
    assert made["samples_bound"] == 12957  # docs/statistics.md's table, tau = 0.1
    assert Canary.objects.get(pk=made["id"]).owners == ["owner@example.com"]
    assert made["resolution"] == Canary.DEFAULT_RESOLUTION == 1e-4
    exact = _create(api, post, name="exact", resolution=0)
    assert (exact["resolution"], Canary.objects.get(pk=exact["id"]).resolution) == (0, 0)
    coarse = post(api, "/api/canaries", {"name": "x", "bad": "any", "resolution": 0.5})
    assert coarse.status_code == 400
    assert "resolution" in coarse.json()["detail"]
    bad = post(api, "/api/canaries", {"name": "x", "bad": "sideways"})
    assert bad.status_code == 400
    assert "bad" in bad.json()["detail"]
    listed = api.get("/api/canaries").json()
    assert [c["id"] for c in listed] == [exact["id"], made["id"]]


def test_batches_through_the_api(api: Client, post: Any) -> None:
    cid = _create(api, post, bad="higher", unit="ms")["id"]
    url = f"/api/canaries/{cid}/observations"
    rng = np.random.default_rng(8)
    first = post(api, url, {"batch": "ci-1", "arm": "A", "values": [1.0, 2.0, 3.0]})
    assert first.status_code == 202, first.content
    assert first.json() == {"batch": "ci-1", "seq": 1, "n": 3, "duplicate": False}
    again = post(api, url, {"batch": "ci-1", "arm": "A", "values": [1.0, 2.0, 3.0]})
    assert again.status_code == 200
    assert again.json()["duplicate"] is True
    assert post(api, url, {"batch": "ci-1", "arm": "A", "values": [5.0]}).status_code == 409
    refused = post(api, url, {"batch": "ci-2", "arm": "B", "values": [1.0, "x"]})
    assert refused.status_code in (400, 422)
    # A boolean is not a number: refused with its position (it was stored as 1.0).
    for values, where in (([True, 2], "values[0]: True"), ([1, False], "values[1]: False")):
        boolean = post(api, url, {"batch": "ci-b", "arm": "B", "values": values})
        assert boolean.status_code == 400, boolean.content
        assert boolean.json()["detail"].startswith(where), boolean.json()
    timestamps = post(api, url, {"batch": "ci-t", "arm": "B", "values": [1.0],
                                 "timestamps": [True]})
    assert timestamps.status_code == 400
    assert timestamps.json()["detail"].startswith("timestamps[0]: True")
    nan = api.post(url, '{"batch": "ci-3", "arm": "B", "values": [1.0, NaN]}',
                   content_type="application/json")
    assert nan.status_code in (400, 422)
    assert post(api, "/api/canaries/999/observations",
                {"batch": "x", "arm": "A", "values": [1.0]}).status_code == 404
    assert CanaryBatch.objects.count() == 1
    for i in range(20):
        post(api, url, {"batch": f"a{i}", "arm": "A", "values": rng.normal(100, 10, 500).tolist()})
        post(api, url, {"batch": f"b{i}", "arm": "B", "values": rng.normal(110, 10, 500).tolist()})
        if api.get(f"/api/canaries/{cid}").json()["decision"] != "continue":
            break
    status = api.get(f"/api/canaries/{cid}?change=5").json()
    assert status["decision"] == "reject"
    assert status["headline"] == "regression"
    # the default test: the rank betting test (no tau)
    assert status["method"] == "ranks"
    assert status["method_text"].startswith("rank betting test")
    assert status["words"][0].startswith("B's values are larger than A's: a B value exceeds")
    assert status["words"][1].startswith("the median rose by at least ")
    assert status["words"][1].endswith(" ms")
    assert status["narrow_enough"] is not None
    late = post(api, url, {"batch": "late", "arm": "A", "values": [1.0]})
    assert late.status_code == 409
    assert "continue" in late.json()["detail"]
    assert post(api, f"/api/canaries/{cid}/continue", {}).json()["accepting"] is True
    assert post(api, url, {"batch": "late", "arm": "A", "values": [1.0]}).status_code == 202


def test_subscribe_only_ones_own_address(api: Client, post: Any) -> None:
    cid = _create(api, post)["id"]
    own = post(api, f"/api/canaries/{cid}/subscribe", {"email": "ci@example.com"})
    assert own.status_code == 200
    other = post(api, f"/api/canaries/{cid}/subscribe", {"email": "else@example.com"})
    assert other.status_code == 403
    assert Canary.objects.get(pk=cid).subscribers == ["ci@example.com"]


def test_pages_escape_user_strings(api: Client, client: Client, post: Any) -> None:
    cid = _create(api, post, metric=XSS, unit="<b>ms</b>")["id"]
    rng = np.random.default_rng(9)
    for arm in "AB":
        post(api, f"/api/canaries/{cid}/observations",
             {"batch": arm, "arm": arm, "values": rng.normal(0, 1, 300).tolist()})
    Canary.objects.filter(pk=cid).update(name=XSS)
    for path in ("/canaries/", f"/canaries/{cid}/"):
        html = client.get(path).content.decode()
        assert XSS not in html
        assert "&lt;img" in html
    live = client.get(f"/canaries/{cid}/live.json").json()
    title = live["figures"]["quantiles"]["layout"]["yaxis"]["title"]["text"]
    assert "<img" not in title
    assert live["view"]["n_a"] == 300
    assert len(live["figures"]["quantiles"]["data"]) == 6
    applied = live["view"]["batches_applied"]
    unchanged = client.get(f"/canaries/{cid}/live.json?seen={applied}").json()
    assert unchanged["figures"] is None
    assert unchanged["view"]["n_a"] == 300
    assert client.get(f"/canaries/{cid}/live.json?seen=0").json()["figures"] is not None


def test_create_from_the_browser_form(client: Client, ci_user: Any) -> None:
    assert client.get("/canaries/new/").status_code == 302  # login first
    client.force_login(ci_user)
    response = client.post("/canaries/new/", {"name": "web", "bad": "lower", "alpha": 0.05,
                                              "quantile": 0.99, "tau": "0.1"})
    canary = Canary.objects.get()
    assert response.status_code == 302
    assert response["Location"] == canary.get_absolute_url()
    assert (canary.bad, canary.tau, canary.quantile, canary.created_by) == (
        "lower", 0.1, 0.99, ci_user)
    assert canary.resolution == Canary.DEFAULT_RESOLUTION  # the field left empty
    bad = client.post("/canaries/new/", {"name": "web", "bad": "lower", "alpha": 0.9,
                                         "quantile": 0.95})
    assert bad.status_code == 200
    assert "alpha" in bad.content.decode()
    page = client.get(canary.get_absolute_url()).content.decode()
    assert "keep going" in page
    assert "the test decides by 12957 per arm" in page


def test_mutated_json_bodies_never_answer_500(api: Client, post: Any) -> None:
    """Create and batch bodies under the fuzz suite's mutations: 4xx or accepted, never
    a 500, and a refused batch stores nothing."""
    cid = _create(api, post)["id"]
    api.raise_request_exception = False
    bodies = {
        "/api/canaries": json.dumps({"name": "f", "bad": "higher", "tau": 0.1,
                                     "owners": ["a@example.com"]}).encode(),
        f"/api/canaries/{cid}/observations": json.dumps(
            {"batch": "seed", "arm": "A", "values": [1.5, 2.5, 3.0]}).encode(),
    }
    codes: dict[int, int] = {}
    for url, seed_body in bodies.items():
        for i, data in cases([seed_body], 200, seed=11):
            before = CanaryBatch.objects.count()
            response = api.post(url, data, content_type="application/json")
            codes[response.status_code] = codes.get(response.status_code, 0) + 1
            assert response.status_code < 500, (url, i, data[:200], response.content[:300])
            if response.status_code >= 400:
                assert CanaryBatch.objects.count() == before
    assert set(codes) & {200, 201, 202}, codes
    assert set(codes) - {200, 201, 202}, codes


def test_admin_pages_render(api: Client, post: Any, client: Client,
                            django_user_model: Any) -> None:
    cid = _create(api, post)["id"]
    post(api, f"/api/canaries/{cid}/observations", {"batch": "a", "arm": "A", "values": [1.0]})
    admin = django_user_model.objects.create_superuser("root", "root@example.com", "pw")
    client.force_login(admin)
    assert client.get("/admin/deviations/canary/").status_code == 200
    assert client.get(f"/admin/deviations/canary/{cid}/change/").status_code == 200
