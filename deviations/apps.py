from django.apps import AppConfig


class CoreConfig(AppConfig):
    name = "deviations"
    verbose_name = "Deviations"

    def ready(self) -> None:
        # The Celery app is loaded when a task is first sent (deviations.core.queue), and
        # only ingest's signals are imported here, not its parsers: Django's start-up is
        # every CLI call's (docs/architecture.md, "Start-up").
        from deviations.histograms import receivers as histogram_receivers
        from deviations.traces import receivers as trace_receivers
        from ingest import signals as ingest

        # What ingest stores, the features analyse: ingest itself imports no task of ours.
        ingest.run_stored.connect(
            trace_receivers.queue_analysis, dispatch_uid="deviations.traces.analysis"
        )
        ingest.histograms_stored.connect(
            histogram_receivers.queue_detection, dispatch_uid="deviations.histograms.detection"
        )
