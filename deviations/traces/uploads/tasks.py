"""The ingest task (parse one uploaded trace, store its times), its sweeper, and the
retention of trace files.

Thin and idempotent. A run is stored before its task is sent; if the broker is down, or
loses the message (a Redis that keeps nothing on disk), or the process that held the run
died, ``requeue_pending`` finds the run in the database and sends it again (beat, every
minute; on the embedded default, the in-process beat of ``deviations.core.beat``).

The task keeps its historical name (``deviations.ingest_run``) so that messages queued by
an earlier version are still consumed after an upgrade.
"""

from datetime import timedelta

from celery import shared_task
from celery.exceptions import SoftTimeLimitExceeded
from django.db import InterfaceError, OperationalError
from django.db.models import Q
from django.utils import timezone

from deviations.core.queue import enqueue
from deviations.traces.models import Run
from deviations.traces.uploads import files, runs

#: A run whose task reached the broker this long ago without being started is sent again
#: (its message was lost, or every worker was busy that long: a second message is harmless).
REQUEUE_AFTER = timedelta(minutes=10)


def _fail(run_id: int, reason: str) -> None:
    name = Run.objects.filter(pk=run_id).values_list("file_name", flat=True).first()
    Run.objects.filter(pk=run_id, status=Run.PENDING).update(
        status=Run.FAILED, error=f"{name}: {reason}"[:2000], finished=timezone.now()
    )


@shared_task(
    name="deviations.ingest_run",
    # Only a lost database connection is worth another try; anything else is a verdict.
    autoretry_for=(OperationalError, InterfaceError),
    retry_backoff=5,
    max_retries=3,
)
def ingest_run(run_id: int) -> str:
    """Parse and store one uploaded trace. A second delivery of the same id does nothing."""
    try:
        # The claim is renewed while the run is processed, in a worker and in-process
        # alike: a claim that stops being renewed is a dead process's, taken over by the
        # sweeper or by sending the file again.
        run = runs.process_run(run_id, lease=True)
    except SoftTimeLimitExceeded:
        _fail(run_id, "the ingest took longer than CELERY_TASK_SOFT_TIME_LIMIT")
        return Run.FAILED
    except (OperationalError, InterfaceError):
        raise
    except Exception as exc:
        # A bug, not the file's fault: fail the run visibly rather than leave it pending.
        _fail(run_id, f"internal error while ingesting ({type(exc).__name__}: {exc})")
        raise
    if run.status == Run.DONE:
        queue_analysis(run.series_id)
    return run.status


def queue_analysis(series_id: int) -> bool:
    """A stored run queues its series' analysis (unless one is queued and not started);
    False when the broker could not be reached (the sweeper sends it later)."""
    # Imported when a run is stored, not with this module (which the web process loads to
    # send the ingest task): the analysis brings SciPy.
    from deviations.traces.tasks import analyse_series, send_once

    return send_once(analyse_series, series_id)


def queue_ingest(run_id: int) -> bool:
    """Send the run's ingest task; record when it reached the broker. False if it did not."""
    sent = enqueue(ingest_run, run_id)
    if sent:
        Run.objects.filter(pk=run_id, status=Run.PENDING).update(queued_at=timezone.now())
    return sent


@shared_task(name="deviations.requeue_pending_runs")
def requeue_pending() -> list[int]:
    """Send again the pending runs whose task never reached the broker, reached it more than
    ``REQUEUE_AFTER`` ago without being started, or whose worker's claim went stale."""
    now = timezone.now()
    waiting = Run.objects.filter(status=Run.PENDING, file_stored=True)
    never = Q(started__isnull=True) & (
        Q(queued_at__isnull=True) | Q(queued_at__lt=now - REQUEUE_AFTER)
    )
    stale = Q(started__lt=runs.stale_claim_before())
    ids = list(waiting.filter(never | stale).order_by("pk").values_list("pk", flat=True))
    return [run_id for run_id in ids if queue_ingest(run_id)]


@shared_task(
    name="deviations.expire_trace_files",
    autoretry_for=(OperationalError, InterfaceError),
    retry_backoff=5,
    max_retries=3,
)
def expire_trace_files() -> dict[str, int]:
    """Delete the trace files past ``DEVIATIONS_KEEP_TRACE_DAYS`` (their runs keep their
    times and say the file is gone), then the stored objects no run refers to."""
    return {"expired": files.expire(), "orphans": files.collect_orphans()}
