"""The rejection email: once to each owner and subscriber, with the headline and the
bands in words; an unsubscribed address gets nothing; a second run sends nothing."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import numpy as np
import pytest
from django.core import mail
from django.test import Client
from django.utils import timezone

from deviations.alerts.models import Alert, AlertGroup, SentAlert
from deviations.alerts.notify import notify_due_groups
from deviations.experiments.canaries import notify, services, tasks
from deviations.experiments.canaries.models import Canary, CanaryState

pytestmark = pytest.mark.django_db


def _reject(committed: Any, canary: Canary) -> None:
    rng = np.random.default_rng(12)
    committed(services.receive_batch, canary.pk, "a", "A", rng.normal(100, 10, 3000).tolist())
    committed(services.receive_batch, canary.pk, "b", "B", rng.normal(104, 10, 3000).tolist())


def test_rejection_is_emailed_once(committed: Any, ci_user: Any) -> None:
    canary = services.create_canary("play <b>", bad="higher", unit="ms",
                                    owners=["owner@example.com", "ci@example.com"])
    services.subscribe(canary, "ci@example.com", ci_user)
    committed(services.receive_batch, canary.pk, "a0", "A", [1.0, 2.0, 3.0])
    assert mail.outbox == []  # nothing before the decision
    _reject(committed, canary)
    assert sorted(m.to[0] for m in mail.outbox) == ["ci@example.com", "owner@example.com"]
    message = mail.outbox[0]
    assert message.subject == "[deviations] canary play <b>: regression"
    assert "the median rose by at least" in message.body
    assert f"/canaries/{canary.pk}/" in message.body
    assert "no more observations unless someone continues it" in message.body
    assert message.extra_headers["List-Unsubscribe"].startswith("<http")
    assert notify.notify_rejection(canary.pk) == 0  # claimed: never twice
    assert len(mail.outbox) == 2
    assert SentAlert.objects.filter(subject=f"canary:{canary.pk}:reject").count() == 2


def test_the_rejection_is_an_alert_of_the_shared_model(committed: Any, client: Client) -> None:
    """Listed and triaged with every detector's alerts; emailed once, by the canary."""
    canary = services.create_canary("play <b>", bad="higher", unit="ms",
                                    owners=["owner@example.com"])
    _reject(committed, canary)
    alert = Alert.objects.get(detector=Alert.CANARY)
    assert (alert.canary, alert.subject, alert.direction) == (
        str(canary.pk), "play <b>", Alert.REGRESSION)
    assert alert.effect_lo is not None
    assert alert.effect_lo > 0  # the median rose
    assert alert.explanation.startswith("canary play <b>: regression. ")
    notify.notify_rejection(canary.pk)  # a second recording: still one alert
    assert Alert.objects.filter(detector=Alert.CANARY).count() == 1
    page = client.get("/alerts/?detector=canary").content.decode()
    assert page.count("data-group=") == AlertGroup.objects.filter(detector="canary").count() == 1
    assert "play &lt;b&gt;" in page
    assert "play <b>" not in page
    assert notify_due_groups() == 0  # the alerts notifier sends nothing more
    assert len(mail.outbox) == 1


def test_unsubscribed_owner_gets_nothing(committed: Any, client: Client) -> None:
    canary = services.create_canary("play", bad="higher", owners=["owner@example.com"])
    link = notify.alerts.unsubscribe_url("owner@example.com", notify.TARGET, str(canary.pk))
    path = link.split("://", 1)[1].split("/", 1)[1]
    assert client.post("/" + path).status_code == 200
    assert notify.recipients(canary) == []
    from deviations.alerts.models import Subscription

    muted = Subscription.objects.get(email="owner@example.com", target=notify.TARGET)
    muted.full_clean()  # "canary" is one of the model's targets
    assert muted.get_target_display() == "canary"
    assert not muted.active
    _reject(committed, canary)
    assert mail.outbox == []


def test_no_email_without_a_rejection(committed: Any) -> None:
    canary = services.create_canary("play", bad="higher", owners=["owner@example.com"])
    committed(services.receive_batch, canary.pk, "a", "A", [1.0, 2.0])
    assert notify.notify_rejection(canary.pk) == 0
    assert mail.outbox == []


def test_sweeper_sends_a_lost_rejection_email(committed: Any, monkeypatch: Any) -> None:
    monkeypatch.setattr(tasks, "enqueue", lambda task, *args: None)  # the message is lost
    canary = services.create_canary("play", bad="higher", owners=["owner@example.com"])
    _reject(committed, canary)
    assert mail.outbox == []
    CanaryState.objects.filter(canary=canary).update(
        decided_at=timezone.now() - timedelta(minutes=5))
    monkeypatch.undo()
    assert tasks.update_stale_canaries() == []
    assert [m.to for m in mail.outbox] == [["owner@example.com"]]
    tasks.update_stale_canaries()
    assert len(mail.outbox) == 1


def test_a_canary_with_the_longest_metric_and_unit_gets_its_alert(committed: Any) -> None:
    """What canary creation accepts fits the alert (PostgreSQL enforces the lengths: a
    40-character unit or a 200-character metric once made the rejection's alert fail,
    retried every minute, never emailed)."""
    metric, unit = "m" * Canary._meta.get_field("metric").max_length, \
        "u" * Canary._meta.get_field("unit").max_length
    canary = services.create_canary("long", bad="higher", unit=unit, metric=metric,
                                    owners=["owner@example.com"])
    _reject(committed, canary)
    alert = Alert.objects.get(detector=Alert.CANARY)
    assert (alert.metric, alert.unit) == (metric, unit)
    assert len(mail.outbox) == 1
