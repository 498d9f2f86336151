"""REST API of the hooks (mounted at /api): webhooks (``/webhooks``: list one's own, add,
delete, send a test, their deliveries), bug templates (``/bug-templates``), an alert's bug
link, bisects (``/alerts/<id>/bisect`` starts one; ``/bisects/<id>`` reads it, and takes the
bisect service's result with the bisect's own token). Writes need an API token, except the
result, which needs the bisect's token."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from django.shortcuts import get_object_or_404
from ninja import Router, Schema, Status

from deviations.alerts.hooks import bugs, selectors, services
from deviations.alerts.hooks.models import Bisect, BugTemplate, Webhook, WebhookDelivery
from deviations.alerts.models import Alert
from deviations.core.api import ErrorOut, TokenAuth

router = Router(tags=["webhooks, bugs, bisects"])
_WRITE = {400: ErrorOut, 403: ErrorOut, 404: ErrorOut, 409: ErrorOut}


class WebhookIn(Schema):
    url: str
    pattern: str
    target: str = Webhook.SERIES
    purpose: str = Webhook.ALERTS
    format: str = Webhook.JSON
    secret: str = ""
    matrix_token: str = ""
    improvements: bool = False


class AttemptOut(Schema):
    number: int
    at: str
    status_code: int | None
    error: str
    duration_ms: int


class DeliveryOut(Schema):
    id: int
    kind: str
    group: int | None
    bisect: int | None
    status: str
    attempts: list[AttemptOut]
    created: str
    delivered_at: str | None


class WebhookOut(Schema):
    id: int
    owner: str
    purpose: str
    target: str
    pattern: str
    format: str
    url: str
    secret: str
    improvements: bool
    active: bool
    created: str


def _hook(h: Webhook) -> dict[str, Any]:
    return {"id": h.pk, "owner": h.owner.get_username(), "purpose": h.purpose,
            "target": h.target, "pattern": h.pattern, "format": h.format, "url": h.url,
            "secret": h.secret, "improvements": h.improvements, "active": h.active,
            "created": h.created.isoformat()}


def _delivery(d: WebhookDelivery) -> dict[str, Any]:
    return {
        "id": d.pk, "kind": d.kind, "group": d.group_id, "bisect": d.bisect_id,
        "status": d.status, "created": d.created.isoformat(),
        "delivered_at": d.delivered_at.isoformat() if d.delivered_at else None,
        "attempts": [{"number": t.number, "at": t.at.isoformat(),
                      "status_code": t.status_code, "error": t.error,
                      "duration_ms": t.duration_ms} for t in d.tries.all()],
    }


@router.get("/webhooks", auth=TokenAuth(), response=list[WebhookOut],
            summary="The token's user's webhooks (every one for staff)")
def list_webhooks(request: HttpRequest) -> list[dict[str, Any]]:
    return [_hook(h) for h, _ in selectors.user_webhooks(request.auth)]


@router.post("/webhooks", auth=TokenAuth(), response={201: WebhookOut, **_WRITE},
             summary="Add a webhook: alert groups of a series, probes or a canary, or a "
                     "series' bisect service")
def add_webhook(request: HttpRequest, body: WebhookIn) -> Status[dict[str, Any]]:
    """``format``: json, slack (an incoming-webhook URL) or matrix (the room's
    ``/_matrix/client/v3/rooms/<room>/send/m.room.message`` URL and ``matrix_token``). A
    blank ``secret`` is generated and returned."""
    hook = services.create_webhook(request.auth, **body.dict())
    return Status(201, _hook(hook))


@router.delete("/webhooks/{hook_id}", auth=TokenAuth(), response={204: None, **_WRITE},
               summary="Delete a webhook (its owner or staff)")
def delete_webhook(request: HttpRequest, hook_id: int) -> Status[None]:
    services.delete_webhook(request.auth, get_object_or_404(Webhook, pk=hook_id))
    return Status(204, None)


@router.post("/webhooks/{hook_id}/test", auth=TokenAuth(), response={202: DeliveryOut, **_WRITE},
             summary="Send a test delivery (signed and retried as the others)")
def test_webhook(request: HttpRequest, hook_id: int) -> Status[dict[str, Any]]:
    delivery = services.send_test(request.auth, get_object_or_404(Webhook, pk=hook_id))
    delivery.refresh_from_db()
    return Status(202, _delivery(delivery))


@router.get("/webhooks/{hook_id}/deliveries", auth=TokenAuth(),
            response={200: list[DeliveryOut], **_WRITE},
            summary="A webhook's deliveries, newest first, with every attempt")
def webhook_deliveries(request: HttpRequest, hook_id: int) -> Status[list[dict[str, Any]]]:
    hook = get_object_or_404(Webhook, pk=hook_id)
    services.check_hook(request.auth, hook)
    return Status(200, [_delivery(d) for d in selectors.deliveries(hook)[:200]])


class BugTemplateIn(Schema):
    target: str = BugTemplate.SERIES
    family: str
    kind: str
    base_url: str
    product: str = ""
    component: str = ""
    labels: str = ""


class BugTemplateOut(BugTemplateIn):
    id: int


def _template(t: BugTemplate) -> dict[str, Any]:
    return {"id": t.pk, "target": t.target, "family": t.family, "kind": t.kind,
            "base_url": t.base_url, "product": t.product, "component": t.component,
            "labels": t.labels}


@router.get("/bug-templates", response=list[BugTemplateOut], summary="Every bug template")
def list_bug_templates(request: HttpRequest) -> list[dict[str, Any]]:
    return [_template(t) for t in selectors.bug_templates()]


@router.put("/bug-templates", auth=TokenAuth(), response={200: BugTemplateOut, **_WRITE},
            summary="Set the bug template of a series or probe family (its writers)")
def put_bug_template(request: HttpRequest, body: BugTemplateIn) -> Status[dict[str, Any]]:
    """``kind``: bugzilla (``product``, ``component``), jira (``product``: the project id,
    ``component``: the issue type id), github (``base_url`` the repository, ``labels``)."""
    return Status(200, _template(services.set_bug_template(request.auth, **body.dict())))


@router.delete("/bug-templates/{template_id}", auth=TokenAuth(), response={204: None, **_WRITE},
               summary="Delete a bug template")
def delete_bug_template(request: HttpRequest, template_id: int) -> Status[None]:
    services.delete_bug_template(request.auth, get_object_or_404(BugTemplate, pk=template_id))
    return Status(204, None)


@router.get("/alerts/{alert_id}/bug-link", response={200: dict[str, str | None]},
            summary="The alert's \"file a bug\" URL (null without a template)")
def bug_link(request: HttpRequest, alert_id: int) -> dict[str, str | None]:
    alert = get_object_or_404(Alert.objects.select_related("group"), pk=alert_id)
    return {"url": bugs.link_for(alert)}


class BisectOut(Schema):
    id: int
    alert: int
    status: str
    culprit_revision: str
    url: str
    message: str
    requested_by: str | None
    created: str
    finished: str | None


def _bisect(b: Bisect) -> dict[str, Any]:
    return {"id": b.pk, "alert": b.alert_id, "status": b.status,
            "culprit_revision": b.culprit_revision, "url": b.details_url, "message": b.message,
            "requested_by": b.requested_by.get_username() if b.requested_by else None,
            "created": b.created.isoformat(),
            "finished": b.finished.isoformat() if b.finished else None}


@router.post("/alerts/{alert_id}/bisect", auth=TokenAuth(), response={201: BisectOut, **_WRITE},
             summary="Start a bisect of a regression (series writers, the assignee, staff)")
def start_bisect(request: HttpRequest, alert_id: int) -> Status[dict[str, Any]]:
    alert = get_object_or_404(Alert.objects.select_related("group"), pk=alert_id)
    return Status(201, _bisect(services.start_bisect(request.auth, alert)))


@router.get("/bisects/{bisect_id}", response=BisectOut, summary="A bisect and its result")
def bisect(request: HttpRequest, bisect_id: int) -> dict[str, Any]:
    return _bisect(get_object_or_404(Bisect.objects.select_related("requested_by"),
                                     pk=bisect_id))


class BisectResultIn(Schema):
    status: str
    culprit_revision: str = ""
    url: str = ""
    message: str = ""


@router.post("/bisects/{bisect_id}", url_name="bisect_result",
             response={200: BisectOut, **_WRITE},
             summary="The bisect service's result: Authorization: Bearer <the bisect's token>")
def bisect_result(request: HttpRequest, bisect_id: int,
                  body: BisectResultIn) -> Status[dict[str, Any]]:
    """``status`` running, done or failed; ``culprit_revision``, ``url`` (details),
    ``message``. The token is the one the bisect request carried."""
    found = get_object_or_404(Bisect.objects.select_related("requested_by"), pk=bisect_id)
    header = request.headers.get("Authorization", "")
    token = header.removeprefix("Bearer ").strip() if header.startswith("Bearer ") else ""
    return Status(200, _bisect(services.bisect_result(found, token, **body.dict())))
