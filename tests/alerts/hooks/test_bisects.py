"""The bisect round trip: "Start bisect" sends the range, signed, to the series' bisect
service (a receiver on loopback), which posts its result back with the bisect's token;
the alert and group pages show it."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client

from deviations.alerts.hooks import services
from deviations.alerts.hooks.models import Bisect, Webhook, WebhookDelivery
from deviations.alerts.models import Alert
from deviations.alerts.recording import record
from deviations.core.models import Ownership
from deviations.core.packing import name_digest
from tests.alerts.hooks.receiver import Receiver, verified
from tests.alerts.hooks.test_webhooks import api, series, user
from tests.alerts.test_groups import trace

pytestmark = pytest.mark.django_db


def _setup(receiver: Receiver) -> tuple[Alert, Any, Webhook]:
    s = series()
    alice = user("alice")
    Ownership.objects.create(kind=Ownership.SERIES, name="s", name_sha1=name_digest("s"),
                             user=alice)
    hook = services.create_webhook(alice, url=receiver.url + "/bisect", pattern="s",
                                   purpose=Webhook.BISECT)
    (pk,) = record([trace(s, "Paint", "2", "3")])
    return Alert.objects.select_related("group").get(pk=pk), alice, hook


def test_round_trip(receiver: Receiver, django_capture_on_commit_callbacks) -> None:
    alert, alice, hook = _setup(receiver)
    page = Client()
    page.force_login(alice)
    assert "Start bisect" in page.get(f"/alerts/{alert.pk}/").content.decode()
    with django_capture_on_commit_callbacks(execute=True):
        started = page.post(f"/hooks/alerts/{alert.pk}/bisect/")
    assert started.status_code == 302
    (request,) = receiver.requests
    assert request.path == "/bisect"
    assert verified(request, hook.secret)
    sent = json.loads(request.body)
    bisect = Bisect.objects.get()
    assert (sent["event"], sent["bisect"], sent["alert"]) == ("bisect", bisect.pk, alert.pk)
    assert (sent["series"], sent["from_version"], sent["to_version"]) == ("s", "2", "3")
    assert sent["from_revision"] is None  # releases carry no revision yet
    assert sent["callback_url"].endswith(f"/api/bisects/{bisect.pk}")
    assert bisect.status == Bisect.REQUESTED
    assert WebhookDelivery.objects.get(bisect=bisect).status == WebhookDelivery.DELIVERED
    # A second bisect while this one runs is refused.
    again = api(alice).post(f"/api/alerts/{alert.pk}/bisect")
    assert again.status_code == 409
    # The bisect service answers through the callback with the token it was sent.
    callback = "/" + sent["callback_url"].split("/", 3)[3]
    service = Client(headers={"Authorization": f"Bearer {sent['token']}"})
    assert Client(headers={"Authorization": "Bearer forged"}).post(
        callback, {"status": "done"}, content_type="application/json").status_code == 403
    assert service.post(callback, {"status": "running"},
                        content_type="application/json").status_code == 200
    done = service.post(callback, {"status": "done", "culprit_revision": "abc123def",
                                   "url": "https://ci.example.org/bisect/7",
                                   "message": "<b>culprit</b> found in 9 steps"},
                        content_type="application/json")
    assert done.status_code == 200, done.content
    assert done.json()["culprit_revision"] == "abc123def"
    assert service.post(callback, {"status": "failed"},
                        content_type="application/json").status_code == 409  # finished
    bisect.refresh_from_db()
    assert (bisect.status, bisect.culprit_revision) == (Bisect.DONE, "abc123def")
    assert bisect.finished is not None
    for path in (f"/alerts/{alert.pk}/", f"/alerts/groups/{alert.group_id}/"):
        html = Client().get(path).content.decode()
        assert "abc123def" in html, path
        assert "https://ci.example.org/bisect/7" in html
        assert "<b>culprit</b>" not in html  # escaped
    assert Client().get(f"/api/bisects/{bisect.pk}").json()["status"] == "done"
    # Finished: a new bisect may start.
    assert api(alice).post(f"/api/alerts/{alert.pk}/bisect").status_code == 201


def test_who_may_start_a_bisect(receiver: Receiver) -> None:
    alert, alice, _ = _setup(receiver)
    bob, carol = user("bob"), user("carol")
    assert api(bob).post(f"/api/alerts/{alert.pk}/bisect").status_code == 403
    page = Client()
    page.force_login(bob)
    refused = page.post(f"/hooks/alerts/{alert.pk}/bisect/")
    assert refused.status_code == 403
    assert 'id="bisect-error"' in refused.content.decode()  # the alert's page, with why
    Alert.objects.filter(pk=alert.pk).update(assignee=carol)
    assert api(carol, scope="other-*").post(
        f"/api/alerts/{alert.pk}/bisect").status_code == 403
    assert api(carol).post(f"/api/alerts/{alert.pk}/bisect").status_code == 201
    assert not Bisect.objects.filter(requested_by=bob).exists()


def test_only_regressions_of_series_with_a_service(receiver: Receiver) -> None:
    alert, alice, hook = _setup(receiver)
    Alert.objects.filter(pk=alert.pk).update(direction=Alert.IMPROVEMENT)
    refused = api(alice).post(f"/api/alerts/{alert.pk}/bisect")
    assert refused.status_code == 400
    assert "only a regression" in refused.json()["detail"]
    Alert.objects.filter(pk=alert.pk).update(direction=Alert.REGRESSION)
    hook.delete()
    refused = api(alice).post(f"/api/alerts/{alert.pk}/bisect")
    assert refused.status_code == 409
    assert "no bisect service" in refused.json()["detail"]


def test_bisect_service_is_set_by_the_series_owners(receiver: Receiver) -> None:
    _setup(receiver)
    bob = user("bob")
    body = {"url": receiver.url, "pattern": "s", "purpose": "bisect"}
    response = api(bob).post("/api/webhooks", body, content_type="application/json")
    assert response.status_code == 403
    assert Webhook.objects.filter(purpose=Webhook.BISECT).count() == 1


@pytest.mark.parametrize(("body", "message"), [
    ({"status": "done", "culprit_revision": "a" * 201}, "culprit_revision is longer than 200"),
    ({"status": "done", "culprit_revision": "a\x00b"}, "culprit_revision holds a control"),
    ({"status": "done", "message": "x\x00"}, "message holds a NUL"),
    ({"status": "done", "message": "x" * 2001}, "message is longer than 2000"),
    ({"status": "done", "url": "javascript:alert(1)"}, "http(s) URL"),
    ({"status": "requested"}, "status must be one of running, done, failed"),
])
def test_bad_results_are_refused(receiver: Receiver, body: dict[str, str],
                                 message: str) -> None:
    alert, alice, _ = _setup(receiver)
    bisect_id = api(alice).post(f"/api/alerts/{alert.pk}/bisect").json()["id"]
    service = Client(headers={"Authorization": f"Bearer {services.bisect_token(bisect_id)}"})
    response = service.post(f"/api/bisects/{bisect_id}", body, content_type="application/json")
    assert response.status_code == 400, response.content
    assert message in response.json()["detail"]
    assert Bisect.objects.get().status == Bisect.REQUESTED


def test_an_unreachable_service_fails_the_bisect(receiver: Receiver, committed) -> None:
    alert, alice, _ = _setup(receiver)
    receiver.statuses = [404]
    bisect = committed(services.start_bisect, alice, alert)
    bisect.refresh_from_db()
    assert bisect.status == Bisect.FAILED
    assert bisect.message.startswith("the bisect service was not reached: HTTP 404")
    assert committed(services.start_bisect, alice, alert).status == Bisect.REQUESTED
