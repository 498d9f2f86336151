"""Pages: parse the request, call a selector, render. No computation here."""

from django.db.models import Count, Max
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render

from deviations import selectors
from deviations.models import Release, Run, Series


def series_list(request: HttpRequest) -> HttpResponse:
    series = Series.objects.annotate(
        n_releases=Count("releases", distinct=True),
        n_runs=Count("runs", distinct=True),
        last_ingest=Max("runs__finished"),
    )
    return render(request, "deviations/series_list.html", {"series": series})


def series_detail(request: HttpRequest, name: str) -> HttpResponse:
    series = get_object_or_404(Series, name=name)
    releases = selectors.releases_with_counts(series)
    return render(
        request, "deviations/series_detail.html", {"series": series, "releases": releases}
    )


def release_detail(request: HttpRequest, name: str, version: str) -> HttpResponse:
    release = get_object_or_404(
        Release.objects.select_related("series"), series__name=name, version=version
    )
    runs = release.runs.order_by("created", "id")
    table = selectors.release_function_table(release)
    return render(
        request,
        "deviations/release_detail.html",
        {"release": release, "series": release.series, "runs": runs, "table": table},
    )


def run_detail(request: HttpRequest, run_id: int) -> HttpResponse:
    run = get_object_or_404(Run.objects.select_related("series", "release"), pk=run_id)
    return render(request, "deviations/run_detail.html", {"run": run})
