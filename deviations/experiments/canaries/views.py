"""Canary pages: the list, the creation form, the live page and its JSON, continue and
subscribe. HTTP only: parse, call a selector or service, render."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from deviations.core import access
from deviations.core.errors import UserError
from deviations.core.forms import form_error
from deviations.experiments.canaries import charts, selectors, services
from deviations.experiments.canaries.forms import CanaryForm
from deviations.experiments.canaries.models import Canary

#: How often the live page asks for news, in milliseconds.
REFRESH_MS = 2000


def canary_list(request: HttpRequest) -> HttpResponse:
    return render(request, "experiments/canaries/list.html",
                  {"canaries": selectors.canaries()[:200]})


@login_required
def canary_new(request: HttpRequest) -> HttpResponse:
    form = CanaryForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            canary = services.create_canary(user=request.user, **form.cleaned_data)
        except UserError as exc:
            form.add_error(None, form_error(exc))
        else:
            return redirect(canary)
    return render(request, "experiments/canaries/new.html", {"form": form})


def _change(request: HttpRequest) -> float | None:
    try:
        value = float(request.GET.get("change", ""))
    except ValueError:
        return None
    return value if value > 0 else None


def _live(canary: Canary, change: float | None) -> dict[str, Any]:
    view = selectors.canary_view(canary, change)
    summary = canary.state.summary or {}
    return {
        "view": view,
        "figures": {
            "pvalue": charts.pvalue_figure(selectors.p_value_points(canary), canary.alpha),
            "quantiles": charts.quantile_figure(summary, canary.metric, canary.unit,
                                                canary.count),
            "difference": charts.difference_figure(summary, canary.metric, canary.unit,
                                                   canary.count),
        },
    }


def canary_detail(request: HttpRequest, canary_id: int) -> HttpResponse:
    canary = get_object_or_404(Canary.objects.select_related("state"), pk=canary_id)
    live = _live(canary, _change(request))
    return render(request, "experiments/canaries/detail.html", {
        "canary": canary, "v": live["view"], "live": live, "refresh_ms": REFRESH_MS,
        "figures": live["figures"].values(),
    })


def canary_live(request: HttpRequest, canary_id: int) -> JsonResponse:
    """The page's refresh: the same view and figures as JSON. With ``?seen=N`` (the
    batches applied when the page last drew) and nothing applied since, the figures are
    left out (``null``): most polls then cost one small read."""
    canary = get_object_or_404(Canary.objects.select_related("state"), pk=canary_id)
    change = _change(request)
    if request.GET.get("seen") == str(canary.state.applied_seq):
        return JsonResponse({"view": selectors.canary_view(canary, change), "figures": None})
    return JsonResponse(_live(canary, change))


@login_required
@require_POST
def canary_continue(request: HttpRequest, canary_id: int) -> HttpResponse:
    canary = get_object_or_404(Canary, pk=canary_id)
    try:
        access.check_canary(request.user, canary)
    except UserError as exc:
        return HttpResponse(exc.message, status=exc.status, content_type="text/plain")
    services.continue_canary(canary)
    return redirect(canary)


@login_required
@require_POST
def canary_subscribe(request: HttpRequest, canary_id: int) -> HttpResponse:
    canary = get_object_or_404(Canary, pk=canary_id)
    try:
        services.subscribe(
            canary, request.POST.get("email") or request.user.email or "", request.user
        )
    except UserError as exc:
        return HttpResponse(exc.message, status=exc.status, content_type="text/plain")
    return redirect(canary)
