"""Sending a task without losing the work when the broker is down.

A stored run or histogram is the durable record of work to do; the task message is only a
wake-up call. When the broker cannot be reached the message is dropped (logged) instead of
failing the request that stored the data, and a beat sweeper finds the work again from the
database once the broker is back (``deviations.traces.uploads.tasks.requeue_pending``,
``deviations.traces.tasks.analyse_stale_series``,
``deviations.histograms.tasks.detect_stale_probes``).
"""

from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger(__name__)


def enqueue(task: Any, *args: Any) -> bool:
    """``task.delay(*args)``; False when the broker is unreachable (the sweeper will retry).

    Celery's publish retry policy still applies first (a blip of a second is absorbed). In
    the embedded default the task runs here, in-process, and its errors propagate.
    """
    # Imported here, not when Django starts: loading Celery binds every @shared_task to the
    # project's app before the first one is sent, and a command that sends none (a CLI
    # call's --help) does not pay for Celery and kombu (start-up time).
    from kombu.exceptions import OperationalError as BrokerError

    from deviations.core import worker  # noqa: F401

    try:
        task.delay(*args)
    except BrokerError as exc:
        log.warning("broker unreachable, %s%r left for the sweeper: %s", task.name, args, exc)
        return False
    return True
