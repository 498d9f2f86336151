"""REST API of A/B runs, mounted at /api/ab: upload a run (with its A/A run), read runs
and a host's floors. Writes need an API token, as everywhere in the API."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from django.shortcuts import get_object_or_404
from ninja import File, Form, Router, Schema, Status
from ninja.files import UploadedFile

from deviations.core.api import ErrorOut, TokenAuth
from deviations.core.uploads import check_upload_size
from deviations.experiments.ab import selectors, services
from deviations.experiments.ab.models import ABHost, ABRun
from deviations.traces import selectors as trace_selectors

router = Router(tags=["A/B runs"])


class RunOut(Schema):
    id: int
    kind: str
    name: str
    host: str | None
    aa_run: int | None
    baseline: str
    created: str
    min_change_pct: float
    comparisons: list[dict[str, Any]]
    floors: dict[str, Any]
    moved: list[str]
    page_url: str


class UploadOut(Schema):
    created: bool
    run: RunOut | None
    aa_run: RunOut | None
    moved: list[str]


class FloorOut(Schema):
    metric: str
    floor: float
    lo: float
    hi: float
    n: int
    biased: bool
    moved: bool
    previous: float | None
    run: int
    created: str


@router.post(
    "/runs",
    auth=TokenAuth(),
    response={201: UploadOut, 200: UploadOut, 400: ErrorOut, 403: ErrorOut, 413: ErrorOut},
    summary="Upload an interleaved A/B run and/or an A/A run of a host (docs/formats.md)",
)
def upload(
    request: HttpRequest,
    file: File[UploadedFile | None] = None,
    aa: File[UploadedFile | None] = None,
    host: Form[str | None] = None,
    min_change: Form[float | None] = None,
) -> Status[dict[str, Any]]:
    """Multipart fields ``file`` (the A/B run), ``aa`` (an A/A run of the same host),
    ``host`` and ``min_change`` (smallest change that matters, % of A's mean; default 1).
    The result is computed now and returned; 201 when stored, 200 when the same upload was
    already stored for this host. An A/A run sets the host's floor (``moved`` lists the
    metrics whose floor it moved); without one the host's stored floor is used."""
    check_upload_size(request)
    stored = services.store_upload(
        file, aa, host=host, ab_name=file.name if file else None,
        aa_name=aa.name if aa else None, min_change_pct=min_change, user=request.auth,
    )
    return Status(201 if stored.created else 200, {
        "created": stored.created,
        "run": selectors.run_out(stored.run) if stored.run else None,
        "aa_run": selectors.run_out(stored.aa_run) if stored.aa_run else None,
        "moved": stored.moved,
    })


@router.get("/runs", response=list[RunOut], summary="Recent A/B and A/A runs, newest first")
def list_runs(request: HttpRequest, limit: int = 50) -> list[dict[str, Any]]:
    return [selectors.run_out(r) for r in selectors.recent_runs(max(0, min(limit, 500)))]


@router.get("/runs/{run_id}", response=RunOut, summary="One run with its stored result")
def get_run(request: HttpRequest, run_id: int) -> dict[str, Any]:
    return selectors.run_out(get_object_or_404(ABRun.objects.select_related("host"), pk=run_id))


class ReleasePrecisionOut(Schema):
    series: str
    function: str
    base: str
    new: str
    metric: str
    unit: str
    n_base: int
    n_new: int
    estimand: str
    scale: str
    min_change_pct: float
    diff: float
    lo: float
    hi: float
    width: float
    min_change: float
    narrow_enough: bool
    excludes_zero: bool
    more_runs_per_release: int
    sentence: str


@router.get(
    "/releases/precision", response={200: ReleasePrecisionOut, 400: ErrorOut},
    summary="How many more runs? Two releases of a trace series, one function (seed 004)",
)
def release_precision(
    request: HttpRequest, series: str, base: str, new: str, function: int,
    metric: str = "self", min_change: float = 1.0,
) -> dict[str, Any]:
    """The anytime-valid interval of the function's change from ``base`` to ``new``
    (independent runs), whether it is narrower than ``min_change`` %, and about how many
    more runs of each release would make it so. ``estimand`` says which change: "change of
    the geometric mean" (``scale`` log, ``unit`` %) when every run's time is > 0, else
    "difference of means" (``scale`` linear, ``unit`` µs, ``min_change`` in µs: that
    percentage of the base's mean). Looking again after more runs keeps its 95 % level."""
    return trace_selectors.release_pair_precision(
        series, base, new, function, metric=metric, min_change_pct=min_change
    )


@router.get("/hosts/{name}/floors", response=list[FloorOut],
            summary="A host's A/A floors, newest first per metric")
def host_floors(request: HttpRequest, name: str) -> list[dict[str, Any]]:
    host = get_object_or_404(ABHost, name=name)
    return [
        {"metric": f.metric, "floor": f.floor, "lo": f.lo, "hi": f.hi, "n": f.n,
         "biased": f.biased, "moved": f.moved, "previous": f.previous, "run": f.run_id,
         "created": f.created.isoformat()}
        for f in selectors.host_floors(host)
    ]
