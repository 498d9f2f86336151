"""Token authentication of the API (``deviations.core.api.TokenAuth``): the token's active
user with its scope, nothing for an unknown token or an inactive user, ``last_used``
written at most once per ``LAST_USED_RESOLUTION``."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.test import RequestFactory
from django.utils import timezone

from deviations.core.api import LAST_USED_RESOLUTION, TokenAuth
from deviations.core.models import ApiToken

pytestmark = pytest.mark.django_db


def _auth(key: str) -> Any:
    return TokenAuth().authenticate(RequestFactory().post("/api/x"), key)


def test_the_token_gives_its_user_and_scope(django_user_model: Any) -> None:
    user = django_user_model.objects.create_user("ci", email="ci@example.com", is_staff=True)
    other = django_user_model.objects.create_user("other")
    token, key = ApiToken.issue(user, "CI", scope="chrome-*")
    ApiToken.issue(other, "other")
    found = _auth(key)
    assert found == user
    assert (found.username, found.email, found.is_staff) == ("ci", "ci@example.com", True)
    assert found.token_scope == "chrome-*"
    assert _auth(key + "x") is None
    user.is_active = False
    user.save()
    assert _auth(key) is None
    token.delete()
    user.is_active = True
    user.save()
    assert _auth(key) is None


def test_last_used_is_written_at_most_once_per_resolution(django_user_model: Any) -> None:
    token, key = ApiToken.issue(django_user_model.objects.create_user("ci"), "CI")
    assert token.last_used is None
    _auth(key)
    first = ApiToken.objects.get(pk=token.pk).last_used
    assert first is not None
    _auth(key)
    assert ApiToken.objects.get(pk=token.pk).last_used == first  # within the resolution
    earlier = timezone.now() - LAST_USED_RESOLUTION - timedelta(seconds=1)
    ApiToken.objects.filter(pk=token.pk).update(last_used=earlier)
    _auth(key)
    assert ApiToken.objects.get(pk=token.pk).last_used > earlier
