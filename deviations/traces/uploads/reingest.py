"""Re-measure the stored runs of a series with another thread selection
(``manage.py reingest``): the files are kept, so nothing needs uploading again.

Each run is re-measured on its own: its stored file is parsed outside any transaction,
then one transaction replaces the run's times and call tree, thread selection, summary and status (a
selection the file does not hold makes the run ``failed`` with the reason, as at upload;
re-measuring with the first selection brings its times back) and drops the series' stored
analysis (derived data: the times of a run it had seen changed), so that an interruption
leaves every run whole, under one selection or the other, and the analysis queued
afterwards (or the beat's sweeper, finding none) recomputes the series whole.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone

from deviations.traces.models import Run, RunCalls, RunTimes, Series
from deviations.traces.services import drop_analysis
from deviations.traces.uploads import runs
from deviations.traces.uploads.runs import ThreadOptions
from ingest.services import TraceError


@dataclass(frozen=True)
class Remeasured:
    """What happened to one run: ``done``, ``failed`` or ``skipped``, in one line."""

    run_id: int
    outcome: str
    line: str


def series_runs(series: Series) -> list[Run]:
    """The series' runs in release order, as ``reingest`` takes them."""
    return list(Run.objects.filter(series=series).select_related("release")
                .order_by("release__sort_key", "release_id", "created", "id"))


def reingest_run(run: Run, options: ThreadOptions) -> Remeasured:
    """Re-measure one run from its stored file with ``options`` (see the module)."""
    name = run.file_name
    if run.status == Run.PENDING:
        return Remeasured(run.pk, "skipped", f"skipped {name}: run {run.pk} is still "
                          "waiting to be ingested (with its own thread selection)")
    if not run.file_stored:
        when = (f"was deleted on {run.file_removed:%Y-%m-%d}" if run.file_removed
                else "is not stored")
        return Remeasured(run.pk, "skipped", f"skipped {name}: the file of run {run.pk} "
                          f"{when}; it keeps its times measured with {_words(run.options)}")
    parsed = runs.parse_stored(run, options.as_dict())
    with transaction.atomic():
        locked = Run.objects.select_for_update().filter(pk=run.pk).first()
        if locked is None or locked.status == Run.PENDING or not locked.file_stored:
            return Remeasured(run.pk, "skipped", f"skipped {name}: run {run.pk} changed "
                              "meanwhile (deleted, or its file expired)")
        RunTimes.objects.filter(run=locked).delete()
        RunCalls.objects.filter(run=locked).delete()
        locked.options = options.as_dict()
        locked.finished = timezone.now()
        if isinstance(parsed, TraceError):
            locked.status, locked.error, locked.summary = Run.FAILED, str(parsed)[:2000], None
        else:
            runs.write_times(locked, parsed)
            locked.status, locked.error = Run.DONE, ""
            locked.summary = parsed.summary.to_dict()
        locked.save(update_fields=["options", "finished", "status", "error", "summary"])
        drop_analysis(locked.series_id)
    if isinstance(parsed, TraceError):
        return Remeasured(run.pk, "failed", f"FAILED {parsed}")
    return Remeasured(run.pk, "done", f"ok {name}: run {run.pk}, {len(parsed.names)} "
                      f"functions, {parsed.summary.slices} slices")


def _words(options: dict[str, object] | None) -> str:
    options = options or {}
    if options.get("all_threads"):
        return "all threads"
    return (f"{options.get('thread_name', 'CrRendererMain')} of "
            f"{options.get('process_name', 'Renderer')}")
