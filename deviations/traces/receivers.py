"""A run stored by ``ingest`` queues its series' analysis (connected in ``deviations.apps``)."""

from typing import Any

from deviations.core.queue import enqueue
from deviations.traces.tasks import analyse_series


def queue_analysis(sender: Any, series_id: int, **kwargs: Any) -> None:
    enqueue(analyse_series, series_id)
