"""The ingest task: parse one uploaded trace and store its times. Thin and idempotent.

The task keeps its historical name (``deviations.ingest_run``) so that messages queued by
an earlier version are still consumed after an upgrade.
"""

from celery import shared_task
from celery.exceptions import SoftTimeLimitExceeded
from django.db import InterfaceError, OperationalError
from django.utils import timezone

from deviations.traces.models import Run
from ingest import runs
from ingest.signals import run_stored


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
        run = runs.process_run(run_id)
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
        run_stored.send(sender=Run, series_id=run.series_id)
    return run.status
