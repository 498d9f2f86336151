"""Celery tasks: thin, idempotent, keyed by ids (docs/architecture.md, "Tasks")."""

from celery import shared_task
from celery.exceptions import SoftTimeLimitExceeded
from django.db import InterfaceError, OperationalError
from django.utils import timezone

from deviations import analysis
from deviations.models import Run, Series
from ingest import runs


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
        analyse_series.delay(run.series_id)
    return run.status


@shared_task(
    name="deviations.analyse_series",
    autoretry_for=(OperationalError, InterfaceError),
    retry_backoff=5,
    max_retries=3,
)
def analyse_series(series_id: int) -> str:
    """Recompute a series' statistics unless a stored analysis already saw every run.

    Each finished run sends one; the first to run covers the others, which then find the
    analysis up to date.
    """
    return analysis.analyse_series(series_id)


@shared_task(name="deviations.analyse_stale_series")
def analyse_stale_series() -> list[int]:
    """Queue the analysis of every series whose stored analysis misses a finished run.

    Each finished run queues its series' analysis; this beat entry catches the ones lost
    on the way (a broker that restarted without persistence, a worker killed past its
    retries). Two queries per series when nothing is stale.
    """
    stale = [s.pk for s in Series.objects.all() if not analysis.is_up_to_date(s)]
    for series_id in stale:
        analyse_series.delay(series_id)
    return stale


# --- Histograms: detection after ingest and on a schedule, alerts -------------------------


@shared_task(
    name="deviations.detect_histogram_changes",
    autoretry_for=(OperationalError, InterfaceError),
    retry_backoff=5,
    max_retries=3,
)
def detect_histogram_changes(probe_ids: list[int] | None = None) -> int:
    """Scan these probes (all when None) and alert on the changes this pass stored; a
    second run stores nothing new and so alerts nobody."""
    from deviations.histogram_analysis import detect

    new = detect(probe_ids)
    if new:
        notify_histogram_changes.delay(new)
    return len(new)


@shared_task(
    name="deviations.notify_histogram_changes",
    autoretry_for=(OperationalError, InterfaceError),
    retry_backoff=5,
    max_retries=3,
)
def notify_histogram_changes(change_ids: list[int]) -> int:
    """Email each change's subscribers; an alert already claimed is never sent again."""
    from deviations import alerts

    return alerts.notify_histogram_changes(change_ids)


@shared_task(
    name="deviations.notify_series_regressions",
    autoretry_for=(OperationalError, InterfaceError),
    retry_backoff=5,
    max_retries=3,
)
def notify_series_regressions() -> int:
    """Email series subscribers the regressions of releases that arrived since they
    subscribed (the matrix's stored verdicts; each one once)."""
    from deviations import alerts

    return alerts.notify_series_regressions()


@shared_task(
    name="deviations.send_alert_digests",
    autoretry_for=(OperationalError, InterfaceError),
    retry_backoff=5,
    max_retries=3,
)
def send_alert_digests() -> int:
    """One email per address with the alerts queued for its daily digest."""
    from deviations import alerts

    return alerts.send_digests()
