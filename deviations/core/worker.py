"""The Celery app (``deviations.celery`` re-exports it for ``celery -A deviations.celery``).

It lives in ``core`` so that ``core.queue`` can load it when the first task is sent rather
than when Django starts: a CLI command that sends no task then never imports Celery
(~0.15 s of start-up; docs/architecture.md, "Start-up").
"""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "deviations.settings")

app = Celery("deviations")
# The app of every thread, not only of the one that loaded it (a request thread, since it is
# loaded when a task is first sent): Celery makes a new app current for its own thread only,
# and default only if nothing had asked for an app before (else an unconfigured fallback app
# would send the other threads' tasks to amqp://localhost).
app.set_default()
app.config_from_object("django.conf:settings", namespace="CELERY")
# Each feature keeps its tasks in its own tasks.py; trace uploads have the ingest task.
TASK_PACKAGES = ["deviations.traces", "deviations.traces.uploads", "deviations.histograms",
                 "deviations.alerts", "deviations.alerts.hooks", "deviations.experiments.canaries"]
app.autodiscover_tasks(TASK_PACKAGES)


def load_tasks() -> None:
    """Import every tasks module now (a worker does it when it starts; the embedded beat
    runs tasks by name). Not ``loader.import_default_modules``: through Celery's Django
    fix-up that runs Django's system checks and configures logging again."""
    app.autodiscover_tasks(TASK_PACKAGES, force=True)
