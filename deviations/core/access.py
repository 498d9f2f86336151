"""Who may write to a series, a probe, a canary or an A/B host (hardening #9, issue 23);
docs/deploy.md states the rules.

- Staff and superusers may write to everything.
- A series or probe with owners (``Ownership``) may be written to by its owners only.
- One without owners may be written to by any signed-in user or token, and whoever writes
  first becomes its owner: a team's CI token claims its series with its first upload.
- A token with a ``scope`` (a name pattern) may write only to names matching it, whatever
  its user may do otherwise.

The CLI is not checked: it needs shell access to the server. Refusals are ``Forbidden``
(HTTP 403) with a message naming the thing and how to get access.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable
from typing import Any

from deviations.core.errors import UserError
from deviations.core.models import Ownership
from deviations.core.packing import name_digest


class ForbiddenError(UserError):
    status = 403
    code = "forbidden"


_LABELS = {Ownership.SERIES: "series", Ownership.PROBE: "probe",
           Ownership.CANARY: "canary", Ownership.AB_HOST: "A/B host"}


def _label(kind: str) -> str:
    return _LABELS[kind]


def check_write(user: Any, kind: str, names: Iterable[str]) -> None:
    """``ForbiddenError`` unless ``user`` (from a session or a token) may write to every
    one of ``names`` of this kind."""
    names = list(dict.fromkeys(names))
    check_scope(user, kind, names)
    if user.is_staff or user.is_superuser:
        return
    owned: dict[str, set[int]] = {}
    for digest, user_id in Ownership.objects.filter(
        kind=kind, name_sha1__in=[name_digest(n) for n in names]
    ).values_list("name_sha1", "user_id"):
        owned.setdefault(digest, set()).add(user_id)
    for name in names:
        owners = owned.get(name_digest(name))
        if owners and user.pk not in owners:
            raise ForbiddenError(
                f"{_label(kind)} {name!r} belongs to other users: ask one of its owners or "
                "an administrator to add you"
            )


def check_scope(user: Any, kind: str, names: Iterable[str]) -> None:
    """``ForbiddenError`` unless ``user`` is signed in (a session or a token) and, for a
    token with a scope, every one of ``names`` matches it: the part of :func:`check_write`
    that holds whatever the user's role (an alert's assignee writing to it, staff)."""
    if not getattr(user, "is_authenticated", False):
        raise ForbiddenError("sign in or send an API token to write")
    scope = getattr(user, "token_scope", "")
    for name in names:
        if scope and not fnmatch.fnmatchcase(name, scope):
            raise ForbiddenError(
                f"this token may write only to names matching {scope!r}, not to "
                f"{_label(kind)} {name!r}"
            )


def check_canary(user: Any, canary: Any) -> None:
    """``ForbiddenError`` unless ``user`` may write to the canary (send batches, continue
    it, triage or note its alert): as :func:`check_write`, owned by id (``Ownership`` of
    kind canary, its creator's from creation), the token's scope matched on its name."""
    if not getattr(user, "is_authenticated", False):
        raise ForbiddenError("sign in or send an API token to write")
    scope = getattr(user, "token_scope", "")
    if scope and not fnmatch.fnmatchcase(canary.name, scope):
        raise ForbiddenError(f"this token may write only to names matching {scope!r}, not to "
                             f"canary {canary.name!r}")
    if user.is_staff or user.is_superuser:
        return
    owners = set(Ownership.objects.filter(
        kind=Ownership.CANARY, name_sha1=name_digest(str(canary.pk))
    ).values_list("user_id", flat=True))
    if owners and user.pk not in owners:
        raise ForbiddenError(f"canary {canary.name!r} belongs to other users: ask one of its "
                             "owners or an administrator to add you")


def claim(user: Any, kind: str, names: Iterable[str]) -> None:
    """Make ``user`` the owner of those ``names`` that have no owner yet."""
    if not getattr(user, "is_authenticated", False):
        return
    names = list(dict.fromkeys(names))
    taken = set(Ownership.objects.filter(
        kind=kind, name_sha1__in=[name_digest(n) for n in names]
    ).values_list("name_sha1", flat=True))
    Ownership.objects.bulk_create(
        [Ownership(kind=kind, name=n, name_sha1=name_digest(n), user_id=user.pk)
         for n in names if name_digest(n) not in taken],
        ignore_conflicts=True,
    )


def owned_by(user: Any, kind: str) -> list[str]:
    return list(Ownership.objects.filter(kind=kind, user=user).values_list("name", flat=True))
