"""The Celery app: ``celery -A deviations.celery worker`` starts a worker."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "deviations.settings")

app = Celery("deviations")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks(["deviations"])
