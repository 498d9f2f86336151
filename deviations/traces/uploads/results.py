"""Benchmark results into a metric series: parse a CI result file, store it in one transaction.

Every way in (upload page, REST API, CLI ``ingest_results``) calls :func:`store_results`.
The readers (``ingest.results``, through ``ingest.services``) touch no database; this module
does the writing. A results file is small and parsed in the request, so a bad file is
refused at once with its one-line reason ("<file>: <reason>") and nothing is stored: no
release, no metric, no run.

What is stored, per release the file holds (one, or several for a CSV with a ``release``
column): a :class:`~deviations.traces.models.Run` identified by the sha256 of the file's
bytes (and the release, for a file of several releases: the same file sent twice is one
set of runs), ``samples`` = the most replicates of any metric in it, and its
:class:`~deviations.traces.models.RunTimes`: each metric id once per replicate, the values
in the metric's unit. The analysis reads the ``j``-th replicate of every metric as the
run's ``j``-th sample (``traces.analysis.Columns``).

Each metric's :class:`~deviations.traces.models.Metric` keeps its unit and direction:
values in another unit of the same kind (ms where ns were stored) are converted, another
kind (bytes where seconds were stored) is refused; a direction the file states replaces
one taken from the unit, never one a user set.
"""

from __future__ import annotations

import hashlib
import uuid
from collections import defaultdict
from dataclasses import dataclass, field
from typing import IO, Any

import numpy as np
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from deviations.core import access
from deviations.core.errors import TooLargeError, UserError
from deviations.core.models import Ownership
from deviations.core.versions import check_order, check_revision, check_version
from deviations.traces.models import Metric, Release, Run, RunTimes, Series
from deviations.traces.notify import record_series_alerts
from deviations.traces.uploads.runs import (
    IngestError,
    _function_ids,
    get_release,
    safe_file_name,
)
from deviations.traces.uploads.tasks import queue_analysis
from ingest.services import (
    HEAD_BYTES,
    MetricValues,
    ResultsError,
    ResultSet,
    convert_values,
    direction_from_unit,
    looks_like_trace,
    parse_results,
)

#: Largest results file accepted (compressed and decompressed): CI result files are
#: kilobytes to a few megabytes.
MAX_RESULTS_BYTES = 64 * 1024**2


@dataclass
class StoredResults:
    """What one results file became: its format, and per release the run (``duplicate``:
    these bytes were stored before) with its metric and value counts."""

    file_name: str
    format: str
    runs: list[tuple[Run, bool]] = field(default_factory=list)
    metrics: int = 0
    values: int = 0
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "file": self.file_name,
            "format": self.format,
            "metrics": self.metrics,
            "values": self.values,
            "notes": list(self.notes),
            "runs": [{"id": run.pk, "release": run.release.version, "duplicate": dup,
                      "samples": run.samples} for run, dup in self.runs],
        }


def results_upload(series_name: str, files: list[Any]) -> bool:
    """Whether an upload (page or API) is benchmark results, not traces: the series'
    kind, or for a new series, the first file's head (``ingest.sniff``)."""
    kind = Series.objects.filter(name=series_name).values_list("kind", flat=True).first()
    if kind is not None and Run.objects.filter(series__name=series_name).exists():
        return bool(kind == Series.METRICS)
    if not files:
        return kind == Series.METRICS
    stream = files[0]
    head = stream.read(HEAD_BYTES)
    stream.seek(0)
    return not looks_like_trace(head)


def read_upload(stream: IO[bytes], file_name: str) -> bytes:
    """An uploaded results file's bytes (page and API); ``TooLargeError`` (413) over
    ``MAX_RESULTS_BYTES``, read no further than one byte past it."""
    data = stream.read(MAX_RESULTS_BYTES + 1)
    if len(data) > MAX_RESULTS_BYTES:
        raise TooLargeError(f"{safe_file_name(file_name)}: larger than the limit of "
                            f"{MAX_RESULTS_BYTES:,} bytes for a results file")
    return data


def parse_file(data: bytes, file_name: str, fmt: str | None = None) -> ResultSet:
    """The parsed results; ``ResultsError`` ("<file>: <reason>") when unusable."""
    return parse_results(data, display_name=file_name, format=fmt or None,
                         max_bytes=min(MAX_RESULTS_BYTES, settings.DEVIATIONS_MAX_TRACE_BYTES))


def store_results(
    series_name: str,
    data: bytes,
    file_name: str,
    *,
    release: str | None = None,
    order: int | None = None,
    fmt: str | None = None,
    user: Any = None,
    batch: uuid.UUID | None = None,
    analyse: bool = True,
    revision: str | None = None,
) -> StoredResults:
    """Parse one results file and store it into the metric series, whole or not at all.

    ``release`` (with its ``order``) is the release every value belongs to; a CSV with a
    ``release`` column names its own releases (then ``release`` must be empty or the one
    release the file names). The series is created as a metric series if new; a trace
    series with runs is refused. ``revision``: the commit ``release`` was built from
    (``runs.get_release``: another revision than the release's is refused with 409).
    ``user`` must be allowed to write to the series
    (``core.access``). The analysis is queued once the transaction commits.
    Raises ``ResultsError`` (a bad file), ``IngestError`` (bad series, release or order,
    a unit that does not fit the stored one), ``ForbiddenError``.
    """
    name = safe_file_name(file_name)
    if release is not None:
        try:
            check_version(release)
            check_order(order)
            if revision:
                check_revision(revision)
        except UserError as exc:
            raise IngestError(exc.message) from None
    elif revision:
        raise IngestError("a revision names the commit of one release: give the release too")
    if user is not None:
        access.check_write(user, Ownership.SERIES, [series_name])
    if not data:
        raise ResultsError(f"{name}: empty file")
    parsed = parse_file(data, name, fmt)
    by_release = _by_release(parsed, name, release)
    sha = hashlib.sha256(data).hexdigest()
    out = StoredResults(name, parsed.format, notes=parsed.notes)
    with transaction.atomic():
        series = _metric_series(series_name)
        for version, metrics in by_release.items():
            rel = get_release(series_name, version, order if version == release else None,
                              kind=Series.METRICS,
                              revision=revision if version == release else None)
            run_sha = sha if len(by_release) == 1 else hashlib.sha256(
                f"{sha}\0{version}".encode()).hexdigest()
            run, duplicate = _store_release(series, rel, metrics, run_sha, name, len(data),
                                            parsed, user, batch)
            out.runs.append((run, duplicate))
            out.metrics = max(out.metrics, len(metrics))
            out.values += sum(len(m.values) for m in metrics)
        if user is not None:
            access.claim(user, Ownership.SERIES, [series_name])
        if analyse and any(not dup for _, dup in out.runs):
            transaction.on_commit(lambda: queue_analysis(series.pk))
    return out


def _by_release(parsed: ResultSet, name: str, release: str | None
                ) -> dict[str, list[MetricValues]]:
    named = {m.release for m in parsed.metrics}
    if named == {None}:
        if release is None:
            raise IngestError(f"{name}: give the release these results belong to "
                              "(the file does not name one)")
        return {release: list(parsed.metrics)}
    if None in named:
        raise ResultsError(f"{name}: some values name their release, others do not")
    if release is not None and named != {release}:
        raise IngestError(f"{name}: the file names its releases ({len(named)}); send it "
                          f"without a release, or only values of release {release!r}")
    out: dict[str, list[MetricValues]] = defaultdict(list)
    for m in parsed.metrics:
        try:
            check_version(m.release or "")
        except UserError as exc:
            raise ResultsError(f"{name}: {exc.message}") from None
        out[m.release or ""].append(m)
    return dict(out)


def _metric_series(series_name: str) -> Series:
    series, created = Series.objects.select_for_update().get_or_create(
        name=series_name, defaults={"kind": Series.METRICS})
    if not created and not series.is_metrics:
        if Run.objects.filter(series=series).exists():
            raise IngestError(
                f"series {series_name!r} holds trace files; benchmark results go into a "
                "metric series of their own (another name)")
        series.kind = Series.METRICS
        series.min_absolute_change_us = 0.0
        series.save(update_fields=["kind", "min_absolute_change_us"])
    return series


def _store_release(series: Series, release: Release, metrics: list[MetricValues], sha: str,
                   name: str, size: int, parsed: ResultSet, user: Any,
                   batch: uuid.UUID | None) -> tuple[Run, bool]:
    existing = Run.objects.filter(series=series, sha256=sha).first()
    if existing is not None and existing.status == Run.DONE:
        return existing, True
    ids = _function_ids(series, [m.name for m in metrics])
    values = _metric_values(ids, metrics, name)
    now = timezone.now()
    run = existing or Run(series=series, sha256=sha)
    run.release, run.file_name, run.size_bytes = release, name, size
    run.status, run.error, run.finished, run.started = Run.DONE, "", now, now
    run.options = {"format": parsed.format}
    run.summary = {"format": parsed.format, "metrics": len(metrics),
                   "values": int(sum(len(v) for v in values)), "notes": list(parsed.notes)}
    run.samples = max(len(v) for v in values)
    run.upload_batch = batch
    run.uploaded_by = user if getattr(user, "is_authenticated", False) else None
    run.save()
    RunTimes.objects.filter(run=run).delete()
    fids = np.repeat(ids, [len(v) for v in values])
    flat = np.concatenate(values)
    RunTimes.pack(run, fids, flat, flat, np.ones(len(flat), dtype=np.int64)).save(
        force_insert=True)
    return run, False


def _metric_values(ids: np.ndarray, metrics: list[MetricValues], name: str
                   ) -> list[np.ndarray]:
    """Each metric's values in its stored unit, creating or updating its ``Metric`` row."""
    known = {m.function_id: m for m in Metric.objects.select_for_update().filter(
        function_id__in=ids.tolist())}
    out = []
    for fid, m in zip(ids.tolist(), metrics, strict=True):
        row = known.get(fid)
        values: tuple[float, ...] | None = m.values
        if row is None:
            Metric.objects.create(
                function_id=fid, unit=m.unit,
                direction=m.direction or direction_from_unit(m.unit),
                source="format" if m.direction else "unit",
                threshold_percent=m.threshold_percent)
        else:
            if row.unit != m.unit:
                values = convert_values(m.values, m.unit, row.unit)
                if values is None:
                    raise IngestError(
                        f"{name}: metric {m.name!r} is in {m.unit or 'no unit'!s}, stored "
                        f"in {row.unit or 'no unit'!s} until now; a unit of another kind "
                        "would mix numbers that cannot be compared")
            changed = []
            if m.direction and row.source != "user" and row.direction != m.direction:
                row.direction, row.source = m.direction, "format"
                changed += ["direction", "source"]
            if m.threshold_percent is not None and row.threshold_percent != m.threshold_percent:
                row.threshold_percent = m.threshold_percent
                changed.append("threshold_percent")
            if changed:
                row.save(update_fields=changed)
        out.append(np.asarray(values, dtype=np.float64))
    return out


def set_metric(series: Series, metric_name: str, *, direction: str | None = None,
               unit: str | None = None, user: Any = None) -> Metric:
    """A user's choice of a metric's direction (kept over what uploads say) or unit label.

    The stored analysis needs no recomputation: directions are applied when it is read
    (``stats.releases.oriented``); the series' alerts are made to match at once.
    Raises ``IngestError`` for an unknown metric or value.
    """
    if user is not None:
        access.check_write(user, Ownership.SERIES, [series.name])
    row = Metric.objects.filter(function__series=series, function__name=metric_name).first()
    if row is None:
        raise IngestError(f"series {series.name!r} has no metric {metric_name!r}")
    fields = []
    if direction is not None:
        if direction not in dict(Metric.DIRECTION_CHOICES):
            raise IngestError(f"direction {direction!r}: lower_is_better or higher_is_better")
        row.direction, row.source = direction, "user"
        fields += ["direction", "source"]
    if unit is not None:
        if len(unit) > 40 or not unit.isprintable():
            raise IngestError("unit: at most 40 printable characters")
        row.unit = unit
        fields.append("unit")
    if fields:
        row.save(update_fields=fields)
        # Its alerts follow at once: a regression may now be an improvement.
        record_series_alerts(series.pk)
    return row


@dataclass
class ResultsUpload:
    """One file of an upload (page or API): what it became, or why it was refused (then
    ``failed`` is the failed run that says so on the upload's status page, when the file
    had a release to belong to)."""

    file_name: str
    stored: StoredResults | None = None
    error: str = ""
    failed: Run | None = None


def submit_results(series_name: str, files: list[tuple[str, IO[bytes]]], *,
                   release: str | None, order: int | None = None, fmt: str | None = None,
                   user: Any, batch: uuid.UUID, revision: str | None = None
                   ) -> list[ResultsUpload]:
    """Store each results file of an upload on its own: a bad file is refused alone (a
    failed run of the release naming it and its reason, so the status page lists it as
    for traces; sending the same bytes again retries it) and the others are stored.
    Errors that concern the request, not a file (bad series, release or order, no
    permission) are raised before anything is stored."""
    access.check_write(user, Ownership.SERIES, [series_name])
    if release is not None:
        with transaction.atomic():
            _metric_series(series_name)
            get_release(series_name, release, order, kind=Series.METRICS, revision=revision)
    elif revision:
        raise IngestError("a revision names the commit of one release: give the release too")
    out = []
    for file_name, stream in files:
        name = safe_file_name(file_name)
        data = b""
        try:
            data = read_upload(stream, name)
            stored = store_results(series_name, data, name, release=release, order=order,
                                   fmt=fmt, user=user, batch=batch, revision=revision)
        except (ResultsError, IngestError, TooLargeError) as exc:
            failed = (_record_failed(series_name, release, data, name, exc.message, user,
                                     batch) if release is not None else None)
            out.append(ResultsUpload(name, error=exc.message, failed=failed))
        else:
            out.append(ResultsUpload(name, stored=stored))
    return out


def _record_failed(series_name: str, release: str, data: bytes, name: str, reason: str,
                   user: Any, batch: uuid.UUID) -> Run:
    sha = hashlib.sha256(data).hexdigest()
    with transaction.atomic():
        rel = Release.objects.get(series__name=series_name, version=release)
        run = Run.objects.select_for_update().filter(series=rel.series, sha256=sha).first()
        if run is not None and run.status == Run.DONE:
            return run  # these bytes were stored before (for another release)
        run = run or Run(series=rel.series, sha256=sha)
        now = timezone.now()
        run.release, run.file_name, run.size_bytes = rel, name, len(data)
        run.status, run.error, run.started, run.finished = Run.FAILED, reason[:2000], now, now
        run.upload_batch, run.summary = batch, None
        run.uploaded_by = user if getattr(user, "is_authenticated", False) else None
        run.save()
    return run
