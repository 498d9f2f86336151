"""Writes of the histogram pages and API besides ingest: triage of a detected change, which
is its alert's (``deviations.alerts``: by the probe's owners, or anyone while it has none)."""

from __future__ import annotations

from typing import Any

from deviations.alerts import services as alerts
from deviations.alerts.models import Alert
from deviations.histograms import notify
from deviations.histograms.models import HistogramChange

STATES = alerts.STATUSES


def change_alert(change: HistogramChange) -> Alert:
    """The change's alert (recorded now if the detection's notifier has not run yet)."""
    found = Alert.objects.filter(change=change).select_related("group").first()
    if found is None:
        notify.record_histogram_changes([change.pk])
        found = Alert.objects.select_related("group").get(change=change)
    return found


def set_state(change: HistogramChange, state: str, user: Any) -> None:
    """Triage: record the new status of the change's alert, who set it and when."""
    alerts.triage([change_alert(change)], user, status=state)
