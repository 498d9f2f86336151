"""REST API of alerts: ``router`` (subscriptions, mounted at /api/histograms where it has
always been: subscribe an address to probes or to a trace series) and ``alerts_router``
(mounted at /api/alerts: list and filter alerts, a group, bulk triage). Writes need an API
token."""

from datetime import date
from typing import Any

from django.http import HttpRequest
from django.shortcuts import get_object_or_404
from ninja import Query, Router, Schema, Status
from ninja.errors import HttpError

from deviations.alerts import downstream, nudging, selectors, services
from deviations.alerts.models import Alert, AlertGroup, Subscription
from deviations.core.api import ErrorOut, TokenAuth

router = Router(tags=["alerts"])
alerts_router = Router(tags=["alerts"])


class AlertOut(Schema):
    id: int
    group: int
    detector: str
    family: str
    subject: str
    metric: str
    rule: str
    from_label: str
    to_label: str
    direction: str
    unit: str
    before: float | None
    after: float | None
    effect: float | None
    effect_lo: float | None
    effect_hi: float | None
    effect_pct: float | None
    effect_pct_lo: float | None
    effect_pct_hi: float | None
    p_value: float | None
    distance: float | None
    threshold: float | None
    method: str
    level: float | None
    n_before: int | None
    n_after: int | None
    provisional: bool
    status: str
    assignee: str | None
    bug_url: str
    created: str
    detected_from: str | None
    detected_to: str | None
    nudged_by: str | None
    nudged_at: str | None
    explanation: str
    url: str
    #: The culprit range (``selectors.CulpritRange``): the last good and first bad
    #: releases, their revisions (null when not given), "r1..r2" (or the versions), and
    #: the series' log link (null without a template or both revisions).
    last_good: str
    first_bad: str
    last_good_revision: str | None
    first_bad_revision: str | None
    culprit_range: str
    log_url: str | None


class FiltersIn(Schema):
    status: str = ""
    detector: str = ""
    family: str = ""
    series: str = ""
    probe: str = ""
    direction: str = ""
    assignee: str = ""
    since: str = ""
    until: str = ""
    limit: int = 200


def _checked(request: HttpRequest, filters: FiltersIn) -> dict[str, Any]:
    """The filters as the alerts page takes them, or a 400 naming what is wrong: an API
    client that misspells a parameter or a value must not get every alert back."""
    unknown = sorted(set(request.GET) - set(FiltersIn.model_fields))
    if unknown:
        raise HttpError(400, f"unknown parameter{'s' * (len(unknown) > 1)}: "
                             f"{', '.join(unknown)} (known: {', '.join(FiltersIn.model_fields)})")
    params = filters.dict()
    for name, detector in (("series", Alert.TRACE), ("probe", Alert.HISTOGRAM)):
        if params[name]:
            if params["family"] and params["family"] != params[name]:
                raise HttpError(400, f"family and {name} name different things")
            if params["detector"] not in ("", detector):
                raise HttpError(400, f"{name} alerts are {detector} alerts, not "
                                     f"{params['detector']}")
            params["family"], params["detector"] = params[name], detector
    choices = {"status": ["untriaged", *(c for c, _ in Alert.STATUSES)],
               "detector": [c for c, _ in Alert.DETECTORS],
               "direction": [c for c, _ in Alert.DIRECTIONS]}
    for name, allowed in choices.items():
        if params[name] and params[name] not in allowed:
            raise HttpError(400, f"{name} must be one of {', '.join(allowed)}")
    for name in ("since", "until"):
        if params[name]:
            try:
                date.fromisoformat(params[name])
            except ValueError:
                raise HttpError(400, f"{name} must be a date, YYYY-MM-DD") from None
    return params


class TriageIn(Schema):
    alerts: list[int]
    status: str | None = None
    bug_url: str | None = None
    assignee: str | None = None
    note: str = ""


class GroupOut(Schema):
    id: int
    detector: str
    family: str
    from_label: str
    to_label: str
    notified_at: str | None
    upstream: int | None
    downstream: list[int]
    url: str
    alerts: list[AlertOut]


class NudgeIn(Schema):
    side: str


class UpstreamIn(Schema):
    upstream: int


def _rows(alerts: Any) -> list[dict[str, Any]]:
    return [r | {"from_label": r["from"], "to_label": r["to"]}
            for r in selectors.export_rows(alerts)]


@alerts_router.get("/", response=list[AlertOut], summary="Alerts, filtered as on /alerts/")
def list_alerts(request: HttpRequest, filters: Query[FiltersIn]) -> list[dict[str, Any]]:
    """Newest first. ``status`` may also be ``untriaged``; ``assignee`` ``-`` means none;
    ``since`` and ``until`` are dates (YYYY-MM-DD); ``series`` (``probe``) is ``family``
    with the trace (histogram) detector. An unknown parameter or value is a 400."""
    f = selectors.Filters.from_params(_checked(request, filters))
    limit = max(0, min(filters.limit, 5000))
    return _rows(selectors.filtered_alerts(f).order_by("-created", "-pk")[:limit])


@alerts_router.get("/groups/{group_id}", response=GroupOut,
                   summary="An alert group and its alerts, largest effect first")
def group(request: HttpRequest, group_id: int) -> dict[str, Any]:
    return _group(get_object_or_404(AlertGroup, pk=group_id))


def _group(g: AlertGroup) -> dict[str, Any]:
    return {
        "id": g.pk, "detector": g.detector, "family": g.family,
        "from_label": g.from_label, "to_label": g.to_label,
        "notified_at": g.notified_at.isoformat() if g.notified_at else None,
        "upstream": g.upstream_id,
        "downstream": [d.pk for d in selectors.downstream_groups(g)],
        "url": g.get_absolute_url(), "alerts": _rows(selectors.group_alerts(g)),
    }


@alerts_router.post(
    "/{alert_id}/nudge", auth=TokenAuth(),
    response={200: AlertOut, 400: ErrorOut, 403: ErrorOut, 404: ErrorOut},
    summary="Move an alert to its earlier or later neighbouring boundary",
)
def nudge(request: HttpRequest, alert_id: int, body: NudgeIn) -> Status[dict[str, Any]]:
    """``side``: ``earlier`` (R_i-1 → R_i) or ``later`` (R_i+1 → R_i+2), releases of the
    series with data (builds of the probe); the alert keeps its key and numbers, a
    re-analysis leaves it there. Needs write access to its series or probe, or to be its
    assignee."""
    moved = nudging.nudge(get_object_or_404(Alert, pk=alert_id), request.auth, body.side)
    return Status(200, _rows(Alert.objects.filter(pk=moved.pk).select_related("group"))[0])


@alerts_router.post(
    "/groups/{group_id}/upstream", auth=TokenAuth(),
    response={200: GroupOut, 400: ErrorOut, 403: ErrorOut, 404: ErrorOut},
    summary="Mark a group as downstream of another (triaged with it, not emailed)",
)
def link_upstream(request: HttpRequest, group_id: int,
                  body: UpstreamIn) -> Status[dict[str, Any]]:
    """Replaces a former link; a link that would make a cycle is a 400."""
    g = get_object_or_404(AlertGroup, pk=group_id)
    return Status(200, _group(downstream.link(g, body.upstream, request.auth)))


@alerts_router.delete(
    "/groups/{group_id}/upstream", auth=TokenAuth(),
    response={200: GroupOut, 403: ErrorOut, 404: ErrorOut},
    summary="Remove a group's 'downstream of' link",
)
def unlink_upstream(request: HttpRequest, group_id: int) -> Status[dict[str, Any]]:
    g = get_object_or_404(AlertGroup, pk=group_id)
    return Status(200, _group(downstream.unlink(g, request.auth)))


@alerts_router.post(
    "/triage", auth=TokenAuth(), response={200: dict[str, int], 400: ErrorOut, 403: ErrorOut},
    summary="Triage several alerts at once: status, bug link, assignee, note",
)
def triage(request: HttpRequest, body: TriageIn) -> Status[dict[str, int]]:
    """Fields left out (null) are kept; ``assignee`` "" unassigns. Needs write access to
    every alert's series or probe."""
    chosen = list(Alert.objects.filter(pk__in=body.alerts).select_related("group"))
    changed = services.triage(chosen, request.auth, status=body.status, bug_url=body.bug_url,
                              assignee=body.assignee, note=body.note)
    return Status(200, {"changed": changed})


class SubscriptionIn(Schema):
    email: str
    pattern: str
    target: str = Subscription.HISTOGRAM
    digest: bool = False
    improvements: bool = False


class SubscriptionOut(Schema):
    email: str
    pattern: str
    target: str
    digest: bool
    improvements: bool
    active: bool
    pending: bool


@router.post(
    "/subscriptions",
    auth=TokenAuth(),
    response={201: SubscriptionOut, 400: ErrorOut},
    summary="Subscribe an address to probes (name or pattern) or to a trace series",
)
def subscribe(request: HttpRequest, body: SubscriptionIn) -> Status[dict[str, Any]]:
    """The token's user's own address (or any, for staff) is subscribed at once; another
    address gets a confirmation link by email and stays `pending` until it is followed."""
    sub = services.validated_subscribe(
        body.email, body.pattern, body.target, body.digest, request.auth, body.improvements
    )
    return Status(201, {
        "email": sub.email, "pattern": sub.pattern, "target": sub.target,
        "digest": sub.digest, "improvements": sub.improvements, "active": sub.active,
        "pending": sub.pending,
    })

