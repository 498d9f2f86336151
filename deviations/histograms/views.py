"""Histogram pages: probe list, probe chart with overlay, changes feed with triage, upload.
HTTP only: parse, call a selector or service, render."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from deviations.alerts.models import Alert
from deviations.core.errors import TooLargeError, UserError
from deviations.core.text import plotly_text
from deviations.core.uploads import check_upload_size
from deviations.histograms import annotations as notes
from deviations.histograms import charts, selectors, services
from deviations.histograms.models import BuildAnnotation, HistogramChange, Probe
from deviations.histograms.store import queue_detection, store_histogram_file

_PAGE = 200


def probe_list(request: HttpRequest) -> HttpResponse:
    search = request.GET.get("q", "").strip()
    probes = selectors.probes_with_changes(search)[:_PAGE]
    recent = selectors.changes_feed()[:10]
    return render(request, "histograms/probe_list.html",
                  {"probes": probes, "recent": recent, "q": search, "limit": _PAGE})


def probe_detail(request: HttpRequest, probe_id: int) -> HttpResponse:
    probe = get_object_or_404(Probe, pk=probe_id)
    changes = list(probe.changes.select_related("alert__group", "alert__status_by")
                   .order_by("sort_key"))
    scan = probe.scan or {"builds": [], "distance": [], "cutoff": [], "reason": []}
    held_back = selectors.held_back(scan, {c.build_id for c in changes})
    figure = charts.distance_figure(
        probe.name, scan, [(c.build_id, c.distance, c.get_kind_display()) for c in changes],
        held_back,
    )
    probe_notes = notes.probe_annotations(probe)
    notes.add_marks(figure, probe, list(scan["builds"]))
    builds, edges, shares = selectors.probe_histograms(probe, scan["builds"])
    histograms = {
        "builds": builds,
        "labels": charts.bucket_labels(edges) if edges is not None else [],
        "shares": shares,
        "title": plotly_text(probe.name),
    }
    chosen = request.GET.get("build")
    if chosen not in builds:
        chosen = changes[-1].build_id if changes else (builds[-1] if builds else None)
    return render(request, "histograms/probe_detail.html", {
        "probe": probe, "changes": changes, "figure": figure, "histograms": histograms,
        "chosen": chosen, "states": Alert.STATUSES, "scan": scan,
        "annotations": probe_notes,
        "held_back": held_back,
    })


def changes_feed(request: HttpRequest) -> HttpResponse:
    state = request.GET.get("state") or None
    if state not in services.STATES:
        state = None
    changes = selectors.changes_feed(state=state)[:_PAGE]
    return render(request, "histograms/changes.html", {
        "changes": changes, "state": state, "states": Alert.STATUSES,
    })


@login_required
@require_POST
def set_state(request: HttpRequest, change_id: int) -> HttpResponse:
    change = get_object_or_404(HistogramChange, pk=change_id)
    try:
        services.set_state(change, request.POST.get("state", ""), request.user)
    except UserError as exc:
        return HttpResponse(exc.message, status=exc.status, content_type="text/plain")
    target = request.POST.get("next", "")
    if not target.startswith("/") or target.startswith("//"):
        target = reverse("histograms:changes")
    return redirect(target)


@login_required
def upload(request: HttpRequest) -> HttpResponse:
    results: list[tuple[bool, str]] = []
    if request.method == "POST":
        try:
            check_upload_size(request)
        except TooLargeError as exc:
            results.append((False, exc.message))
        files = request.FILES.getlist("files")
        if not files and not results:
            results.append((False, "choose at least one file"))
        probe_ids: set[int] = set()
        for f in files if not results else []:
            try:
                stored = store_histogram_file(f, display_name=f.name, user=request.user)
            except UserError as exc:  # HistogramError, or ForbiddenError for others' probes
                results.append((False, f"FAILED {exc}"))
            else:
                results.append((True, stored.line()))
                probe_ids.update(stored.probe_ids)
        if probe_ids:
            queue_detection(sorted(probe_ids))
    return render(request, "histograms/upload.html", {"results": results})


@login_required
@require_POST
def annotate_build(request: HttpRequest, probe_id: int) -> HttpResponse:
    """Add a note to a build of the probe (the probe page's form)."""
    probe = get_object_or_404(Probe, pk=probe_id)
    try:
        notes.annotate_build(request.user, probe, request.POST.get("build_id", ""),
                             request.POST.get("text", ""))
    except UserError as exc:
        return HttpResponse(exc.message, status=exc.status, content_type="text/plain")
    return redirect(probe.get_absolute_url() + "#annotations")


@login_required
@require_POST
def delete_build_annotation(request: HttpRequest, annotation_id: int) -> HttpResponse:
    """Delete a note (its author, an owner of the probe, or staff)."""
    note = get_object_or_404(BuildAnnotation.objects.select_related("probe"), pk=annotation_id)
    try:
        notes.delete_annotation(request.user, note)
    except UserError as exc:
        return HttpResponse(exc.message, status=exc.status, content_type="text/plain")
    return redirect(note.probe.get_absolute_url() + "#annotations")
