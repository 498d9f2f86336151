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
from typing import Protocol

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


class Span(Protocol):
    """What places an alert in a group: its detector, family and range."""

    @property
    def detector(self) -> str: ...
    @property
    def family(self) -> str: ...
    @property
    def from_label(self) -> str: ...
    @property
    def to_label(self) -> str: ...
    @property
    def from_key(self) -> str: ...
    @property
    def to_key(self) -> str: ...


def _merge_links(gone: AlertGroup, into: AlertGroup) -> None:
    """``gone`` is merged into ``into``: its "downstream of" links follow it; a link
    between the two, or one that would now close a cycle, is dropped."""
    AlertGroup.objects.filter(upstream=gone).exclude(pk=into.pk).update(upstream=into)
    if into.upstream_id == gone.pk:
        into.upstream_id, into.upstream_by_id, into.upstream_at = None, None, None
    if into.upstream_id is None and gone.upstream_id not in (None, into.pk):
        into.upstream_id, into.upstream_by_id, into.upstream_at = (
            gone.upstream_id, gone.upstream_by_id, gone.upstream_at)
    # Walk up from ``into``: a group met twice closes a cycle; cut it at ``into``.
    seen, at = {into.pk}, into.upstream_id
    while at is not None and at not in seen:
        seen.add(at)
        at = AlertGroup.objects.filter(pk=at).values_list("upstream_id", flat=True).first()
    if at is not None:
        into.upstream_id, into.upstream_by_id, into.upstream_at = None, None, None


def _place(groups: list[AlertGroup], data: Span) -> AlertGroup:
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
        _merge_links(other, group)
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
                                  "notified_at", "upstream", "upstream_by", "upstream_at"])
    return group


def _nudged_here(fresh: list[AlertData]) -> set[str]:
    """Keys of ``fresh`` verdicts a nudged alert already stands for: same detector, thing
    and rule, moved by a sheriff to exactly this range (the detector now agrees with the
    nudge; one alert, with its triage, not a second one beside it)."""
    nudged = Alert.objects.filter(
        nudged_at__isnull=False, detector__in={d.detector for d in fresh},
        to_key__in={d.to_key for d in fresh},
    ).values_list("detector", "series_id", "function_id", "probe_id", "canary", "rule",
                  "from_key", "to_key")
    spots = set(nudged)
    return {d.key for d in fresh
            if (d.detector, d.series_id, d.function_id, d.probe_id, d.canary, d.rule,
                d.from_key, d.to_key) in spots}


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
        if not alert.reported or any(getattr(alert, f) != values[f] for f in _UPDATED):
            for f in _UPDATED:
                setattr(alert, f, values[f])
            alert.reported = True  # reported again: it may be told
            alert.updated = now
            changed.append(alert)
    Alert.objects.bulk_update(changed, [*_UPDATED, "reported", "updated"], batch_size=500)
    fresh = [d for d in items if d.key not in existing]
    if fresh:
        covered = _nudged_here(fresh)
        fresh = [d for d in fresh if d.key not in covered]
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
    groups left empty; triaged ones stay (the triage is history), and so do nudged ones (a
    sheriff placed them) and noted ones (their notes), these marked no longer reported
    (``Alert.reported``: never emailed about a change that is gone). Returns alerts
    deleted."""
    candidates = [a for a in alerts if a.status == Alert.NEW and a.nudged_at is None]
    noted = set(AlertNote.objects.filter(alert_id__in=[a.pk for a in candidates])
                .values_list("alert_id", flat=True))
    if noted:
        Alert.objects.filter(pk__in=noted, reported=True).update(reported=False,
                                                                 updated=timezone.now())
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


def _refit(group: AlertGroup, without: int) -> bool:
    """Alert ``without`` leaves ``group``: shrink the group's range to its other alerts'
    and split it where they no longer overlap (the first part keeps the group; the others
    become groups of their own, emailed or not and downstream of the same group as it was;
    groups downstream of it stay with the first part). False, and nothing
    changed, when no other alert is left."""
    rest = sorted(group.alerts.exclude(pk=without), key=lambda a: (a.from_key, a.to_key, a.pk))
    if not rest:
        return False
    parts: list[list[Alert]] = []
    end = ""
    for a in rest:
        if parts and a.from_key < end:
            parts[-1].append(a)
            end = max(end, a.to_key)
        else:
            parts.append([a])
            end = a.to_key
    for k, part in enumerate(parts):
        first, last = part[0], max(part, key=lambda a: a.to_key)
        span = {"from_key": first.from_key, "from_label": first.from_label,
                "to_key": last.to_key, "to_label": last.to_label}
        if k == 0:
            AlertGroup.objects.filter(pk=group.pk).update(**span)
            continue
        split = AlertGroup.objects.create(
            detector=group.detector, family=group.family, notified_at=group.notified_at,
            upstream_id=group.upstream_id, upstream_by_id=group.upstream_by_id,
            upstream_at=group.upstream_at, **span)
        Alert.objects.filter(pk__in=[a.pk for a in part]).update(group=split)
    return True


@dataclass(frozen=True)
class _Moved:
    detector: str
    family: str
    from_label: str
    to_label: str
    from_key: str
    to_key: str


@transaction.atomic
def regroup(alert: Alert) -> AlertGroup:
    """Put ``alert``, whose range changed (a nudge), in the group its new range overlaps
    among its detector and family's (merging, extending or creating one), and refit the
    group it left. An alert alone in its group moves with the group (its links and email
    state). Returns its group."""
    old = AlertGroup.objects.select_for_update().get(pk=alert.group_id)
    moved = _Moved(alert.detector, old.family, alert.from_label, alert.to_label,
                   alert.from_key, alert.to_key)
    if not _refit(old, alert.pk):
        AlertGroup.objects.filter(pk=old.pk).update(
            from_key=moved.from_key, from_label=moved.from_label, to_key=moved.to_key,
            to_label=moved.to_label)
    groups = list(AlertGroup.objects.filter(detector=old.detector, family=old.family))
    known = {g.pk for g in groups}
    group = _place(groups, moved)
    if group.pk not in known:
        # A group of its own for an alert already emailed about: not emailed again.
        AlertGroup.objects.filter(pk=group.pk).update(notified_at=old.notified_at)
        group.notified_at = old.notified_at
    Alert.objects.filter(pk=alert.pk).update(group=group)
    alert.group = group
    return group


def sync(alerts: Iterable[Alert], items: Iterable[AlertData]) -> tuple[int, int]:
    """Make the stored alerts ``alerts`` (everything one detector reports about one thing,
    e.g. a series) match ``items``: record them, withdraw the others. Returns (created,
    withdrawn)."""
    items = list(items)
    keys = {d.key for d in items}
    stored = {a.key: a for a in alerts}
    withdrawn = withdraw([a for k, a in stored.items() if k not in keys])
    return len(record(items, {k: a for k, a in stored.items() if k in keys})), withdrawn
