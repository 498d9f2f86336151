"""Tasks of histograms: detect changes (after ingest and on a schedule), email them.

Thin and idempotent (docs/histograms.md); names keep their historical prefix.
"""

from celery import shared_task
from django.db import InterfaceError, OperationalError

from deviations.histograms import detection, notify


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
        notify_histogram_changes.delay(new)
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
