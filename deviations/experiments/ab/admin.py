"""Admin of A/B runs, hosts and A/A floors (read-mostly: results are computed at upload)."""

from django.contrib import admin

from deviations.experiments.ab.models import AAFloorRecord, ABHost, ABRun


@admin.register(ABHost)
class ABHostAdmin(admin.ModelAdmin):
    list_display = ["name", "created"]
    search_fields = ["name"]


@admin.register(ABRun)
class ABRunAdmin(admin.ModelAdmin):
    list_display = ["id", "kind", "name", "host", "baseline", "uploaded_by", "created"]
    list_filter = ["kind", "host"]
    search_fields = ["name", "host__name"]
    readonly_fields = ["content_key", "data", "result", "created"]


@admin.register(AAFloorRecord)
class AAFloorRecordAdmin(admin.ModelAdmin):
    list_display = ["host", "metric", "floor", "lo", "hi", "n", "biased", "moved", "created"]
    list_filter = ["host", "moved", "biased"]
    readonly_fields = ["created"]
