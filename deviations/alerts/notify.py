"""Telling people about alert groups: one email per group and address, once, when due.

A group is due when it has untriaged alerts that are confirmed: no longer provisional
(the detector says so: ``Alert.provisional``; a trace verdict is final once the releases
after it exist, or sent early on overwhelming evidence), or, for other detectors,
recorded at least ``DEVIATIONS_ALERT_CONFIRM_SECONDS`` ago (settings; a day by default),
so a flag that flips back within that time is withdrawn before it reaches an inbox. Regressions and
changes are emailed; improvements only to subscribers who asked for them
(``Subscription.improvements``); they are recorded and shown either way.

Recipients, per detector: a trace series' subscribers and owners (``Ownership``); a
probe's subscribers (patterns) and owners (``Probe.alert_emails``). An address is told of
the alerts whose data arrived after it subscribed (or became an owner). Canaries: the
experiments feature adds its recipients to ``RECIPIENTS``. Claiming (``SentAlert``,
subject ``group:<id>``), sending and the daily digest are ``deviations.alerts.services``';
the group's webhooks are claimed and queued by ``deviations.alerts.hooks.services``.

Runs after every analysis and detection (in-process in the embedded default) and every
15 minutes under beat (``notify-alert-groups``: groups whose delay ran out since).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.utils import timezone

from deviations.alerts import selectors
from deviations.alerts import services as alerts
from deviations.alerts.hooks import services as hooks
from deviations.alerts.models import Alert, AlertGroup, SentAlert, Subscription
from deviations.core.models import Ownership
from deviations.core.packing import name_digest
from deviations.core.text import one_line
from deviations.histograms.models import Probe

#: Alerts listed in an email, largest first (the group page has the rest).
TOP = 10


@dataclass(frozen=True)
class Recipient:
    email: str
    digest: bool
    target: str  # Subscription target of the unsubscribe link
    pattern: str  # what they are told through: their pattern, the series, the probe
    why: str
    since: datetime | None  # told of alerts whose data arrived after this
    improvements: bool


def _muted(subs: list[Subscription], names: set[str]) -> set[str]:
    return {s.email for s in subs
            if not s.active and not s.pending and s.pattern in names | {alerts.ALL}}


def series_recipients(group: AlertGroup) -> list[Recipient]:
    """Subscribers of the series and its owners (unless they unsubscribed)."""
    name = group.family
    subs = list(Subscription.objects.filter(target=Subscription.SERIES,
                                            pattern__in=[name, alerts.ALL]))
    found = {
        s.email: Recipient(s.email, s.digest, Subscription.SERIES, name,
                           f"you subscribed to the series {name}", s.created, s.improvements)
        for s in subs if s.active and s.pattern == name
    }
    muted = _muted(subs, {name})
    owners = Ownership.objects.filter(kind=Ownership.SERIES, name_sha1=name_digest(name))
    for owner in owners.select_related("user"):
        email = alerts.normalise_email(owner.user.email or "")
        if email and email not in found and email not in muted:
            found[email] = Recipient(email, False, Subscription.SERIES, name,
                                     f"you own the series {name}", owner.created, False)
    return sorted(found.values(), key=lambda r: r.email)


def probe_recipients(group: AlertGroup) -> list[Recipient]:
    """Per probe of the group: subscriptions whose pattern matches its name (``fnmatch``,
    case-sensitive) and its owners (``alert_emails``) unless they unsubscribed from it or
    from every probe."""
    subs = list(Subscription.objects.filter(target=Subscription.HISTOGRAM))
    found: dict[str, Recipient] = {}
    probe_ids = set(group.alerts.values_list("probe_id", flat=True))
    for probe in Probe.objects.filter(pk__in=probe_ids).order_by("name"):
        for s in sorted(subs, key=lambda s: (s.digest, s.pk)):  # immediate before digest
            if s.active and s.email not in found and fnmatch.fnmatchcase(probe.name, s.pattern):
                found[s.email] = Recipient(
                    s.email, s.digest, Subscription.HISTOGRAM, s.pattern,
                    f"you subscribed to {s.pattern!r}", s.created, s.improvements,
                )
        muted = _muted(subs, {probe.name})
        for owner in probe.alert_emails:
            email = alerts.normalise_email(owner)
            if email not in found and email not in muted:
                found[email] = Recipient(
                    email, False, Subscription.HISTOGRAM, probe.name,
                    "you are listed as an owner (alert_emails) of the probe", None, False,
                )
    return sorted(found.values(), key=lambda r: r.email)


#: Who is told about a group, per detector (the canary feature adds ``Alert.CANARY``).
RECIPIENTS: dict[str, Callable[[AlertGroup], list[Recipient]]] = {
    Alert.TRACE: series_recipients,
    Alert.HISTOGRAM: probe_recipients,
}


def due(alerts_of_group: list[Alert], now: datetime) -> list[Alert]:
    """The untriaged alerts that may be told: confirmed, or provisional for longer than
    the confirmation delay. A trace alert's verdict says itself when it is final (or sent
    early): it is never told on the delay. An alert its detector no longer reports (kept
    for its notes) is never told."""
    delay = timedelta(seconds=settings.DEVIATIONS_ALERT_CONFIRM_SECONDS)
    return [a for a in alerts_of_group
            if a.status == Alert.NEW and a.reported and (not a.provisional or (
                a.detector != Alert.TRACE and a.created <= now - delay))]


def _counts(told: list[Alert]) -> str:
    parts = []
    for direction, label in ((Alert.REGRESSION, "regression"), (Alert.IMPROVEMENT,
                             "improvement"), (Alert.CHANGE, "change")):
        n = sum(a.direction == direction for a in told)
        if n:
            parts.append(f"{n} {label}{'s' * (n != 1)}")
    return ", ".join(parts)


def group_subject(group: AlertGroup, told: list[Alert]) -> str:
    if len(told) == 1:
        prefix = f"{group.family}: " if group.detector == Alert.TRACE else ""
        return f"[deviations] {prefix}{selectors.alert_line(told[0])}"
    return (
        f"[deviations] {group.family}: {_counts(told)} between {group.from_label} and "
        f"{group.to_label} (largest: {selectors.alert_line(told[0])})"
    )


def range_line(r: selectors.CulpritRange) -> str:
    """``Commits: r1234..r1240 <log URL>`` (the versions when a revision is missing)."""
    return f"Commits: {r.text}" + (f" {r.log_url}" if r.log_url else "")


def group_body(group: AlertGroup, told: list[Alert], why: str) -> str:
    lines = [
        f"{group.family}: {_counts(told)} between {group.from_label} and {group.to_label}"
        + (", largest first:" if len(told) > 1 else ":"),
    ]
    if group.detector == Alert.TRACE:
        lines.append(range_line(selectors.group_range(group)))
    lines.append("")
    ranges = selectors.culprit_ranges(told[:TOP])
    for k, a in enumerate(told[:TOP], 1):
        lines.append(f"{k}. {one_line(a.explanation)}")
        if a.detector == Alert.TRACE and len(told) > 1:
            lines.append(f"   {range_line(ranges[a.pk])}")
        if a.nudged:
            lines.append(f"   {one_line(selectors.moved_line(a))}")
        lines.append(f"   {alerts.site_url(a.get_absolute_url())}")
    if len(told) > TOP:
        lines.append(f"... and {len(told) - TOP} more on the group page.")
    lines += ["", f"Triage them together: {alerts.site_url(group.get_absolute_url())}"]
    for label, url in selectors.group_links(group):
        lines.append(f"{label}: {alerts.site_url(url)}")
    lines += ["", f"You receive this because {why}."]
    return "\n".join(lines)


def _told_before(group: AlertGroup, members: list[Alert], email: str) -> bool:
    """Whether the former notifier (one email per paper-rule regression, before alert
    groups) already sent one of the group's verdicts to this address: an upgrade does not
    email it again."""
    if group.detector != Alert.TRACE:
        return False
    legacy = {f"series:{a.series_id}:{name_digest(a.subject)}:{a.to_label}" for a in members}
    return SentAlert.objects.filter(email=email, subject__in=legacy).exists()


def notify_group(group: AlertGroup, now: datetime) -> int:
    """Email (or queue for the digest) a due group to each recipient once; returns emails
    sent. The group is marked notified when it had something due or nothing untriaged."""
    if group.upstream_id is not None:
        return 0  # triaged with its upstream group (alerts.downstream): not emailed
    members = sorted(group.alerts.select_related("nudged_by"), key=lambda a: -a.size)
    ready = due(members, now)
    if not ready:
        if not any(a.status == Alert.NEW for a in members):
            AlertGroup.objects.filter(pk=group.pk).update(notified_at=now)
        return 0
    hooks.deliver_group(group, ready, now)  # webhooks: once per group and hook, as email
    sent = 0
    finder = RECIPIENTS.get(group.detector)
    for r in finder(group) if finder else []:
        told = [a for a in ready
                if (r.since is None or a.data_at > r.since)
                and (a.direction != Alert.IMPROVEMENT or r.improvements)]
        if not told or _told_before(group, members, r.email):
            continue
        subject = group_subject(group, told)
        status = SentAlert.QUEUED if r.digest else SentAlert.SENDING
        claimed = alerts.claim(
            f"group:{group.pk}", r.email, status, summary=subject.removeprefix("[deviations] "),
            url=alerts.site_url(group.get_absolute_url()),
        )
        if claimed is None or r.digest:
            continue
        alerts.send(claimed, subject, group_body(group, told, r.why),
                    alerts.unsubscribe_url(r.email, r.target, r.pattern))
        sent += 1
    AlertGroup.objects.filter(pk=group.pk).update(notified_at=now)
    return sent


def notify_due_groups(now: datetime | None = None) -> int:
    """Every group not notified yet that is due; returns the emails sent."""
    now = now or timezone.now()
    sent = 0
    for group in AlertGroup.objects.filter(notified_at__isnull=True,
                                           upstream__isnull=True).order_by("pk"):
        sent += notify_group(group, now)
    return sent
