"""The compare page in Debian's Chromium, reached from the matrix's form (screenshot:
test-artifacts/compare.png)."""

from __future__ import annotations

import io
from typing import Any

import pytest
from django.core.management import call_command

from deviations.management.commands.demo import SERIES
from deviations.traces import demo
from tests.conftest import ARTIFACTS

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_compare_two_demo_releases_from_the_matrix(page: Any) -> None:
    call_command("demo", "--runs", "5", stdout=io.StringIO(), stderr=io.StringIO())
    page.goto(f"/series/{SERIES}/")
    form = page.locator("#compare-with")
    form.locator("select[name=base]").select_option(demo.RELEASES[3])
    form.locator("select[name=new]").select_option(demo.RELEASES[9])
    form.locator("button").click()
    page.locator("#comparison").wait_for()
    assert "/compare/" in page.url
    rows = page.locator("#comparison tbody tr")
    assert rows.first.locator("td").nth(0).text_content() == "Paint"
    assert rows.first.locator("td").nth(1).text_content() == "regression"
    assert page.locator("#comparison tr.verdict-regression").count() == 1
    assert page.locator("#comparison tr.verdict-improvement").count() == 0
    assert "1 regression," in page.locator("#compare-summary").text_content()
    page.screenshot(path=str(ARTIFACTS / "compare.png"), full_page=True)
    # Filter to the regressions, then open the function page from the table.
    page.locator("#compare-form select[name=show]").select_option("regression")
    page.locator("#compare-form button").click()
    page.wait_for_url("**show=regression**")
    assert page.locator("#comparison tbody tr").count() == 1
    page.locator("#comparison tbody a").first.click()
    page.wait_for_url("**/functions/**")
    assert "Paint" in page.locator("h1").text_content()
