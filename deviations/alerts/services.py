"""Triage, ignores, subscriptions, unsubscribe tokens, and sending each email once, for
every detector.

The detectors record their verdicts (``deviations.alerts.recording``); who is told about
a group and the email are ``deviations.alerts.notify``'s; this module triages, subscribes,
claims and sends.

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

import logging
import re
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.core import signing
from django.core.exceptions import ValidationError
from django.core.mail import EmailMessage, get_connection
from django.core.validators import validate_email
from django.db import IntegrityError, transaction
from django.urls import reverse
from django.utils import timezone

from deviations.alerts.models import (
    Alert,
    AlertGroup,
    AlertNote,
    Ignore,
    SentAlert,
    Subscription,
)
from deviations.core import access
from deviations.core.errors import UserError
from deviations.core.models import Ownership
from deviations.core.packing import name_digest
from deviations.core.text import has_control, one_line
from deviations.traces.models import Series

log = logging.getLogger(__name__)

_SALT = "deviations.alerts.unsubscribe"
_CONFIRM_SALT = "deviations.alerts.confirm"
#: Unsubscribe links stop working after this long (the emails that carry them are old by
#: then; the subscriptions page manages the rest).
UNSUBSCRIBE_MAX_AGE = 180 * 24 * 3600
#: A confirmation link for a subscription asked for by someone else.
CONFIRM_MAX_AGE = 7 * 24 * 3600
ALL = "*"
_SUBJECT_CHARS = 150


def normalise_email(email: str) -> str:
    return email.strip().lower()


def site_url(path: str) -> str:
    return settings.DEVIATIONS_SITE_URL.rstrip("/") + path


# --- Triage ---------------------------------------------------------------------------

STATUSES = [s for s, _ in Alert.STATUSES]
_BUG_URL_CHARS = 500


def _check_triage(user: Any, alerts: list[Alert]) -> None:
    """Triage is a write: the owners of each alert's series or probe (or anyone signed in
    while it has none: ``deviations.core.access``)."""
    series = {a.group.family for a in alerts if a.detector == Alert.TRACE}
    probes = {a.subject for a in alerts if a.detector == Alert.HISTOGRAM}
    canaries = {a.canary for a in alerts if a.detector == Alert.CANARY and a.canary}
    if not getattr(user, "is_authenticated", False):
        raise access.ForbiddenError("sign in or send an API token to triage")
    if series:
        access.check_write(user, Ownership.SERIES, sorted(series))
    if probes:
        access.check_write(user, Ownership.PROBE, sorted(probes))
    if canaries:
        from deviations.experiments.canaries.models import Canary

        for canary in Canary.objects.filter(pk__in=[int(c) for c in canaries if c.isdigit()]):
            access.check_canary(user, canary)


def check_sheriff(user: Any, alerts: list[Alert]) -> None:
    """Moving alerts and linking groups (``alerts.nudging``, ``alerts.downstream``): the
    owners of the alerts' series or probes and staff, as triage, and also the user every
    one of them is assigned to; a token's scope holds for everyone."""
    if alerts and all(a.assignee_id is not None and a.assignee_id == getattr(user, "pk", None)
                      for a in alerts):
        for kind, detector in ((Ownership.SERIES, Alert.TRACE),
                               (Ownership.PROBE, Alert.HISTOGRAM)):
            names = {a.group.family if detector == Alert.TRACE else a.subject
                     for a in alerts if a.detector == detector}
            access.check_scope(user, kind, sorted(names))
        if any(a.detector == Alert.CANARY for a in alerts):
            _check_triage(user, [a for a in alerts if a.detector == Alert.CANARY])
        return
    _check_triage(user, alerts)


def _user_named(username: str) -> Any:
    from django.contrib.auth import get_user_model

    found = get_user_model().objects.filter(username=username).first()
    if found is None:
        raise UserError(f"no user named {username!r} to assign")
    return found


@transaction.atomic
def triage(
    alerts: list[Alert], user: Any, *, status: str | None = None, bug_url: str | None = None,
    assignee: str | None = None, note: str = "",
) -> int:
    """Set the status, bug link, assignee (a user name; "" unassigns) of these alerts
    together, and add ``note`` to each; ``None`` leaves a field as it is. Returns the number
    of alerts changed."""
    if not alerts:
        raise UserError("select at least one alert")
    for field, value in (("note", note), ("bug link", bug_url), ("assignee", assignee)):
        if value and "\x00" in value:  # PostgreSQL's text cannot hold it (a 500 there)
            raise UserError(f"the {field} holds a NUL character")
    _check_triage(user, alerts)
    if status is not None and status not in STATUSES:
        raise UserError(f"status must be one of {', '.join(STATUSES)}")
    if bug_url is not None:
        bug_url = bug_url.strip()
        if bug_url and (len(bug_url) > _BUG_URL_CHARS
                        or not bug_url.startswith(("https://", "http://"))):
            raise UserError("the bug link must be an http(s) URL of at most 500 characters")
    who = _user_named(assignee.strip()) if assignee else None
    updates: dict[str, Any] = {}
    if status is not None:
        updates |= {"status": status, "status_by": user, "status_at": timezone.now()}
    if bug_url is not None:
        updates["bug_url"] = bug_url
    if assignee is not None:
        updates["assignee"] = who
    ids = [a.pk for a in alerts]
    if updates:
        Alert.objects.filter(pk__in=ids).update(**updates)
    if note.strip():
        AlertNote.objects.bulk_create(
            [AlertNote(alert_id=pk, author=user, text=note.strip()) for pk in ids]
        )
    return len(ids)


def add_note(alert: Alert, user: Any, text: str) -> AlertNote:
    if not getattr(user, "is_authenticated", False):
        raise access.ForbiddenError("sign in to add a note")
    # A note pins the alert (a noted alert is never withdrawn): a write, as triage.
    _check_triage(user, [alert])
    if not text.strip():
        raise UserError("the note is empty")
    if "\x00" in text:
        raise UserError("the note holds a NUL character")
    return AlertNote.objects.create(alert=alert, author=user, text=text.strip())


# --- Ignored functions and probes ---------------------------------------------------------


def _check_ignore(user: Any, kind: str, family: str) -> None:
    if kind == Ignore.FUNCTION:
        access.check_write(user, Ownership.SERIES, [family])
    elif kind == Ignore.PROBE:
        access.check_write(user, Ownership.PROBE, [family])
    elif not getattr(user, "is_authenticated", False):
        raise access.ForbiddenError("sign in to ignore a canary")


@transaction.atomic
def ignore(kind: str, family: str, subject: str, user: Any, *, function: Any = None,
           probe: Any = None) -> Ignore:
    """No more alerts from this function (of the series ``family``) or probe: its
    untriaged alerts and those recorded later get the status ``ignored``."""
    _check_ignore(user, kind, family)
    found, _ = Ignore.objects.get_or_create(
        kind=kind, family=family, subject_sha1=name_digest(subject),
        defaults={"subject": subject, "function": function, "probe": probe, "by": user},
    )
    alerts = Alert.objects.filter(status=Alert.NEW)
    if kind == Ignore.FUNCTION:
        alerts = alerts.filter(detector=Alert.TRACE, group__family=family, subject=subject)
    elif kind == Ignore.PROBE:
        alerts = alerts.filter(detector=Alert.HISTOGRAM, subject=subject)
    else:
        alerts = alerts.filter(detector=Alert.CANARY, subject=subject)
    alerts.update(status=Alert.IGNORED, status_by=user, status_at=timezone.now())
    return found


def unignore(ignored: Ignore, user: Any) -> None:
    """Undo: later alerts are new again (those already ignored stay so: triage them)."""
    _check_ignore(user, ignored.kind, ignored.family)
    ignored.delete()


# --- Subscriptions and tokens ---------------------------------------------------------


def subscribe(
    email: str, pattern: str, *, target: str = Subscription.HISTOGRAM, digest: bool = False,
    user: Any = None, improvements: bool = False,
) -> Subscription:
    """Create or re-activate a subscription (a later subscribe undoes an unsubscribe).

    For the address's own decisions (its owner, a confirmation link, an admin); requests
    for someone else's address go through ``validated_subscribe``.
    """
    sub, _ = Subscription.objects.update_or_create(
        email=normalise_email(email), target=target, pattern=pattern.strip(),
        defaults={"active": True, "pending": False, "digest": digest,
                  "improvements": improvements,
                  "user": user if getattr(user, "is_authenticated", False) else None},
    )
    return sub


def speaks_for(user: Any, email: str) -> bool:
    """Whether ``user`` may decide for ``email``: it is their own address, or they are staff."""
    if not getattr(user, "is_authenticated", False):
        return False
    own = normalise_email(getattr(user, "email", "") or "")
    return bool(own and own == normalise_email(email)) or bool(user.is_staff)


#: Confirmation emails one user may cause to other addresses per hour, and all visitors who
#: are not signed in together (issue 23: they were unlimited, to any address, with the
#: caller's pattern in them).
CONFIRMATIONS_PER_HOUR = 10
ANONYMOUS_CONFIRMATIONS_PER_HOUR = 30
#: A pattern of probes that goes into a confirmation email: probe-name characters and globs.
_PROBE_PATTERN = re.compile(r"[A-Za-z0-9_.:*?\[\]/-]{1,200}")


def request_subscription(
    email: str, pattern: str, *, target: str, digest: bool, user: Any
) -> Subscription:
    """Someone else's address: store the wish as pending (an active or unsubscribed row of
    the address is left as it is) and email the address a link that confirms it: once per
    (address, target, pattern), and at most :data:`CONFIRMATIONS_PER_HOUR` a user."""
    email, pattern = normalise_email(email), pattern.strip()
    if target == Subscription.HISTOGRAM and not _PROBE_PATTERN.fullmatch(pattern):
        raise UserError("a probe pattern for someone else's address holds letters, digits and "
                        "_ . : - / * ? [ ] only, at most 200 (it is written in their email)")
    owner = user if getattr(user, "is_authenticated", False) else None
    existing = Subscription.objects.filter(email=email, target=target, pattern=pattern).first()
    if existing is not None:
        return existing  # asked before (its one email went then), or the address decided
    recent = Subscription.objects.filter(
        pending=True, user=owner, created__gte=timezone.now() - timedelta(hours=1)).count()
    if recent >= (CONFIRMATIONS_PER_HOUR if owner else ANONYMOUS_CONFIRMATIONS_PER_HOUR):
        raise UserError(f"at most {CONFIRMATIONS_PER_HOUR} confirmation emails an hour to "
                        "other addresses: try again later, or ask them to subscribe",
                        status=429, code="throttled")
    sub, created = Subscription.objects.get_or_create(
        email=email, target=target, pattern=pattern,
        defaults={"active": False, "pending": True, "digest": digest, "user": owner},
    )
    if not created:
        return sub  # a concurrent request made it (and sends its email)
    url = site_url(reverse("histograms:confirm",
                           args=[confirmation_token(email, target, pattern, digest)]))
    who = getattr(user, "get_username", lambda: "someone")()
    what = "histogram probes matching" if target == Subscription.HISTOGRAM else "the series"
    EmailMessage(
        subject=one_line(f"[deviations] confirm alerts for {what} {pattern}")[:_SUBJECT_CHARS],
        body=(
            f"{who} asked that {email} receive deviations alerts for {what} {pattern}.\n\n"
            f"Nothing is sent until you confirm: {url}\n"
            f"The link is valid for {CONFIRM_MAX_AGE // 86400} days. Ignore this email to "
            "receive nothing."
        ),
        from_email=settings.DEFAULT_FROM_EMAIL, to=[email],
        headers={"Auto-Submitted": "auto-generated"}, connection=get_connection(),
    ).send()
    return sub


def read_confirmation(token: str) -> tuple[str, str, str, bool]:
    """(email, target, pattern, digest) of a confirmation link; ``signing.BadSignature``
    (or its subclass ``SignatureExpired``) if it is forged, damaged or too old."""
    value = signing.loads(token, salt=_CONFIRM_SALT, max_age=CONFIRM_MAX_AGE)
    if (
        not isinstance(value, list) or len(value) != 4
        or not all(isinstance(v, str) for v in value[:3])
    ):
        raise signing.BadSignature("not a confirmation token")
    return value[0], value[1], value[2], bool(value[3])


def confirm_subscription(token: str) -> Subscription:
    """Apply a confirmation link (see ``read_confirmation`` for its errors)."""
    email, target, pattern, digest = read_confirmation(token)
    return subscribe(email, pattern, target=target, digest=digest)


def validated_subscribe(
    email: str, pattern: str, target: str, digest: bool, user: Any, improvements: bool = False,
) -> Subscription:
    """Subscribe after checking the address, the target and (for series) the name."""
    try:
        validate_email(email.strip())
    except ValidationError as exc:
        raise UserError(f"{email!r} is not an email address") from exc
    pattern = pattern.strip()
    if not pattern or len(pattern) > 1000:
        raise UserError("the pattern must be 1 to 1,000 characters")
    if has_control(pattern):
        # PostgreSQL's text cannot hold NUL (it was a 500 there); no name holds one.
        raise UserError("the pattern holds a control character (tab, line break, NUL)")
    if target == Subscription.SERIES:
        if not _series_exists(pattern):
            raise UserError(f"no series named {pattern!r}")
    elif target != Subscription.HISTOGRAM:
        raise UserError("target must be 'histogram' or 'series'")
    if speaks_for(user, email):
        return subscribe(email, pattern, target=target, digest=digest, user=user,
                         improvements=improvements)
    return request_subscription(email, pattern, target=target, digest=digest, user=user)


def _series_exists(name: str) -> bool:
    return Series.objects.filter(name=name).exists()


def confirmation_token(email: str, target: str, pattern: str, digest: bool) -> str:
    """The signed token of the link that confirms a subscription made for ``email``."""
    return signing.dumps([email, target, pattern, digest], salt=_CONFIRM_SALT, compress=True)


def unsubscribe_token(email: str, target: str, pattern: str) -> str:
    return signing.dumps([normalise_email(email), target, pattern], salt=_SALT, compress=True)


def read_token(token: str) -> tuple[str, str, str]:
    """(email, target, pattern) of a token; ``signing.BadSignature`` if forged or damaged,
    ``signing.SignatureExpired`` (a subclass) if older than ``UNSUBSCRIBE_MAX_AGE``."""
    value = signing.loads(token, salt=_SALT, max_age=UNSUBSCRIBE_MAX_AGE)
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
    if pattern == ALL:
        Subscription.objects.filter(email=email, target=target).update(
            active=False, pending=False
        )
    Subscription.objects.update_or_create(
        email=email, target=target, pattern=pattern, defaults={"active": False, "pending": False}
    )
    return email, target, pattern


def unsubscribe_url(email: str, target: str, pattern: str) -> str:
    token = unsubscribe_token(email, target, pattern)
    return site_url(reverse("histograms:unsubscribe", args=[token]))


# --- Claim, send ----------------------------------------------------------------------


def claim(subject: str, email: str, status: str, **fields: Any) -> SentAlert | None:
    """The SentAlert row if this call created it, None if it existed (already handled)."""
    try:
        with transaction.atomic():
            return SentAlert.objects.create(subject=subject, email=email, status=status, **fields)
    except IntegrityError:
        return None


def send(alert: SentAlert, subject: str, body: str, unsubscribe: str) -> None:
    message = EmailMessage(
        subject=one_line(subject)[:_SUBJECT_CHARS],
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


# --- Daily digest ---------------------------------------------------------------------


def _without_downstream(claimed: list[SentAlert]) -> list[SentAlert]:
    """Digest lines of groups linked downstream of another since they were queued are
    dropped (deleted: a downstream group is triaged with its upstream, not emailed)."""
    ids = {int(a.subject.split(":", 1)[1]) for a in claimed
           if a.subject.startswith("group:") and a.subject[6:].isdigit()}
    linked = {f"group:{pk}" for pk in AlertGroup.objects.filter(
        pk__in=ids, upstream__isnull=False).values_list("pk", flat=True)}
    if not linked:
        return claimed
    SentAlert.objects.filter(pk__in=[a.pk for a in claimed if a.subject in linked]).delete()
    return [a for a in claimed if a.subject not in linked]


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
        claimed = _without_downstream(claimed)
        if not claimed:
            continue
        lines = "\n".join(f"- {one_line(a.summary)}\n  {a.url}" for a in claimed)
        message = EmailMessage(
            subject=f"[deviations] daily digest: {len(claimed)} alert(s)",
            body=(
                f"{lines}\n\nUnsubscribe from all histogram alerts: "
                f"{unsubscribe_url(email, Subscription.HISTOGRAM, ALL)}\n"
                f"Unsubscribe from all series alerts: "
                f"{unsubscribe_url(email, Subscription.SERIES, ALL)}\n"
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
