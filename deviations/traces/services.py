"""Writes of trace series besides ingest: deleting a series, a release or a run; a
release's revision and a series' log-URL template (owners: ``core.access``; the CLI passes
no user, it needs shell access).

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

from deviations.core import access
from deviations.core.models import Ownership
from deviations.core.queue import enqueue
from deviations.core.versions import check_log_url_template, check_revision
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


def set_release_revision(release: Release, revision: str, user: object = None) -> Release:
    """Change (or, with "", clear) the commit a release was built from: the explicit update
    that uploads naming another revision are refused and pointed to. ``user``: None from
    the CLI, else an owner of the series (``ForbiddenError``); a bad revision is a
    ``UserError`` naming it."""
    revision = revision.strip()
    if revision:
        check_revision(revision)
    if user is not None:
        access.check_write(user, Ownership.SERIES, [release.series.name])
    release.revision = revision
    release.save(update_fields=["revision"])
    return release


def set_log_url_template(series: Series, template: str, user: object = None) -> Series:
    """Set (or, with "", remove) the series' log-URL template, e.g.
    ``https://github.com/o/r/compare/{from}...{to}``; owners only, as above."""
    template = template.strip()
    if template:
        check_log_url_template(template)
    if user is not None:
        access.check_write(user, Ownership.SERIES, [series.name])
    series.log_url_template = template
    series.save(update_fields=["log_url_template"])
    return series


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
