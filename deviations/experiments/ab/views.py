"""A/B pages: runs and upload, a run's result, a host's A/A floors. HTTP only: parse, call
a selector or service, render."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from deviations.core.errors import UserError
from deviations.core.uploads import check_upload_size
from deviations.experiments.ab import charts, selectors, services
from deviations.experiments.ab.models import ABHost, ABRun


def _pct(raw: str | None) -> float | None:
    if raw is None or not raw.strip():
        return None
    try:
        return float(raw)
    except ValueError:
        raise UserError(f"smallest change that matters: {raw!r} is not a number") from None


def run_list(request: HttpRequest) -> HttpResponse:
    error = None
    if request.method == "POST":
        if not request.user.is_authenticated:
            return redirect(f"/accounts/login/?next={request.path}")
        try:
            check_upload_size(request)
            ab, aa = request.FILES.get("ab"), request.FILES.get("aa")
            stored = services.store_upload(
                ab, aa, host=request.POST.get("host") or None,
                ab_name=ab.name if ab else None, aa_name=aa.name if aa else None,
                min_change_pct=_pct(request.POST.get("min_change")), user=request.user,
            )
        except UserError as exc:
            error = exc.message
        else:
            target = stored.run or stored.aa_run
            assert target is not None  # store_upload needs one file
            if target.kind == ABRun.AA and target.host_id:
                return redirect("ab:host", name=target.host.name)
            return redirect("ab:run", run_id=target.pk)
    return render(request, "experiments/ab/list.html", {
        "runs": selectors.recent_runs(), "hosts": ABHost.objects.all(), "error": error,
        "post": request.POST if error else {},
    })


def run_detail(request: HttpRequest, run_id: int) -> HttpResponse:
    run = get_object_or_404(ABRun.objects.select_related("host", "aa_run"), pk=run_id)
    groups = [
        (build, [(c, charts.differences_figure(c), f"ab-fig-{i}-{j}")
                 for j, c in enumerate(items)])
        for i, (build, items) in enumerate(selectors.by_build(run))
    ]
    figures = [f for _, items in groups for _, f, _ in items]
    return render(request, "experiments/ab/run.html", {
        "run": run, "groups": groups, "figures": figures,
        "several": len(run.result.get("comparisons", [])) > 1,
        "hl": selectors.uses_hodges_lehmann(run),
        "floors": run.result.get("floors", {}), "moved": run.result.get("moved", []),
    })


@login_required
@require_POST
def set_min_change(request: HttpRequest, run_id: int) -> HttpResponse:
    run = get_object_or_404(ABRun, pk=run_id)
    try:
        pct = _pct(request.POST.get("min_change"))
        if pct is None:
            raise UserError("give the smallest change that matters, in % of A's mean")
        services.set_min_change(run, pct, request.user)
    except UserError as exc:
        return HttpResponse(exc.message, status=exc.status, content_type="text/plain")
    return redirect("ab:run", run_id=run.pk)


def host_detail(request: HttpRequest, name: str) -> HttpResponse:
    host = get_object_or_404(ABHost, name=name)
    return render(request, "experiments/ab/host.html", {
        "host": host, "current": selectors.current_floors(host),
        "history": selectors.host_floors(host),
        "runs": host.runs.order_by("-created", "-id")[:100],
    })
