"""Tasks of trace series: analyse a series, catch up on missed analyses, email regressions.

Thin and idempotent, keyed by ids (docs/architecture.md, "Tasks"). Task names keep their
historical ``deviations.`` prefix so queued messages survive an upgrade.
"""

from celery import shared_task
from django.db import InterfaceError, OperationalError

from deviations.core.queue import enqueue
from deviations.traces import analysis, notify
from deviations.traces.models import Series


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
        enqueue(analyse_series, series_id)
    return stale


@shared_task(
    name="deviations.notify_series_regressions",
    autoretry_for=(OperationalError, InterfaceError),
    retry_backoff=5,
    max_retries=3,
)
def notify_series_regressions() -> int:
    """Email series subscribers the regressions of releases that arrived since they
    subscribed (the matrix's stored verdicts; each one once)."""
    return notify.notify_series_regressions()
