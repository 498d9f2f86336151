"""deviations: performance deviations between releases, with honest statistics.

This package is the Django project and its core app. It deliberately does not import
the Celery app here (the usual Django/Celery recipe does), so that
``import deviations.stats`` stays free of Django: the Celery app is loaded by
``deviations.apps.CoreConfig.ready`` instead.
"""
