"""The real services (PostgreSQL, Redis, a Celery worker process): a group's webhook is
delivered by the worker, a 500 retried by the worker's own scheduled retry, once."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.test import Client

from deviations.alerts import notify
from deviations.alerts.hooks import services
from deviations.alerts.hooks.models import Bisect, DeliveryAttempt, Webhook, WebhookDelivery
from deviations.alerts.recording import record
from deviations.core.models import ApiToken
from tests.alerts.hooks.receiver import Receiver, verified
from tests.alerts.hooks.test_webhooks import series, user
from tests.alerts.test_groups import trace
from tests.core.test_services import running_worker

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def hook_worker(tmp_path: Path, settings: Any) -> Iterator[Any]:
    settings.MEDIA_ROOT = tmp_path / "media"
    env = {"DEVIATIONS_WEBHOOK_ALLOW_PRIVATE": "1", "DEVIATIONS_WEBHOOK_BACKOFF_SECONDS": "1"}
    with running_worker(tmp_path, settings.MEDIA_ROOT, env) as proc:
        yield proc


def _wait(delivery_filter: dict[str, Any], tmp_path: Path, timeout: float = 120) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = WebhookDelivery.objects.filter(**delivery_filter).first()
        if found is not None and found.status in (WebhookDelivery.DELIVERED,
                                                  WebhookDelivery.FAILED):
            return found
        time.sleep(0.2)
    raise AssertionError((tmp_path / "worker.log").read_text())


def test_worker_delivers_once_and_retries(receiver: Receiver, hook_worker: Any,
                                          tmp_path: Path) -> None:
    s = series()
    hook = services.create_webhook(user("alice"), url=receiver.url, pattern="s")
    receiver.statuses = [500]
    record([trace(s, "Paint", "2", "3")])
    notify.notify_due_groups()
    notify.notify_due_groups()
    sent = _wait({"webhook": hook}, tmp_path)
    assert sent.status == WebhookDelivery.DELIVERED, (tmp_path / "worker.log").read_text()
    codes = list(DeliveryAttempt.objects.filter(delivery=sent).values_list("status_code",
                                                                           flat=True))
    assert codes == [500, 200]
    time.sleep(2)  # a duplicate would have arrived by now
    assert len(receiver.requests) == 2
    assert all(verified(r, hook.secret) for r in receiver.requests)
    assert json.loads(receiver.requests[1].body)["group"]["family"] == "s"
    assert WebhookDelivery.objects.count() == 1


def test_worker_sends_the_bisect_request(receiver: Receiver, hook_worker: Any,
                                         tmp_path: Path) -> None:
    s = series()
    alice = user("alice")
    hook = services.create_webhook(alice, url=receiver.url, pattern="s",
                                   purpose=Webhook.BISECT)
    (alert_id,) = record([trace(s, "Paint", "2", "3")])
    token = ApiToken.issue(alice, "t")[1]
    started = Client(headers={"Authorization": f"Bearer {token}"}).post(
        f"/api/alerts/{alert_id}/bisect")
    assert started.status_code == 201, started.content
    assert _wait({"webhook": hook}, tmp_path).status == WebhookDelivery.DELIVERED
    (request,) = receiver.requests
    assert verified(request, hook.secret)
    sent = json.loads(request.body)
    callback = "/" + sent["callback_url"].split("/", 3)[3]
    done = Client(headers={"Authorization": f"Bearer {sent['token']}"}).post(
        callback, {"status": "done", "culprit_revision": "abc"},
        content_type="application/json")
    assert done.status_code == 200, done.content
    assert Bisect.objects.get().culprit_revision == "abc"
