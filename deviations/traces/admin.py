"""Admin of trace and metric series: series, releases, runs, functions, metrics."""

from typing import Any

from django.contrib import admin

from deviations.traces import services
from deviations.traces.models import Function, Metric, Release, ReleaseAnnotation, Run, Series


class _DeletesThroughServices:
    """Deletions from the admin go through ``deviations.traces.services``: pending uploads
    removed, the analysis recomputed. Django's confirmation page asks first."""

    delete = staticmethod(services.delete_series)

    def delete_model(self, request: Any, obj: Any) -> None:
        self.delete(obj)

    def delete_queryset(self, request: Any, queryset: Any) -> None:
        for obj in queryset:
            self.delete(obj)


@admin.register(Series)
class SeriesAdmin(_DeletesThroughServices, admin.ModelAdmin):
    list_display = ["name", "kind", "created", "default_rule", "min_relative_change",
                    "min_absolute_change_us"]
    list_filter = ["kind"]
    search_fields = ["name"]


@admin.register(Metric)
class MetricAdmin(admin.ModelAdmin):
    """A metric series' metrics: unit and direction (a change here is a user's choice: set
    ``source`` to "user" to keep it over what later uploads say)."""

    list_display = ["function", "unit", "direction", "source", "threshold_percent"]
    list_filter = ["direction", "source"]
    search_fields = ["function__name"]
    raw_id_fields = ["function"]


@admin.register(Release)
class ReleaseAdmin(_DeletesThroughServices, admin.ModelAdmin):
    delete = staticmethod(services.delete_release)
    list_display = ["version", "series", "order", "created"]
    list_filter = ["series"]
    search_fields = ["version"]
    ordering = ["series", "sort_key"]


@admin.register(Run)
class RunAdmin(_DeletesThroughServices, admin.ModelAdmin):
    delete = staticmethod(services.delete_run)
    list_display = ["file_name", "release", "status", "size_bytes", "created", "finished"]
    list_filter = ["status", "series"]
    search_fields = ["file_name", "sha256"]
    readonly_fields = ["sha256", "size_bytes", "summary", "started", "finished"]


@admin.register(Function)
class FunctionAdmin(admin.ModelAdmin):
    list_display = ["name", "series"]
    list_filter = ["series"]
    search_fields = ["name"]


@admin.register(ReleaseAnnotation)
class ReleaseAnnotationAdmin(admin.ModelAdmin):
    list_display = ["release", "text", "author", "created"]
    list_select_related = ["release__series", "author"]
    search_fields = ["text", "release__version", "release__series__name"]
    raw_id_fields = ["release"]
