"""REST API of trace series, mounted at /api: upload a trace as a run, read runs, series and
releases. Writes need an API token (``Authorization: Bearer <token>``)."""

import uuid
from typing import Any, Literal

from django.db.models import Count
from django.http import HttpRequest
from django.shortcuts import get_object_or_404
from django.urls import reverse
from ninja import Field, File, Form, Router, Schema, Status
from ninja.files import UploadedFile

from deviations.core import access
from deviations.core.api import ErrorOut, TokenAuth
from deviations.core.errors import UserError
from deviations.core.models import Ownership
from deviations.core.uploads import check_upload_size
from deviations.traces import annotations as notes
from deviations.traces import calltree, compare, gate, selectors, services
from deviations.traces.models import Release, ReleaseAnnotation, Run, Series
from deviations.traces.uploads.results import read_upload, set_metric, store_results
from deviations.traces.uploads.runs import ThreadOptions
from deviations.traces.uploads.submit import submit_uploads

router = Router(tags=["traces"])


class RunOut(Schema):
    run: int
    series: str
    release: str
    file_name: str
    sha256: str
    size_bytes: int
    status: str
    error: str
    summary: dict[str, Any] | None
    status_url: str
    page_url: str
    file_url: str | None = None
    duplicate: bool = False
    note: str = ""


class FailedRunOut(RunOut):
    """A run whose file was refused while the request ran (tasks in-process): the run and,
    in ``detail``, the reason."""

    detail: str


QUEUED_NOTE = (
    "queued: the stored run waits for a worker; the task queue cannot be reached now and "
    "the run is sent to it again automatically once it is back"
)


class ReleaseOut(Schema):
    version: str
    order: int | None
    #: The commit the release was built from ("" when not given).
    revision: str
    runs_done: int
    runs_failed: int
    runs_pending: int


class SeriesOut(Schema):
    name: str
    #: "traces" (trace files) or "metrics" (benchmark results)
    kind: str
    description: str
    releases: int
    default_rule: str
    min_relative_change: float
    min_absolute_change_us: float
    #: Links the commits between two releases: ``{from}`` and ``{to}`` are replaced by
    #: their revisions ("" when not set).
    log_url_template: str
    #: Why the last analysis did not finish (its time limit, memory), or "" (issue 24)
    analysis_failure: str


class SeriesSettingsIn(Schema):
    """What a series' owner may change; fields left out keep their value."""

    default_rule: Literal["shifts", "paper"] | None = None
    min_relative_change: float | None = Field(None, ge=0, le=10)
    min_absolute_change_us: float | None = Field(None, ge=0)
    #: http(s) URL with {from} and {to}, at most 500 characters; "" removes it.
    log_url_template: str | None = None


class ReleaseIn(Schema):
    """The explicit change of a release's revision ("" clears it); owners."""

    revision: str


SETTINGS = ("default_rule", "min_relative_change", "min_absolute_change_us")


def run_out(run: Run, duplicate: bool = False) -> dict[str, Any]:
    return {
        "run": run.pk,
        "series": run.series.name,
        "release": run.release.version,
        "file_name": run.file_name,
        "sha256": run.sha256,
        "size_bytes": run.size_bytes,
        "status": run.status,
        "error": run.error,
        "summary": run.summary,
        "status_url": f"/api/runs/{run.pk}",
        "page_url": run.get_absolute_url(),
        # The file as sent, while it is kept (DEVIATIONS_KEEP_TRACE_DAYS).
        "file_url": reverse("run_file", args=[run.pk]) if run.file_stored else None,
        "duplicate": duplicate,
    }


@router.post(
    "/series/{name}/releases/{version}/runs",
    auth=TokenAuth(),
    response={201: RunOut, 200: RunOut, 400: FailedRunOut | ErrorOut, 403: ErrorOut,
              409: ErrorOut, 413: ErrorOut, 507: ErrorOut},
    summary="Upload one trace file as a run of a release",
)
def upload_run(
    request: HttpRequest,
    name: str,
    version: str,
    file: File[UploadedFile | None] = None,
    thread_name: Form[str] = "CrRendererMain",
    process_name: Form[str] = "Renderer",
    all_threads: Form[bool] = False,
    order: Form[int | None] = None,
    revision: Form[str | None] = None,
) -> Status[dict[str, Any]]:
    """The series and release are created if new; `revision` (optional) is the commit the
    release was built from: stored on a release without one, and a release that carries
    another is refused with 409 (change it with `PATCH /api/series/NAME/releases/VERSION`).
    201: a new run (`pending` until a worker
    ingests it, or already `done` when tasks run in-process); 200: the same bytes were
    already a run of this series (`duplicate: true`, nothing stored twice); poll
    `status_url` until the status is `done` or `failed`. 400: a bad name, or (tasks
    in-process) a file that cannot be used: the run is `failed` and `detail` says why, so
    `curl --fail` notices. 403: the series belongs to others; 413: over the size limit;
    507: the server's storage is full (nothing was stored: send it again later). The file
    is kept whole (`file_url`) for the run page's download and `manage.py reingest`."""
    check_upload_size(request)
    if file is None:
        raise UserError("no file: send the trace as the multipart field 'file'")
    submission = submit_uploads(
        name,
        version,
        [(file.name or "upload", file)],
        ThreadOptions(thread_name, process_name, all_threads),
        order=order,
        user=request.auth,
        revision=revision or None,
    )
    entry = submission.registered[0]
    entry.run.refresh_from_db()
    out = run_out(entry.run, entry.duplicate)
    if entry.run.pk in submission.unqueued:
        out["note"] = QUEUED_NOTE
    if entry.run.status == Run.FAILED:
        return Status(400, {**out, "detail": entry.run.error})
    return Status(200 if entry.duplicate else 201, out)


class ResultsRunOut(Schema):
    id: int
    release: str
    duplicate: bool
    samples: int


class ResultsOut(Schema):
    file: str
    format: str
    metrics: int
    values: int
    notes: list[str]
    runs: list[ResultsRunOut]
    series_url: str


@router.post(
    "/series/{name}/results",
    auth=TokenAuth(),
    response={201: ResultsOut, 200: ResultsOut, 400: ErrorOut, 403: ErrorOut, 409: ErrorOut,
              413: ErrorOut},
    summary="Upload one benchmark results file into a metric series",
)
def upload_results(
    request: HttpRequest,
    name: str,
    file: File[UploadedFile | None] = None,
    release: Form[str | None] = None,
    order: Form[int | None] = None,
    format: Form[Literal["google-benchmark", "pytest-benchmark", "hyperfine", "asv",  # noqa: A002
                         "perfherder", "bmf", "csv"] | None] = None,
    revision: Form[str | None] = None,
) -> Status[dict[str, Any]]:
    """Any supported CI results file: Google Benchmark, pytest-benchmark, hyperfine, asv,
    Perfherder (`PERFHERDER_DATA` JSON or log), Bencher Metric Format, or CSV
    `release,metric,value[,unit,direction]` (whose rows name their releases: then no
    `release`). The format is read from the content unless `format` says it. The series
    is created as a metric series if new; `revision` (with `release`) is the commit the
    release was built from (409 when the release carries another). Stored whole or not at
    all, then analysed. 201:
    stored; 200: these bytes were stored before (`duplicate`), nothing twice; 400: a bad
    file or name (`detail` names the file and the reason: nothing stored); 403: the series
    belongs to others; 413: over the size limit."""
    check_upload_size(request)
    if file is None:
        raise UserError("no file: send the results as the multipart field 'file'")
    data = read_upload(file, file.name or "upload")
    stored = store_results(name, data, file.name or "upload", release=release or None,
                           order=order, fmt=format, user=request.auth,
                           revision=revision or None)
    out = {**stored.to_dict(), "series_url": reverse("series", args=[name])}
    return Status(200 if all(dup for _, dup in stored.runs) else 201, out)


class MetricIn(Schema):
    """A metric's direction (kept over what later uploads say) or unit label."""

    metric: str
    direction: Literal["lower_is_better", "higher_is_better"] | None = None
    unit: str | None = Field(None, max_length=40)


class MetricOut(Schema):
    metric: str
    unit: str
    direction: str
    source: str


@router.patch(
    "/series/{name}/metric", auth=TokenAuth(),
    response={200: MetricOut, 400: ErrorOut, 403: ErrorOut},
    summary="Set a metric's direction or unit (metric series; owners)",
)
def update_metric(request: HttpRequest, name: str, body: MetricIn) -> dict[str, Any]:
    series = get_object_or_404(Series, name=name)
    row = set_metric(series, body.metric, direction=body.direction, unit=body.unit,
                     user=request.auth)
    return {"metric": body.metric, "unit": row.unit, "direction": row.direction,
            "source": row.source}


@router.get("/runs/{run_id}", response=RunOut, summary="A run's status and parse summary")
def get_run(request: HttpRequest, run_id: int) -> dict[str, Any]:
    run = get_object_or_404(Run.objects.select_related("series", "release"), pk=run_id)
    return run_out(run)


@router.get("/series", response=list[SeriesOut], summary="All series")
def list_series(request: HttpRequest) -> list[dict[str, Any]]:
    return [_series_out(s) for s in Series.objects.annotate(n=Count("releases"))]


def _series_out(s: Series) -> dict[str, Any]:
    return {"name": s.name, "kind": s.kind, "description": s.description, "releases": s.n,
            "log_url_template": s.log_url_template,
            "analysis_failure": s.analysis_failure, **{k: getattr(s, k) for k in SETTINGS}}


@router.patch(
    "/series/{name}", auth=TokenAuth(), response={200: SeriesOut, 403: ErrorOut},
    summary="Change a series' default rule, minimum practical change or log-URL template "
    "(owners)",
)
def update_series(request: HttpRequest, name: str, body: SeriesSettingsIn) -> dict[str, Any]:
    """`log_url_template`: an http(s) URL holding `{from}` and `{to}` (the revisions of the
    last good and first bad release, URL-quoted), e.g.
    `https://github.com/o/r/compare/{from}...{to}`; "" removes it; 400 names the problem."""
    series = get_object_or_404(Series.objects.annotate(n=Count("releases")), name=name)
    access.check_write(request.auth, Ownership.SERIES, [series.name])
    changed = body.dict(exclude_none=True)
    template = changed.pop("log_url_template", None)
    if template is not None:
        services.set_log_url_template(series, template, request.auth)
    for key, value in changed.items():
        setattr(series, key, value)
    series.save(update_fields=list(changed) or None)
    return _series_out(series)


@router.get(
    "/series/{name}/releases",
    response=list[ReleaseOut],
    summary="A series' releases in order, with run counts",
)
def list_releases(request: HttpRequest, name: str) -> list[Any]:
    series = get_object_or_404(Series, name=name)
    return selectors.releases_with_counts(series)


@router.patch(
    "/series/{name}/releases/{version}", auth=TokenAuth(),
    response={200: ReleaseOut, 400: ErrorOut, 403: ErrorOut},
    summary="Change a release's revision (owners)",
)
def update_release(request: HttpRequest, name: str, version: str, body: ReleaseIn) -> Any:
    """The explicit change of the commit a release was built from (uploads that name
    another revision are refused with 409); "" clears it. 400: not 1 to 100 printable
    characters without spaces."""
    release = get_object_or_404(Release.objects.select_related("series"), series__name=name,
                                version=version)
    services.set_release_revision(release, body.revision, request.auth)
    return next(r for r in selectors.releases_with_counts(release.series)
                if r.pk == release.pk)


@router.get(
    "/uploads/{batch}",
    response=list[RunOut],
    summary="The runs of one upload (the files sent together from the upload page)",
)
def get_upload(request: HttpRequest, batch: uuid.UUID) -> list[dict[str, Any]]:
    runs = Run.objects.filter(upload_batch=batch).select_related("series", "release")
    return [run_out(r) for r in runs.order_by("id")]


class DeletedOut(Schema):
    series: str
    releases: int
    runs: int


def _deleted(done: services.Deleted) -> dict[str, Any]:
    return {"series": done.series, "releases": done.releases, "runs": done.runs}


@router.delete(
    "/series/{name}", auth=TokenAuth(), response={200: DeletedOut, 403: ErrorOut},
    summary="Delete a series with its releases, runs and analysis",
)
def delete_series(request: HttpRequest, name: str) -> dict[str, Any]:
    series = get_object_or_404(Series, name=name)
    access.check_write(request.auth, Ownership.SERIES, [series.name])
    return _deleted(services.delete_series(series))


@router.delete(
    "/series/{name}/releases/{version}", auth=TokenAuth(),
    response={200: DeletedOut, 403: ErrorOut},
    summary="Delete a release and its runs; the series' analysis is recomputed",
)
def delete_release(request: HttpRequest, name: str, version: str) -> dict[str, Any]:
    release = get_object_or_404(Release.objects.select_related("series"), series__name=name,
                                version=version)
    access.check_write(request.auth, Ownership.SERIES, [release.series.name])
    return _deleted(services.delete_release(release))


@router.delete(
    "/runs/{run_id}", auth=TokenAuth(), response={200: DeletedOut, 403: ErrorOut},
    summary="Delete one run; the series' analysis is recomputed",
)
def delete_run(request: HttpRequest, run_id: int) -> dict[str, Any]:
    run = get_object_or_404(Run.objects.select_related("series"), pk=run_id)
    access.check_write(request.auth, Ownership.SERIES, [run.series.name])
    return _deleted(services.delete_run(run))


class _MediansOut(Schema):
    """Two releases' medians with their intervals, and the difference later − earlier."""

    base_median: float | None
    base_lo: float | None
    base_hi: float | None
    new_median: float | None
    new_lo: float | None
    new_hi: float | None
    diff: float | None
    diff_lo: float | None
    diff_hi: float | None
    change_pct: float | None


class ComparisonRowOut(_MediansOut):
    function: str
    function_id: int
    verdict: str
    p_value: float | None
    q_value: float | None


class ComparisonOut(Schema):
    series: str
    base: str
    new: str
    metric: str
    runs_base: int
    runs_new: int
    test: str
    fdr: float
    min_change: float
    min_change_us: float
    counts: dict[str, int]
    rows: list[ComparisonRowOut]


@router.get(
    "/series/{name}/compare", response={200: ComparisonOut, 400: ErrorOut, 404: ErrorOut},
    summary="Compare any two releases of a series, function by function",
)
def compare_releases(
    request: HttpRequest, name: str, base: str, new: str, metric: str = "self",
    test: str = "auto",
) -> dict[str, Any]:
    """Per function: both medians with their 95% intervals (µs), `diff` = new − base with
    its interval, `change_pct`, the p-value and its Benjamini–Hochberg q-value over all the
    functions, and the verdict (`regression`, `improvement`, `appeared`, `vanished`,
    `below_threshold`, `unchanged`). 404: an unknown series or release; 400: the same
    release twice, or a release with fewer than two done runs."""
    series = get_object_or_404(Series, name=name)
    result = compare.compare_releases(series, base, new, metric, test=test)
    return {
        "series": series.name, "base": result.base.version, "new": result.new.version,
        "metric": result.metric, "runs_base": result.runs_base, "runs_new": result.runs_new,
        "test": result.test, "fdr": compare.FDR, "min_change": series.min_relative_change,
        "min_change_us": series.min_absolute_change_us, "counts": result.counts,
        "rows": list(result.rows),
    }


class CallEdgeOut(_MediansOut):
    caller: str
    caller_id: int
    callee: str
    callee_id: int
    q_value: float | None
    significant: bool
    verdict: str
    share_of_caller: float | None
    base_mean: float | None
    new_mean: float | None


class CallTreeOut(Schema):
    series: str
    base: str
    new: str
    function: str
    runs_base: int
    runs_new: int
    runs_without_tree: int
    fdr: float
    words: str
    remainder: float | None
    parts: list[dict[str, Any]]
    edges: list[CallEdgeOut]
    tree: dict[str, list[Any]]
    cut: dict[str, int]


@router.get(
    "/series/{name}/compare/calltree",
    response={200: CallTreeOut, 400: ErrorOut, 404: ErrorOut},
    summary="Two releases' call trees compared: why a function's time changed",
)
def compare_calltree(
    request: HttpRequest, name: str, base: str, new: str, function: str = "",
    test: str = "auto",
) -> dict[str, Any]:
    """Between releases `base` and `new`: for `function` (or, empty, the measured threads'
    top-level frames) the change of its total time split into its self time and each
    callee (`parts`, largest share first, and `words`), every caller–callee edge of the
    series compared (`edges`: medians with 95% intervals in µs, `diff` = new − base with
    its interval, Benjamini–Hochberg q-value over every total, self time and edge,
    `share_of_caller`: the edge's part of its caller's change of the mean), and the tree
    the compare page draws (`tree`: ids, parents, labels, values in µs, change %,
    significant; `cut`: frames not drawn). `remainder`: the total's median change less its
    parts' (medians do not add). 404: unknown series, release or function; 400: the same
    release twice, a metric series, fewer than two runs with a call tree on a side (runs
    ingested before call trees were stored: `manage.py reingest --series NAME`)."""
    series = get_object_or_404(Series, name=name)
    diff = calltree.release_calltree(series, base, new, function, test=test)
    tree = {k: v for k, v in diff.tree.items() if k != "hover"}
    return {
        "series": series.name, "base": base, "new": new, "function": function,
        "runs_base": diff.comparison.runs_base, "runs_new": diff.comparison.runs_new,
        "runs_without_tree": diff.comparison.without_tree, "fdr": calltree.FDR,
        "words": diff.words, "remainder": diff.remainders[diff.root],
        "parts": diff.part_rows(), "edges": diff.edges, "tree": tree, "cut": diff.cut,
    }


class AnnotationIn(Schema):
    text: str


class AnnotationOut(Schema):
    id: int
    series: str
    release: str
    text: str
    author: str | None
    created: str


@router.get("/series/{name}/annotations", response=list[AnnotationOut],
            summary="The notes on a series' releases, in release order")
def list_annotations(request: HttpRequest, name: str) -> list[dict[str, Any]]:
    series = get_object_or_404(Series, name=name)
    return [notes.annotation_out(a) for a in notes.series_annotations(series)]


@router.post(
    "/series/{name}/releases/{version}/annotations", auth=TokenAuth(),
    response={201: AnnotationOut, 400: ErrorOut, 403: ErrorOut},
    summary="Add a note to a release (shown on the matrix and the function charts)",
)
def annotate_release(
    request: HttpRequest, name: str, version: str, body: AnnotationIn
) -> Status[dict[str, Any]]:
    """One line of at most 500 characters, e.g. "switched to headless". 403: the series
    belongs to others."""
    release = get_object_or_404(Release.objects.select_related("series"), series__name=name,
                                version=version)
    note = notes.annotate_release(request.auth, release, body.text)
    return Status(201, notes.annotation_out(note))


@router.delete(
    "/series/{name}/annotations/{annotation_id}", auth=TokenAuth(),
    response={200: AnnotationOut, 403: ErrorOut},
    summary="Delete a note (its author, an owner of the series, or staff)",
)
def delete_annotation(request: HttpRequest, name: str, annotation_id: int) -> dict[str, Any]:
    note = get_object_or_404(ReleaseAnnotation.objects.select_related("release__series"),
                             pk=annotation_id, release__series__name=name)
    out = notes.annotation_out(note)
    notes.delete_annotation(request.auth, note)
    return out


class GateOut(Schema):
    """The CI gate's verdict (``traces.gate``): ``verdict`` pass, fail or not_ready with
    ``exit_code`` 0, 1 or 3 as `manage.py check_release` exits; the flags at the boundary
    from ``previous`` to the release, ``blocking`` those that fail it; ``markdown`` the
    summary for a pull request."""

    series: str
    release: str
    previous: str | None
    verdict: str
    exit_code: int
    reason: str
    rule: str
    include_provisional: bool
    release_url: str
    range: dict[str, Any] | None
    regressions: list[dict[str, Any]]
    improvements: list[dict[str, Any]]
    blocking: list[dict[str, Any]]
    markdown: str


@router.get(
    "/series/{name}/releases/{version}/check",
    response={200: GateOut, 404: ErrorOut},
    summary="The CI gate: may this release ship (no untriaged regression)?",
)
def check_release(request: HttpRequest, name: str, version: str,
                  include_provisional: bool = False) -> dict[str, Any]:
    """The verdict of `manage.py check_release` as JSON, for CI without shell access:
    `verdict` is `pass` (no untriaged regression from the previous release), `fail`
    (`blocking` lists them) or `not_ready` (a run of the release still being ingested, or
    the analysis not up to date: ask again later); always 200 for a known release, so
    gate on the body, e.g. `jq -e '.verdict == "pass"'`. 404: unknown series or release."""
    return gate.check_release(name, version,
                              include_provisional=include_provisional).as_dict()
