"""Tasks of trace series: analyse a series (then record its alerts and email the groups
that are due), catch up on missed analyses.

Thin and idempotent, keyed by ids (docs/architecture.md, "Tasks"). Task names keep their
historical ``deviations.`` prefix so queued messages survive an upgrade.
"""

from celery import shared_task
from django.db import InterfaceError, OperationalError

from deviations.core.queue import enqueue
from deviations.traces import analysis, notify, store
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
    analysis up to date. Its alerts follow (in-process in the embedded default), only when
    this call stored a new analysis: the others would re-sync the same verdicts (seconds
    for a series with thousands of alerts); due groups are also emailed by the beat.
    """
    before = store.generation(series_id)
    result = analysis.analyse_series(series_id)
    if store.generation(series_id) != before:
        enqueue(series_alerts, series_id)
    return result


@shared_task(
    name="deviations.series_alerts",
    autoretry_for=(OperationalError, InterfaceError),
    retry_backoff=5,
    max_retries=3,
)
def series_alerts(series_id: int) -> int:
    """Record the series' verdicts as alerts, then email the alert groups that are due;
    returns the emails sent (a second run records and sends nothing new)."""
    return notify.after_analysis(series_id)


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
    """The former beat entry (before alert groups), kept so that queued messages are
    consumed: records every series' alerts and emails the groups that are due."""
    sent = 0
    for series_id in Series.objects.values_list("pk", flat=True):
        sent += notify.after_analysis(series_id)
    return sent
