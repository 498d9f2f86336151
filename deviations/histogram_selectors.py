"""Reads and small writes for the histogram pages and API (probes, changes feed, triage,
subscriptions); no HTTP here."""

from __future__ import annotations

import fnmatch
from typing import Any

from django.core.exceptions import ValidationError
from django.core.validators import validate_email
from django.db.models import Count, F, Max, Q, QuerySet
from django.utils import timezone

from deviations import alerts
from deviations.histogram_models import (
    HistogramChange,
    HistogramSnapshot,
    Probe,
    Subscription,
    name_digest,
    unpack,
)
from deviations.models import Series

STATES = [s for s, _ in HistogramChange.STATES]


def probe_names(ids: list[int]) -> list[str]:
    return list(Probe.objects.filter(pk__in=ids).order_by("name").values_list("name", flat=True))


def probe_by_name(name: str) -> Probe | None:
    return Probe.objects.filter(name_sha1=name_digest(name)).first()


def probes_with_changes(search: str = "") -> QuerySet[Probe]:
    """Probes with their number of builds and changes, those with recent changes first."""
    probes = Probe.objects.annotate(
        n_builds=Count("snapshots", distinct=True),
        n_changes=Count("changes", distinct=True),
        n_new=Count("changes", filter=Q(changes__state=HistogramChange.NEW), distinct=True),
        last_change=Max("changes__detected_at"),
    )
    if search:
        probes = probes.filter(name__icontains=search)
    return probes.order_by(F("last_change").desc(nulls_last=True), "name")


def changes_feed(probe: str | None = None, state: str | None = None) -> QuerySet[HistogramChange]:
    changes = HistogramChange.objects.select_related("probe", "state_by")
    if probe:
        changes = changes.filter(probe__name_sha1=name_digest(probe))
    if state:
        changes = changes.filter(state=state)
    return changes.order_by("-detected_at", "-pk")


def change_out(c: HistogramChange) -> dict[str, Any]:
    return {
        "id": c.pk, "probe": c.probe.name, "build_id": c.build_id,
        "previous_build_id": c.previous_build_id, "distance": c.distance, "cutoff": c.cutoff,
        "kind": c.kind, "rule": c.rule, "state": c.state,
        "state_by": c.state_by.get_username() if c.state_by else None,
        "state_at": c.state_at.isoformat() if c.state_at else None,
        "detected_at": c.detected_at.isoformat(), "page_url": c.get_absolute_url(),
    }


def set_state(change: HistogramChange, state: str, user: Any) -> None:
    """Triage: record the new state, who set it and when."""
    if state not in STATES:
        raise ValueError(f"state must be one of {', '.join(STATES)}")
    change.state = state
    change.state_by = user if getattr(user, "is_authenticated", False) else None
    change.state_at = timezone.now()
    change.save(update_fields=["state", "state_by", "state_at"])


def snapshots(probe: Probe) -> list[HistogramSnapshot]:
    return list(probe.snapshots.order_by("sort_key", "pk"))


def validated_subscribe(
    email: str, pattern: str, target: str, digest: bool, user: Any
) -> Subscription:
    """Subscribe after checking the address, the target and (for series) the name."""
    try:
        validate_email(email.strip())
    except ValidationError as exc:
        raise ValueError(f"{email!r} is not an email address") from exc
    pattern = pattern.strip()
    if not pattern or len(pattern) > 1000:
        raise ValueError("the pattern must be 1 to 1,000 characters")
    if target == Subscription.SERIES:
        if not Series.objects.filter(name=pattern).exists():
            raise ValueError(f"no series named {pattern!r}")
    elif target != Subscription.HISTOGRAM:
        raise ValueError("target must be 'histogram' or 'series'")
    return alerts.subscribe(email, pattern, target=target, digest=digest, user=user)


def matching_probes(pattern: str, limit: int = 20) -> list[str]:
    names = Probe.objects.values_list("name", flat=True)
    return [n for n in names.iterator() if fnmatch.fnmatchcase(n, pattern)][:limit]


def user_subscriptions(user: Any) -> QuerySet[Subscription]:
    return Subscription.objects.filter(
        Q(user=user) | Q(email=alerts.normalise_email(user.email or ""))
    ).order_by("target", "pattern")


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
