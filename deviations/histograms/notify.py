"""Who is told about a detected histogram change, and the email they get (once each).

Recipients: every active histogram subscription whose pattern matches the probe name
(``fnmatch``: ``*``, ``?``, ``[...]``, case-sensitive), and the probe's owners
(``Probe.alert_emails``) unless they unsubscribed from that probe (an inactive
subscription naming it) or from every probe (an inactive ``*``). Claiming, sending and
digests are ``deviations.alerts.services``'.
"""

from __future__ import annotations

import fnmatch

from deviations.alerts import services as alerts
from deviations.alerts.models import SentAlert, Subscription
from deviations.alerts.services import Recipient, normalise_email
from deviations.histograms.models import HistogramChange, Probe


def histogram_recipients(probe: Probe) -> list[Recipient]:
    subs = list(Subscription.objects.filter(target=Subscription.HISTOGRAM))
    muted = {
        s.email for s in subs
        if not s.active and not s.pending and s.pattern in (probe.name, alerts.ALL)
    }
    found: dict[str, Recipient] = {}
    for s in sorted(subs, key=lambda s: (s.digest, s.pk)):  # immediate before digest
        if s.active and s.email not in found and fnmatch.fnmatchcase(probe.name, s.pattern):
            found[s.email] = Recipient(
                s.email, s.digest, s.pattern, f"you subscribed to {s.pattern!r}"
            )
    for owner in probe.alert_emails:
        email = normalise_email(owner)
        if email not in found and email not in muted:
            found[email] = Recipient(
                email, False, probe.name, "you are listed as an owner (alert_emails) of the probe"
            )
    return sorted(found.values(), key=lambda r: r.email)


def change_summary(change: HistogramChange) -> str:
    kind = "shift" if change.kind == "shift" else "shape change"
    return (
        f"{change.probe.name}: {kind} at build {change.build_id} "
        f"(Hellinger distance {change.distance:.3f}, cutoff {change.cutoff:.3f})"
    )


def _change_body(change: HistogramChange, url: str, why: str) -> str:
    shift = ""
    if change.kind == "shift" and change.shift_buckets is not None:
        shift = f"\nMass moved by {change.shift_buckets:+.2f} buckets."
    return (
        f"A change was detected in the Telemetry histogram {change.probe.name}.\n\n"
        f"Build: {change.build_id} (compared with {change.previous_build_id or '-'})\n"
        f"Kind: {change.get_kind_display()}{shift}\n"
        f"Hellinger distance: {change.distance:.4f} (cutoff {change.cutoff:.4f}, "
        f"{change.rule} rule)\n\n"
        f"Chart and before/after histograms: {url}\n\n"
        f"You receive this because {why}."
    )


def notify_histogram_changes(change_ids: list[int]) -> int:
    """Email (or queue for the digest) each change to each recipient once; returns the
    number of emails sent by this call."""
    sent = 0
    changes = HistogramChange.objects.filter(pk__in=change_ids).select_related("probe")
    for change in changes.order_by("pk"):
        url = alerts.site_url(change.get_absolute_url())
        summary = change_summary(change)
        for r in histogram_recipients(change.probe):
            status = SentAlert.QUEUED if r.digest else SentAlert.SENDING
            alert = alerts.claim(
                f"histogram:{change.pk}", r.email, status, change=change, summary=summary,
                url=url,
            )
            if alert is None or r.digest:
                continue
            alerts.send(
                alert,
                f"[deviations] {summary}",
                _change_body(change, url, r.why),
                alerts.unsubscribe_url(r.email, Subscription.HISTOGRAM, r.pattern),
            )
            sent += 1
    return sent
