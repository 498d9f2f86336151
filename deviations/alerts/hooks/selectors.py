"""Reads of webhooks, deliveries, bug templates and bisects. An alert's or a group's range
(the messages, bug texts, bisect requests) is ``alerts.selectors.culprit_range`` /
``group_range``'s ``CulpritRange``."""

from __future__ import annotations

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

#: Deliveries shown per webhook on its page, newest first.
DELIVERIES_SHOWN = 20


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
