"""REST API of canaries, mounted at /api/canaries: create, send observation batches, read
the status, continue after a decision, subscribe. Writes need an API token."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from django.shortcuts import get_object_or_404
from ninja import Field, Router, Schema, Status

from deviations.core import access
from deviations.core.api import ErrorOut, TokenAuth
from deviations.experiments.canaries import selectors, services
from deviations.experiments.canaries.models import Canary

router = Router(tags=["canaries"])


class CanaryIn(Schema):
    name: str
    bad: str
    metric: str = ""
    unit: str = ""
    alpha: float = 0.05
    tau: float | None = None
    count: bool = False
    method: str | None = None
    quantile: float = 0.95
    quantiles: list[float] = []
    min_effect: float | None = None
    owners: list[str] = []
    resolution: float = Canary.DEFAULT_RESOLUTION


class BatchIn(Schema):
    batch: str
    arm: str
    # Numbers, checked by the service (``receive_batch``) so that ``true`` is refused
    # with its position rather than stored as 1.0 (issue 23).
    values: list[Any] | None = Field(None, description="numbers")
    timestamps: list[Any] | None = Field(None, description="numbers (seconds)")


class BatchOut(Schema):
    batch: str
    seq: int
    n: int
    duplicate: bool


class StatusOut(Schema):
    id: int
    name: str
    metric: str
    unit: str
    bad: str
    count: bool
    method: str
    method_text: str
    alpha: float
    tau: float | None
    resolution: float
    decision: str
    headline: str
    headline_text: str
    words: list[str]
    quantiles: list[float] = []
    quantile_verdicts: list[dict[str, Any]] = []
    p_value: float
    statistic: float
    n_a: int
    n_b: int
    decided_n_a: int | None
    decided_n_b: int | None
    continued: bool
    accepting: bool
    batches_received: int
    batches_applied: int
    samples_bound: int | None
    samples_bound_more: int | None
    change: float | None
    median_band: list[float | None]
    narrow_enough: bool | None
    samples_needed: int | None
    samples_needed_more: int | None
    page_url: str


class SubscribeIn(Schema):
    email: str


def _status(canary: Canary, change: float | None = None) -> dict[str, Any]:
    return {**selectors.canary_view(canary, change), "page_url": canary.get_absolute_url()}


def _canary(canary_id: int) -> Canary:
    return get_object_or_404(Canary.objects.select_related("state"), pk=canary_id)


@router.post("", auth=TokenAuth(), response={201: StatusOut, 400: ErrorOut},
             summary="Create a canary")
def create(request: HttpRequest, body: CanaryIn) -> Status[dict[str, Any]]:
    """``bad``: higher, lower or any. ``tau`` (0-1, optional): accept 'no difference beyond
    tau' on the distribution functions. ``count``: batches carry event timestamps only.
    ``method``: ``ranks`` (the default: a rank betting test, the fastest on shifts,
    reject only), ``dkw`` (distribution functions; the default when ``tau`` or
    ``quantiles`` is given) or ``signs`` (a sign test on pairs, reject only;
    docs/statistics.md). ``quantiles`` (e.g.
    ``[0.5, 0.9, 0.99]``): judge the canary on these quantiles instead, each with an
    anytime-valid decision (Bonferroni over them; needs ``method`` dkw and no ``tau``).
    ``resolution`` (default 1e-4, 0 = exact): values are rounded down to a relative grid of
    that step, which bounds the canary's memory and keeps the false-alarm guarantee.
    ``min_effect`` (optional, the metric's unit): the smallest change of the median worth
    knowing; with ``ranks`` the test's bets are tuned to it from the first 20 A values
    (not scored), looking for the ``bad`` side only unless ``bad`` is any: it decides
    sooner near that change (docs/statistics.md, "Against the target")."""
    canary = services.create_canary(user=request.auth, **body.dict())
    return Status(201, _status(_canary(canary.pk)))


@router.get("", response=list[StatusOut], summary="Canaries, newest first")
def list_canaries(request: HttpRequest, limit: int = 100) -> list[dict[str, Any]]:
    return [{**selectors.canary_view(c), "page_url": c.get_absolute_url()}
            for c in selectors.canaries()[: max(0, min(limit, 1000))]]


@router.get("/{canary_id}", response=StatusOut, summary="A canary's decision and numbers")
def status(request: HttpRequest, canary_id: int, change: float | None = None) -> dict[str, Any]:
    """``change``: the smallest change of the median worth knowing (default the canary's
    ``min_effect``): ``narrow_enough`` and ``samples_needed`` answer "how many more?"."""
    return _status(_canary(canary_id), change)


@router.post(
    "/{canary_id}/observations", auth=TokenAuth(),
    response={202: BatchOut, 200: BatchOut, 400: ErrorOut, 403: ErrorOut, 404: ErrorOut,
              409: ErrorOut},
    summary="Send a batch of observations of one arm",
)
def observations(request: HttpRequest, canary_id: int, body: BatchIn) -> Status[dict[str, Any]]:
    """``{"batch": "<client id>", "arm": "A"|"B", "values": [...]}`` (a count canary sends
    ``"timestamps"`` instead). Stored whole or refused whole; 202 when new (the state is
    updated by a task), 200 for a batch id already received with the same data, 409 for
    a used id with other data or a canary that has decided."""
    access.check_canary(request.auth, _canary(canary_id))
    receipt = services.receive_batch(
        canary_id, body.batch, body.arm, body.values, body.timestamps
    )
    return Status(200 if receipt.duplicate else 202, {
        "batch": body.batch, "seq": receipt.seq, "n": receipt.n,
        "duplicate": receipt.duplicate,
    })


@router.post("/{canary_id}/continue", auth=TokenAuth(),
             response={200: StatusOut, 403: ErrorOut},
             summary="Take observations again after the decision")
def continue_(request: HttpRequest, canary_id: int) -> Status[dict[str, Any]]:
    canary = _canary(canary_id)
    access.check_canary(request.auth, canary)
    services.continue_canary(canary)
    return Status(200, _status(canary))


@router.post("/{canary_id}/subscribe", auth=TokenAuth(),
             response={200: StatusOut, 400: ErrorOut, 403: ErrorOut},
             summary="Email an address when the canary rejects")
def subscribe(request: HttpRequest, canary_id: int, body: SubscribeIn) -> Status[dict[str, Any]]:
    canary = _canary(canary_id)
    services.subscribe(canary, body.email, request.auth)
    return Status(200, _status(canary))
