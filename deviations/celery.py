"""The Celery app: ``celery -A deviations.celery worker`` starts a worker."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "deviations.settings")

app = Celery("deviations")
app.config_from_object("django.conf:settings", namespace="CELERY")
# Each feature keeps its tasks in its own tasks.py; ingest has the ingest task.
app.autodiscover_tasks(
    ["deviations.traces", "deviations.histograms", "deviations.alerts", "ingest",
     "deviations.experiments.canaries"]
)
