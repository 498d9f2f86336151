"""Keyboard shortcuts of the group and alerts pages in Debian's Chromium (screenshots:
test-artifacts/alert-keys-*.png): j j x a acknowledges the second alert, ? shows the help,
keys typed in a field do nothing, i on the alerts page marks a group invalid."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from deviations.alerts.models import Alert
from deviations.alerts.recording import record
from deviations.traces.models import Release, Series
from tests.alerts.test_groups import trace
from tests.conftest import ARTIFACTS

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _log_in(page: Any, next_path: str) -> None:
    get_user_model().objects.create_user("sheriff", "sheriff@example.org", "pw")
    page.goto(f"/accounts/login/?next={next_path}")
    page.fill("input[name=username]", "sheriff")
    page.fill("input[name=password]", "pw")
    page.locator("main button[type=submit]").click()


def test_j_j_x_a_acknowledges_the_second_alert_and_question_mark_shows_help(page: Any) -> None:
    s = Series.objects.create(name="s")
    for v in range(1, 7):
        Release.objects.create(series=s, version=str(v))
    Release.objects.filter(series=s).update(created=timezone.now() - timedelta(days=1))
    record([trace(s, "Big", "2", "3", pct=80), trace(s, "Middle", "2", "3", pct=40),
            trace(s, "Small", "2", "3", pct=20), trace(s, "Other", "5", "6")])
    group = Alert.objects.get(subject="Big").group
    _log_in(page, group.get_absolute_url())
    page.locator("#group-alerts").wait_for()
    # Typing in a field does nothing.
    page.locator("input[name=note]").focus()
    page.keyboard.type("jjxa")
    assert page.locator("tr.key-cursor").count() == 0
    page.locator("input[name=note]").fill("")
    page.locator("h1").click()
    page.keyboard.press("j")
    page.keyboard.press("j")
    cursor = page.locator("tr.key-cursor")
    assert cursor.get_attribute("data-alert") == str(Alert.objects.get(subject="Middle").pk)
    assert cursor.evaluate("row => document.activeElement === row")
    page.keyboard.press("x")
    assert cursor.locator("input[name=alert]").is_checked()
    page.screenshot(path=str(ARTIFACTS / "alert-keys-group.png"), full_page=True)
    with page.expect_navigation():
        page.keyboard.press("a")
    statuses = dict(Alert.objects.values_list("subject", "status"))
    assert statuses == {"Big": "new", "Middle": "acknowledged", "Small": "new", "Other": "new"}
    assert Alert.objects.get(subject="Middle").status_by.username == "sheriff"
    # ? shows the help, Esc closes it.
    page.keyboard.press("?")
    help_box = page.locator("#keys-help")
    help_box.wait_for(state="visible")
    assert "acknowledge the selected rows" in help_box.text_content()
    page.screenshot(path=str(ARTIFACTS / "alert-keys-help.png"), full_page=True)
    page.keyboard.press("Escape")
    help_box.wait_for(state="hidden")
    # The alerts page: rows are groups; k/j to the first, i marks its untriaged alerts.
    page.goto("/alerts/")
    page.locator("#alert-groups").wait_for()
    page.keyboard.press("j")
    first = page.locator("tr.key-cursor")
    first_group = int(first.get_attribute("data-group"))
    with page.expect_navigation():
        page.keyboard.press("i")
    marked = set(Alert.objects.filter(group_id=first_group).values_list("status", flat=True))
    # The first group is the one with the newest untriaged alert; its acknowledged alert
    # (Middle) is not an untriaged one and keeps its status.
    expected = {"invalid"} if first_group != group.pk else {"invalid", "acknowledged"}
    assert marked == expected
    assert Alert.objects.exclude(group_id=first_group).filter(status="invalid").count() == 0
