"""What every feature's API router shares: token authentication and the error schema.

``deviations.api`` assembles the one ``NinjaAPI`` from the features' routers and turns
every ``UserError`` into ``{"detail": message}`` with the error's status; the routers
import their authentication from here (not from ``deviations.api``, which imports them).
"""

from datetime import datetime, timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.db import connection
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
        found = _token_user(ApiToken.hash_key(token), timezone.now() - LAST_USED_RESOLUTION)
        if found is None:
            return None
        user, token_id, scope, stale = found
        # At most one write a minute per token: a CI client posting canary batches sends
        # hundreds of requests a second, each of which would otherwise commit a write.
        if stale:
            ApiToken.objects.filter(pk=token_id).update(last_used=timezone.now())
        user.token_scope = scope  # deviations.core.access reads it
        return user


def _token_user(key_sha256: str, used_before: datetime) -> tuple[Any, int, str, bool] | None:
    """The active user of the token with this hash, the token's id and scope, and whether
    it was last used before ``used_before``; None if there is no such token.

    One query written in SQL (``User.objects.raw`` builds the user): every API write pays
    for it, and with the ORM building the join it cost 0.5 ms of CPU (0.2 ms now).
    """
    user_model = get_user_model()
    q = connection.ops.quote_name
    user_meta, token_meta = user_model._meta, ApiToken._meta
    user_pk = q(user_meta.pk.column)
    token = {name: q(token_meta.get_field(name).column)
             for name in ("id", "scope", "last_used", "key_sha256", "user")}
    # Only the models' own quoted table and column names are formatted in; values are
    # parameters.
    sql = (
        f"SELECT u.*, t.{token['id']} AS token_id, t.{token['scope']} AS token_scope, "  # noqa: S608
        f"(t.{token['last_used']} IS NULL OR t.{token['last_used']} < %s) AS token_stale "
        f"FROM {q(token_meta.db_table)} t JOIN {q(user_meta.db_table)} u "
        f"ON u.{user_pk} = t.{token['user']} "
        f"WHERE t.{token['key_sha256']} = %s AND u.{q(user_meta.get_field('is_active').column)}"
    )
    when = connection.ops.adapt_datetimefield_value(used_before)
    for user in user_model.objects.raw(sql, [when, key_sha256]):
        return user, int(user.token_id), str(user.token_scope), bool(user.token_stale)
    return None


class ErrorOut(Schema):
    detail: str
