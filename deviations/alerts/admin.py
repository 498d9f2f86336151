"""Admin of alerts, their groups, ignores, subscriptions and the emails sent."""

from django.contrib import admin

from deviations.alerts.models import Alert, AlertGroup, AlertNote, Ignore, SentAlert, Subscription


class AlertNoteInline(admin.TabularInline):
    model = AlertNote
    extra = 0
    readonly_fields = ["author", "created"]


@admin.register(Alert)
class AlertAdmin(admin.ModelAdmin):
    list_display = ["subject", "detector", "direction", "from_label", "to_label", "metric",
                    "rule", "effect_pct", "provisional", "status", "assignee", "created"]
    list_filter = ["detector", "status", "direction", "provisional", "rule"]
    search_fields = ["subject", "group__family", "bug_url"]
    raw_id_fields = ["group", "series", "function", "probe", "change"]
    readonly_fields = ["key", "created", "updated"]
    inlines = [AlertNoteInline]


@admin.register(AlertGroup)
class AlertGroupAdmin(admin.ModelAdmin):
    list_display = ["family", "detector", "from_label", "to_label", "created", "notified_at"]
    list_filter = ["detector"]
    search_fields = ["family"]


@admin.register(Ignore)
class IgnoreAdmin(admin.ModelAdmin):
    list_display = ["kind", "family", "subject", "by", "created"]
    list_filter = ["kind"]
    search_fields = ["family", "subject"]
    raw_id_fields = ["function", "probe"]
    readonly_fields = ["subject_sha1"]


@admin.register(Subscription)
class SubscriptionAdmin(admin.ModelAdmin):
    list_display = ["email", "target", "pattern", "digest", "improvements", "active", "created"]
    list_filter = ["target", "active", "digest", "improvements"]
    search_fields = ["email", "pattern"]


@admin.register(SentAlert)
class SentAlertAdmin(admin.ModelAdmin):
    list_display = ["subject", "email", "status", "created", "sent_at"]
    list_filter = ["status"]
    search_fields = ["email", "subject"]
    readonly_fields = ["subject", "email", "status", "change", "summary", "url", "created",
                       "sent_at"]
