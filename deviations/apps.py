from typing import Any

from django.apps import AppConfig
from django.contrib import admin
from django.contrib.admin.apps import SimpleAdminConfig
from django.contrib.admin.checks import check_admin_app, check_dependencies
from django.core import checks


class CoreConfig(AppConfig):
    name = "deviations"
    verbose_name = "Deviations"


class AdminConfig(SimpleAdminConfig):
    """Django's admin without autodiscovery at set-up: ``django.contrib.admin``'s ready()
    imports every admin module (ours and the contrib apps') in every process, a CLI call's
    included (~12 ms of ``django.setup()``). The root URL configuration calls
    ``admin.autodiscover()`` when the site is served; the admin's system check calls it
    first too, so ``manage.py check`` checks every ModelAdmin whatever order the checks run
    in (the URL checks, which would also import them, come in no fixed order)."""

    def ready(self) -> None:
        # SimpleAdminConfig.ready() with the app check replaced, not doubled.
        checks.register(check_dependencies, checks.Tags.admin)
        checks.register(_check_admin_app, checks.Tags.admin)


def _check_admin_app(app_configs: Any, **kwargs: Any) -> list[checks.CheckMessage]:
    admin.autodiscover()
    return check_admin_app(app_configs, **kwargs)
