"""Histogram pages: probe list, probe chart with overlay, changes feed with triage,
subscriptions, unsubscribe, upload. HTTP only: parse, call a selector or service, render."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.core import signing
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from deviations import alerts, histogram_charts, histogram_selectors
from deviations.histogram_models import HistogramChange, Probe, Subscription
from ingest.histogram_store import queue_detection, store_histogram_file
from ingest.histograms import HistogramError
from ingest.upload_handlers import over_limit

_PAGE = 200


def probe_list(request: HttpRequest) -> HttpResponse:
    search = request.GET.get("q", "").strip()
    probes = histogram_selectors.probes_with_changes(search)[:_PAGE]
    recent = histogram_selectors.changes_feed()[:10]
    return render(request, "histograms/probe_list.html",
                  {"probes": probes, "recent": recent, "q": search, "limit": _PAGE})


def probe_detail(request: HttpRequest, probe_id: int) -> HttpResponse:
    probe = get_object_or_404(Probe, pk=probe_id)
    changes = list(probe.changes.select_related("state_by").order_by("sort_key"))
    scan = probe.scan or {"builds": [], "distance": [], "cutoff": [], "reason": []}
    figure = histogram_charts.distance_figure(
        probe.name, scan, [(c.build_id, c.distance, c.get_kind_display()) for c in changes]
    )
    builds, edges, shares = histogram_selectors.probe_histograms(probe, scan["builds"])
    histograms = {
        "builds": builds,
        "labels": histogram_charts.bucket_labels(edges) if edges is not None else [],
        "shares": shares,
        "title": histogram_charts.plotly_text(probe.name),
    }
    chosen = request.GET.get("build")
    if chosen not in builds:
        chosen = changes[-1].build_id if changes else (builds[-1] if builds else None)
    return render(request, "histograms/probe_detail.html", {
        "probe": probe, "changes": changes, "figure": figure, "histograms": histograms,
        "chosen": chosen, "states": HistogramChange.STATES, "scan": scan,
    })


def changes_feed(request: HttpRequest) -> HttpResponse:
    state = request.GET.get("state") or None
    if state not in histogram_selectors.STATES:
        state = None
    changes = histogram_selectors.changes_feed(state=state)[:_PAGE]
    return render(request, "histograms/changes.html", {
        "changes": changes, "state": state, "states": HistogramChange.STATES,
    })


@login_required
@require_POST
def set_state(request: HttpRequest, change_id: int) -> HttpResponse:
    change = get_object_or_404(HistogramChange, pk=change_id)
    try:
        histogram_selectors.set_state(change, request.POST.get("state", ""), request.user)
    except ValueError as exc:
        return HttpResponse(str(exc), status=400, content_type="text/plain")
    target = request.POST.get("next", "")
    if not target.startswith("/") or target.startswith("//"):
        target = reverse("histograms:changes")
    return redirect(target)


@login_required
def subscriptions(request: HttpRequest) -> HttpResponse:
    error = ""
    values = {"email": request.user.email, "pattern": "", "target": Subscription.HISTOGRAM,
              "digest": False}
    if request.method == "POST":
        values = {
            "email": request.POST.get("email", ""), "pattern": request.POST.get("pattern", ""),
            "target": request.POST.get("target", Subscription.HISTOGRAM),
            "digest": request.POST.get("digest") == "on",
        }
        try:
            histogram_selectors.validated_subscribe(
                values["email"], values["pattern"], values["target"], values["digest"],
                request.user,
            )
        except ValueError as exc:
            error = str(exc)
        else:
            return redirect("histograms:subscriptions")
    subs = [
        (s, reverse("histograms:unsubscribe",
                    args=[alerts.unsubscribe_token(s.email, s.target, s.pattern)]))
        for s in histogram_selectors.user_subscriptions(request.user)
    ]
    return render(request, "histograms/subscriptions.html", {
        "subs": subs, "values": values, "error": error, "targets": Subscription.TARGETS,
    }, status=400 if error else 200)


# The signed token is the authority here, not a session: mail clients' one-click
# unsubscribe (RFC 8058) POSTs without a CSRF token.
@csrf_exempt
def unsubscribe(request: HttpRequest, token: str) -> HttpResponse:
    try:
        email, target, pattern = alerts.read_token(token)
    except signing.BadSignature:
        return render(request, "histograms/unsubscribe.html", {"invalid": True}, status=400)
    done = False
    if request.method == "POST":
        alerts.unsubscribe(token)
        done = True
    return render(request, "histograms/unsubscribe.html", {
        "email": email, "target": target, "pattern": pattern, "done": done,
    })


@login_required
def upload(request: HttpRequest) -> HttpResponse:
    results: list[tuple[bool, str]] = []
    if request.method == "POST":
        if reason := over_limit(request):
            results.append((False, reason))
        files = request.FILES.getlist("files")
        if not files and not results:
            results.append((False, "choose at least one file"))
        probe_ids: set[int] = set()
        for f in files if not results else []:
            try:
                stored = store_histogram_file(f, display_name=f.name, user=request.user)
            except HistogramError as exc:
                results.append((False, f"FAILED {exc}"))
            else:
                results.append((True, stored.line()))
                probe_ids.update(stored.probe_ids)
        if probe_ids:
            queue_detection(sorted(probe_ids))
    return render(request, "histograms/upload.html", {"results": results})
