"""Tasks of histograms: detect changes (after ingest and on a schedule), email them.

Thin and idempotent (docs/histograms.md); names keep their historical prefix.
"""

from celery import shared_task
from django.db import InterfaceError, OperationalError
from django.db.models import F, Max, Q

from deviations.core.queue import enqueue
from deviations.histograms import detection, notify
from deviations.histograms.models import Probe


@shared_task(
    name="deviations.detect_histogram_changes",
    autoretry_for=(OperationalError, InterfaceError),
    retry_backoff=5,
    max_retries=3,
)
def detect_histogram_changes(probe_ids: list[int] | None = None) -> int:
    """Scan these probes (all when None) and alert on the changes this pass stored; a
    second run stores nothing new and so alerts nobody."""
    new = detection.detect(probe_ids)
    if new:
        enqueue(notify_histogram_changes, new)
    return len(new)


@shared_task(
    name="deviations.notify_histogram_changes",
    autoretry_for=(OperationalError, InterfaceError),
    retry_backoff=5,
    max_retries=3,
)
def notify_histogram_changes(change_ids: list[int]) -> int:
    """Email each change's subscribers; an alert already claimed is never sent again."""
    return notify.notify_histogram_changes(change_ids)


@shared_task(name="deviations.detect_stale_probes")
def detect_stale_probes() -> list[int]:
    """Queue detection on the probes with histograms stored since their last scan (a
    detection lost with a broker that was down or restarted); beat, every two minutes."""
    stale = list(
        Probe.objects.annotate(last=Max("snapshots__updated"))
        .filter(Q(detected_at__isnull=True) | Q(last__gt=F("detected_at")), last__isnull=False)
        .order_by("pk").values_list("pk", flat=True)
    )
    if stale:
        enqueue(detect_histogram_changes, stale)
    return stale
