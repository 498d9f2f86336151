"""Admin of webhooks, their deliveries and attempts, bug templates and bisects."""

from django.contrib import admin

from deviations.alerts.hooks.models import (
    Bisect,
    BugTemplate,
    DeliveryAttempt,
    Webhook,
    WebhookDelivery,
)


@admin.register(Webhook)
class WebhookAdmin(admin.ModelAdmin):
    list_display = ["pk", "owner", "purpose", "target", "pattern", "format", "url", "active"]
    list_filter = ["purpose", "target", "format", "active"]
    search_fields = ["pattern", "url"]
    raw_id_fields = ["owner"]


class AttemptInline(admin.TabularInline):
    model = DeliveryAttempt
    extra = 0


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(admin.ModelAdmin):
    list_display = ["pk", "webhook", "kind", "group", "status", "attempts", "next_at",
                    "delivered_at"]
    list_filter = ["kind", "status"]
    raw_id_fields = ["webhook", "group", "bisect"]
    inlines = [AttemptInline]


@admin.register(BugTemplate)
class BugTemplateAdmin(admin.ModelAdmin):
    list_display = ["family", "target", "kind", "base_url", "by", "updated"]
    list_filter = ["target", "kind"]


@admin.register(Bisect)
class BisectAdmin(admin.ModelAdmin):
    list_display = ["pk", "alert", "status", "culprit_revision", "requested_by", "created",
                    "finished"]
    list_filter = ["status"]
    raw_id_fields = ["alert", "requested_by"]
