"""Admin of trace series: series, releases, runs, functions."""

from django.contrib import admin

from deviations.traces.models import Function, Release, Run, Series


@admin.register(Series)
class SeriesAdmin(admin.ModelAdmin):
    list_display = ["name", "created"]
    search_fields = ["name"]


@admin.register(Release)
class ReleaseAdmin(admin.ModelAdmin):
    list_display = ["version", "series", "order", "created"]
    list_filter = ["series"]
    search_fields = ["version"]
    ordering = ["series", "sort_key"]


@admin.register(Run)
class RunAdmin(admin.ModelAdmin):
    list_display = ["file_name", "release", "status", "size_bytes", "created", "finished"]
    list_filter = ["status", "series"]
    search_fields = ["file_name", "sha256"]
    readonly_fields = ["sha256", "size_bytes", "summary", "started", "finished"]


@admin.register(Function)
class FunctionAdmin(admin.ModelAdmin):
    list_display = ["name", "series"]
    list_filter = ["series"]
    search_fields = ["name"]
