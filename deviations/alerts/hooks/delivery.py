"""Attempting a delivery once, under a claim, and finding the deliveries that are due.

A delivery is attempted by whoever moves it from ``pending`` (and due) to ``sending`` with
one conditional UPDATE: a task delivered twice (acks_late), a scheduled retry racing the
sweeper, or two workers, make one attempt. After the attempt the row is ``delivered``,
``failed`` (a 4xx other than 408/425/429, or the last attempt failed) or ``pending`` again
with its next attempt ``DEVIATIONS_WEBHOOK_BACKOFF_SECONDS`` × 2^(attempts − 1) later. A
worker that dies during an attempt leaves the row ``sending``: the sweeper marks it failed
once the attempt's time is long past and does not send it again (at most once, as email).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.utils import timezone

from deviations.alerts.hooks import outbound
from deviations.alerts.hooks.models import Bisect, DeliveryAttempt, Webhook, WebhookDelivery

#: A claim older than the HTTP timeout plus this belongs to a worker that died mid-attempt.
LOST_AFTER_SECONDS = 60
#: The receiver's clock and ours: a scheduled retry that arrives this early still counts.
EARLY_SECONDS = 1


def backoff(attempts: int) -> float:
    """Seconds before attempt ``attempts + 1``: base × 2^(attempts − 1)."""
    return float(settings.DEVIATIONS_WEBHOOK_BACKOFF_SECONDS * 2 ** max(0, attempts - 1))


def attempt(delivery_id: int, now: datetime | None = None) -> float | None:
    """Make the next attempt of a due delivery, if this call claims it. Returns the delay
    before the next attempt when one is scheduled, else None."""
    now = now or timezone.now()
    claimed = WebhookDelivery.objects.filter(
        pk=delivery_id, status=WebhookDelivery.PENDING,
        next_at__lte=now + timedelta(seconds=EARLY_SECONDS),
    ).update(status=WebhookDelivery.SENDING, claimed_at=now)
    if not claimed:
        return None
    delivery = WebhookDelivery.objects.select_related("webhook").get(pk=delivery_id)
    hook = delivery.webhook
    url, method, bearer = hook.url, "POST", ""
    if hook.format == Webhook.MATRIX:
        # The client-server API's send: a PUT with a transaction id, which makes a retried
        # request one message in the room.
        url, method, bearer = f"{url.rstrip('/')}/deviations-{delivery.pk}", "PUT", \
            hook.matrix_token
    outcome = outbound.send(url=url, method=method, body=delivery.body.encode(),
                            secret=hook.secret, delivery_id=delivery.pk, event=delivery.kind,
                            bearer=bearer)
    number = delivery.attempts + 1
    DeliveryAttempt.objects.create(
        delivery=delivery, number=number, at=now, status_code=outcome.status_code,
        error=outcome.error, duration_ms=outcome.duration_ms)
    done = timezone.now()
    if outcome.delivered:
        WebhookDelivery.objects.filter(pk=delivery.pk).update(
            status=WebhookDelivery.DELIVERED, attempts=number, delivered_at=done)
        return None
    if not outcome.retryable or number >= settings.DEVIATIONS_WEBHOOK_ATTEMPTS:
        _failed(delivery, number, outcome.error)
        return None
    delay = backoff(number)
    WebhookDelivery.objects.filter(pk=delivery.pk).update(
        status=WebhookDelivery.PENDING, attempts=number,
        next_at=done + timedelta(seconds=delay))
    return delay


def _failed(delivery: WebhookDelivery, attempts: int, error: str) -> None:
    """The delivery failed for good; a bisect it requested failed with it (so that another
    one may start)."""
    WebhookDelivery.objects.filter(pk=delivery.pk).update(status=WebhookDelivery.FAILED,
                                                           attempts=attempts)
    if delivery.bisect_id is not None:
        Bisect.objects.filter(pk=delivery.bisect_id, status=Bisect.REQUESTED).update(
            status=Bisect.FAILED, finished=timezone.now(),
            message=f"the bisect service was not reached: {error}"[:2000])


def due(now: datetime | None = None) -> list[int]:
    """Pending deliveries whose attempt is due; deliveries lost with their worker are
    marked failed on the way (never sent again)."""
    now = now or timezone.now()
    lost_before = now - timedelta(
        seconds=settings.DEVIATIONS_WEBHOOK_TIMEOUT_SECONDS + LOST_AFTER_SECONDS)
    for lost in WebhookDelivery.objects.filter(status=WebhookDelivery.SENDING,
                                               claimed_at__lt=lost_before):
        error = "the worker stopped during this attempt; not sent again (at most once)"
        marked = WebhookDelivery.objects.filter(
            pk=lost.pk, status=WebhookDelivery.SENDING, claimed_at=lost.claimed_at,
        ).update(status=WebhookDelivery.FAILED, attempts=lost.attempts + 1)
        if marked:
            DeliveryAttempt.objects.create(delivery=lost, number=lost.attempts + 1,
                                           at=lost.claimed_at or now, error=error)
            _failed(lost, lost.attempts + 1, error)
    return list(WebhookDelivery.objects.filter(
        status=WebhookDelivery.PENDING, next_at__lte=now).order_by("next_at", "pk")
        .values_list("pk", flat=True)[:500])
