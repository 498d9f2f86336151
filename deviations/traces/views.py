"""Pages: parse the request, call a selector, render. No statistics are computed here."""

from __future__ import annotations

import io
from collections.abc import Iterable, Sequence
from typing import Any

import msgspec
from django.contrib.auth.decorators import login_required
from django.db import transaction
from django.db.models import Count, F, Max, OuterRef, Subquery
from django.db.models.functions import Coalesce
from django.http import FileResponse, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from deviations.core import annotations as note_rules
from deviations.core.errors import UserError
from deviations.core.forms import form_error
from deviations.core.pagecache import shared_page
from deviations.core.tables import write_csv
from deviations.core.text import plotly_text
from deviations.traces import annotations as notes
from deviations.traces import calltree, charts, compare, selectors, services
from deviations.traces.forms import CommitSettingsForm
from deviations.traces.matrix import (
    MANY_RELEASES,
    WINDOW,
    MatrixQuery,
    Window,
    cell_rows,
    cells_json,
    matrix_slice,
    range_problem,
    release_window,
)
from deviations.traces.models import Function, Release, ReleaseAnnotation, Run, Series
from deviations.traces.uploads import files
from deviations.traces.uploads.results import set_metric

SERIES_FIELDS = ["series", "releases", "runs", "latest_from", "latest_to", "regressions",
                 "improvements", "newest_not_compared", "releases_lacking_runs"]
DEVIATION_FIELDS = list(selectors.DEVIATION_FIELDS)
RELEASE_CHANGE_FIELDS = [*DEVIATION_FIELDS[:DEVIATION_FIELDS.index("provisional")],
                         "compared_from", "compared_to",
                         *DEVIATION_FIELDS[DEVIATION_FIELDS.index("provisional"):]]


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
    # One sub-query per count (issue 24: joining releases × runs of every series took 7.5 s
    # at 2,000 releases; counted apart, milliseconds).
    def per_series(model: Any, value: Any) -> Any:
        return Coalesce(Subquery(
            model.objects.filter(series=OuterRef("pk")).order_by().values("series")
            .annotate(v=value).values("v")[:1]), 0)

    series = list(Series.objects.annotate(
        n_releases=per_series(Release, Count("*")),
        n_runs=per_series(Run, Count("*")),
        last_ingest=Subquery(Run.objects.filter(series=OuterRef("pk")).order_by()
                             .values("series").annotate(v=Max("finished")).values("v")[:1]),
    ).order_by("name"))
    latest = {s.pk: selectors.latest_deviations(s) for s in series}
    lacking = selectors.lacking_runs_by_series()
    fmt = request.GET.get("format")
    if fmt in ("csv", "json"):
        rows = [
            {"series": s.name, "releases": s.n_releases, "runs": s.n_runs,
             "latest_from": (latest[s.pk] or {}).get("from"),
             "latest_to": (latest[s.pk] or {}).get("to"),
             "regressions": (latest[s.pk] or {}).get("regressions"),
             "improvements": (latest[s.pk] or {}).get("improvements"),
             "newest_not_compared": (latest[s.pk] or {}).get("newest"),
             "releases_lacking_runs": " ".join(lacking.get(s.pk, []))}
            for s in series
        ]
        return _table_response(rows, SERIES_FIELDS, fmt, "series")
    return render(request, "deviations/series_list.html",
                  {"series": [(s, latest[s.pk], lacking.get(s.pk, [])) for s in series]})


def series_detail(request: HttpRequest, name: str) -> HttpResponse:
    """The deviation matrix (seed 003, Figure 9) with its controls."""
    series = get_object_or_404(
        Series.objects.annotate(page_generation=F("analysis__generation")), name=name
    )
    query = MatrixQuery.for_series(request.GET, series)
    fmt = request.GET.get("format")
    if fmt in ("json", "csv"):
        view = matrix_slice(series, query)
        if fmt == "json":
            return HttpResponse(cells_json(view, series), content_type="application/json")
        rows = cell_rows(view, series) if view is not None else []
        return _table_response(rows, DEVIATION_FIELDS, fmt, f"{series.name}-deviations")
    # A long history lists only the window's releases (the pickers and the table of
    # releases): the page reads and renders what it shows (issue 24).
    total = series.releases.count()
    listed = window = None
    if total > MANY_RELEASES:
        window = release_window(series, query)
        listed = window.versions if window is not None else []
    releases = selectors.releases_with_counts(series, listed)
    lacking, one_run = selectors.releases_lacking_runs(series), selectors.one_run_releases(series)
    annotations = notes.series_annotations(series)
    # Everything the page shows (core.pagecache): the series' row (thresholds, default
    # rule), its analysis (generation), the controls, the releases with their run counts
    # (versions, the selects, "not in the matrix"), the notes marked on the figure.
    key = (
        "series_detail", request.path, _fields(series), series.page_generation, query,
        selectors.metric_settings_key(series), total, one_run,
        tuple(tuple(r.values()) for r in lacking),
        tuple(_fields(r) + (r.runs_done, r.runs_failed, r.runs_pending) for r in releases),
        tuple(_fields(a) + (note_rules.byline(a),) for a in annotations),
    )
    listing = {"releases_total": total, "releases_listed": listed is not None,
               "lacking": lacking, "one_run": one_run}
    return shared_page(request, key, "deviations/series_detail.html",
                       lambda: _series_context(request, series, query, releases, annotations,
                                               window) | listing)


def _fields(instance: Any) -> tuple[Any, ...]:
    """The values of a row's columns (a page's cache key: any edit is a new key)."""
    return tuple(getattr(instance, f.attname) for f in type(instance)._meta.concrete_fields)


def _series_context(request: HttpRequest, series: Series, query: MatrixQuery,
                    releases: list[Release], annotations: list[ReleaseAnnotation],
                    window: Window | None = None) -> dict[str, Any]:
    view = matrix_slice(series, query, window=window)
    figure, table = None, []
    if view is not None:
        link = "?" + query.params(page=1, q="", only=False, sort="deviations", first="", last="")
        urls = [reverse("function", args=[series.name, fid]) + link for fid in view.function_ids]
        a = view.arrays
        release_urls = [reverse("release", args=[series.name, v]) + link
                        for v in view.releases]
        names, what, unit = view.function_names, f"{query.metric} time", "ms"
        if series.is_metrics:  # each row in its own unit, said beside its name
            units = selectors.metric_units(series, view.function_ids)
            names = [f"{n} ({units[f]})" if units.get(f) else n
                     for n, f in zip(names, view.function_ids, strict=True)]
            what, unit = "metrics", "raw"
        figure = charts.deviation_matrix(
            names, view.releases, a["verdict"], a["gap"], a["diff"],
            a["diff_lo"], a["diff_hi"], a["estimate"], a["lo"], a["hi"], a["digression"],
            urls, title=f"{what}, {query.estimator}, {query.rule_label}", unit=unit,
            release_urls=release_urls, provisional=a["provisional"], relative=a["relative"],
            p_value=a["p_value"], n_before=a["n_before"], n_after=a["n_after"],
            early=a["early"],
            pair_ranges=[r.text for r in selectors.pair_ranges(series, view.releases)],
        )
        notes.add_marks(figure, series, {v: plotly_text(v) for v in view.releases[1:]},
                        annotations)
        table = [
            {"name": n, "url": u, "regressions": int(r), "improvements": int(i),
             "largest_gap": float(g)}
            for n, u, r, i, g in zip(view.function_names, urls, view.regressions,
                                     view.improvements, view.largest_gap, strict=True)
        ]
    return {
        "series": series, "query": query, "view": view, "figure": figure, "table": table,
        "releases": releases, "pairs_shown": len(view.releases) - 1 if view else 0,
        "range_problem": range_problem(query, list(series.releases.filter(
            version__in=[query.first, query.last]).order_by("sort_key", "id")
            .values_list("version", flat=True))),
        "provisional_pairs": int(view.arrays["provisional"].any(axis=0).sum()) if view else 0,
        "final_within": int(view.arrays["final_within"].max(initial=0)) if view else 0,
        "permalink": request.path + ("?" + query.params() if query.params() else ""),
        "export_csv": "?" + query.params(format="csv"),
        "export_json": "?" + query.params(format="json"),
        "default_window": WINDOW,
        "prev_page": query.params(page=view.query.page - 1) if view and view.query.page > 1
        else None,
        "next_page": query.params(page=view.query.page + 1)
        if view and view.query.page < view.pages else None,
    }


def matrix_json(request: HttpRequest, name: str) -> HttpResponse:
    """The cells the matrix page shows with the same controls, as JSON."""
    series = get_object_or_404(Series, name=name)
    view = matrix_slice(series, MatrixQuery.for_series(request.GET, series))
    return HttpResponse(cells_json(view, series), content_type="application/json")


def function_detail(request: HttpRequest, name: str, function_id: int) -> HttpResponse:
    """One function across releases: median and mean CIs, deviations, runs on demand."""
    series = get_object_or_404(Series, name=name)
    function = get_object_or_404(Function, series=series, pk=function_id)
    query = MatrixQuery.for_series(request.GET, series)
    # The matrix's window of releases (the newest by default; exports: ``window=all``).
    window = release_window(series, query)
    columns = window.columns if window is not None else None
    detail = selectors.function_detail(series, function, query.metric, query.estimator,
                                       query.rule, with_samples="runs" in request.GET,
                                       columns=columns)
    fmt = request.GET.get("format")
    if fmt in ("csv", "json"):
        # The range as its export columns (the page's ``culprit`` is for the template).
        rows = [{k: v for k, v in row.items() if k != "culprit"}
                for row in (detail.rows if detail is not None else [])]
        return _table_response(rows, selectors.FUNCTION_FIELDS, fmt, f"{series.name}-function")
    figure = narrowing = None
    unit: charts.Unit = "us"
    metric = getattr(function, "metric", None) if series.is_metrics else None
    # The release of the matrix cell clicked to come here, outlined on the chart and table.
    highlight = request.GET.get("at", "")
    if detail is not None:
        unit = "raw" if series.is_metrics else charts.unit_for(detail.median[0])
        what = (f"{metric.unit or 'value'}, {metric.get_direction_display()}"
                if metric is not None else f"{query.metric} time")
        figure = charts.function_cis(
            detail.releases, detail.median, detail.mean, detail.verdict, detail.digression,
            samples=detail.samples, diff=detail.diff, gap=detail.gap, unit=unit,
            sample_urls=None if detail.sample_runs is None else [
                [reverse("run", args=[run]) for run in runs] for runs in detail.sample_runs],
            title=f"{function.name}: {what}, {query.rule_label}",
            highlight=highlight or None, unit_label=metric.unit if metric else None,
        )
        notes.add_marks(figure, series, {v: r for r, v in enumerate(detail.releases)})
        if detail.narrowing is not None:
            n, est, lo, hi, label = detail.narrowing
            narrowing = charts.ci_narrowing(n, est, lo, hi, labels=[label], unit=unit,
                                            unit_label=metric.unit if metric else None,
                                            title="Median CI against the number of runs")
    context = {
        "why": calltree.function_flags(series, function, query.rule, columns),
        "window": window, "default_window": WINDOW,
        "window_extra": "&runs=1" if "runs" in request.GET else "",
        "series": series, "function": function, "query": query, "detail": detail,
        "figure": figure, "narrowing": narrowing, "unit": unit, "metric": metric,
        "sample_word": "value" if series.is_metrics else "run",
        "unit_label": metric.unit if metric is not None else charts.UNIT_LABEL[unit],
        "highlight": highlight,
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
    query = MatrixQuery.for_series(request.GET, release.series)
    changes = selectors.release_changes(release, query.metric, query.estimator, query.rule)
    fmt = request.GET.get("format")
    if fmt in ("csv", "json"):
        rows = [dict(c, url=None) for c in changes["rows"]]
        return _table_response(rows, RELEASE_CHANGE_FIELDS, fmt, f"{name}-{version}-changes")
    series = release.series
    for kind in ("regressions", "improvements"):  # a metric's unit beside its name
        changes[kind] = selectors.with_units(series, changes[kind])
    context = {
        "release": release, "series": series, "query": query, "changes": changes,
        "unit": "raw" if series.is_metrics else "ms",
        "unit_label": "" if series.is_metrics else "ms",
        "sample_word": "value" if series.is_metrics else "run",
        "runs": release.runs.order_by("created", "id"),
        "table": (selectors.release_metric_table(release) if series.is_metrics
                  else selectors.release_function_table(release)),
        "runs_done": release.runs.filter(status=Run.DONE).count(),
        "nearby": _nearby_versions(release),
        "permalink": request.get_full_path(),
        "export_csv": "?" + query.params(format="csv"),
        "export_json": "?" + query.params(format="json"),
    }
    return render(request, "deviations/release_detail.html", context)


def _nearby_versions(release: Release) -> list[str] | None:
    """The base picker's offers on a release page of a long history (more than
    ``MANY_RELEASES``): the window of releases before it and after it, not all (None: a
    short history, every release in a select)."""
    releases = Release.objects.filter(series=release.series)
    if releases.count() <= MANY_RELEASES:
        return None
    before = releases.filter(sort_key__lte=release.sort_key).exclude(pk=release.pk).order_by(
        "-sort_key", "-id").values_list("version", flat=True)[:WINDOW]
    after = releases.filter(sort_key__gte=release.sort_key).exclude(pk=release.pk).order_by(
        "sort_key", "id").values_list("version", flat=True)[:WINDOW]
    return [*reversed(list(before)), *after]


def run_detail(request: HttpRequest, run_id: int) -> HttpResponse:
    run = get_object_or_404(Run.objects.select_related("series", "release"), pk=run_id)
    return render(request, "deviations/run_detail.html", {
        "run": run, "summary": selectors.summary_rows(run.summary),
        "kept_until": files.kept_until(run), "keep_days": files.keep_days(),
    })


def compare_releases(request: HttpRequest, name: str) -> HttpResponse:
    """Any two releases of the series, function by function (``?base=A&new=B``)."""
    series = get_object_or_404(Series, name=name)
    query = compare.CompareQuery.from_params(request.GET)
    result, error, status = None, "", 200
    rows: Sequence[dict[str, Any]] = []
    fmt = request.GET.get("format")
    if query.base or query.new or fmt in ("csv", "json"):
        try:
            result, rows = compare.remembered_rows(series, query)
        except compare.CompareError as exc:
            error, status = exc.message, exc.status
    if fmt in ("csv", "json"):
        if error:
            return HttpResponse(error, status=status, content_type="text/plain; charset=utf-8")
        return _table_response(rows, compare.FIELDS, fmt,
                               f"{series.name}-{query.base}-{query.new}")
    tree = tree_figure = None
    tree_error = ""
    if result is not None and not series.is_metrics:
        try:
            tree = calltree.release_calltree(series, query.base, query.new,
                                             request.GET.get("calls", ""),
                                             test=query.test)
            tree_figure = charts.calltree_icicle(
                tree.tree, title=f"Call tree, {query.base} → {query.new}")
        except calltree.CallTreeError as exc:
            tree_error = exc.message
    matching = len(rows)
    pages = max(1, -(-matching // compare.PER_PAGE))
    page = min(query.page, pages)
    # The shown rows only are made (Rows: 100 of 20,000 functions).
    shown = selectors.with_units(  # a metric's unit beside its name
        series, list(rows[(page - 1) * compare.PER_PAGE : page * compare.PER_PAGE]))
    # Milliseconds, as the release page's tables of many functions (exports stay in µs);
    # a metric series' values as stored (each metric in its unit).
    unit: charts.Unit = "raw" if series.is_metrics else "ms"
    context = {
        "series": series, "query": query, "result": result, "rows": shown, "error": error,
        "unit": unit, "unit_label": charts.UNIT_LABEL[unit],
        "file_word": "file" if series.is_metrics else "run",
        "sample_word": "value" if series.is_metrics else "run",
        **_compare_pickers(series, query),
        "fdr": compare.FDR, "min_change": series.min_relative_change,
        "how_many_pct": f"{_how_many_pct(series):g}",
        "min_change_us": series.min_absolute_change_us,
        "shows": compare.SHOW, "sorts": compare.SORTS,
        "permalink": request.path + ("?" + query.params() if query.params() else ""),
        "export_csv": "?" + query.params(format="csv"),
        "export_json": "?" + query.params(format="json"),
        "sort_links": {s: "?" + query.params(sort=s, page=1) for s in compare.SORTS},
        "matching": matching, "page": page, "pages": pages, "per_page": compare.PER_PAGE,
        "prev_page": query.params(page=page - 1) if page > 1 else None,
        "next_page": query.params(page=page + 1) if page < pages else None,
        "swap": "?" + query.params(base=query.new, new=query.base, page=1),
        "tree": tree, "tree_figure": tree_figure, "tree_error": tree_error,
        "calls": request.GET.get("calls", ""),
        "tree_cut": calltree.cut_words(tree.cut) if tree is not None else "",
        "tree_edges": (sorted(tree.edges, key=lambda e: -abs(e["diff"] or 0.0))
                       [:calltree.MAX_TABLE_ROWS] if tree is not None else []),
        "tree_table_max": calltree.MAX_TABLE_ROWS,
        "tree_root_name": calltree.ROOT_NAME,
    }
    return render(request, "deviations/compare.html", context, status=status)


def _compare_pickers(series: Series, query: compare.CompareQuery) -> dict[str, Any]:
    """The compare page's release pickers: every release with its runs in two selects, or
    past ``MANY_RELEASES`` text inputs offering the newest ``WINDOW`` and the two chosen."""
    if series.releases.count() <= MANY_RELEASES:
        return {"releases": selectors.releases_with_counts(series), "releases_listed": False}
    newest = series.releases.order_by("-sort_key", "-id").values_list("version",
                                                                      flat=True)[:WINDOW]
    shown = {*newest, query.base, query.new} - {""}
    return {"releases": selectors.releases_with_counts(series, shown), "releases_listed": True}


def _how_many_pct(series: Series) -> float:
    """The change "how many more runs?" asks about: the series' minimum practical change
    (2 % by default), or 2 % when the series keeps every significant change."""
    return 100.0 * series.min_relative_change or 2.0


def release_precision(request: HttpRequest, name: str) -> HttpResponse:
    """How many more runs of each release would tell a change of ``min_change`` % of one
    function's mean from noise (``?base=A&new=B&function=ID&metric=self&min_change=2``):
    the compare view's "how many more runs?" link (docs/statistics.md, §3.8 and §3.11)."""
    series = get_object_or_404(Series, name=name)
    params = request.GET
    context: dict[str, Any] = {"series": series, "result": None, "error": "",
                               "min_change": params.get("min_change",
                                                        f"{_how_many_pct(series):g}")}
    status = 200
    try:
        try:
            function_id = int(params.get("function", ""))
            min_change = float(context["min_change"])
        except ValueError as exc:
            raise UserError("function must be an id and min_change a number") from exc
        context["result"] = selectors.release_pair_precision(
            series.name, params.get("base", ""), params.get("new", ""), function_id,
            metric=params.get("metric", "self"), min_change_pct=min_change)
    except UserError as exc:
        context["error"], status = exc.message, exc.status
    return render(request, "deviations/precision.html", context, status=status)


@login_required
@require_POST
def annotate_release(request: HttpRequest, name: str, version: str) -> HttpResponse:
    """Add a note to a release (the release page's form)."""
    release = get_object_or_404(
        Release.objects.select_related("series"), series__name=name, version=version
    )
    try:
        notes.annotate_release(request.user, release, request.POST.get("text", ""))
    except UserError as exc:
        return HttpResponse(exc.message, status=exc.status, content_type="text/plain")
    return redirect(release.get_absolute_url() + "#annotations")


@login_required
@require_POST
def set_metric_direction(request: HttpRequest, name: str, function_id: int) -> HttpResponse:
    """A metric's direction (its page's form; the series' owners): kept over what later
    uploads say, applied at once (no new analysis)."""
    function = get_object_or_404(Function, series__name=name, pk=function_id)
    try:
        set_metric(function.series, function.name,
                   direction=request.POST.get("direction", ""), user=request.user)
    except UserError as exc:
        return HttpResponse(exc.message, status=exc.status, content_type="text/plain")
    return redirect(reverse("function", args=[name, function_id]))


@login_required
@require_POST
def delete_release_annotation(request: HttpRequest, name: str, annotation_id: int) -> HttpResponse:
    """Delete a note (its author, an owner of the series, or staff)."""
    note = get_object_or_404(ReleaseAnnotation.objects.select_related("release__series"),
                             pk=annotation_id, release__series__name=name)
    try:
        notes.delete_annotation(request.user, note)
    except UserError as exc:
        return HttpResponse(exc.message, status=exc.status, content_type="text/plain")
    return redirect(note.release.get_absolute_url() + "#annotations")


@login_required
def series_settings(request: HttpRequest, name: str) -> HttpResponse:
    """The owners' commit settings of a series: its log-URL template and a release's
    revision (``traces.services``; a visitor who does not own it gets the 403 there)."""
    series = get_object_or_404(Series, name=name)
    versions = list(series.releases.order_by("sort_key", "id").values_list("version",
                                                                            flat=True))
    status = 200
    if request.method == "POST":
        form = CommitSettingsForm(request.POST, versions=versions)
        if form.is_valid():
            data = form.cleaned_data
            try:
                with transaction.atomic():  # both changes, or neither
                    services.set_log_url_template(series, data["log_url_template"],
                                                  request.user)
                    if data["release"]:
                        release = Release.objects.get(series=series, version=data["release"])
                        services.set_release_revision(release, data["revision"], request.user)
            except UserError as exc:
                form.add_error(None, form_error(exc))
                status = exc.status
            else:
                return redirect(reverse("series_settings", args=[name]) + "?saved=1")
        else:
            status = 400
    else:
        form = CommitSettingsForm(initial={"log_url_template": series.log_url_template},
                                  versions=versions)
    return render(request, "deviations/series_settings.html", {
        "series": series, "form": form, "saved": "saved" in request.GET,
        "releases": series.releases.order_by("sort_key", "id"),
    }, status=status)


def run_file(request: HttpRequest, run_id: int) -> HttpResponse:
    """The run's trace file byte for byte as it was sent (a ``.json.gz`` stays gzip), while
    it is kept (``DEVIATIONS_KEEP_TRACE_DAYS``); 404 with the reason once it is gone."""
    run = get_object_or_404(Run, pk=run_id)
    gone = None
    if not run.file_stored:
        gone = (f"the file of run {run.pk} was deleted on {run.file_removed:%Y-%m-%d}: "
                "only its times are kept" if run.file_removed else
                f"the file of run {run.pk} is not stored: only its times are kept")
    else:
        try:
            stream = files.open_for_download(run.sha256)
        except FileNotFoundError:  # deleted meanwhile
            gone = f"the file of run {run.pk} is no longer stored"
    if gone is not None:
        return HttpResponse(gone, status=404, content_type="text/plain; charset=utf-8")
    # octet-stream and no Content-Encoding: a client must not inflate a gzip file on the way.
    response = FileResponse(stream, as_attachment=True, filename=run.file_name,
                            content_type="application/octet-stream")
    response["Content-Length"] = str(run.size_bytes)
    return response
