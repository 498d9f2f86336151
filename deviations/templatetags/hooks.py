"""The hooks on the alert and group pages: ``{% alert_hooks alert %}`` (the "file a bug"
link, the bisects and the "Start bisect" button) and ``{% group_hooks alerts %}`` (the
same per alert of a group). Each reads through
``deviations.alerts.hooks.selectors`` and ``bugs``."""

from typing import Any

from django import template

from deviations.alerts.hooks import bugs, selectors
from deviations.alerts.selectors import culprit_range

register = template.Library()


@register.inclusion_tag("alerts/hooks/_alert.html", takes_context=True)
def alert_hooks(context: Any, alert: Any) -> dict[str, Any]:
    bisectable = alert.detector == "trace" and alert.direction == "regression"
    return {
        "alert": alert, "user": context.get("user"), "csrf_token": context.get("csrf_token"),
        "bug_url": bugs.link_for(alert), "bisects": selectors.alert_bisects(alert),
        "bisect_hook": bisectable and selectors.bisect_hook(alert.group.family) is not None,
    }


@register.inclusion_tag("alerts/hooks/_group.html")
def group_hooks(alerts: list[Any]) -> dict[str, Any]:
    bisects = selectors.group_bisects(alerts)
    # One family per group: its template is read once, not per alert.
    template = selectors.bug_template_for(alerts[0]) if alerts else None
    rows = [(a, bugs.build_link(template, a, culprit_range(a)) if template else None,
             bisects.get(a.pk, [])) for a in alerts]
    return {"rows": [r for r in rows if r[1] or r[2]]}
