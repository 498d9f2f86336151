"""Fixtures of the canary tests: a user with an API token and a client that sends it."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from deviations.core.models import ApiToken


@pytest.fixture
def ci_user(django_user_model: Any) -> Any:
    return django_user_model.objects.create_user("ci", email="ci@example.com")


@pytest.fixture
def api(ci_user: Any) -> Client:
    token = ApiToken.issue(ci_user, "CI")[1]
    return Client(headers={"Authorization": f"Bearer {token}"})


@pytest.fixture
def post(django_capture_on_commit_callbacks: Any) -> Any:
    """post(client, path, body): a JSON POST whose on-commit work (the state update) runs,
    as after a real commit (these tests are not transactional)."""

    def send(client: Client, path: str, body: Any) -> Any:
        with django_capture_on_commit_callbacks(execute=True):
            return client.post(path, body, content_type="application/json")

    return send
