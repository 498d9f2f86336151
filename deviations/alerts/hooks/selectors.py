"""Reads of webhooks, deliveries, bug templates and bisects, and an alert's range.

``alert_range`` is the one place the hooks read an alert's range (the bug text, the
bisect request, the messages), from ``alerts.selectors.culprit_range``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db.models import Prefetch, QuerySet

from deviations.alerts.hooks.models import (
    Bisect,
    BugTemplate,
    DeliveryAttempt,
    Webhook,
    WebhookDelivery,
)
from deviations.alerts.models import Alert
from deviations.alerts.selectors import culprit_range

#: Deliveries shown per webhook on its page, newest first.
DELIVERIES_SHOWN = 20


@dataclass(frozen=True)
class AlertRange:
    """The range of an alert: the last release before the change and the first after it,
    their revisions when known, a link to the log between them, and a line of text."""

    series: str
    from_version: str
    to_version: str
    from_revision: str | None
    to_revision: str | None
    log_url: str | None
    text: str


def alert_range(alert: Alert) -> AlertRange:
    """The alert's culprit range (``alerts.selectors.culprit_range``): its last good and
    first bad releases, their revisions and the series' log link when known."""
    r = culprit_range(alert)
    text = f"{r.series}: between {r.last_good} and {r.first_bad}" + (
        f" ({r.text})" if r.has_revisions else "")
    return AlertRange(r.series, r.last_good, r.first_bad, r.last_good_revision,
                      r.first_bad_revision, r.log_url, text)


def user_webhooks(user: Any) -> list[tuple[Webhook, list[WebhookDelivery]]]:
    """The user's webhooks (every one for staff), each with its latest deliveries and their
    attempts."""
    hooks = Webhook.objects.all() if user.is_staff else Webhook.objects.filter(owner=user)
    out = []
    for hook in hooks.select_related("owner"):
        deliveries = list(
            hook.deliveries.prefetch_related(
                Prefetch("tries", queryset=DeliveryAttempt.objects.order_by("number")))
            .order_by("-created", "-pk")[:DELIVERIES_SHOWN])
        out.append((hook, deliveries))
    return out


def deliveries(hook: Webhook) -> QuerySet[WebhookDelivery]:
    return hook.deliveries.prefetch_related("tries").order_by("-created", "-pk")


def bug_template_for(alert: Alert) -> BugTemplate | None:
    target = {Alert.TRACE: BugTemplate.SERIES, Alert.HISTOGRAM: BugTemplate.HISTOGRAM}.get(
        alert.detector)
    if target is None:
        return None
    return BugTemplate.objects.filter(target=target, family=alert.group.family).first()


def bug_templates() -> QuerySet[BugTemplate]:
    return BugTemplate.objects.select_related("by")


def bisect_hook(series: str) -> Webhook | None:
    return Webhook.objects.filter(purpose=Webhook.BISECT, pattern=series, active=True).first()


def alert_bisects(alert: Alert) -> list[Bisect]:
    return list(alert.bisects.select_related("requested_by"))


def group_bisects(alerts: list[Alert]) -> dict[int, list[Bisect]]:
    found: dict[int, list[Bisect]] = {}
    for b in Bisect.objects.filter(alert__in=alerts).select_related("requested_by"):
        found.setdefault(b.alert_id, []).append(b)
    return found
