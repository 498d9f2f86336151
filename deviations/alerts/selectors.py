"""Reads of subscriptions for the subscriptions page."""

from __future__ import annotations

from typing import Any

from django.db.models import Q, QuerySet

from deviations.alerts.models import Subscription
from deviations.alerts.services import normalise_email


def user_subscriptions(user: Any) -> QuerySet[Subscription]:
    return Subscription.objects.filter(
        Q(user=user) | Q(email=normalise_email(user.email or ""))
    ).order_by("target", "pattern")
