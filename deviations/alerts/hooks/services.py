"""Writes of the hooks: webhooks (add, delete, test), the claim of a group's deliveries,
bug templates, bisects (start, result).

Who may write:
- a webhook: its owner (whoever added it) and staff; adding one needs a signed-in user or a
  token, and a token with a scope may touch only webhooks whose pattern its scope matches;
  a bisect service of a series is set by the series' writers (``core.access``);
- a bug template: the writers of its series, or of the probes of its family;
- a bisect: the series' writers and the alert's assignee (whose token scope still bounds
  them); its result: whoever holds the bisect's own token (the bisect service).

Once: a group is sent to a webhook at most once, claimed by inserting
``WebhookDelivery(webhook, group)`` (unique), as an email is by its ``SentAlert``.
"""

from __future__ import annotations

import fnmatch
import hmac
import secrets
from datetime import datetime, timedelta
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Q
from django.urls import reverse
from django.utils import timezone
from django.utils.crypto import salted_hmac

from deviations.alerts.hooks import messages, outbound, selectors, tasks
from deviations.alerts.hooks.models import (
    PATTERN_CHARS,
    SECRET_CHARS,
    TOKEN_CHARS,
    URL_CHARS,
    Bisect,
    BugTemplate,
    Webhook,
    WebhookDelivery,
)
from deviations.alerts.models import Alert, AlertGroup
from deviations.alerts.selectors import culprit_range, group_range
from deviations.alerts.services import site_url
from deviations.core import access
from deviations.core.errors import UserError
from deviations.core.models import Ownership
from deviations.core.queue import enqueue
from deviations.core.text import has_control
from deviations.histograms.models import Probe
from deviations.traces.models import Series

_GLOB = set("*?[")
#: A bisect's message as stored and shown.
MESSAGE_CHARS = 2000
CULPRIT_CHARS = 200


def _text(field: str, value: str, limit: int, *, required: bool = False) -> str:
    """``value`` stripped, or a ``UserError`` naming the field (empty when required, longer
    than ``limit``, holding a control character: NUL cannot be stored by PostgreSQL)."""
    value = (value or "").strip()
    if required and not value:
        raise UserError(f"{field} is required")
    if len(value) > limit:
        raise UserError(f"{field} is longer than {limit} characters")
    if has_control(value):
        raise UserError(f"{field} holds a control character (NUL, tab, line break)")
    return value


def _choice(field: str, value: str, choices: list[tuple[str, str]]) -> str:
    allowed = [c for c, _ in choices]
    if value not in allowed:
        raise UserError(f"{field} must be one of {', '.join(allowed)}")
    return value


def _signed_in(user: Any) -> None:
    if not getattr(user, "is_authenticated", False):
        raise access.ForbiddenError("sign in or send an API token to write")


def _scope(user: Any, name: str) -> None:
    scope = getattr(user, "token_scope", "")
    if scope and not fnmatch.fnmatchcase(name, scope):
        raise access.ForbiddenError(
            f"this token may write only to names matching {scope!r}, not to {name!r}")


def check_hook(user: Any, hook: Webhook) -> None:
    """``ForbiddenError`` unless ``user`` may change or test ``hook``."""
    _signed_in(user)
    _scope(user, hook.pattern)
    if not (user.is_staff or user.is_superuser or hook.owner_id == user.pk):
        raise access.ForbiddenError("this webhook belongs to another user")


# --- Webhooks ---------------------------------------------------------------------------


def _url_checked(url: str) -> str:
    url = _text("url", url, URL_CHARS, required=True)
    outbound.check_address(url)  # the syntax, then where it points
    return url


def create_webhook(
    user: Any, *, url: str, pattern: str, target: str = Webhook.SERIES,
    purpose: str = Webhook.ALERTS, format: str = Webhook.JSON,  # noqa: A002
    secret: str = "", matrix_token: str = "", improvements: bool = False,
) -> Webhook:
    """Add a webhook owned by ``user``; a blank secret is generated (shown to its owner)."""
    _signed_in(user)
    purpose = _choice("purpose", purpose, Webhook.PURPOSES)
    target = _choice("target", target, Webhook.TARGETS)
    format = _choice("format", format, Webhook.FORMATS)  # noqa: A001
    pattern = _text("pattern", pattern, PATTERN_CHARS, required=True)
    url = _url_checked(url)
    secret = _text("secret", secret, SECRET_CHARS) or secrets.token_hex(32)
    matrix_token = _text("matrix_token", matrix_token, TOKEN_CHARS)
    if format == Webhook.MATRIX and not matrix_token:
        raise UserError("matrix_token is required for a Matrix webhook (the bot's access "
                        "token)")
    _scope(user, pattern)
    if purpose == Webhook.BISECT:
        if target != Webhook.SERIES or format != Webhook.JSON:
            raise UserError("a bisect service is for a trace series and takes generic JSON")
        if not Series.objects.filter(name=pattern).exists():
            raise UserError(f"no series named {pattern!r}")
        access.check_write(user, Ownership.SERIES, [pattern])
        if Webhook.objects.filter(purpose=Webhook.BISECT, pattern=pattern).exists():
            raise UserError(f"the series {pattern!r} has a bisect service already: delete it "
                            "first", status=409, code="exists")
    elif target == Webhook.SERIES and not (_GLOB & set(pattern)):
        if not Series.objects.filter(name=pattern).exists():
            raise UserError(f"no series named {pattern!r}")
    try:
        with transaction.atomic():
            return Webhook.objects.create(
                owner=user, purpose=purpose, target=target, pattern=pattern, format=format,
                url=url, secret=secret, matrix_token=matrix_token, improvements=improvements)
    except IntegrityError as exc:  # a concurrent request set the series' bisect service
        raise UserError(f"the series {pattern!r} has a bisect service already", status=409,
                        code="exists") from exc


def delete_webhook(user: Any, hook: Webhook) -> None:
    check_hook(user, hook)
    hook.delete()


def _queue(delivery_id: int) -> None:
    transaction.on_commit(lambda: enqueue(tasks.deliver_webhook, delivery_id))


#: Test deliveries one webhook may send an hour: a test is an outgoing request anyone who
#: adds a webhook may cause, to an address of their choice.
TESTS_PER_HOUR = 10


def send_test(user: Any, hook: Webhook) -> WebhookDelivery:
    """A test message to the hook, through the same signed, retried delivery."""
    check_hook(user, hook)
    recent = hook.deliveries.filter(kind=WebhookDelivery.TEST,
                                    created__gte=timezone.now() - timedelta(hours=1)).count()
    if recent >= TESTS_PER_HOUR:
        raise UserError(f"at most {TESTS_PER_HOUR} test deliveries an hour per webhook",
                        status=429, code="throttled")
    test = WebhookDelivery.objects.create(webhook=hook, kind=WebhookDelivery.TEST,
                                          body=messages.test_body(hook).decode(),
                                          next_at=timezone.now())
    _queue(test.pk)
    return test


def _matches(hook: Webhook, group: AlertGroup, told: list[Alert]) -> bool:
    target = {Alert.TRACE: Webhook.SERIES, Alert.HISTOGRAM: Webhook.HISTOGRAM,
              Alert.CANARY: Webhook.CANARY}.get(group.detector)
    if hook.target != target:
        return False
    if target == Webhook.HISTOGRAM:
        return any(fnmatch.fnmatchcase(a.subject, hook.pattern) for a in told)
    return fnmatch.fnmatchcase(group.family, hook.pattern)


def deliver_group(group: AlertGroup, ready: list[Alert], now: datetime) -> list[int]:
    """Claim and queue one delivery per matching webhook for a due group; ``ready`` are
    its due alerts, largest first. A webhook hears of the alerts whose data arrived after
    it was added (as an address after it subscribed), improvements only when it asked.
    Returns the deliveries this call created (none for a group already claimed)."""
    created = []
    for hook in Webhook.objects.filter(purpose=Webhook.ALERTS, active=True).order_by("pk"):
        told = [a for a in ready if a.data_at > hook.created
                and (a.direction != Alert.IMPROVEMENT or hook.improvements)]
        if not told or not _matches(hook, group, told):
            continue
        rng = group_range(group)
        body = messages.group_body(hook, group, told, rng).decode()
        try:
            with transaction.atomic():
                claimed = WebhookDelivery.objects.create(
                    webhook=hook, kind=WebhookDelivery.GROUP, group=group, body=body,
                    next_at=now)
        except IntegrityError:
            continue  # claimed before: at most once per group and hook
        _queue(claimed.pk)
        created.append(claimed.pk)
    return created


# --- Bug templates ------------------------------------------------------------------------


def _check_family(user: Any, target: str, family: str) -> None:
    if target == BugTemplate.SERIES:
        if not Series.objects.filter(name=family).exists():
            raise UserError(f"no series named {family!r}")
        access.check_write(user, Ownership.SERIES, [family])
        return
    probes = list(Probe.objects.filter(Q(name=family) | Q(name__startswith=f"{family}_"))
                  .values_list("name", flat=True))
    if not probes:
        raise UserError(f"no probe of the family {family!r}")
    _scope(user, family)
    access.check_write(user, Ownership.PROBE, probes)


def set_bug_template(
    user: Any, *, target: str, family: str, kind: str, base_url: str, product: str = "",
    component: str = "", labels: str = "",
) -> BugTemplate:
    """Create or replace the bug template of a series or probe family."""
    _signed_in(user)
    target = _choice("target", target, BugTemplate.TARGETS)
    kind = _choice("kind", kind, BugTemplate.KINDS)
    family = _text("family", family, PATTERN_CHARS, required=True)
    base_url = _text("base_url", base_url, 500, required=True)
    outbound.check_url(base_url)
    fields = {"product": _text("product", product, 200),
              "component": _text("component", component, 200),
              "labels": _text("labels", labels, 200)}
    if kind == BugTemplate.BUGZILLA and not fields["product"]:
        raise UserError("product is required for Bugzilla")
    if kind == BugTemplate.JIRA and not (fields["product"] and fields["component"]):
        raise UserError("product (the project id, pid) and component (the issue type id) "
                        "are required for Jira")
    _check_family(user, target, family)
    template, _ = BugTemplate.objects.update_or_create(
        target=target, family=family,
        defaults={"kind": kind, "base_url": base_url, "by": user, **fields})
    return template


def delete_bug_template(user: Any, template: BugTemplate) -> None:
    _signed_in(user)
    _check_family(user, template.target, template.family)
    template.delete()


# --- Bisects ------------------------------------------------------------------------------


def bisect_token(bisect_id: int) -> str:
    """The bisect's own token: an HMAC of its id under the site's secret key (nothing to
    store, the same in web and workers)."""
    return salted_hmac("deviations.alerts.hooks.bisect", str(bisect_id)).hexdigest()


def _check_bisect(user: Any, alert: Alert) -> None:
    _signed_in(user)
    family = alert.group.family
    if alert.assignee_id is not None and alert.assignee_id == user.pk:
        _scope(user, family)
        return
    access.check_write(user, Ownership.SERIES, [family])


@transaction.atomic
def start_bisect(user: Any, alert: Alert) -> Bisect:
    """Ask the series' bisect service to bisect a regression's range: a ``Bisect`` row and
    its signed delivery (range, callback URL, token)."""
    if alert.detector != Alert.TRACE or alert.direction != Alert.REGRESSION:
        raise UserError("only a regression of a trace series can be bisected")
    _check_bisect(user, alert)
    hook = selectors.bisect_hook(alert.group.family)
    if hook is None:
        raise UserError(f"the series {alert.group.family!r} has no bisect service: its owner "
                        "adds one on the webhooks page (purpose: bisect)", status=409,
                        code="no_bisect_service")
    Alert.objects.select_for_update().filter(pk=alert.pk).first()  # one bisect at a time
    if alert.bisects.filter(status__in=Bisect.ACTIVE).exists():
        raise UserError("a bisect of this alert is already under way", status=409,
                        code="exists")
    bisect = Bisect.objects.create(alert=alert, requested_by=user)
    callback = site_url(reverse("api:bisect_result", args=[bisect.pk]))
    body = messages.bisect_body(bisect.pk, alert, culprit_range(alert), callback,
                                bisect_token(bisect.pk))
    request = WebhookDelivery.objects.create(webhook=hook, kind=WebhookDelivery.BISECT,
                                             bisect=bisect, body=body.decode(),
                                             next_at=timezone.now())
    _queue(request.pk)
    return bisect


def bisect_result(
    bisect: Bisect, token: str, *, status: str, culprit_revision: str = "",
    url: str = "", message: str = "",
) -> Bisect:
    """The bisect service's report: ``running``, then ``done`` (with the culprit) or
    ``failed``; a finished bisect takes no more reports."""
    if not token or not hmac.compare_digest(token, bisect_token(bisect.pk)):
        raise access.ForbiddenError("not this bisect's token")
    status = _choice("status", status, [(s, s) for s in (Bisect.RUNNING, Bisect.DONE,
                                                          Bisect.FAILED)])
    culprit_revision = _text("culprit_revision", culprit_revision, CULPRIT_CHARS)
    url = _text("url", url, URL_CHARS)
    if url:
        outbound.check_url(url)
    if "\x00" in (message or ""):
        raise UserError("message holds a NUL character")
    message = (message or "").strip()
    if len(message) > MESSAGE_CHARS:
        raise UserError(f"message is longer than {MESSAGE_CHARS} characters")
    with transaction.atomic():
        current = Bisect.objects.select_for_update().get(pk=bisect.pk)
        if current.status not in Bisect.ACTIVE:
            raise UserError(f"bisect {bisect.pk} is {current.status} already", status=409,
                            code="finished")
        current.status, current.culprit_revision = status, culprit_revision
        current.details_url, current.message = url, message
        current.finished = timezone.now() if status not in Bisect.ACTIVE else None
        current.save()
    return current
