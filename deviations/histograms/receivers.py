"""Histograms stored by ``ingest`` queue change detection on their probes (connected in
``deviations.apps``)."""

from typing import Any

from deviations.core.queue import enqueue
from deviations.histograms.tasks import detect_histogram_changes


def queue_detection(sender: Any, probe_ids: list[int], **kwargs: Any) -> None:
    enqueue(detect_histogram_changes, list(probe_ids))
