"""Admin of API tokens (created with ``manage.py create_api_token``, never here)."""

from django.contrib import admin

from deviations.core.models import ApiToken


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ["name", "user", "created", "last_used"]
    readonly_fields = ["key_sha256", "created", "last_used"]

    def has_add_permission(self, request: object) -> bool:
        return False  # the clear key must be shown once: `manage.py create_api_token`
