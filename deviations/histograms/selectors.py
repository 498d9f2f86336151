"""Reads for the histogram pages and API: probes, the changes feed, a probe's histograms."""

from __future__ import annotations

from typing import Any

from django.db.models import Count, F, Max, Q, QuerySet

from deviations.alerts.models import Alert
from deviations.core.packing import name_digest, unpack
from deviations.histograms.models import HistogramChange, HistogramSnapshot, Probe


def probe_names(ids: list[int]) -> list[str]:
    return list(Probe.objects.filter(pk__in=ids).order_by("name").values_list("name", flat=True))


def probes_with_changes(search: str = "") -> QuerySet[Probe]:
    """Probes with their number of builds and changes, those with recent changes first."""
    probes = Probe.objects.annotate(
        n_builds=Count("snapshots", distinct=True),
        n_changes=Count("changes", distinct=True),
        n_new=Count("changes", filter=Q(changes__alert__status=Alert.NEW,
                                         changes__alert__group__upstream__isnull=True),
                    distinct=True),
        last_change=Max("changes__detected_at"),
    )
    if search:
        probes = probes.filter(name__icontains=search)
    return probes.order_by(F("last_change").desc(nulls_last=True), "name")


def changes_feed(probe: str | None = None, state: str | None = None) -> QuerySet[HistogramChange]:
    changes = HistogramChange.objects.select_related("probe", "alert__group",
                                                     "alert__status_by")
    if probe:
        changes = changes.filter(probe__name_sha1=name_digest(probe))
    if state:
        changes = changes.filter(alert__status=state)
    return changes.order_by("-detected_at", "-pk")


def change_out(c: HistogramChange) -> dict[str, Any]:
    """A change for the API; its triage state is its alert's status (``new`` until the
    alert is recorded)."""
    try:
        alert: Alert | None = c.alert
    except Alert.DoesNotExist:
        alert = None
    return {
        "id": c.pk, "probe": c.probe.name, "build_id": c.build_id,
        "previous_build_id": c.previous_build_id, "distance": c.distance, "cutoff": c.cutoff,
        "kind": c.kind, "change": c.describe(), "rule": c.rule,
        "confirm_builds": c.confirm_builds,
        "state": alert.status if alert else Alert.NEW,
        "state_by": alert.status_by.get_username() if alert and alert.status_by else None,
        "state_at": alert.status_at.isoformat() if alert and alert.status_at else None,
        "alert_url": alert.get_absolute_url() if alert else None,
        "detected_at": c.detected_at.isoformat(), "page_url": c.get_absolute_url(),
    }


def snapshots(probe: Probe) -> list[HistogramSnapshot]:
    return list(probe.snapshots.order_by("sort_key", "pk"))


def probe_histograms(probe: Probe, builds: list[str]) -> tuple[list[str], Any, list[list[float]]]:
    """(build ids, edges, normalised histograms) of these builds (the scanned series, all
    on one layout), in build order."""
    rows = probe.snapshots.filter(build_id__in=builds).order_by("sort_key", "pk")
    ids, shares, edges = [], [], None
    for build_id, e, counts in rows.values_list("build_id", "edges", "counts"):
        c = unpack(counts)
        total = float(c.sum())
        ids.append(build_id)
        shares.append([round(float(v) / total, 6) if total > 0 else 0.0 for v in c])
        edges = unpack(e)
    return ids, edges, shares


HELD_BACK_REASONS = {
    "not persistent": "held back by the persistence rule: the later builds did not stay "
                      "that far from the past ones",
    "past unstable": "the past builds vary too much among themselves to tell",
    "awaiting later builds": "waiting for the later builds that must confirm it",
    "later build has too little data": "a later build has too little data to confirm it",
    "too few past builds": "too few usable past builds to compare with",
    "too little data": "this build has too little data",
    "below cutoff": "below the cutoff against the past builds the rule compares with, "
                    "which need not include the build just before",
}
"""Why a build above the cutoff is not a change, in words (reasons of
``deviations.stats.histograms.detect_changes``)."""


def held_back(scan: dict[str, Any], changed: set[str]) -> list[dict[str, Any]]:
    """The builds whose distance is above their cutoff but that are not a change, each with
    the rule's reason: the points of the chart above the dashed line with no alert."""
    rows = []
    for build, d, c, reason in zip(scan.get("builds", []), scan.get("distance", []),
                                   scan.get("cutoff", []), scan.get("reason", []), strict=False):
        if d is None or c is None or d <= c or build in changed or reason == "change":
            continue
        rows.append({"build_id": build, "distance": d, "cutoff": c, "reason": reason,
                     "explanation": HELD_BACK_REASONS.get(reason, reason)})
    return rows
