"""The bodies sent to webhooks, as bytes: an alert group in generic JSON, as a Slack
message (``text`` and ``blocks``) or a Matrix ``m.room.message`` (``body`` and an HTML
``formatted_body``); a test message; a bisect request. Pure functions of the rows."""

from __future__ import annotations

import html
import json
from typing import Any

from deviations.alerts import selectors
from deviations.alerts.hooks.models import Webhook
from deviations.alerts.models import Alert, AlertGroup
from deviations.alerts.selectors import CulpritRange
from deviations.alerts.services import site_url
from deviations.core.text import one_line

#: Alerts listed in a chat message, largest first (the group page has the rest); generic
#: JSON carries up to LISTED.
CHAT_TOP = 5
LISTED = 100


def encode(payload: dict[str, Any]) -> bytes:
    """Compact ASCII JSON: the bytes signed are the bytes stored and sent."""
    return json.dumps(payload, separators=(",", ":"), sort_keys=True).encode("ascii")


def _alert(a: Alert) -> dict[str, Any]:
    return {
        "id": a.pk, "subject": a.subject, "detector": a.detector, "metric": a.metric,
        "direction": a.direction, "from": a.from_label, "to": a.to_label, "unit": a.unit,
        "effect": a.effect, "effect_lo": a.effect_lo, "effect_hi": a.effect_hi,
        "effect_pct": a.effect_pct, "effect_pct_lo": a.effect_pct_lo,
        "effect_pct_hi": a.effect_pct_hi, "p_value": a.p_value, "distance": a.distance,
        "provisional": a.provisional, "explanation": a.explanation,
        "url": site_url(a.get_absolute_url()),
    }


def headline(group: AlertGroup, told: list[Alert]) -> str:
    n = len(told)
    kinds = sorted({a.direction for a in told})
    return one_line(f"{group.family}: {n} {'/'.join(kinds)} alert{'s' * (n != 1)} between "
                    f"{group.from_label} and {group.to_label}")


def _slack_escape(s: str) -> str:
    # Slack's mrkdwn: these three are control characters (api.slack.com, "Escaping text").
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def group_body(hook: Webhook, group: AlertGroup, told: list[Alert], rng: CulpritRange) -> bytes:
    """The message about a group, in the hook's format; ``told`` largest first."""
    url = site_url(group.get_absolute_url())
    title = headline(group, told)
    lines = [one_line(selectors.alert_line(a)) for a in told[:CHAT_TOP]]
    more = len(told) - CHAT_TOP
    if hook.format == Webhook.SLACK:
        items = "\n".join(f"• {_slack_escape(line)}" for line in lines)
        if more > 0:
            items += f"\n… and {more} more"
        return encode({
            "text": f"{_slack_escape(title)}: {url}",
            "blocks": [
                {"type": "section", "text": {"type": "mrkdwn",
                 "text": f"*<{url}|{_slack_escape(title)}>*"}},
                {"type": "section", "text": {"type": "mrkdwn", "text": items}},
                {"type": "context", "elements": [{"type": "mrkdwn",
                 "text": _slack_escape(rng.sentence)}]},
            ],
        })
    if hook.format == Webhook.MATRIX:
        text = "\n".join([title, *(f"- {line}" for line in lines),
                          *([f"… and {more} more"] if more > 0 else []), url])
        items = "".join(f"<li>{html.escape(line)}</li>" for line in lines)
        return encode({
            "msgtype": "m.notice", "body": text, "format": "org.matrix.custom.html",
            "formatted_body": (f'<p><a href="{html.escape(url)}">{html.escape(title)}</a></p>'
                               f"<ul>{items}</ul>"
                               + (f"<p>… and {more} more</p>" if more > 0 else "")),
        })
    return encode({
        "event": "alert_group", "title": title, "url": url,
        "group": {"id": group.pk, "detector": group.detector, "family": group.family,
                  "from": group.from_label, "to": group.to_label},
        "range": _range(rng), "count": len(told),
        "alerts": [_alert(a) for a in told[:LISTED]],
    })


def _range(rng: CulpritRange) -> dict[str, Any]:
    return {"series": rng.series, "from_version": rng.last_good,
            "to_version": rng.first_bad, "from_revision": rng.last_good_revision,
            "to_revision": rng.first_bad_revision, "log_url": rng.log_url,
            "text": rng.sentence}


def test_body(hook: Webhook) -> bytes:
    title = f"deviations: test delivery to the webhook of {hook.target} {hook.pattern}"
    if hook.format == Webhook.SLACK:
        return encode({"text": title})
    if hook.format == Webhook.MATRIX:
        return encode({"msgtype": "m.notice", "body": title})
    return encode({"event": "test", "title": title, "webhook": hook.pk})


def bisect_body(bisect_id: int, alert: Alert, rng: CulpritRange, callback: str,
                token: str) -> bytes:
    return encode({
        "event": "bisect", "bisect": bisect_id, "alert": alert.pk,
        "alert_url": site_url(alert.get_absolute_url()), "subject": alert.subject,
        "explanation": alert.explanation, **_range(rng),
        "callback_url": callback, "token": token,
    })
