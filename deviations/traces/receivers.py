"""A run stored by ``ingest`` queues its series' analysis (connected in ``deviations.apps``)."""

from typing import Any

from deviations.traces.tasks import analyse_series


def queue_analysis(sender: Any, series_id: int, **kwargs: Any) -> None:
    analyse_series.delay(series_id)
