"""REST API for histograms, mounted at /api/histograms: upload, probes, changes, triage,
subscriptions. Writes need an API token, as everywhere in the API."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from django.shortcuts import get_object_or_404
from ninja import File, Form, Router, Schema, Status
from ninja.files import UploadedFile

from deviations import histogram_selectors
from deviations.api import ErrorOut, TokenAuth
from deviations.histogram_models import HistogramChange, Subscription
from ingest.histogram_store import queue_detection, store_histogram_file
from ingest.histograms import HistogramError
from ingest.upload_handlers import over_limit

router = Router(tags=["histograms"])


class StoredOut(Schema):
    file: str
    created: int
    replaced: int
    unchanged: int
    probes: list[str]


class ChangeOut(Schema):
    id: int
    probe: str
    build_id: str
    previous_build_id: str
    distance: float
    cutoff: float
    kind: str
    rule: str
    state: str
    state_by: str | None
    state_at: str | None
    detected_at: str
    page_url: str


class TriageIn(Schema):
    state: str


class SubscriptionIn(Schema):
    email: str
    pattern: str
    target: str = Subscription.HISTOGRAM
    digest: bool = False


class SubscriptionOut(Schema):
    email: str
    pattern: str
    target: str
    digest: bool
    active: bool


@router.post(
    "/upload",
    auth=TokenAuth(),
    response={201: StoredOut, 400: ErrorOut, 413: ErrorOut},
    summary="Upload one histogram file (docs/formats.md); changes are detected afterwards",
)
def upload(
    request: HttpRequest,
    file: File[UploadedFile | None] = None,
    build_id: Form[str | None] = None,
    probe: Form[str | None] = None,
) -> Status[dict[str, Any]]:
    """The file is stored whole or not at all (400 names the bad record). A histogram for a
    (probe, build id) already stored is replaced."""
    if reason := over_limit(request):
        return Status(413, {"detail": reason})
    if file is None:
        return Status(400, {"detail": "no file: send it as the multipart field 'file'"})
    try:
        stored = store_histogram_file(
            file, display_name=file.name or "upload", build_id=build_id, probe=probe,
            user=request.auth,
        )
    except HistogramError as exc:
        return Status(400, {"detail": str(exc)})
    queue_detection(stored.probe_ids)
    return Status(201, {
        "file": stored.name, "created": stored.created, "replaced": stored.replaced,
        "unchanged": stored.unchanged,
        "probes": histogram_selectors.probe_names(stored.probe_ids),
    })


@router.get("/changes", response=list[ChangeOut], summary="Detected changes, newest first")
def list_changes(
    request: HttpRequest, probe: str | None = None, state: str | None = None, limit: int = 100
) -> list[dict[str, Any]]:
    limit = max(0, min(limit, 1000))
    changes = histogram_selectors.changes_feed(probe=probe, state=state)[:limit]
    return [histogram_selectors.change_out(c) for c in changes]


@router.post(
    "/changes/{change_id}/state",
    auth=TokenAuth(),
    response={200: ChangeOut, 400: ErrorOut},
    summary="Triage a change: new, acknowledged, invalid or fixed",
)
def triage(request: HttpRequest, change_id: int, body: TriageIn) -> Status[dict[str, Any]]:
    change = get_object_or_404(HistogramChange.objects.select_related("probe"), pk=change_id)
    try:
        histogram_selectors.set_state(change, body.state, request.auth)
    except ValueError as exc:
        return Status(400, {"detail": str(exc)})
    return Status(200, histogram_selectors.change_out(change))


@router.post(
    "/subscriptions",
    auth=TokenAuth(),
    response={201: SubscriptionOut, 400: ErrorOut},
    summary="Subscribe an address to probes (name or pattern) or to a trace series",
)
def subscribe(request: HttpRequest, body: SubscriptionIn) -> Status[dict[str, Any]]:
    try:
        sub = histogram_selectors.validated_subscribe(
            body.email, body.pattern, body.target, body.digest, request.auth
        )
    except ValueError as exc:
        return Status(400, {"detail": str(exc)})
    return Status(201, {
        "email": sub.email, "pattern": sub.pattern, "target": sub.target,
        "digest": sub.digest, "active": sub.active,
    })

