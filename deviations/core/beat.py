"""The embedded default's beat: ``CELERY_BEAT_SCHEDULE`` run by a thread of the server.

Without a broker there is no Celery beat, so nothing swept what a killed server left
behind: a run it was ingesting stayed pending for good, an analysis it was computing never
came. ``deviations.wsgi`` starts this thread when a server process starts (runserver,
gunicorn) on the embedded default; commands never do. Tasks run in-process there
(``task_always_eager``), so each due entry runs in this thread.

- **Start-up sweep**: the entries that repeat at least every ``STARTUP_PERIOD`` (the
  sweepers: runs to ingest again, stale analyses and detections, canaries, alert groups
  that are due) run as soon as the server starts; the longer ones (the hourly detection
  and retention, the daily digest) one period later, so restarting does not send them.
- **Periodic**: every entry then runs on its period, as under Celery beat.
- **One per site**: the process whose thread holds an exclusive ``flock`` on the site's
  beat file (``core.locks.site_lock_folder``) runs the schedule; the others try again at
  every tick and take over when the holder's process ends (the kernel releases its lock).

An entry that raises is logged and tried again soon, not a whole period later: after
``RETRY`` seconds, doubling at each further failure up to its period (a start-up sweep that
met a busy database runs again within seconds, not an hour later); the thread goes on.
"""

from __future__ import annotations

import fcntl
import logging
import threading
import time
from datetime import timedelta
from typing import IO, Any

from django import db
from django.conf import settings

from deviations.core.locks import site_lock_folder

log = logging.getLogger(__name__)

#: Entries repeating at least this often run at start-up.
STARTUP_PERIOD = timedelta(minutes=15)
#: How often a process that does not hold the beat tries to take it over, in seconds.
TICK = 30.0
#: Seconds before a failed entry runs again (doubling per consecutive failure, at most its
#: period).
RETRY = 5.0

_started = threading.Lock()
_thread: EmbeddedBeat | None = None


def _seconds(schedule: Any) -> float:
    if isinstance(schedule, timedelta):
        return schedule.total_seconds()
    return float(schedule)


class EmbeddedBeat(threading.Thread):
    """Runs ``schedule`` (``{name: {"task": ..., "schedule": seconds}}``) while the process
    lives; ``stop()`` ends it (tests)."""

    def __init__(self, schedule: dict[str, dict[str, Any]], tick: float = TICK,
                 retry: float = RETRY) -> None:
        super().__init__(name="embedded-beat", daemon=True)
        self.periods = {name: _seconds(entry["schedule"]) for name, entry in schedule.items()}
        self.tasks = {name: entry["task"] for name, entry in schedule.items()}
        self.tick = tick
        self.retry = retry
        self.failures = dict.fromkeys(self.periods, 0)  # consecutive, per entry
        self.stopping = threading.Event()
        self.holding: IO[bytes] | None = None
        self.loaded = False

    def stop(self) -> None:
        self.stopping.set()
        self.join()

    def _take(self) -> bool:
        """True while this process holds the site's beat."""
        if self.holding is not None:
            return True
        lock = (site_lock_folder() / "beat.lock").open("a+b")
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.close()
            return False
        self.holding = lock
        return True

    def run(self) -> None:
        startup = STARTUP_PERIOD.total_seconds()
        start = time.monotonic()
        due = {name: start if period <= startup else start + period
               for name, period in self.periods.items()}
        try:
            while not self.stopping.is_set():
                if self._take():
                    now = time.monotonic()
                    for name in sorted(due, key=due.__getitem__):
                        if due[name] <= now and not self.stopping.is_set():
                            due[name] = time.monotonic() + self._run(name)
                    wait = max(0.0, min(due.values()) - time.monotonic())
                else:
                    wait = self.tick
                self.stopping.wait(min(wait, self.tick))
        finally:
            if self.holding is not None:
                self.holding.close()  # releases the flock
            db.connections.close_all()  # this thread's connections

    def _run(self, name: str) -> float:
        """Run entry ``name`` once; the seconds until it is due again."""
        from deviations.core import worker  # loaded with the first task, as enqueue does

        try:
            if not self.loaded:
                worker.load_tasks()
                self.loaded = True
            result = worker.app.tasks[self.tasks[name]].apply()  # in-process, this thread
            result.get(propagate=True)  # apply() keeps a task's error in its result
        except Exception:
            self.failures[name] += 1
            again = min(self.periods[name], self.retry * 2 ** (self.failures[name] - 1))
            log.exception("embedded beat: %s failed; it runs again in %.0f s", name, again)
            return again
        finally:
            db.close_old_connections()
        self.failures[name] = 0
        return self.periods[name]


def start() -> EmbeddedBeat | None:
    """Start this process's beat thread once, on the embedded default (no broker) when
    ``DEVIATIONS_EMBEDDED_BEAT`` is on; None otherwise."""
    global _thread
    if not settings.CELERY_TASK_ALWAYS_EAGER or not settings.DEVIATIONS_EMBEDDED_BEAT:
        return None
    with _started:
        if _thread is None:
            _thread = EmbeddedBeat(settings.CELERY_BEAT_SCHEDULE)
            _thread.start()
    return _thread
