"""A run stored by ``ingest`` queues its series' analysis (connected in ``deviations.apps``)."""

from typing import Any


def queue_analysis(sender: Any, series_id: int, **kwargs: Any) -> None:
    # Imported when data arrives, not when Django starts: the tasks bring the analysis and
    # SciPy, which a command or a page that stores nothing never needs.
    from deviations.traces.tasks import analyse_series, send_once

    send_once(analyse_series, series_id)
