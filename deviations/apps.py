from django.apps import AppConfig


class CoreConfig(AppConfig):
    name = "deviations"
    verbose_name = "Deviations"
