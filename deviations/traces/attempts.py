"""The analysis task's attempts: an analysis that cannot finish is not sent for ever.

Issue 24: an analysis killed at the task's time limit (or for memory) was sent again by the
beat's ``analyse_stale_series`` every 2 minutes, for ever, and a long one that was still
running was sent again beside itself. Each attempt now records, on its series, when it
started and the newest finished run it covers (``runs_until``); its end clears the start.
An attempt that stops at the soft time limit or runs out of memory records why
(``fail``); one that was killed outright (the hard limit, the kernel's OOM killer) is found
by the sweeper, which sees an attempt started longer ago than the hard limit and never
ended, and records why for it. The sweeper then sends no attempt for the same runs: a new
finished run (a new ``runs_until``) or ``manage.py analyse`` tries again, and the series
page and API say what happened.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Max
from django.utils import timezone

from deviations.traces.models import Run, Series


def runs_until(series_id: int) -> datetime | None:
    """When the series' newest finished run finished: what an analysis now would cover."""
    return Run.objects.filter(series_id=series_id, status=Run.DONE).aggregate(
        t=Max("finished"))["t"]


def begin(series_id: int, until: datetime | None) -> None:
    Series.objects.filter(pk=series_id).update(analysis_started=timezone.now(),
                                               analysis_runs_until=until)


def end(series_id: int) -> None:
    """The attempt stopped on an error: no longer running (a failure is ``fail``'s)."""
    Series.objects.filter(pk=series_id).update(analysis_started=None)


def finish(series_id: int) -> None:
    """The attempt ended: its start is cleared, and any failure it follows is forgotten."""
    Series.objects.filter(pk=series_id).update(analysis_started=None, analysis_failure="",
                                               analysis_failed_at=None)


def fail(series_id: int, until: datetime | None, reason: str) -> None:
    Series.objects.filter(pk=series_id).update(
        analysis_started=None, analysis_runs_until=until, analysis_failure=reason,
        analysis_failed_at=timezone.now())


def touch(series_id: int) -> None:
    """A chunk of the running attempt starts: the attempt is alive (the sweeper counts the
    hard limit from here, per chunk, not for the whole chord)."""
    Series.objects.filter(pk=series_id, analysis_started__isnull=False).update(
        analysis_started=timezone.now())


def fail_running(series_id: int, reason: str) -> None:
    """A part of the running attempt (a chunk of a chunked analysis, issue 24) failed: the
    attempt failed, for the runs it covers (recorded by ``begin``)."""
    Series.objects.filter(pk=series_id).update(
        analysis_started=None, analysis_failure=reason, analysis_failed_at=timezone.now())


def failure(series_id: int) -> str:
    return str(Series.objects.filter(pk=series_id).values_list(
        "analysis_failure", flat=True).first() or "")


def hard_limit() -> timedelta:
    return timedelta(seconds=settings.CELERY_TASK_TIME_LIMIT)


def to_send(series: Series, until: datetime | None, *, in_process: bool) -> bool:
    """Whether the sweeper should send an analysis of ``series``, whose newest finished run
    finished at ``until`` (its stored analysis misses a run). No when an attempt for the
    same runs failed, or is running; an attempt for them that started longer ago than the
    hard time limit and never ended was killed: recorded as failed, and no."""
    if series.analysis_runs_until != until:
        return True  # something changed since the last attempt (or there was none)
    if series.analysis_failure:
        return False
    if series.analysis_started is None:
        return True  # the last attempt for these runs ended; this one is a lost message
    if in_process:  # no time limit applies; the embedded beat sends it again
        return True
    if timezone.now() - series.analysis_started <= hard_limit() + timedelta(seconds=60):
        return False  # running: sending it again would run it twice
    fail(series.pk, until, killed_reason())
    return False


def redelivered_after_kill(series_id: int, until: datetime | None) -> bool:
    """An analysis message delivered again after its worker was lost (``acks_late`` with
    ``reject_on_worker_lost``: the OOM killer, a SIGKILL) while its attempt for the same
    runs had begun and never ended: that attempt was killed. Recorded as failed, so the
    message is not run again (it would be killed again, for ever); True then."""
    found = Series.objects.filter(pk=series_id).values_list(
        "analysis_started", "analysis_runs_until").first()
    if found is None or found[0] is None or found[1] != until:
        return False
    fail(series_id, until, killed_reason())
    return True


def limit_reason() -> str:
    return (f"stopped at the task's time limit ({settings.CELERY_TASK_SOFT_TIME_LIMIT} s): "
            "the series is too large for one analysis task at this limit. Raise "
            "CELERY_TASK_SOFT_TIME_LIMIT and CELERY_TASK_TIME_LIMIT, or run "
            "`manage.py analyse --series NAME` outside the workers; a new run tries again")


def memory_reason() -> str:
    return ("ran out of memory: the series is too large for one analysis in this worker. "
            "Give the workers more memory, or run `manage.py analyse --series NAME` on a "
            "larger machine; a new run tries again")


def killed_reason() -> str:
    return (f"did not finish: its worker was stopped (the task's hard time limit of "
            f"{settings.CELERY_TASK_TIME_LIMIT} s, or its memory) before it ended. Raise the "
            "limits or the workers' memory, or run `manage.py analyse --series NAME`; a new "
            "run tries again")
