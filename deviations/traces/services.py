"""Writes of trace series besides ingest: deleting a series, a release or a run.

A deletion happens in one transaction. Deleting a release or a run also drops the series'
stored analysis (derived data: a column or a run gone means a full recompute) and queues
the analysis once committed; the kept files of the deleted runs are deleted once
committed, unless a run of another series was sent the same bytes
(``uploads.files.release``). The callers check who may delete
(``deviations.core.access``); the CLI needs shell access.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db import transaction

from deviations.core.queue import enqueue
from deviations.traces.models import AnalysisBlock, Release, Run, Series, SeriesAnalysis
from deviations.traces.uploads import files


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
    stored = _stored(Run.objects.filter(series=series))
    with transaction.atomic():
        series.delete()
        transaction.on_commit(lambda: _remove(stored))
    return done


def delete_release(release: Release) -> Deleted:
    done = describe(release.series, release)
    stored = _stored(release.runs.all())
    with transaction.atomic():
        drop_analysis(release.series_id)
        release.delete()
        _after(release.series_id, stored)
    return done


def delete_run(run: Run) -> Deleted:
    done = describe(run.series, run=run)
    stored = _stored(Run.objects.filter(pk=run.pk))
    with transaction.atomic():
        drop_analysis(run.series_id)
        run.delete()
        _after(run.series_id, stored)
    return done


def _stored(runs: object) -> list[str]:
    """The digests of these runs' kept files (read before the rows go)."""
    return list(runs.filter(file_stored=True).values_list("sha256", flat=True))  # type: ignore[attr-defined]


def drop_analysis(series_id: int) -> None:
    """Forget the series' stored analysis (derived data): the next one is a full recompute."""
    AnalysisBlock.objects.filter(series_id=series_id).delete()
    SeriesAnalysis.objects.filter(series_id=series_id).delete()


def _after(series_id: int, stored: list[str]) -> None:
    from deviations.traces.tasks import analyse_series  # the analysis brings SciPy

    def later() -> None:
        _remove(stored)
        enqueue(analyse_series, series_id)

    transaction.on_commit(later)


def _remove(stored: list[str]) -> None:
    for sha256 in dict.fromkeys(stored):
        files.release(sha256)
