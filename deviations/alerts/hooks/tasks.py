"""Tasks of the hooks: one attempt of a delivery (``deliver_webhook``) and the sweeper of
due deliveries (beat entry ``deliver-due-webhooks``, every minute).

With a worker, a failed attempt schedules the next one itself (``countdown``); in the
embedded default (tasks in-process, where a countdown would block the request) the
sweeper makes it, as it does for a message lost with the broker.
"""

from typing import Any

from celery import shared_task
from django.db import InterfaceError, OperationalError

from deviations.alerts.hooks import delivery
from deviations.core.queue import enqueue


@shared_task(
    bind=True,
    name="deviations.deliver_webhook",
    autoretry_for=(OperationalError, InterfaceError),
    retry_backoff=5,
    max_retries=3,
)
def deliver_webhook(self: Any, delivery_id: int) -> bool:
    """One attempt of the delivery if it is due and nobody holds it; True when another
    attempt was scheduled."""
    delay = delivery.attempt(delivery_id)
    if delay is None or self.request.is_eager:
        return False
    deliver_webhook.apply_async((delivery_id,), countdown=delay)
    return True


@shared_task(name="deviations.deliver_due_webhooks")
def deliver_due_webhooks() -> int:
    """Send every delivery whose attempt is due (a retry in the embedded default, a message
    lost with the broker); returns how many were sent to the worker."""
    ids = delivery.due()
    for pk in ids:
        enqueue(deliver_webhook, pk)
    return len(ids)
