import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "deviations.settings")
application = get_wsgi_application()


def _warm_up() -> None:
    """Load at a server process' start what its first requests would load: the URLconf
    (it imports every API router, SciPy with them) and, on the embedded default, where
    tasks run in the web process, Celery and the analysis. A fresh worker's first upload
    answered in 953 ms, now 165 ms (docs/architecture.md, "Rendered pages and load").
    Commands never import this module: their start-up stays lazy (docs/architecture.md)."""
    from django.conf import settings
    from django.urls import get_resolver

    get_resolver().url_patterns  # noqa: B018 (imports the views and the API)
    if settings.CELERY_TASK_ALWAYS_EAGER:
        from deviations.core import beat, worker  # (binds the tasks to the app)
        from deviations.traces import tasks  # noqa: F401  (the analysis)

        worker.load_tasks()
        # No Celery beat without a broker: the sweepers run in a thread of this process,
        # at start-up (a server killed mid-ingest left runs pending) and on their periods.
        beat.start()


_warm_up()
