"""REST API of histograms, mounted at /api/histograms: upload, changes, triage. Writes
need an API token, as everywhere in the API."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from django.shortcuts import get_object_or_404
from ninja import File, Form, Router, Schema, Status
from ninja.files import UploadedFile

from deviations.core.api import ErrorOut, TokenAuth
from deviations.core.errors import UserError
from deviations.core.packing import name_digest
from deviations.core.uploads import check_upload_size
from deviations.histograms import annotations as notes
from deviations.histograms import selectors, services
from deviations.histograms.models import BuildAnnotation, HistogramChange, Probe
from deviations.histograms.store import queue_detection, store_histogram_file

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
    alert_url: str | None
    detected_at: str
    page_url: str


class TriageIn(Schema):
    state: str


@router.post(
    "/upload",
    auth=TokenAuth(),
    response={201: StoredOut, 400: ErrorOut, 403: ErrorOut, 413: ErrorOut},
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
    check_upload_size(request)
    if file is None:
        raise UserError("no file: send it as the multipart field 'file'")
    stored = store_histogram_file(
        file, display_name=file.name or "upload", build_id=build_id, probe=probe,
        user=request.auth,
    )
    queue_detection(stored.probe_ids)
    return Status(201, {
        "file": stored.name, "created": stored.created, "replaced": stored.replaced,
        "unchanged": stored.unchanged,
        "probes": selectors.probe_names(stored.probe_ids),
    })


@router.get("/changes", response=list[ChangeOut], summary="Detected changes, newest first")
def list_changes(
    request: HttpRequest, probe: str | None = None, state: str | None = None, limit: int = 100
) -> list[dict[str, Any]]:
    limit = max(0, min(limit, 1000))
    changes = selectors.changes_feed(probe=probe, state=state)[:limit]
    return [selectors.change_out(c) for c in changes]


@router.post(
    "/changes/{change_id}/state",
    auth=TokenAuth(),
    response={200: ChangeOut, 400: ErrorOut, 403: ErrorOut},
    summary="Triage a change (its alert): new, acknowledged, invalid, fixed or ignored",
)
def triage(request: HttpRequest, change_id: int, body: TriageIn) -> Status[dict[str, Any]]:
    change = get_object_or_404(HistogramChange.objects.select_related("probe"), pk=change_id)
    services.set_state(change, body.state, request.auth)
    return Status(200, selectors.change_out(change))


class BuildAnnotationIn(Schema):
    probe: str
    build_id: str
    text: str


class BuildAnnotationOut(Schema):
    id: int
    probe: str
    build_id: str
    text: str
    author: str | None
    created: str


def _probe(name: str) -> Probe:
    return get_object_or_404(Probe, name_sha1=name_digest(name))


@router.get("/annotations", response=list[BuildAnnotationOut],
            summary="The notes on a probe's builds")
def list_annotations(request: HttpRequest, probe: str) -> list[dict[str, Any]]:
    return [notes.annotation_out(a) for a in notes.probe_annotations(_probe(probe))]


@router.post(
    "/annotations", auth=TokenAuth(),
    response={201: BuildAnnotationOut, 400: ErrorOut, 403: ErrorOut, 404: ErrorOut},
    summary="Add a note to a build of a probe (shown on the probe's chart)",
)
def annotate_build(request: HttpRequest, body: BuildAnnotationIn) -> Status[dict[str, Any]]:
    """One line of at most 500 characters, e.g. "new bot"; the probe must have a histogram
    for the build (404 otherwise). 403: the probe belongs to others."""
    note = notes.annotate_build(request.auth, _probe(body.probe), body.build_id, body.text)
    return Status(201, notes.annotation_out(note))


@router.delete(
    "/annotations/{annotation_id}", auth=TokenAuth(),
    response={200: BuildAnnotationOut, 403: ErrorOut},
    summary="Delete a note (its author, an owner of the probe, or staff)",
)
def delete_annotation(request: HttpRequest, annotation_id: int) -> dict[str, Any]:
    note = get_object_or_404(BuildAnnotation.objects.select_related("probe"), pk=annotation_id)
    out = notes.annotation_out(note)
    notes.delete_annotation(request.auth, note)
    return out
