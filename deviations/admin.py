"""Registers each feature's admin pages (Django's admin autodiscovery imports this module)."""

from deviations.alerts import admin as alerts_admin
from deviations.core import admin as core_admin
from deviations.histograms import admin as histograms_admin
from deviations.traces import admin as traces_admin

__all__ = ["alerts_admin", "core_admin", "histograms_admin", "traces_admin"]
