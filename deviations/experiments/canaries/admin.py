"""Admin of canaries: the canary and its state (read-only: the task writes it)."""

from django.contrib import admin

from deviations.experiments.canaries.models import Canary, CanaryState


class StateInline(admin.StackedInline):
    model = CanaryState
    can_delete = False
    readonly_fields = ["applied_seq", "n_a", "n_b", "statistic", "p_value", "p_value_now",
                       "decision", "headline", "decided_n_a", "decided_n_b", "decided_at",
                       "updated"]
    exclude = ["summary"]


@admin.register(Canary)
class CanaryAdmin(admin.ModelAdmin):
    list_display = ["pk", "name", "metric", "bad", "alpha", "tau", "count", "created"]
    search_fields = ["name", "metric"]
    readonly_fields = ["batches_received", "last_time_a", "last_time_b", "update_queued", "created"]
    inlines = [StateInline]
