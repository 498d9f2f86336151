from django.apps import AppConfig


class CoreConfig(AppConfig):
    name = "deviations"
    verbose_name = "Deviations"

    def ready(self) -> None:
        # Load the Celery app so that @shared_task binds to it in every Django process
        # (kept out of deviations/__init__.py so that deviations.stats stays Django-free).
        from deviations import celery  # noqa: F401
