"""Detected histogram changes as alerts (``deviations.alerts``), and telling people.

Each ``HistogramChange`` becomes one ``Alert`` (detector ``histogram``, its probe's
family: the name up to its first ``_``, so ``GC_MS`` and ``GC_SLICE_MS`` changing at
overlapping builds are one group). Who is told and the email are
``deviations.alerts.notify``'s: the probe's subscribers (patterns) and owners
(``Probe.alert_emails``), one email per group, once.
"""

from __future__ import annotations

from typing import Any

from django.db.models import Q

from deviations.alerts import notify as alert_notify
from deviations.alerts.models import Alert
from deviations.alerts.recording import AlertData, record
from deviations.core.versions import sort_key
from deviations.histograms.models import HistogramChange

#: The one method sentence per rule (docs/statistics.md, histograms).
_METHOD = {
    "fixed": "Mozilla's fixed Hellinger cutoff (seed 001)",
    "adaptive": "adaptive Hellinger cutoff over the probe's own noise (seed 001)",
}


def probe_family(name: str) -> str:
    """``GC_SLICE_MS`` -> ``GC``: probes of one family change together and are triaged as
    one group."""
    return name.split("_", 1)[0] or name


#: The method sentence of the count rule's kinds (docs/statistics.md, "Changes in counts").
_COUNT_METHOD = {
    "proportion": "test of proportions over the builds' clients, with the probe's own "
                  "between-build variance",
    "volume": "clients per build against the probe's own build-to-build variation",
}


def explain(change: HistogramChange) -> str:
    """The verdict in words, as the alert and the probe page show it."""
    builds = f"between builds {change.previous_build_id or '-'} and {change.build_id}"
    if change.kind in HistogramChange.COUNT_KINDS:
        later = (f"the {change.confirm_builds} following builds" if change.confirm_builds
                 else "the following builds")
        return (
            f"{change.probe.name}: {change.describe()} {builds} "
            f"({_COUNT_METHOD[change.kind]}), and {later} confirmed it."
        )
    return (
        f"{change.probe.name}: {change.describe()} {builds}; Hellinger distance "
        f"{change.distance:.3f} passed the cutoff "
        f"{change.cutoff:.3f} ({_METHOD.get(change.rule, change.rule + ' rule')}), and the "
        "following builds confirmed it."
    )


def _count_figures(change: HistogramChange) -> dict[str, Any]:
    """The alert's numbers for a count change: the share in points, or the clients."""
    n = {"n_before": round(change.clients_before) if change.clients_before else None,
         "n_after": round(change.clients_after) if change.clients_after else None}
    if change.kind == "proportion" and change.share_before is not None:
        after = change.share_after or 0.0
        return {**n, "unit": "points", "before": 100 * change.share_before,
                "after": 100 * after, "effect": 100 * (after - change.share_before),
                "effect_lo": None if change.diff_lo is None else 100 * change.diff_lo,
                "effect_hi": None if change.diff_hi is None else 100 * change.diff_hi}
    if change.clients_before and change.clients_after:
        return {**n, "unit": "clients", "before": change.clients_before,
                "after": change.clients_after,
                "effect": change.clients_after - change.clients_before,
                "effect_pct": 100 * (change.clients_after / change.clients_before - 1)}
    return n


def alert_data(change: HistogramChange) -> AlertData:
    name = change.probe.name
    common = dict(
        key=f"histogram:{change.pk}", detector=Alert.HISTOGRAM, family=probe_family(name),
        subject=name, from_label=change.previous_build_id or "-", to_label=change.build_id,
        from_key=sort_key(change.previous_build_id) if change.previous_build_id else "",
        to_key=change.sort_key, direction=Alert.CHANGE, explanation=explain(change),
        data_at=change.detected_at, probe_id=change.probe_id, change_id=change.pk,
        rule=change.rule, ignore_as=(name, name),
    )
    if change.kind in HistogramChange.COUNT_KINDS:
        return AlertData(**common, method=_COUNT_METHOD[change.kind],
                         **_count_figures(change))
    shift = change.kind == "shift" and change.shift_buckets is not None
    return AlertData(
        **common, method=_METHOD.get(change.rule, change.rule),
        unit="buckets" if shift else "",
        effect=change.shift_buckets if shift else None, distance=change.distance,
        threshold=change.cutoff,
    )


def record_histogram_changes(change_ids: list[int]) -> list[int]:
    """Record these changes, and any stored change still without its alert (a notifier
    lost with the broker), as alerts; returns the ids of the alerts created."""
    changes = HistogramChange.objects.filter(
        Q(pk__in=change_ids) | Q(alert__isnull=True)
    ).select_related("probe")
    return record(alert_data(c) for c in changes.order_by("pk"))


def notify_histogram_changes(change_ids: list[int]) -> int:
    """Record the changes as alerts, then email the groups that are due (each once);
    returns the number of emails sent by this call."""
    record_histogram_changes(change_ids)
    return alert_notify.notify_due_groups()
