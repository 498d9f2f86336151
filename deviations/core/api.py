"""What every feature's API router shares: token authentication and the error schema.

``deviations.api`` assembles the one ``NinjaAPI`` from the features' routers and turns
every ``UserError`` into ``{"detail": message}`` with the error's status; the routers
import their authentication from here (not from ``deviations.api``, which imports them).
"""

from typing import Any

from django.http import HttpRequest
from django.utils import timezone
from ninja import Schema
from ninja.security import HttpBearer

from deviations.core.models import ApiToken


class TokenAuth(HttpBearer):
    """``Authorization: Bearer <token>``; the request's ``auth`` is the token's user."""

    def authenticate(self, request: HttpRequest, token: str) -> Any:
        found = (
            ApiToken.objects.select_related("user")
            .filter(key_sha256=ApiToken.hash_key(token), user__is_active=True)
            .first()
        )
        if found is None:
            return None
        ApiToken.objects.filter(pk=found.pk).update(last_used=timezone.now())
        user = found.user
        user.token_scope = found.scope  # deviations.core.access reads it
        return user


class ErrorOut(Schema):
    detail: str
