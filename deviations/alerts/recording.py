"""Recording detectors' verdicts as alerts, and grouping them.

Every detector hands its verdicts over as ``AlertData`` (plain values, no model of its
own): trace series (``deviations.traces.notify``), histograms
(``deviations.histograms.notify``), and canaries (the experiments feature: detector
``"canary"``, ``family`` and ``subject`` the canary's name, ``canary`` set). Recording is
idempotent: ``Alert.key`` is natural (what, where, which rule), so the same verdict
recorded twice updates one row and keeps its triage.

Groups: an alert joins the group of its detector and family whose range overlaps its own
(ranges are (from, to], compared by sort key); an alert that bridges two groups merges
them into the older one. A group's range is the union of its alerts'.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, fields
from datetime import datetime

from django.db import transaction
from django.utils import timezone

from deviations.alerts.models import Alert, AlertGroup, AlertNote, Ignore
from deviations.core.packing import name_digest

#: The kind of ``Ignore`` that mutes each detector's subjects.
IGNORE_KIND = {Alert.TRACE: Ignore.FUNCTION, Alert.HISTOGRAM: Ignore.PROBE,
               Alert.CANARY: Ignore.CANARY}


@dataclass(frozen=True)
class AlertData:
    """One verdict as a detector reports it (fields as ``Alert``'s)."""

    key: str
    detector: str
    family: str
    subject: str
    from_label: str
    to_label: str
    from_key: str
    to_key: str
    direction: str
    method: str
    explanation: str
    data_at: datetime
    series_id: int | None = None
    function_id: int | None = None
    probe_id: int | None = None
    change_id: int | None = None
    canary: str = ""
    metric: str = ""
    rule: str = ""
    unit: str = ""
    before: float | None = None
    after: float | None = None
    effect: float | None = None
    effect_lo: float | None = None
    effect_hi: float | None = None
    effect_pct: float | None = None
    effect_pct_lo: float | None = None
    effect_pct_hi: float | None = None
    p_value: float | None = None
    distance: float | None = None
    threshold: float | None = None
    level: float | None = None
    n_before: int | None = None
    n_after: int | None = None
    provisional: bool = False
    early: bool = False
    # Who is muted: the (family, subject) an ``Ignore`` of this detector's kind names.
    ignore_as: tuple[str, str] | None = field(default=None, compare=False)


# Fields a later recording of the same verdict may change (its numbers as more runs
# arrive, whether it is still provisional); triage and group are kept.
_UPDATED = ("direction", "unit", "before", "after", "effect", "effect_lo", "effect_hi",
            "effect_pct", "effect_pct_lo", "effect_pct_hi", "p_value", "distance",
            "threshold", "method", "level", "n_before", "n_after", "explanation",
            "provisional", "early", "subject", "metric")


_MODEL_FIELDS = tuple(f.name for f in fields(AlertData) if f.name not in ("family", "ignore_as"))


def _fields(data: AlertData) -> dict[str, object]:
    # Not dataclasses.asdict: it deep-copies every value (~0.5 ms an alert).
    return {name: getattr(data, name) for name in _MODEL_FIELDS}


def _ignored(items: list[AlertData]) -> set[tuple[str, str, str]]:
    wanted = {(IGNORE_KIND[d.detector], *(d.ignore_as or (d.family, d.subject))) for d in items}
    if not wanted:
        return set()
    found = Ignore.objects.filter(
        kind__in={k for k, _, _ in wanted}, family__in={f for _, f, _ in wanted},
        subject_sha1__in={name_digest(s) for _, _, s in wanted},
    ).values_list("kind", "family", "subject")
    return set(found)


def _overlaps(a_from: str, a_to: str, b_from: str, b_to: str) -> bool:
    return a_from < b_to and b_from < a_to


def _place(groups: list[AlertGroup], data: AlertData) -> AlertGroup:
    """The group of ``data`` among its detector and family's ``groups`` (merged, extended
    or created)."""
    hits = [g for g in groups if _overlaps(data.from_key, data.to_key, g.from_key, g.to_key)]
    if not hits:
        group = AlertGroup.objects.create(
            detector=data.detector, family=data.family, from_label=data.from_label,
            to_label=data.to_label, from_key=data.from_key, to_key=data.to_key,
        )
        groups.append(group)
        return group
    hits.sort(key=lambda g: g.pk)
    group = hits[0]
    for other in hits[1:]:
        Alert.objects.filter(group=other).update(group=group)
        group.notified_at = group.notified_at or other.notified_at
        if other.from_key < group.from_key:
            group.from_key, group.from_label = other.from_key, other.from_label
        if other.to_key > group.to_key:
            group.to_key, group.to_label = other.to_key, other.to_label
        groups.remove(other)
        other.delete()
    changed = len(hits) > 1
    if data.from_key < group.from_key:
        group.from_key, group.from_label, changed = data.from_key, data.from_label, True
    if data.to_key > group.to_key:
        group.to_key, group.to_label, changed = data.to_key, data.to_label, True
    if changed:
        group.save(update_fields=["from_key", "from_label", "to_key", "to_label",
                                  "notified_at"])
    return group


@transaction.atomic
def record(items: Iterable[AlertData], known: dict[str, Alert] | None = None) -> list[int]:
    """Store these verdicts (new ones grouped; known keys updated, triage kept); returns
    the ids of the alerts created. ``known``: the stored alerts these keys may name, when
    the caller has them (``sync``)."""
    items = list({d.key: d for d in items}.values())
    if not items:
        return []
    existing = known if known is not None else {
        a.key: a for a in Alert.objects.filter(key__in=[d.key for d in items])
    }
    changed, now = [], timezone.now()
    for data in items:
        alert = existing.get(data.key)
        if alert is None:
            continue
        values = _fields(data)
        if any(getattr(alert, f) != values[f] for f in _UPDATED):
            for f in _UPDATED:
                setattr(alert, f, values[f])
            alert.updated = now
            changed.append(alert)
    Alert.objects.bulk_update(changed, [*_UPDATED, "updated"], batch_size=500)
    fresh = [d for d in items if d.key not in existing]
    if not fresh:
        return []
    ignored = _ignored(fresh)
    groups: dict[tuple[str, str], list[AlertGroup]] = {}
    for detector, family in {(d.detector, d.family) for d in fresh}:
        groups[(detector, family)] = list(
            AlertGroup.objects.filter(detector=detector, family=family)
        )
    created = []
    for data in sorted(fresh, key=lambda d: (d.family, d.from_key, d.to_key, d.key)):
        group = _place(groups[(data.detector, data.family)], data)
        muted = (IGNORE_KIND[data.detector], *(data.ignore_as or (data.family, data.subject)))
        alert = Alert(group=group, **_fields(data))
        if muted in ignored:
            alert.status = Alert.IGNORED
        created.append(alert)
    # A concurrent recording of the same verdict (two tasks racing) keeps the first row.
    Alert.objects.bulk_create(created, ignore_conflicts=True)
    return list(Alert.objects.filter(key__in=[d.key for d in fresh])
                .values_list("pk", flat=True))


@transaction.atomic
def withdraw(alerts: Iterable[Alert]) -> int:
    """Forget verdicts the detector no longer reports (a provisional flag that flipped
    back, a pair whose new runs removed the deviation): untriaged alerts are deleted, with
    groups left empty; triaged ones stay (the triage is history). Returns alerts deleted."""
    candidates = [a for a in alerts if a.status == Alert.NEW]
    noted = set(AlertNote.objects.filter(alert_id__in=[a.pk for a in candidates])
                .values_list("alert_id", flat=True))
    gone = [a for a in candidates if a.pk not in noted]
    if not gone:
        return 0
    group_ids = {a.group_id for a in gone}
    Alert.objects.filter(pk__in=[a.pk for a in gone]).delete()
    for group in AlertGroup.objects.filter(pk__in=group_ids):
        rest = list(group.alerts.values_list("from_key", "from_label", "to_key", "to_label"))
        if not rest:
            group.delete()
            continue
        first = min(rest)
        last = max(rest, key=lambda r: r[2])
        AlertGroup.objects.filter(pk=group.pk).update(
            from_key=first[0], from_label=first[1], to_key=last[2], to_label=last[3]
        )
    return len(gone)


def sync(alerts: Iterable[Alert], items: Iterable[AlertData]) -> tuple[int, int]:
    """Make the stored alerts ``alerts`` (everything one detector reports about one thing,
    e.g. a series) match ``items``: record them, withdraw the others. Returns (created,
    withdrawn)."""
    items = list(items)
    keys = {d.key for d in items}
    stored = {a.key: a for a in alerts}
    withdrawn = withdraw([a for k, a in stored.items() if k not in keys])
    return len(record(items, {k: a for k, a in stored.items() if k in keys})), withdrawn
