"""Admin of histograms: rule parameters (global and per probe), probes, changes."""

from django.contrib import admin

from deviations.histograms.models import (
    BuildAnnotation,
    HistogramChange,
    HistogramRuleDefaults,
    Probe,
)

_RULE_FIELDSET = (
    "Change rule (blank: the global value, else the statistics default)",
    {"fields": ["rule", "min_count", "past_builds", "min_past", "future_builds", "cutoff",
                "max_past_std", "k", "floor", "stability_ratio"]},
)


@admin.register(HistogramRuleDefaults)
class HistogramRuleDefaultsAdmin(admin.ModelAdmin):
    fieldsets = [_RULE_FIELDSET]

    def has_add_permission(self, request: object) -> bool:
        return not HistogramRuleDefaults.objects.exists()


@admin.register(Probe)
class ProbeAdmin(admin.ModelAdmin):
    list_display = ["name", "rule", "histogram_type", "detected_at"]
    search_fields = ["name"]
    list_filter = ["rule"]
    fieldsets = [(None, {"fields": ["name", "alert_emails", "histogram_type"]}),
                 _RULE_FIELDSET]


@admin.register(HistogramChange)
class HistogramChangeAdmin(admin.ModelAdmin):
    list_display = ["probe", "build_id", "kind", "distance", "detected_at"]
    list_filter = ["alert__status", "kind", "rule"]
    search_fields = ["probe__name", "build_id"]
    readonly_fields = ["probe", "build_id", "previous_build_id", "distance", "cutoff", "kind",
                       "shift_buckets", "rule", "detected_at"]
    exclude = ["edges", "before", "after"]


@admin.register(BuildAnnotation)
class BuildAnnotationAdmin(admin.ModelAdmin):
    list_display = ["probe", "build_id", "text", "author", "created"]
    list_select_related = ["probe", "author"]
    search_fields = ["text", "build_id"]
    raw_id_fields = ["probe"]
