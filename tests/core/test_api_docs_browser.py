"""/api/docs works offline (issue 14): Swagger UI comes from our own static files."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import ARTIFACTS

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_api_docs_render_without_the_network(page: Any, live_server: Any) -> None:
    requested: list[str] = []
    page.on("request", lambda r: requested.append(r.url))
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto("/api/docs")
    page.locator(".swagger-ui .opblock").first.wait_for()
    assert page.locator(".swagger-ui .opblock").count() >= 8
    assert page.get_by_text("/api/series/{name}/releases/{version}/runs").count() >= 1
    assert errors == []
    assert all(url.startswith(live_server.url) or url.startswith("data:") for url in requested)
    page.screenshot(path=str(ARTIFACTS / "api-docs.png"))
