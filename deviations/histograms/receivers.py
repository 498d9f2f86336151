"""Histograms stored by ``ingest`` queue change detection on their probes (connected in
``deviations.apps``)."""

from typing import Any

from deviations.histograms.tasks import detect_histogram_changes


def queue_detection(sender: Any, probe_ids: list[int], **kwargs: Any) -> None:
    detect_histogram_changes.delay(list(probe_ids))
