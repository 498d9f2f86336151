"""Histograms stored by ``ingest`` queue change detection on their probes (connected in
``deviations.apps``)."""

from typing import Any

from deviations.core.queue import enqueue


def queue_detection(sender: Any, probe_ids: list[int], **kwargs: Any) -> None:
    # Imported when data arrives, not when Django starts: the tasks bring the analysis and
    # SciPy, which a command or a page that stores nothing never needs.
    from deviations.histograms.tasks import detect_histogram_changes

    enqueue(detect_histogram_changes, list(probe_ids))
