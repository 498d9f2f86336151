"""Webhooks of alert groups: one signed delivery per group and hook, Slack and Matrix
shapes, retries with backoff, no retry on a 4xx, the page and the API's owner checks."""

from __future__ import annotations

import io
import json
import time
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from django.test import Client
from django.utils import timezone

from deviations.alerts import notify
from deviations.alerts.hooks import delivery, outbound, services
from deviations.alerts.hooks.models import DeliveryAttempt, Webhook, WebhookDelivery
from deviations.alerts.hooks.tasks import deliver_due_webhooks
from deviations.alerts.models import AlertGroup
from deviations.alerts.recording import record
from deviations.core.errors import UserError
from deviations.core.models import ApiToken
from deviations.traces.models import Release, Series
from tests.alerts.hooks.receiver import Receiver, verified
from tests.alerts.test_groups import trace

pytestmark = pytest.mark.django_db


def user(name: str, **extra: Any) -> Any:
    return get_user_model().objects.create_user(name, f"{name}@example.org", "pw", **extra)


def api(u: Any, scope: str = "") -> Client:
    return Client(headers={"Authorization": f"Bearer {ApiToken.issue(u, 't', scope=scope)[1]}"})


def series(name: str = "s", versions: tuple[str, ...] = ("1", "2", "3", "4")) -> Series:
    s = Series.objects.create(name=name)
    for v in versions:
        Release.objects.create(series=s, version=v)
    return s


def hook(owner: Any, url: str, **kwargs: Any) -> Webhook:
    return services.create_webhook(owner, url=url, pattern=kwargs.pop("pattern", "s"),
                                   **kwargs)


def test_one_signed_delivery_per_group(receiver: Receiver, committed) -> None:
    s = series()
    alice = user("alice")
    h = hook(alice, receiver.url + "/in")
    record([trace(s, "Paint", "2", "3"), trace(s, "Layout", "2", "3", pct=20)])
    committed(notify.notify_due_groups)
    record([trace(s, "Paint", "3", "4")])  # another group, later
    committed(notify.notify_due_groups)
    committed(notify.notify_due_groups)  # nothing due twice
    assert len(receiver.requests) == 2
    first = receiver.requests[0]
    assert first.method == "POST"
    assert first.path == "/in"
    assert verified(first, h.secret)
    assert not verified(first, "another secret")
    payload = json.loads(first.body)
    assert payload["event"] == "alert_group"
    assert payload["group"]["family"] == "s"
    assert [a["subject"] for a in payload["alerts"]] == ["Paint", "Layout"]  # largest first
    assert payload["range"]["from_version"] == "2"
    assert payload["range"]["to_version"] == "3"
    assert first.headers["X-Deviations-Event"] == "group"
    assert abs(int(first.headers["X-Deviations-Timestamp"]) - time.time()) < 60
    groups = set(WebhookDelivery.objects.values_list("group_id", flat=True))
    assert groups == set(AlertGroup.objects.values_list("pk", flat=True))
    assert WebhookDelivery.objects.filter(status=WebhookDelivery.DELIVERED).count() == 2
    # Claimed: a second pass over the same group creates nothing.
    g = AlertGroup.objects.order_by("pk").first()
    assert services.deliver_group(g, list(g.alerts.all()), timezone.now()) == []


def test_the_signature_is_over_the_timestamp_and_exact_body() -> None:
    # Computed independently: printf '1700000000.{"a":1}' | openssl dgst -sha256 -hmac k
    assert outbound.signature("k", 1700000000, b'{"a":1}') == (
        "sha256=1b6ad1bc9bf48c52ce01939866d5877c6cc4e87ddad27e16673cb8c4964394a3")
    assert outbound.signature("k", 1700000000, b'{"a":1}') != outbound.signature(
        "k", 1700000001, b'{"a":1}')


def test_slack_and_matrix_shapes(receiver: Receiver, committed) -> None:
    s = series()
    alice = user("alice")
    hook(alice, receiver.url + "/slack", format=Webhook.SLACK)
    matrix = hook(alice, receiver.url + "/_matrix/client/v3/rooms/!r:x/send/m.room.message",
                  format=Webhook.MATRIX, matrix_token="syt_bot")
    record([trace(s, "<b>Paint</b>", "2", "3")])
    committed(notify.notify_due_groups)
    by_path = {r.path.split("/")[1]: r for r in receiver.requests}
    slack = json.loads(by_path["slack"].body)
    assert "s: 1 regression alert between 2 and 3" in slack["text"]
    assert slack["blocks"][0]["type"] == "section"
    assert "&lt;b&gt;Paint&lt;/b&gt;" in slack["blocks"][1]["text"]["text"]  # mrkdwn escaped
    room = by_path["_matrix"]
    assert room.method == "PUT"
    delivery_id = WebhookDelivery.objects.get(webhook=matrix).pk
    assert room.path.endswith(f"/send/m.room.message/deviations-{delivery_id}")  # txn id
    assert room.headers["Authorization"] == "Bearer syt_bot"
    message = json.loads(room.body)
    assert message["msgtype"] == "m.notice"
    assert "<b>Paint</b>" in message["body"]
    assert "&lt;b&gt;Paint&lt;/b&gt;" in message["formatted_body"]
    assert message["format"] == "org.matrix.custom.html"


def test_a_failing_receiver_is_retried_with_backoff(receiver: Receiver, committed,
                                                     settings) -> None:
    settings.DEVIATIONS_WEBHOOK_BACKOFF_SECONDS = 0
    s = series()
    hook(user("alice"), receiver.url)
    receiver.statuses = [500, 503]
    record([trace(s, "Paint", "2", "3")])
    committed(notify.notify_due_groups)
    sent = WebhookDelivery.objects.get()
    assert sent.status == WebhookDelivery.PENDING
    assert committed(deliver_due_webhooks) == 1  # the embedded default's sweeper
    assert committed(deliver_due_webhooks) == 1
    assert committed(deliver_due_webhooks) == 0
    sent.refresh_from_db()
    assert sent.status == WebhookDelivery.DELIVERED
    attempts = list(DeliveryAttempt.objects.filter(delivery=sent).values_list(
        "number", "status_code"))
    assert attempts == [(1, 500), (2, 503), (3, 200)]
    assert len(receiver.requests) == 3
    assert len({r.body for r in receiver.requests}) == 1  # the same bytes each time
    assert len({r.headers["X-Deviations-Delivery"] for r in receiver.requests}) == 1


def test_backoff_doubles_and_attempts_are_bounded(receiver: Receiver, settings) -> None:
    settings.DEVIATIONS_WEBHOOK_BACKOFF_SECONDS = 30
    settings.DEVIATIONS_WEBHOOK_ATTEMPTS = 3
    assert [delivery.backoff(n) for n in (1, 2, 3)] == [30, 60, 120]
    h = hook(user("alice"), receiver.url, pattern="*")
    receiver.statuses = [502, 429, 500, 500]
    d = WebhookDelivery.objects.create(webhook=h, kind="test", body="{}",
                                       next_at=timezone.now())
    now = timezone.now()
    assert delivery.attempt(d.pk, now) == 30
    assert delivery.attempt(d.pk, now) is None  # not due yet: nothing sent
    assert len(receiver.requests) == 1
    assert delivery.attempt(d.pk, now + timezone.timedelta(seconds=31)) == 60
    assert delivery.attempt(d.pk, now + timezone.timedelta(seconds=200)) is None
    d.refresh_from_db()
    assert d.status == WebhookDelivery.FAILED
    assert d.attempts == 3
    assert len(receiver.requests) == 3


def test_a_4xx_is_not_retried(receiver: Receiver, committed) -> None:
    h = hook(user("alice"), receiver.url, pattern="*")
    receiver.statuses = [410]
    committed(services.send_test, h.owner, h)
    d = WebhookDelivery.objects.get()
    assert d.status == WebhookDelivery.FAILED
    assert d.attempts == 1
    assert DeliveryAttempt.objects.get().error.startswith("HTTP 410")
    assert committed(deliver_due_webhooks) == 0
    assert len(receiver.requests) == 1


def test_connection_errors_are_retried(settings, committed) -> None:
    settings.DEVIATIONS_WEBHOOK_ALLOW_PRIVATE = True
    closed = Receiver()
    url = closed.url
    closed.close()  # nobody listens there any more
    h = hook(user("alice"), url, pattern="*")
    committed(services.send_test, h.owner, h)
    d = WebhookDelivery.objects.get()
    assert d.status == WebhookDelivery.PENDING
    assert d.attempts == 1
    assert "ConnectionError" in DeliveryAttempt.objects.get().error


def test_private_targets_are_refused_unless_allowed(settings) -> None:
    settings.DEVIATIONS_WEBHOOK_ALLOW_PRIVATE = False
    series()
    with pytest.raises(UserError, match="private address"):
        hook(user("alice"), "http://127.0.0.1:9/in")
    with pytest.raises(UserError, match="http"):
        hook(user("bob"), "file:///etc/passwd")


def test_a_target_found_private_when_sending_fails_at_once(receiver: Receiver, committed,
                                                            settings) -> None:
    """The address is checked again at each attempt (DNS may change): refused, the
    delivery fails without a request and is not retried (nothing would change)."""
    h = hook(user("alice"), receiver.url, pattern="*")  # allowed when it was added
    settings.DEVIATIONS_WEBHOOK_ALLOW_PRIVATE = False
    committed(services.send_test, h.owner, h)
    d = WebhookDelivery.objects.get()
    assert d.status == WebhookDelivery.FAILED
    assert d.attempts == 1
    assert "private address" in DeliveryAttempt.objects.get().error
    assert receiver.requests == []


def test_only_the_start_of_an_error_answer_is_read(receiver: Receiver, committed) -> None:
    h = hook(user("alice"), receiver.url, pattern="*")
    receiver.statuses = [410]
    receiver.body = b"x" * 5_000_000
    committed(services.send_test, h.owner, h)
    error = DeliveryAttempt.objects.get().error
    assert error == "HTTP 410: " + "x" * 200


def test_a_worker_lost_mid_attempt_is_not_resent(receiver: Receiver) -> None:
    h = hook(user("alice"), receiver.url, pattern="*")
    long_ago = timezone.now() - timezone.timedelta(hours=1)
    d = WebhookDelivery.objects.create(webhook=h, kind="test", body="{}", next_at=long_ago,
                                       status=WebhookDelivery.SENDING, claimed_at=long_ago)
    assert delivery.due() == []
    d.refresh_from_db()
    assert d.status == WebhookDelivery.FAILED
    assert "not sent again" in DeliveryAttempt.objects.get(delivery=d).error
    assert receiver.requests == []


def test_improvements_and_other_series_are_not_sent(receiver: Receiver, committed) -> None:
    s, other = series(), series("other")
    hook(user("alice"), receiver.url)
    record([trace(s, "Paint", "2", "3", direction="improvement"),
            trace(other, "Paint", "2", "3")])
    committed(notify.notify_due_groups)
    assert receiver.requests == []


def test_page_lists_attempts_and_only_owners_write(receiver: Receiver,
                                                  django_capture_on_commit_callbacks) -> None:
    series()
    alice, bob = user("alice"), user("bob")
    page = Client()
    page.force_login(alice)
    made = page.post("/hooks/", {"url": receiver.url, "pattern": "s", "target": "series",
                                 "purpose": "alerts", "format": "json"})
    assert made.status_code == 302, made.content
    h = Webhook.objects.get()
    assert len(h.secret) == 64  # generated
    receiver.statuses = [500]
    with django_capture_on_commit_callbacks(execute=True):
        with_test = page.post(f"/hooks/{h.pk}/test/")
    assert with_test.status_code == 302
    shown = page.get("/hooks/").content.decode()
    assert "HTTP 500" in shown
    assert "Send a test delivery" in shown
    page.force_login(bob)
    for action in ("test", "delete"):
        # Refused on the webhooks page itself, with the reason (not a bare text answer).
        refused_page = page.post(f"/hooks/{h.pk}/{action}/")
        assert refused_page.status_code == 403
        assert refused_page["Content-Type"].startswith("text/html")
        assert 'class="error" role="alert"' in refused_page.content.decode()
    assert f'data-webhook="{h.pk}"' not in page.get("/hooks/").content.decode()
    refused = page.post("/hooks/", {"url": receiver.url + "\x00", "pattern": "s",
                                    "target": "series", "purpose": "alerts", "format": "json"})
    assert refused.status_code == 400
    page.force_login(alice)
    assert page.post(f"/hooks/{h.pk}/delete/").status_code == 302
    assert not Webhook.objects.exists()


def test_api_owner_and_scope_checks(receiver: Receiver,
                                    django_capture_on_commit_callbacks) -> None:
    series()
    series("team-a-x")
    alice, bob = user("alice"), user("bob")
    body = {"url": receiver.url, "pattern": "team-a-x", "format": "slack"}
    assert Client().post("/api/webhooks", body,
                         content_type="application/json").status_code == 401
    out_of_scope = api(alice, scope="team-b-*").post("/api/webhooks", body,
                                                     content_type="application/json")
    assert out_of_scope.status_code == 403
    made = api(alice, scope="team-a-*").post("/api/webhooks", body,
                                             content_type="application/json")
    assert made.status_code == 201, made.content
    hid = made.json()["id"]
    assert [h["id"] for h in api(alice).get("/api/webhooks").json()] == [hid]
    assert api(bob).get("/api/webhooks").json() == []
    assert api(bob).post(f"/api/webhooks/{hid}/test").status_code == 403
    assert api(bob).get(f"/api/webhooks/{hid}/deliveries").status_code == 403
    assert api(bob).delete(f"/api/webhooks/{hid}").status_code == 403
    assert api(alice, scope="team-b-*").delete(f"/api/webhooks/{hid}").status_code == 403
    with django_capture_on_commit_callbacks(execute=True):
        tested = api(alice).post(f"/api/webhooks/{hid}/test")
    assert tested.status_code == 202
    assert tested.json()["status"] == "pending"  # sent after the request's commit
    assert json.loads(receiver.requests[0].body) == {
        "text": "deviations: test delivery to the webhook of series team-a-x"}
    listed = api(alice).get(f"/api/webhooks/{hid}/deliveries").json()
    assert listed[0]["kind"] == "test"
    assert listed[0]["status"] == "delivered"
    assert listed[0]["attempts"][0]["status_code"] == 200
    assert api(user("admin", is_staff=True)).delete(f"/api/webhooks/{hid}").status_code == 204


@pytest.mark.parametrize(("field", "value", "message"), [
    ("url", "http://127.0.0.1/" + "a" * 2000, "url is longer than 2000"),
    ("url", "http://127.0.0.1/\x00", "url holds a control character"),
    ("pattern", "s\x00", "pattern holds a control character"),
    ("pattern", "x" * 1001, "pattern is longer than 1000"),
    ("secret", "k" * 201, "secret is longer than 200"),
    ("format", "xml", "format must be one of"),
    ("pattern", "nope", "no series named 'nope'"),
])
def test_api_refuses_bad_values_with_400(receiver: Receiver, field: str, value: str,
                                         message: str) -> None:
    series()
    body = {"url": receiver.url, "pattern": "s", field: value}
    response = api(user("alice")).post("/api/webhooks", body, content_type="application/json")
    assert response.status_code == 400, response.content
    assert message in response.json()["detail"]
    assert not Webhook.objects.exists()


def test_command_lists_tests_and_delivers(receiver: Receiver, settings) -> None:
    settings.DEVIATIONS_WEBHOOK_BACKOFF_SECONDS = 0
    h = hook(user("alice"), receiver.url, pattern="*")
    receiver.statuses = [500]
    out = io.StringIO()
    call_command("webhooks", "test", str(h.pk), stdout=out)
    assert out.getvalue().splitlines() == ["attempt 1: 500 HTTP 500: ok", "pending"]
    out = io.StringIO()
    call_command("webhooks", "deliver", stdout=out)
    assert out.getvalue().strip() == "1 due deliveries sent"
    out = io.StringIO()
    call_command("webhooks", "list", stdout=out)
    assert out.getvalue().rstrip().endswith("test delivered (2 attempts)")
    receiver.statuses = [404]
    with pytest.raises(CommandError, match="failed"):
        call_command("webhooks", "test", str(h.pk), stdout=io.StringIO())


def test_test_deliveries_are_limited(receiver: Receiver) -> None:
    h = hook(user("alice"), receiver.url, pattern="*")
    for _ in range(services.TESTS_PER_HOUR):
        services.send_test(h.owner, h)
    with pytest.raises(UserError, match="at most 10 test deliveries") as refused:
        services.send_test(h.owner, h)
    assert refused.value.status == 429


@pytest.mark.parametrize("url", ["http://[::1/x", "http://host:99999/", "http://exa mple.org/"])
def test_malformed_urls_are_refused(url: str, settings) -> None:
    settings.DEVIATIONS_WEBHOOK_ALLOW_PRIVATE = False
    with pytest.raises(UserError):
        outbound.check_address(url)
