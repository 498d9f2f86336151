"""Writes of trace series besides ingest: deleting a series, a release or a run.

A deletion happens in one transaction. Deleting a release or a run also drops the series'
stored analysis (derived data: a column or a run gone means a full recompute) and queues
the analysis once committed; the uploads of deleted runs still waiting for a worker are
removed from disk. The callers check who may delete (``deviations.core.access``); the CLI
needs shell access.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.core.files.storage import default_storage
from django.db import transaction

from deviations.core.queue import enqueue
from deviations.traces.models import AnalysisBlock, Release, Run, Series, SeriesAnalysis


@dataclass(frozen=True)
class Deleted:
    """What a deletion removed, in words for a confirmation or an API answer."""

    series: str
    releases: int
    runs: int

    def line(self) -> str:
        return f"deleted {self.releases} release(s) and {self.runs} run(s) of {self.series}"


def describe(series: Series, release: Release | None = None, run: Run | None = None) -> Deleted:
    """What deleting this would remove (for the question asked before doing it)."""
    if run is not None:
        return Deleted(series.name, 0, 1)
    if release is not None:
        return Deleted(series.name, 1, release.runs.count())
    return Deleted(series.name, series.releases.count(), series.runs.count())


def delete_series(series: Series) -> Deleted:
    done = describe(series)
    uploads = _uploads(Run.objects.filter(series=series))
    with transaction.atomic():
        series.delete()
        transaction.on_commit(lambda: _remove(uploads))
    return done


def delete_release(release: Release) -> Deleted:
    done = describe(release.series, release)
    uploads = _uploads(release.runs.all())
    with transaction.atomic():
        _drop_analysis(release.series_id)
        release.delete()
        _after(release.series_id, uploads)
    return done


def delete_run(run: Run) -> Deleted:
    done = describe(run.series, run=run)
    uploads = _uploads(Run.objects.filter(pk=run.pk))
    with transaction.atomic():
        _drop_analysis(run.series_id)
        run.delete()
        _after(run.series_id, uploads)
    return done


def _uploads(runs: object) -> list[str]:
    return [name for name in runs.exclude(upload="").values_list("upload", flat=True)]  # type: ignore[attr-defined]


def _drop_analysis(series_id: int) -> None:
    AnalysisBlock.objects.filter(series_id=series_id).delete()
    SeriesAnalysis.objects.filter(series_id=series_id).delete()


def _after(series_id: int, uploads: list[str]) -> None:
    from deviations.traces.tasks import analyse_series  # the analysis brings SciPy

    def later() -> None:
        _remove(uploads)
        enqueue(analyse_series, series_id)

    transaction.on_commit(later)


def _remove(uploads: list[str]) -> None:
    for name in uploads:
        default_storage.delete(name)
