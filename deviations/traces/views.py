"""Pages: parse the request, call a selector, render. No statistics are computed here."""

from __future__ import annotations

import io
from collections.abc import Iterable
from typing import Any

import msgspec
from django.db.models import Count, Max
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.urls import reverse

from deviations.core.tables import write_csv
from deviations.traces import charts, selectors
from deviations.traces.matrix import MatrixQuery, cell_rows, cells_json, matrix_slice
from deviations.traces.models import Function, Release, Run, Series

SERIES_FIELDS = ["series", "releases", "runs", "latest_from", "latest_to", "regressions",
                 "improvements"]
DEVIATION_FIELDS = ["function", "from_release", "to_release", "verdict", "gap", "diff",
                    "diff_lo", "diff_hi", "digression"]


def _table_response(rows: Iterable[dict[str, Any]], fields: list[str], fmt: str,
                    filename: str) -> HttpResponse:
    """The rows a page shows, as CSV or JSON (the page's export links)."""
    if fmt == "json":
        # msgspec: the JSON of a page of the matrix in ~20 ms instead of ~200 ms.
        return HttpResponse(msgspec.json.encode(list(rows)), content_type="application/json")
    out = io.StringIO()
    write_csv(out, rows, fields)
    response = HttpResponse(out.getvalue(), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{filename}.csv"'
    return response


def series_list(request: HttpRequest) -> HttpResponse:
    series = list(Series.objects.annotate(
        n_releases=Count("releases", distinct=True),
        n_runs=Count("runs", distinct=True),
        last_ingest=Max("runs__finished"),
    ))
    latest = {s.pk: selectors.latest_deviations(s) for s in series}
    fmt = request.GET.get("format")
    if fmt in ("csv", "json"):
        rows = [
            {"series": s.name, "releases": s.n_releases, "runs": s.n_runs,
             "latest_from": (latest[s.pk] or {}).get("from"),
             "latest_to": (latest[s.pk] or {}).get("to"),
             "regressions": (latest[s.pk] or {}).get("regressions"),
             "improvements": (latest[s.pk] or {}).get("improvements")}
            for s in series
        ]
        return _table_response(rows, SERIES_FIELDS, fmt, "series")
    return render(request, "deviations/series_list.html",
                  {"series": [(s, latest[s.pk]) for s in series]})


def series_detail(request: HttpRequest, name: str) -> HttpResponse:
    """The deviation matrix (seed 003, Figure 9) with its controls."""
    series = get_object_or_404(Series, name=name)
    query = MatrixQuery.from_params(request.GET)
    view = matrix_slice(series, query)
    fmt = request.GET.get("format")
    if fmt == "json":
        return HttpResponse(cells_json(view), content_type="application/json")
    if fmt == "csv":
        rows = cell_rows(view) if view is not None else []
        return _table_response(rows, DEVIATION_FIELDS, fmt, f"{series.name}-deviations")
    figure, table = None, []
    if view is not None:
        link = "?" + query.params(page=1, q="", only=False, sort="deviations", first="", last="")
        urls = [reverse("function", args=[series.name, fid]) + link for fid in view.function_ids]
        a = view.arrays
        figure = charts.deviation_matrix(
            view.function_names, view.releases, a["verdict"], a["gap"], a["diff"],
            a["diff_lo"], a["diff_hi"], a["estimate"], a["lo"], a["hi"], a["digression"],
            urls, title=f"{query.metric} time, {query.estimator}, {query.rule} rule",
        )
        table = [
            {"name": n, "url": u, "regressions": int(r), "improvements": int(i),
             "largest_gap": float(g)}
            for n, u, r, i, g in zip(view.function_names, urls, view.regressions,
                                     view.improvements, view.largest_gap, strict=True)
        ]
    context = {
        "series": series, "query": query, "view": view, "figure": figure, "table": table,
        "releases": selectors.releases_with_counts(series),
        "permalink": request.path + ("?" + query.params() if query.params() else ""),
        "export_csv": "?" + query.params(format="csv"),
        "export_json": "?" + query.params(format="json"),
        "prev_page": query.params(page=view.query.page - 1) if view and view.query.page > 1
        else None,
        "next_page": query.params(page=view.query.page + 1)
        if view and view.query.page < view.pages else None,
    }
    return render(request, "deviations/series_detail.html", context)


def matrix_json(request: HttpRequest, name: str) -> HttpResponse:
    """The cells the matrix page shows with the same controls, as JSON."""
    series = get_object_or_404(Series, name=name)
    view = matrix_slice(series, MatrixQuery.from_params(request.GET))
    return HttpResponse(cells_json(view), content_type="application/json")


def function_detail(request: HttpRequest, name: str, function_id: int) -> HttpResponse:
    """One function across releases: median and mean CIs, deviations, runs on demand."""
    series = get_object_or_404(Series, name=name)
    function = get_object_or_404(Function, series=series, pk=function_id)
    query = MatrixQuery.from_params(request.GET)
    detail = selectors.function_detail(series, function, query.metric, query.estimator,
                                       query.rule, with_samples="runs" in request.GET)
    fmt = request.GET.get("format")
    if fmt in ("csv", "json"):
        rows = detail.rows if detail is not None else []
        return _table_response(rows, selectors.FUNCTION_FIELDS, fmt, f"{series.name}-function")
    figure = narrowing = None
    if detail is not None:
        figure = charts.function_cis(
            detail.releases, detail.median, detail.mean, detail.verdict, detail.digression,
            samples=detail.samples, diff=detail.diff, gap=detail.gap,
            title=f"{function.name}: {query.metric} time, {query.rule} rule",
        )
        if detail.narrowing is not None:
            n, est, lo, hi, label = detail.narrowing
            narrowing = charts.ci_narrowing(n, est, lo, hi, labels=[label],
                                            title="Median CI against the number of runs")
    context = {
        "series": series, "function": function, "query": query, "detail": detail,
        "figure": figure, "narrowing": narrowing,
        "permalink": request.get_full_path(),
        "export_csv": "?" + query.params(format="csv"),
        "export_json": "?" + query.params(format="json"),
        "with_runs": "?" + query.params() + ("&" if query.params() else "") + "runs=1",
    }
    return render(request, "deviations/function_detail.html", context)


def release_detail(request: HttpRequest, name: str, version: str) -> HttpResponse:
    release = get_object_or_404(
        Release.objects.select_related("series"), series__name=name, version=version
    )
    query = MatrixQuery.from_params(request.GET)
    changes = selectors.release_changes(release, query.metric, query.estimator, query.rule)
    fmt = request.GET.get("format")
    if fmt in ("csv", "json"):
        rows = [dict(c, url=None) for c in changes["rows"]]
        return _table_response(rows, DEVIATION_FIELDS, fmt, f"{name}-{version}-changes")
    context = {
        "release": release, "series": release.series, "query": query, "changes": changes,
        "runs": release.runs.order_by("created", "id"),
        "table": selectors.release_function_table(release),
        "permalink": request.get_full_path(),
        "export_csv": "?" + query.params(format="csv"),
        "export_json": "?" + query.params(format="json"),
    }
    return render(request, "deviations/release_detail.html", context)


def run_detail(request: HttpRequest, run_id: int) -> HttpResponse:
    run = get_object_or_404(Run.objects.select_related("series", "release"), pk=run_id)
    return render(request, "deviations/run_detail.html", {"run": run})
