"""What every feature's API router shares: token authentication and the error schema.

``deviations.api`` assembles the one ``NinjaAPI`` from the features' routers and turns
every ``UserError`` into ``{"detail": message}`` with the error's status; the routers
import their authentication from here (not from ``deviations.api``, which imports them).
"""

from datetime import timedelta
from typing import Any

from django.http import HttpRequest
from django.utils import timezone
from ninja import Schema
from ninja.security import HttpBearer

from deviations.core.models import ApiToken

#: ``ApiToken.last_used`` is exact to this much.
LAST_USED_RESOLUTION = timedelta(minutes=1)


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
        now = timezone.now()
        # At most one write a minute per token: a CI client posting canary batches sends
        # hundreds of requests a second, each of which would otherwise commit a write.
        if found.last_used is None or now - found.last_used > LAST_USED_RESOLUTION:
            ApiToken.objects.filter(pk=found.pk).update(last_used=now)
        user = found.user
        user.token_scope = found.scope  # deviations.core.access reads it
        return user


class ErrorOut(Schema):
    detail: str
