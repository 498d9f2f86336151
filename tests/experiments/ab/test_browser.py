"""The A/B upload and result page in Debian's Chromium (Playwright): upload an A/B run
with its A/A run, see the four-number line and the per-slice bars drawn."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model

from tests.conftest import ARTIFACTS

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
DATA = Path(__file__).parent / "data"


def test_upload_and_result_page(page: Any) -> None:
    get_user_model().objects.create_user("alice", password="correct horse")
    page.goto("/accounts/login/?next=/ab/")
    page.fill("#id_username", "alice")
    page.fill("#id_password", "correct horse")
    page.click("main form button[type=submit]")
    page.wait_for_url("**/ab/")
    page.set_input_files("input[name=ab]", str(DATA / "seed002_ab.csv"))
    page.set_input_files("input[name=aa]", str(DATA / "seed002_aa.csv"))
    page.fill("input[name=host]", "bench-1")
    page.click("#ab-upload button[type=submit]")
    page.wait_for_url("**/ab/runs/*/")
    line = page.locator("#result-lines li").first.inner_text()
    assert line.startswith(
        "B is 0.92 ms faster at p99 (Hodges–Lehmann; 95% CI [-1.01, -0.85]; A/A floor ±0.07; "
        "n=15 slice pairs)"
    )
    page.wait_for_selector("div.chart[data-rendered=true]")
    assert page.locator("div.chart .bars path").count() == 15
    page.screenshot(path=str(ARTIFACTS / "ab-result.png"), full_page=True)
    page.click("text=bench-1")
    page.wait_for_url("**/ab/hosts/bench-1/")
    assert "±0.07" in page.locator("#current-floors").inner_text()
