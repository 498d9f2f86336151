"""Registers each feature's admin pages (Django's admin autodiscovery imports this module)."""

from django.contrib import admin

from deviations.alerts import admin as alerts_admin
from deviations.alerts.hooks import admin as hooks_admin
from deviations.core import admin as core_admin
from deviations.core.login import throttled
from deviations.experiments.ab import admin as ab_admin
from deviations.experiments.canaries import admin as canaries_admin
from deviations.histograms import admin as histograms_admin
from deviations.traces import admin as traces_admin

# The admin's login page is throttled like the site's (deviations.core.login).
admin.site.login = throttled(admin.site.login)  # type: ignore[method-assign]

__all__ = ["ab_admin", "alerts_admin", "canaries_admin", "core_admin", "histograms_admin",
           "hooks_admin", "traces_admin"]
