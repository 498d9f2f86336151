"""Reads of alerts, groups, ignores and subscriptions for the pages, the API and emails."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date
from typing import Any
from urllib.parse import quote, urlencode

from django.db.models import F, Max, Q, QuerySet
from django.urls import reverse

from deviations.alerts import nudging
from deviations.alerts.models import Alert, AlertGroup, Ignore, Subscription
from deviations.alerts.services import normalise_email
from deviations.core.packing import name_digest
from deviations.traces.models import Release, Series


def user_subscriptions(user: Any) -> QuerySet[Subscription]:
    return Subscription.objects.filter(
        Q(user=user) | Q(email=normalise_email(user.email or ""))
    ).order_by("target", "pattern")


# --- Words and links --------------------------------------------------------------------


def quantity(value: float | None, unit: str, *, sign: bool = True) -> str:
    """``+2,660 µs`` as ``+2.66 ms`` past a millisecond; plain numbers otherwise."""
    if value is None:
        return "—"
    fmt = "+" if sign else ""
    if unit == "µs" and abs(value) >= 1000:
        return f"{value / 1000:{fmt}.2f} ms"
    if unit == "µs":
        return f"{value:{fmt}.0f} µs"
    return f"{value:{fmt}.2f}{' ' + unit if unit else ''}"


def alert_line(a: Alert) -> str:
    """One line: what, where, how much (subjects of emails, digest lines, exports)."""
    what = a.subject + (f" ({a.metric} time, {a.rule} rule)" if a.metric else "")
    if a.distance is not None:
        return (f"{what}: {a.direction} from {a.from_label} to {a.to_label} "
                f"(distance {a.distance:.3f}, cutoff {a.threshold or 0:.3f})")
    if a.effect_pct is not None:
        effect = f"{a.effect_pct:+.0f}% ({quantity(a.effect, a.unit)})"
    else:
        effect = quantity(a.effect, a.unit)
    return f"{what}: {a.direction} {effect} from {a.from_label} to {a.to_label}"


def moved_line(a: Alert) -> str:
    """Where a nudged alert stands and where the detector put it ("" when not moved)."""
    if not a.nudged:
        return ""
    who = a.nudged_by.get_username() if a.nudged_by else "someone"
    return (f"Range {a.from_label} → {a.to_label}: moved by {who} from "
            f"{a.detected_from_label} → {a.detected_to_label} (where the detector put it; "
            "the numbers above are the detector's there).")


def group_links(group: AlertGroup) -> list[tuple[str, str]]:
    """(label, path) of the pages to look at a group from: the matrix and the compare view
    of its range (traces), the probe pages (histograms)."""
    if group.detector == Alert.TRACE:
        matrix = reverse("series", args=[group.family])
        compare = f"/series/{quote(group.family)}/compare/?" + urlencode(
            {"base": group.from_label, "new": group.to_label})
        return [("Deviation matrix", matrix), ("Compare the two releases", compare)]
    if group.detector == Alert.HISTOGRAM:
        probes = (group.alerts.order_by("probe_id").values_list("probe_id", "subject")
                  .distinct())
        return [(f"Probe {name}", reverse("histograms:probe", args=[pk]))
                for pk, name in probes[:5] if pk is not None]
    return []


def subject_url(a: Alert) -> str | None:
    """The page of what the alert is about: the function page, the probe page."""
    if a.function_id is not None:
        return reverse("function", args=[a.group.family, a.function_id])
    if a.probe_id is not None:
        return reverse("histograms:probe", args=[a.probe_id]) + (
            f"?build={quote(a.to_label)}" if a.change_id else "")
    return None


# --- Culprit ranges: the commits between the last good and the first bad release ---------


@dataclass(frozen=True)
class CulpritRange:
    """Where a change happened: after ``last_good`` and by ``first_bad`` (versions), with
    their revisions when the releases carry them, the series' log URL of the commits in
    between (``Series.log_url_template``, revisions URL-quoted) and a one-line ``text``:
    ``r1234..r1240`` from revisions, ``54.0.2837.0..54.0.2840.0`` from versions when a
    revision is missing. For a histogram or canary alert ``series`` is its family and
    there are no revisions."""

    series: str
    last_good: str
    first_bad: str
    last_good_revision: str | None
    first_bad_revision: str | None
    log_url: str | None
    text: str

    @property
    def has_revisions(self) -> bool:
        return self.last_good_revision is not None and self.first_bad_revision is not None

    @property
    def sentence(self) -> str:
        """``series: between LAST_GOOD and FIRST_BAD`` and, with revisions, the commits'
        range: the line of webhook messages, bug texts and bisect requests."""
        commits = f" (commits {self.text})" if self.has_revisions else ""
        return f"{self.series}: between {self.last_good} and {self.first_bad}{commits}"


def log_url(template: str, from_revision: str, to_revision: str) -> str:
    """``template`` with ``{from}`` and ``{to}`` replaced by the revisions, URL-quoted (a
    quoted value holds no brace, so one substitution cannot feed the other)."""
    return (template.replace("{from}", quote(from_revision, safe=""))
            .replace("{to}", quote(to_revision, safe="")))


def make_range(series: str, last_good: str, first_bad: str, last_good_revision: str | None,
               first_bad_revision: str | None, template: str = "") -> CulpritRange:
    """The range between two releases, named by revisions when both have one."""
    both = bool(last_good_revision) and bool(first_bad_revision)
    url = None
    if both and template:
        url = log_url(template, last_good_revision or "", first_bad_revision or "")
    text = (f"{last_good_revision}..{first_bad_revision}" if both
            else f"{last_good}..{first_bad}")
    return CulpritRange(series, last_good, first_bad, last_good_revision or None,
                        first_bad_revision or None, url, text)


def series_ranges(series: Series, pairs: Iterable[tuple[str, str]]
                  ) -> dict[tuple[str, str], CulpritRange]:
    """The culprit range of each (last good, first bad) pair of versions of a series, the
    revisions read in one query (a version no longer there has none)."""
    pairs = list(dict.fromkeys(pairs))
    wanted = {v for pair in pairs for v in pair}
    revisions = dict(Release.objects.filter(series=series, version__in=wanted)
                     .exclude(revision="").values_list("version", "revision"))
    return {(a, b): make_range(series.name, a, b, revisions.get(a), revisions.get(b),
                               series.log_url_template) for a, b in pairs}


def culprit_ranges(alerts: Iterable[Alert]) -> dict[int, CulpritRange]:
    """The culprit range of each alert by id: for a trace alert (a function's change at
    the boundary between two consecutive analysed releases) the last good release is the
    one before the boundary, the first bad the one after; one query per series."""
    alerts = list(alerts)
    by_series: dict[int, list[Alert]] = {}
    out: dict[int, CulpritRange] = {}
    for a in alerts:
        if a.detector == Alert.TRACE and a.series_id is not None:
            by_series.setdefault(a.series_id, []).append(a)
        else:
            out[a.pk] = make_range(a.group.family, a.from_label, a.to_label, None, None)
    for series in Series.objects.filter(pk__in=list(by_series)):
        ranges = series_ranges(series, [(a.from_label, a.to_label)
                                        for a in by_series[series.pk]])
        for a in by_series[series.pk]:
            out[a.pk] = ranges[(a.from_label, a.to_label)]
    return out


def culprit_range(alert: Alert) -> CulpritRange:
    """The range of commits that holds the alert's cause: between its last good and first
    bad release (``CulpritRange``)."""
    return culprit_ranges([alert])[alert.pk]


def group_ranges(groups: Iterable[AlertGroup]) -> dict[int, CulpritRange]:
    """The range of each group by id: from the release before its first boundary to the
    last release of its last one (the union of its alerts' ranges); one query per series."""
    groups = list(groups)
    traced = {g.family for g in groups if g.detector == Alert.TRACE}
    series = {s.name: s for s in Series.objects.filter(name__in=traced)}
    out = {}
    for name, one in series.items():
        mine = [g for g in groups if g.detector == Alert.TRACE and g.family == name]
        ranges = series_ranges(one, [(g.from_label, g.to_label) for g in mine])
        out.update({g.pk: ranges[(g.from_label, g.to_label)] for g in mine})
    for g in groups:
        if g.pk not in out:
            out[g.pk] = make_range(g.family, g.from_label, g.to_label, None, None)
    return out


def group_range(group: AlertGroup) -> CulpritRange:
    """The range of a whole group (``group_ranges``)."""
    return group_ranges([group])[group.pk]


def with_ranges(alerts: Iterable[Alert]) -> list[Alert]:
    """The alerts, each with its ``culprit`` range (``CulpritRange``) for templates."""
    alerts = list(alerts)
    ranges = culprit_ranges(alerts)
    for a in alerts:
        a.culprit = ranges[a.pk]  # type: ignore[attr-defined]
    return alerts


def nudge_targets(alert: Alert) -> list[nudging.Boundary]:
    """The boundaries the alert page offers to move the alert to (none for a canary)."""
    if alert.detector == Alert.CANARY:
        return []
    return nudging.neighbours(alert)


def upstream_chain(group: AlertGroup) -> list[AlertGroup]:
    """The groups ``group`` is downstream of, nearest first."""
    chain: list[AlertGroup] = []
    seen = {group.pk}
    at = group.upstream
    while at is not None and at.pk not in seen:
        chain.append(at)
        seen.add(at.pk)
        at = at.upstream
    return chain


def downstream_groups(group: AlertGroup) -> list[AlertGroup]:
    """The groups linked as downstream of ``group``."""
    return list(group.downstream.order_by("pk"))


# --- Lists ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Filters:
    """The alerts page's filters, from its query string (unknown values are dropped)."""

    status: str = ""
    detector: str = ""
    family: str = ""
    direction: str = ""
    assignee: str = ""
    since: date | None = None
    until: date | None = None

    @classmethod
    def from_params(cls, params: Any) -> Filters:
        def pick(name: str, choices: list[tuple[str, str]]) -> str:
            value = params.get(name, "")
            return value if value in {c for c, _ in choices} else ""

        def day(name: str) -> date | None:
            try:
                return date.fromisoformat(params.get(name, ""))
            except ValueError:
                return None

        status = params.get("status", "")
        return cls(
            status=status if status == "untriaged" else pick("status", Alert.STATUSES),
            detector=pick("detector", Alert.DETECTORS),
            family=params.get("family", "").strip()[:1000],
            direction=pick("direction", Alert.DIRECTIONS),
            assignee=params.get("assignee", "").strip()[:150],
            since=day("since"), until=day("until"),
        )

    def params(self, **changes: Any) -> str:
        values = {
            "status": self.status, "detector": self.detector, "family": self.family,
            "direction": self.direction, "assignee": self.assignee,
            "since": self.since.isoformat() if self.since else "",
            "until": self.until.isoformat() if self.until else "",
        } | changes
        return urlencode({k: v for k, v in values.items() if v})


def untriaged(alerts: QuerySet[Alert]) -> QuerySet[Alert]:
    """The untriaged ones of ``alerts``: new, and not in a group downstream of another
    (triaged with its upstream: ``alerts.downstream``)."""
    return alerts.filter(status=Alert.NEW, group__upstream__isnull=True)


def filtered_alerts(f: Filters) -> QuerySet[Alert]:
    alerts = Alert.objects.select_related("group", "assignee", "status_by", "nudged_by")
    if f.status == "untriaged":
        alerts = untriaged(alerts)
    elif f.status:
        alerts = alerts.filter(status=f.status)
    if f.detector:
        alerts = alerts.filter(detector=f.detector)
    if f.family:
        alerts = alerts.filter(Q(group__family=f.family) | Q(subject=f.family))
    if f.direction:
        alerts = alerts.filter(direction=f.direction)
    if f.assignee == "-":
        alerts = alerts.filter(assignee__isnull=True)
    elif f.assignee:
        alerts = alerts.filter(assignee__username=f.assignee)
    if f.since:
        alerts = alerts.filter(created__date__gte=f.since)
    if f.until:
        alerts = alerts.filter(created__date__lte=f.until)
    return alerts


@dataclass
class GroupRow:
    group: AlertGroup
    alerts: list[Alert]  # the matching alerts, largest effect first
    untriaged: int
    regressions: int
    improvements: int
    changes: int
    latest: Any
    range: CulpritRange | None = None  # the group's culprit range

    @property
    def top(self) -> Alert:
        return self.alerts[0]

    @property
    def triage_ids(self) -> list[int]:
        """What a keyboard triage of the row sets (alerts page): its untriaged alerts, or
        all its listed alerts when none is untriaged."""
        new = [a.pk for a in self.alerts if a.status == Alert.NEW]
        return new or [a.pk for a in self.alerts]


def group_rows(alerts: QuerySet[Alert], limit: int = 50, offset: int = 0) -> list[GroupRow]:
    """The groups of these alerts, those with untriaged alerts first, then newest first,
    each with its matching alerts (largest effect first)."""
    ranked = (
        AlertGroup.objects.filter(pk__in=alerts.values("group_id")).annotate(
            latest_new=Max("alerts__created",
                           filter=Q(alerts__status=Alert.NEW, upstream__isnull=True)),
            latest=Max("alerts__created"),
        ).order_by(F("latest_new").desc(nulls_last=True), "-latest", "-pk")
        .select_related("upstream")
    )
    groups = list(ranked[offset:offset + limit])
    by_group: dict[int, list[Alert]] = {g.pk: [] for g in groups}
    for a in alerts.filter(group_id__in=list(by_group)):
        by_group[a.group_id].append(a)
    rows = []
    ranges = group_ranges(groups)
    for g in groups:
        members = sorted(by_group[g.pk], key=lambda a: (-a.size, a.pk))
        rows.append(GroupRow(
            g, members,
            0 if g.upstream_id else sum(a.status == Alert.NEW for a in members),
            sum(a.direction == Alert.REGRESSION for a in members),
            sum(a.direction == Alert.IMPROVEMENT for a in members),
            sum(a.direction == Alert.CHANGE for a in members),
            g.latest,  # type: ignore[attr-defined]
            ranges[g.pk],
        ))
    return rows


def untriaged_groups(limit: int = 20) -> list[GroupRow]:
    """What the home page shows first: groups with untriaged alerts, newest first."""
    return group_rows(untriaged(Alert.objects.all()), limit=limit)


def group_alerts(group: AlertGroup) -> list[Alert]:
    """A group's alerts, largest effect first (the group page)."""
    found = group.alerts.select_related("assignee", "status_by", "function", "nudged_by",
                                        "group")
    return with_ranges(sorted(found, key=lambda a: (-a.size, a.pk)))


def export_rows(alerts: QuerySet[Alert]) -> list[dict[str, Any]]:
    alerts = with_ranges(alerts)  # type: ignore[assignment]
    return [
        {
            "id": a.pk, "group": a.group_id, "detector": a.detector, "family": a.group.family,
            "subject": a.subject, "metric": a.metric, "rule": a.rule,
            "from": a.from_label, "to": a.to_label, "direction": a.direction, "unit": a.unit,
            "before": a.before, "after": a.after,
            "effect": a.effect, "effect_lo": a.effect_lo, "effect_hi": a.effect_hi,
            "effect_pct": a.effect_pct, "effect_pct_lo": a.effect_pct_lo,
            "effect_pct_hi": a.effect_pct_hi, "p_value": a.p_value, "distance": a.distance,
            "threshold": a.threshold, "method": a.method, "level": a.level,
            "n_before": a.n_before, "n_after": a.n_after, "provisional": a.provisional,
            "status": a.status, "assignee": a.assignee.get_username() if a.assignee else None,
            "bug_url": a.bug_url, "created": a.created.isoformat(),
            "detected_from": a.detected_from_label or None,
            "detected_to": a.detected_to_label or None,
            "nudged_by": a.nudged_by.get_username() if a.nudged_by else None,
            "nudged_at": a.nudged_at.isoformat() if a.nudged_at else None,
            "explanation": a.explanation, "url": a.get_absolute_url(),
            **range_columns(a.culprit),  # type: ignore[attr-defined]
        }
        for a in alerts
    ]


EXPORT_FIELDS = ["id", "group", "detector", "family", "subject", "metric", "rule", "from",
                 "to", "direction", "unit", "before", "after", "effect", "effect_lo",
                 "effect_hi", "effect_pct", "effect_pct_lo", "effect_pct_hi", "p_value",
                 "distance", "threshold", "method", "level", "n_before", "n_after",
                 "provisional", "status", "assignee", "bug_url", "created",
                 "detected_from", "detected_to", "nudged_by", "nudged_at", "explanation",
                 "url", "last_good", "first_bad", "last_good_revision", "first_bad_revision",
                 "culprit_range", "log_url"]


def range_columns(r: CulpritRange) -> dict[str, str | None]:
    """A culprit range as export columns (alerts, the analysis' deviations)."""
    return {"last_good": r.last_good, "first_bad": r.first_bad,
            "last_good_revision": r.last_good_revision,
            "first_bad_revision": r.first_bad_revision, "culprit_range": r.text,
            "log_url": r.log_url}


# --- What a function or probe page shows -------------------------------------------------


def function_alerts(series_name: str, function_id: int) -> list[Alert]:
    """The alerts of one function, newest boundary first (its page explains them)."""
    return with_ranges(
        Alert.objects.filter(detector=Alert.TRACE, group__family=series_name,
                             function_id=function_id)
        .select_related("group", "nudged_by").order_by("-to_key", "metric", "rule")
    )


def ignored(kind: str, family: str, subject: str) -> Ignore | None:
    return Ignore.objects.filter(kind=kind, family=family,
                                 subject_sha1=name_digest(subject)).first()


def all_ignored() -> QuerySet[Ignore]:
    return Ignore.objects.select_related("by").order_by("kind", "family", "subject")
