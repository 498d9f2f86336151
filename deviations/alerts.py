"""Who is told what, once: histogram changes and trace regressions by email.

Recipients of a histogram change: every active histogram subscription whose pattern
matches the probe name (``fnmatch``: ``*``, ``?``, ``[...]``, case-sensitive), and the
probe's owners (``Probe.alert_emails``) unless they unsubscribed from that probe (an
inactive subscription naming it) or from every probe (an inactive ``*``).

Never twice: before sending, an alert is claimed by inserting ``SentAlert(subject,
email)``, unique on that pair. The one insert that succeeds sends; a retried task, a
second worker or a second detection of the same change finds the row and skips. The row is
deleted again only when sending raised, so a retry can send it; if a worker dies between
the SMTP hand-over and the status update the alert stays ``sending`` and is not resent:
at most once, by design.

Unsubscribe links carry a token signed with ``django.core.signing`` (the site's secret
key, salt ``deviations.alerts.unsubscribe``) holding (email, target, pattern); it needs no
login and does not expire. Digest subscribers get their alerts queued and sent together
by ``send_digests`` (the ``send-alert-digests`` beat entry, daily).
"""

from __future__ import annotations

import fnmatch
import logging
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core import signing
from django.core.mail import EmailMessage, get_connection
from django.db import IntegrityError, transaction
from django.urls import reverse
from django.utils import timezone

from deviations import selectors
from deviations.histogram_models import HistogramChange, Probe, SentAlert, Subscription
from deviations.models import Function, Release, Series

log = logging.getLogger(__name__)

_SALT = "deviations.alerts.unsubscribe"
_ALL = "*"
_SUBJECT_CHARS = 150


def normalise_email(email: str) -> str:
    return email.strip().lower()


def site_url(path: str) -> str:
    return settings.DEVIATIONS_SITE_URL.rstrip("/") + path


# --- Subscriptions and tokens ---------------------------------------------------------


def subscribe(
    email: str, pattern: str, *, target: str = Subscription.HISTOGRAM, digest: bool = False,
    user: Any = None,
) -> Subscription:
    """Create or re-activate a subscription (a later subscribe undoes an unsubscribe)."""
    sub, _ = Subscription.objects.update_or_create(
        email=normalise_email(email), target=target, pattern=pattern.strip(),
        defaults={"active": True, "digest": digest,
                  "user": user if getattr(user, "is_authenticated", False) else None},
    )
    return sub


def unsubscribe_token(email: str, target: str, pattern: str) -> str:
    return signing.dumps([normalise_email(email), target, pattern], salt=_SALT, compress=True)


def read_token(token: str) -> tuple[str, str, str]:
    """(email, target, pattern) of a token; ``signing.BadSignature`` if forged or damaged."""
    value = signing.loads(token, salt=_SALT)
    if (
        not isinstance(value, list) or len(value) != 3
        or not all(isinstance(v, str) for v in value)
    ):
        raise signing.BadSignature("not an unsubscribe token")
    return value[0], value[1], value[2]


def unsubscribe(token: str) -> tuple[str, str, str]:
    """Apply an unsubscribe token: the subscription (or the owner's mail of that probe, or
    everything with pattern ``*``) stops. Idempotent."""
    email, target, pattern = read_token(token)
    if pattern == _ALL:
        Subscription.objects.filter(email=email, target=target).update(active=False)
    Subscription.objects.update_or_create(
        email=email, target=target, pattern=pattern, defaults={"active": False}
    )
    return email, target, pattern


def unsubscribe_url(email: str, target: str, pattern: str) -> str:
    token = unsubscribe_token(email, target, pattern)
    return site_url(reverse("histograms:unsubscribe", args=[token]))


@dataclass(frozen=True)
class Recipient:
    email: str
    digest: bool
    pattern: str  # what they are told through: their pattern, or the probe's name (owner)
    why: str


def histogram_recipients(probe: Probe) -> list[Recipient]:
    subs = list(Subscription.objects.filter(target=Subscription.HISTOGRAM))
    muted = {
        s.email for s in subs if not s.active and s.pattern in (probe.name, _ALL)
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


# --- Claim, send ----------------------------------------------------------------------


def _claim(subject: str, email: str, status: str, **fields: Any) -> SentAlert | None:
    """The SentAlert row if this call created it, None if it existed (already handled)."""
    try:
        with transaction.atomic():
            return SentAlert.objects.create(subject=subject, email=email, status=status, **fields)
    except IntegrityError:
        return None


def _send(alert: SentAlert, subject: str, body: str, unsubscribe: str) -> None:
    message = EmailMessage(
        subject=subject[:_SUBJECT_CHARS],
        body=body + f"\n\nUnsubscribe: {unsubscribe}\n",
        from_email=settings.DEFAULT_FROM_EMAIL,
        to=[alert.email],
        headers={
            "List-Unsubscribe": f"<{unsubscribe}>",
            "List-Unsubscribe-Post": "List-Unsubscribe=One-Click",
            "Auto-Submitted": "auto-generated",
        },
        connection=get_connection(),
    )
    try:
        message.send()
    except Exception:
        # Not sent: release the claim so that the task's retry can send it.
        SentAlert.objects.filter(pk=alert.pk, status=SentAlert.SENDING).delete()
        raise
    SentAlert.objects.filter(pk=alert.pk).update(status=SentAlert.SENT, sent_at=timezone.now())


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
        url = site_url(change.get_absolute_url())
        summary = change_summary(change)
        for r in histogram_recipients(change.probe):
            status = SentAlert.QUEUED if r.digest else SentAlert.SENDING
            alert = _claim(
                f"histogram:{change.pk}", r.email, status, change=change, summary=summary,
                url=url,
            )
            if alert is None or r.digest:
                continue
            _send(
                alert,
                f"[deviations] {summary}",
                _change_body(change, url, r.why),
                unsubscribe_url(r.email, Subscription.HISTOGRAM, r.pattern),
            )
            sent += 1
    return sent


# --- Trace regressions from the matrix ------------------------------------------------


def notify_series_regressions() -> int:
    """Tell series subscribers about regressions (self time, median, the paper rule: the
    matrix's default view) of releases created after they subscribed, once each."""
    subs = list(Subscription.objects.filter(target=Subscription.SERIES, active=True))
    sent = 0
    for series in Series.objects.filter(name__in={s.pattern for s in subs}):
        try:
            rows = [
                r for r in selectors.deviation_rows(series, "self", "median", "paper")
                if r["verdict"] == "regression"
            ]
        except selectors.NotAnalysedError:
            continue
        created = dict(
            Release.objects.filter(series=series).values_list("version", "created")
        )
        url = site_url(series.get_absolute_url())
        for sub in (s for s in subs if s.pattern == series.name):
            for row in rows:
                if created.get(row["to_release"], sub.created) <= sub.created:
                    continue
                subject = (
                    f"series:{series.pk}:{Function.digest(row['function'])}:{row['to_release']}"
                )
                summary = (
                    f"{series.name}: {row['function']} regressed from {row['from_release']} "
                    f"to {row['to_release']}"
                    + (f" (median self time +{row['diff']:.0f} µs)" if row["diff"] else "")
                )
                status = SentAlert.QUEUED if sub.digest else SentAlert.SENDING
                alert = _claim(subject, sub.email, status, summary=summary, url=url)
                if alert is None or sub.digest:
                    continue
                _send(
                    alert,
                    f"[deviations] {summary}",
                    f"{summary}.\n\nDeviation matrix: {url}\n\n"
                    f"You receive this because you subscribed to the series {series.name}.",
                    unsubscribe_url(sub.email, Subscription.SERIES, series.name),
                )
                sent += 1
    return sent


# --- Daily digest ---------------------------------------------------------------------


def send_digests() -> int:
    """One email per address with every alert queued for it; returns emails sent."""
    sent = 0
    emails = (
        SentAlert.objects.filter(status=SentAlert.QUEUED)
        .values_list("email", flat=True).distinct().order_by("email")
    )
    for email in list(emails):
        # Claim this address's queued rows with one conditional UPDATE, marked by the
        # instant, so a concurrent digest run cannot take the same rows.
        stamp = timezone.now()
        SentAlert.objects.filter(email=email, status=SentAlert.QUEUED).update(
            status=SentAlert.SENDING, sent_at=stamp
        )
        claimed = list(
            SentAlert.objects.filter(email=email, status=SentAlert.SENDING, sent_at=stamp)
            .order_by("created", "pk")
        )
        if not claimed:
            continue
        lines = "\n".join(f"- {a.summary}\n  {a.url}" for a in claimed)
        message = EmailMessage(
            subject=f"[deviations] daily digest: {len(claimed)} alert(s)",
            body=(
                f"{lines}\n\nUnsubscribe from all histogram alerts: "
                f"{unsubscribe_url(email, Subscription.HISTOGRAM, _ALL)}\n"
                f"Unsubscribe from all series alerts: "
                f"{unsubscribe_url(email, Subscription.SERIES, _ALL)}\n"
            ),
            from_email=settings.DEFAULT_FROM_EMAIL,
            to=[email],
            headers={"Auto-Submitted": "auto-generated"},
        )
        ids = [a.pk for a in claimed]
        try:
            message.send()
        except Exception:
            SentAlert.objects.filter(pk__in=ids).update(status=SentAlert.QUEUED, sent_at=None)
            raise
        SentAlert.objects.filter(pk__in=ids).update(status=SentAlert.SENT)
        sent += 1
    return sent
