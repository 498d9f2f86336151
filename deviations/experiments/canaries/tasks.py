"""Tasks of canaries: apply the batches received to the stored state, email a rejection,
and the sweeper. Thin and idempotent: they take ids; a second run finds nothing to do."""

from datetime import timedelta

from celery import shared_task
from django.db import InterfaceError, OperationalError
from django.db.models import F
from django.utils import timezone

from deviations.core.queue import enqueue
from deviations.experiments.canaries import notify, state
from deviations.experiments.canaries.models import Canary


@shared_task(
    name="deviations.update_canary",
    autoretry_for=(OperationalError, InterfaceError),
    retry_backoff=2,
    max_retries=5,
)
def update_canary(canary_id: int) -> int:
    """Apply the canary's pending batches (all of them: one update, or one per
    ``state.MAX_APPLY_VALUES`` observations of a long backlog); returns how many.

    Clears ``Canary.update_queued`` first, in its own transaction: a batch committed before
    that is read by this update; a batch committed after it sees the flag clear and queues
    the next update. So a burst of batches costs one message and one update, not one each.
    """
    Canary.objects.filter(pk=canary_id, update_queued=True).update(update_queued=False)
    batches, rejected = 0, False
    while True:
        applied = state.apply_pending(canary_id)  # each piece committed on its own
        batches += applied.batches
        rejected = rejected or applied.rejected_now
        if not applied.more:
            break
    if rejected:
        enqueue(notify_canary, canary_id)
    return batches


@shared_task(
    name="deviations.notify_canary",
    autoretry_for=(OperationalError, InterfaceError),
    retry_backoff=5,
    max_retries=3,
)
def notify_canary(canary_id: int) -> int:
    """Email the rejection to owners and subscribers; an alert claimed is never resent."""
    return notify.notify_rejection(canary_id)


@shared_task(name="deviations.update_stale_canaries")
def update_stale_canaries() -> list[int]:
    """Queue the update of canaries with batches not yet applied, and the email of
    rejections of the last day that no alert row records (task messages lost with the
    broker); beat, every minute. Both tasks do nothing the second time."""
    stale = list(
        Canary.objects.filter(batches_received__gt=F("state__applied_seq"))
        .order_by("pk").values_list("pk", flat=True)
    )
    for pk in stale:
        enqueue(update_canary, pk)
    now = timezone.now()
    for pk in (
        Canary.objects.filter(
            state__decision="reject",
            state__decided_at__range=(now - timedelta(days=1), now - timedelta(minutes=2)),
        ).values_list("pk", flat=True)
    ):
        if notify.recipients_left(pk):
            enqueue(notify_canary, pk)
    return stale
