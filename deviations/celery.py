"""The Celery app: ``celery -A deviations.celery worker`` starts a worker."""

from deviations.core.worker import app

__all__ = ["app"]
