"""A note added on the release page shows on the matrix and the function chart, in Debian's
Chromium (screenshots: test-artifacts/annotation-*.png)."""

from __future__ import annotations

import io
from typing import Any

import pytest
from django.core.management import call_command

from deviations.management.commands.demo import SERIES
from deviations.traces import demo
from tests.conftest import ARTIFACTS

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_note_on_a_release_shows_on_the_charts(page: Any) -> None:
    call_command("demo", "--runs", "5", stdout=io.StringIO(), stderr=io.StringIO())
    release = demo.RELEASES[8]
    page.goto(f"/accounts/login/?next=/series/{SERIES}/releases/{release}/")
    page.fill("input[name=username]", "demo")
    page.fill("input[name=password]", "demo")
    page.locator("main button[type=submit]").click()
    page.locator("#annotate-form").wait_for()
    page.fill("#annotate-form input[name=text]", "<i>new bot</i>")
    page.locator("#annotate-form button").click()
    page.locator("#annotations .annotation-text").wait_for()
    assert page.locator("#annotations .annotation-text").text_content() == "<i>new bot</i>"
    page.screenshot(path=str(ARTIFACTS / "annotation-release.png"), full_page=True)
    page.goto(f"/series/{SERIES}/")
    page.locator("#matrix[data-rendered=true]").wait_for()
    label = page.locator("#matrix g.annotation").filter(has_text="new bot")
    assert label.count() == 1
    assert label.first.text_content() == "<i>new bot</i>"  # shown as text, not as italics
    page.screenshot(path=str(ARTIFACTS / "annotation-matrix.png"), full_page=True)
    page.locator("#functions a", has_text="Paint").first.click()
    page.locator("#function-chart[data-rendered=true]").wait_for()
    assert page.locator("#function-chart g.annotation").filter(has_text="new bot").count() == 1
    page.screenshot(path=str(ARTIFACTS / "annotation-function.png"), full_page=True)
