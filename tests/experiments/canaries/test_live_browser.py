"""The live canary page in Chromium: batches arrive while it is open and the page, polling
by itself, shows the decision change from "keep going" to "regression"."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from django.test import Client

from tests.conftest import ARTIFACTS

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_live_page_sees_the_decision_change(page: Any, api: Client) -> None:
    made = api.post("/api/canaries", {"name": "live <i>", "bad": "higher", "unit": "ms"},
                    content_type="application/json").json()
    url = f"/api/canaries/{made['id']}/observations"
    rng = np.random.default_rng(14)

    def send(i: int, shift: float) -> None:
        for arm, loc in (("A", 100.0), ("B", 100.0 + shift)):
            response = api.post(url, {"batch": f"{i}{arm}", "arm": arm,
                                      "values": rng.normal(loc, 10, 500).tolist()},
                                content_type="application/json")
            assert response.status_code == 202, response.content

    send(0, 0.0)
    # Signed in (the controls are for signed-in users; ci created the canary: its owner).
    from django.contrib.auth import get_user_model

    ci = get_user_model().objects.get(username="ci")
    ci.set_password("ci-password")
    ci.save()
    page.goto("/accounts/login/")
    page.fill("#id_username", "ci")
    page.fill("#id_password", "ci-password")
    page.click("form button[type=submit], form input[type=submit]")
    page.wait_for_load_state()
    page.goto(f"/canaries/{made['id']}/")
    assert page.locator("#subscribe-form").is_visible()  # while it has not decided
    assert not page.locator("#continue-form").is_visible()
    headline = page.locator("#headline")
    assert headline.text_content() == "keep going"
    assert page.locator("#n-a").text_content() == "500"
    page.wait_for_function("document.querySelector('#quantile-chart .main-svg') !== null")
    for i in range(1, 4):
        send(i, 0.0)
    page.wait_for_function("document.querySelector('#n-a').textContent === '2000'")
    assert headline.text_content() == "keep going"
    for i in range(4, 20):
        send(i, 8.0)
        if api.get(f"/api/canaries/{made['id']}").json()["decision"] != "continue":
            break
    page.wait_for_function(
        "document.querySelector('#headline').dataset.headline === 'regression'",
        timeout=20_000,
    )
    assert headline.text_content() == "regression"
    assert page.locator("#decision").text_content() == "reject"
    assert "Decided: no more observations" in page.locator("#accepting").text_content()
    # Without a reload: Continue is offered, the email offer is gone (issue 23).
    assert page.locator("#continue-form").is_visible()
    assert not page.locator("#subscribe-form").is_visible()
    words = page.locator("#words li").all_text_contents()
    assert words[0].startswith("B's values are larger than A's")
    assert words[1].startswith("the median ")
    assert page.title().startswith("Canary live <i>")
    page.screenshot(path=str(ARTIFACTS / "canary_live.png"), full_page=True)
