from django.apps import AppConfig


class CoreConfig(AppConfig):
    name = "deviations"
    verbose_name = "Deviations"

    def ready(self) -> None:
        # Load the Celery app so that @shared_task binds to it in every Django process
        # (kept out of deviations/__init__.py so that deviations.stats stays Django-free).
        from deviations import celery  # noqa: F401
        from deviations.histograms import receivers as histogram_receivers
        from deviations.traces import receivers as trace_receivers
        from ingest import services as ingest

        # What ingest stores, the features analyse: ingest itself imports no task of ours.
        ingest.run_stored.connect(
            trace_receivers.queue_analysis, dispatch_uid="deviations.traces.analysis"
        )
        ingest.histograms_stored.connect(
            histogram_receivers.queue_detection, dispatch_uid="deviations.histograms.detection"
        )
