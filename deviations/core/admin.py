"""Admin of API tokens (created with ``manage.py create_api_token`` or on the tokens page,
never here) and of the owners of series and probes."""

from django.contrib import admin

from deviations.core.models import ApiToken, Ownership


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ["name", "user", "scope", "created", "last_used"]
    readonly_fields = ["key_sha256", "created", "last_used"]

    def has_add_permission(self, request: object) -> bool:
        return False  # the clear key must be shown once: `manage.py create_api_token`


@admin.register(Ownership)
class OwnershipAdmin(admin.ModelAdmin):
    list_display = ["kind", "name", "user", "created"]
    list_filter = ["kind"]
    search_fields = ["name", "user__username"]
    readonly_fields = ["name_sha1", "created"]
