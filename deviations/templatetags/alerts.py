"""Alerts shown on other features' pages: ``{% untriaged_groups as groups %}`` (home page),
``{% function_alerts series_name function_id as alerts %}`` (a function's verdicts in
words), ``{% ignore_state kind family subject as ignored %}`` (the ignore button), and
``{{ value|quantity:unit }}``. Each calls one selector of ``deviations.alerts``."""

from typing import Any

from django import template

from deviations.alerts import selectors

register = template.Library()


@register.simple_tag
def untriaged_groups(limit: int = 20) -> list[selectors.GroupRow]:
    return selectors.untriaged_groups(limit)


@register.simple_tag
def function_alerts(series_name: str, function_id: int) -> list[Any]:
    return selectors.function_alerts(series_name, function_id)


@register.simple_tag
def ignore_state(kind: str, family: str, subject: str) -> Any:
    return selectors.ignored(kind, family, subject)


@register.filter
def quantity(value: float | None, unit: str) -> str:
    return selectors.quantity(value, unit)


@register.filter
def level(value: float | None, unit: str) -> str:
    """A level (before, after), not a change: no sign."""
    return selectors.quantity(value, unit, sign=False)


@register.filter
def subject_url(alert: Any) -> str | None:
    return selectors.subject_url(alert)
