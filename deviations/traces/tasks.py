"""Tasks of trace series: analyse a series (then record its alerts and email the groups
that are due), catch up on missed analyses.

Thin and idempotent, keyed by ids (docs/architecture.md, "Tasks"). Task names keep their
historical ``deviations.`` prefix so queued messages survive an upgrade.
"""

import os
import time
from typing import Any

from celery import shared_task
from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.core.cache import cache
from django.db import InterfaceError, OperationalError
from redis.exceptions import RedisError

from deviations.core.locks import site_lock_folder
from deviations.core.queue import enqueue
from deviations.traces import analysis, attempts, notify, store
from deviations.traces.models import Series

#: How long a "queued" mark (``send_once``) lives if its message is lost; the beat's
#: ``analyse_stale_series`` finds such a series within 2 minutes anyway.
QUEUED_MARK_SECONDS = 600


def _coalesces() -> bool:
    """Marks need a worker (in-process, each task has run before its sender goes on) and a
    cache every process shares (the broker's Redis; local memory is per process)."""
    from deviations.core.worker import app

    backend = str(settings.CACHES["default"]["BACKEND"])
    return not app.conf.task_always_eager and backend.endswith("RedisCache")


def _mark(task: Any, series_id: int) -> str:
    return f"queued:{task.name}:{series_id}"


def _in_process() -> bool:
    from deviations.core.worker import app

    return bool(app.conf.task_always_eager)


#: How long one request goes on running the task in-process for callers that came while
#: it ran, in seconds: a burst of uploads is analysed before the last request answers, a
#: steady stream no longer holds one request for ever.
IN_PROCESS_SECONDS = 30.0


def _run_once_in_process(task: Any, series_id: int) -> bool:
    """The embedded default's ``send_once``: the task runs here, in-process, unless the same
    task of the series is running in another request (thread or server process); that
    one runs it again before it lets go, so it sees what the caller stored.

    Ten concurrent uploads to one series on SQLite otherwise made ten analyses at once,
    each of every run (measured: an upload cost 375 ms of CPU in the request under the
    load benchmark). An exclusive ``flock`` on a file per task and series (in
    ``core.locks.site_lock_folder``) says who runs; a caller that finds it taken leaves a
    *dirty* file and returns; the holder clears the file before each run and runs again
    while it finds it back, then checks once more after letting go (a caller that came
    between its last check and the release found the lock still taken). The caller's data
    was committed before it looked (``transaction.on_commit``), so the next run of the
    holder reads it.

    A holder starts no new run after :data:`IN_PROCESS_SECONDS` (issue 23: under a steady
    stream of uploads the request holding the analysis never returned; one took 365 s):
    then it lets go with the dirty file left, for the next caller or the embedded beat's
    ``analyse_stale_series`` (every 2 minutes) to take.
    """
    import fcntl

    folder = site_lock_folder()
    name = f"{task.name}-{int(series_id)}"
    lock_path, dirty = folder / f"{name}.lock", folder / f"{name}.dirty"
    dirty.touch()
    runs, since = 0, time.monotonic()

    def more() -> bool:
        return dirty.exists() and (runs == 0 or time.monotonic() - since < IN_PROCESS_SECONDS)

    while more():
        with lock_path.open("a+b") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return True  # the holder finds the dirty file and runs again
            try:
                while more():
                    dirty.unlink(missing_ok=True)
                    runs += 1
                    enqueue(task, series_id)  # in-process: runs here; errors propagate
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)
    return True


def send_once(task: Any, series_id: int) -> bool:
    """``enqueue(task, series_id)`` unless the same task of the series is queued and not
    started yet: that one will see what the caller stored, since a task drops its mark
    (``_started``) before it reads anything. A burst of runs of one series then costs one
    analysis, not one per run (a worker that falls behind catches up at once). False when
    the broker is unreachable (the mark is dropped: the next run tries again). In-process
    (the embedded default), one run of the task at a time per series, see
    ``_run_once_in_process``."""
    if _in_process() and os.name == "posix":
        return _run_once_in_process(task, series_id)
    if not _coalesces():
        return enqueue(task, series_id)
    key = _mark(task, series_id)
    try:
        if not cache.add(key, 1, QUEUED_MARK_SECONDS):
            return True
    except RedisError:  # Redis is the broker too: enqueue says what to do
        return enqueue(task, series_id)
    if enqueue(task, series_id):
        return True
    try:
        cache.delete(key)
    except RedisError:  # the mark expires; the beat's sweeper catches the series first
        pass
    return False


def _started(task: Any, series_id: int) -> None:
    """From now on a new run (or analysis) sends the task again (``send_once``)."""
    if _coalesces():
        try:
            cache.delete(_mark(task, series_id))
        except RedisError:  # unreachable: its mark expires, nothing is lost
            pass


@shared_task(
    name="deviations.analyse_series",
    autoretry_for=(OperationalError, InterfaceError),
    retry_backoff=5,
    max_retries=3,
)
def analyse_series(series_id: int) -> str:
    """Recompute a series' statistics unless a stored analysis already saw every run.

    Each finished run sends one unless one is queued already (``send_once``); the first
    to run covers the others, which then find the analysis up to date. Its alerts follow
    (in-process in the embedded default), only when this call stored a new analysis: the
    others would re-sync the same verdicts (seconds for a series with thousands of
    alerts); due groups are also emailed by the beat.
    """
    _started(analyse_series, series_id)
    before = store.generation(series_id)
    until = attempts.runs_until(series_id)
    delivery = getattr(analyse_series.request, "delivery_info", None) or {}
    if delivery.get("redelivered") and attempts.redelivered_after_kill(series_id, until):
        return "killed before: not run again"
    try:
        result = analysis.analyse_series(
            series_id, fan_out=None if _in_process() else _fan_out)
        if result.startswith(analysis.SENT):
            return result  # the chord's last step (finish_analysis) sends the alerts
    except SoftTimeLimitExceeded:
        # Recorded, not retried: the sweeper sends none for these runs again (issue 24:
        # it sent a series too large for the limit every 2 minutes, for ever).
        attempts.fail(series_id, until, attempts.limit_reason())
        return "stopped at the time limit"
    except MemoryError:
        attempts.fail(series_id, until, attempts.memory_reason())
        return "out of memory"
    if store.generation(series_id) != before:
        send_once(series_alerts, series_id)
    return result


def _fan_out(job: analysis.Job) -> None:
    """A series too large for one analysis (``DEVIATIONS_ANALYSIS_MEMORY_MB``): a chord of
    one task per chunk of rows over the worker pool, then ``finish_analysis``."""
    from celery import chord

    payload = job.to_json()
    chord([analyse_chunk.s(payload, lo, hi) for lo, hi in job.chunks])(
        finish_analysis.s(payload))


def _chunk_mark(stage: int, lo: int) -> str:
    return f"chunk:{stage}:{lo}"


@shared_task(
    name="deviations.analyse_chunk",
    ignore_result=False,  # the chord counts its chunks' results (Redis) to run its last step
    autoretry_for=(OperationalError, InterfaceError),
    retry_backoff=5,
    max_retries=3,
)
def analyse_chunk(job: dict[str, Any], lo: int, hi: int) -> str:
    """Compute rows ``lo .. hi`` of a chunked analysis and write their blocks, unpublished
    (``analysis.run_chunk``). Returns what happened: a chunk that stops at the time limit
    or runs out of memory records why on the series (``traces.attempts``, as the analysis
    task does) and the last step publishes nothing. A chunk delivered again after its
    worker was lost (the hard time limit, the OOM killer: ``acks_late``) is recorded as
    killed and not run again (no loop)."""
    found = analysis.Job.from_json(job)
    mark = _chunk_mark(found.stage, lo)
    if _coalesces():
        try:
            if not cache.add(mark, 1, settings.CELERY_TASK_TIME_LIMIT + 60):
                attempts.fail_running(found.series_id, attempts.killed_reason())
                return "killed before: not run again"
        except RedisError:  # Redis is the broker too: the chunk runs
            pass
    attempts.touch(found.series_id)
    try:
        analysis.run_chunk(found, lo, hi)
    except SoftTimeLimitExceeded:
        attempts.fail_running(found.series_id, attempts.limit_reason())
        return "stopped at the time limit"
    except MemoryError:
        attempts.fail_running(found.series_id, attempts.memory_reason())
        return "out of memory"
    except store.BaseChangedError:
        return analysis.NEWER  # the last step sees it and sends the analysis again
    finally:
        if _coalesces():
            try:
                cache.delete(mark)
            except RedisError:  # it expires
                pass
    return f"rows {lo}..{hi} written"


@shared_task(
    name="deviations.finish_analysis",
    autoretry_for=(OperationalError, InterfaceError),
    retry_backoff=5,
    max_retries=3,
)
def finish_analysis(results: list[str], job: dict[str, Any]) -> str:
    """The chord's last step: publish every chunk's blocks at once (``analysis.finish``),
    end the attempt and send the alerts; or, when a chunk failed, publish nothing (the
    attempt's failure is recorded); when another analysis stored in between, analyse
    again from what is stored."""
    found = analysis.Job.from_json(job)
    series_id = found.series_id
    try:
        done = analysis.finish(found)
    except store.IncompleteStageError as exc:
        if not attempts.failure(series_id):
            attempts.fail_running(series_id, f"a chunk of the analysis did not finish ({exc})")
        return f"not published: {exc}"
    except store.BaseChangedError:
        attempts.end(series_id)
        send_once(analyse_series, series_id)
        return "another analysis stored in between: sent again"
    except store.NewerStoredError:
        attempts.finish(series_id)
        return analysis.NEWER
    attempts.finish(series_id)
    send_once(series_alerts, series_id)
    return done


@shared_task(
    name="deviations.series_alerts",
    autoretry_for=(OperationalError, InterfaceError),
    retry_backoff=5,
    max_retries=3,
)
def series_alerts(series_id: int) -> int:
    """Record the series' verdicts as alerts, then email the alert groups that are due;
    returns the emails sent (a second run records and sends nothing new)."""
    _started(series_alerts, series_id)
    return notify.after_analysis(series_id)


@shared_task(name="deviations.analyse_stale_series")
def analyse_stale_series() -> list[int]:
    """Queue the analysis of every series whose stored analysis misses a finished run.

    Each finished run queues its series' analysis; this beat entry catches the ones lost
    on the way (a broker that restarted without persistence, a worker killed past its
    retries). Two queries per series when nothing is stale. Not sent: a series whose
    attempt for the same runs is running, failed, or was killed (``traces.attempts``):
    a new run, or ``manage.py analyse``, tries again.
    """
    in_process = _in_process()
    stale = [s.pk for s in Series.objects.all() if not analysis.is_up_to_date(s)
             and attempts.to_send(s, attempts.runs_until(s.pk), in_process=in_process)]
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
