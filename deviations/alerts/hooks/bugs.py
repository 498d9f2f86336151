"""The "file a bug" link of an alert: the tracker's new-bug page prefilled with the alert's
words, numbers and range, from its family's ``BugTemplate``.

- Bugzilla: ``<site>/enter_bug.cgi?product=&component=&short_desc=&comment=&bug_file_loc=``
- Jira: ``<site>/secure/CreateIssueDetails!init.jspa?pid=&issuetype=&summary=&description=``
- GitHub: ``<repository>/issues/new?title=&body=&labels=``

Browsers and trackers refuse long URLs (Bugzilla behind Apache: 8 kB of request line), so
the description is cut to keep the whole link under ``MAX_URL`` characters.
"""

from __future__ import annotations

from urllib.parse import urlencode

from deviations.alerts import selectors
from deviations.alerts.hooks.models import BugTemplate
from deviations.alerts.hooks.selectors import bug_template_for
from deviations.alerts.models import Alert
from deviations.alerts.selectors import CulpritRange, culprit_range
from deviations.alerts.services import site_url
from deviations.core.text import one_line

MAX_URL = 8000
TITLE_CHARS = 200
_CUT = "\n[…cut: the alert page has the rest]"


def _effect(a: Alert) -> str:
    if a.effect_pct is None:
        return ""
    return (f"Effect: {a.effect_pct:+.1f}% (95% interval {a.effect_pct_lo or 0:+.1f}% to "
            f"{a.effect_pct_hi or 0:+.1f}%)")


def bug_text(alert: Alert, rng: CulpritRange) -> tuple[str, str]:
    """(title, description) of a bug about the alert."""
    title = one_line(f"{alert.group.family}: {selectors.alert_line(alert)}")[:TITLE_CHARS]
    lines = [
        alert.explanation, "",
        f"Range: {rng.sentence}",
        *([f"Log: {rng.log_url}"] if rng.log_url else []),
        *([_effect(alert)] if alert.effect_pct is not None else []),
        f"Alert: {site_url(alert.get_absolute_url())}",
        f"Group: {site_url(alert.group.get_absolute_url())}",
    ]
    return title, "\n".join(lines)


def _url(template: BugTemplate, title: str, body: str) -> str:
    base = template.base_url.rstrip("/")
    if template.kind == BugTemplate.BUGZILLA:
        return f"{base}/enter_bug.cgi?" + urlencode({
            "product": template.product, "component": template.component,
            "short_desc": title, "comment": body})
    if template.kind == BugTemplate.JIRA:
        return f"{base}/secure/CreateIssueDetails!init.jspa?" + urlencode({
            "pid": template.product, "issuetype": template.component, "summary": title,
            "description": body})
    params = {"title": title, "body": body}
    if template.labels:
        params["labels"] = template.labels
    return f"{base}/issues/new?" + urlencode(params)


def build_link(template: BugTemplate, alert: Alert, rng: CulpritRange) -> str:
    """The new-bug URL, shorter than ``MAX_URL``: the description is cut (at the longest
    prefix that fits, found by bisection on its length) when the whole one does not fit."""
    title, body = bug_text(alert, rng)
    url = _url(template, title, body)
    if len(url) < MAX_URL:
        return url
    lo, hi = 0, len(body)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if len(_url(template, title, body[:mid] + _CUT)) < MAX_URL:
            lo = mid
        else:
            hi = mid - 1
    return _url(template, title, body[:lo] + _CUT)


def link_for(alert: Alert) -> str | None:
    """The alert's "file a bug" URL from its family's template; None without one."""
    template = bug_template_for(alert)
    if template is None:
        return None
    return build_link(template, alert, culprit_range(alert))
