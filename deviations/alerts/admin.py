"""Admin of subscriptions and of the alerts sent."""

from django.contrib import admin

from deviations.alerts.models import SentAlert, Subscription


@admin.register(Subscription)
class SubscriptionAdmin(admin.ModelAdmin):
    list_display = ["email", "target", "pattern", "digest", "active", "created"]
    list_filter = ["target", "active", "digest"]
    search_fields = ["email", "pattern"]


@admin.register(SentAlert)
class SentAlertAdmin(admin.ModelAdmin):
    list_display = ["subject", "email", "status", "created", "sent_at"]
    list_filter = ["status"]
    search_fields = ["email", "subject"]
    readonly_fields = ["subject", "email", "status", "change", "summary", "url", "created",
                       "sent_at"]
