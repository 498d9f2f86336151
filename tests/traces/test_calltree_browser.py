"""The compare view's call-tree diff in Debian's Chromium, reached from a release page's
link for its consecutive pair: the icicle is drawn and the table sorts (screenshot:
test-artifacts/calltree.png)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from deviations.traces.models import Function
from tests.conftest import ARTIFACTS
from tests.traces.test_calltree import SERIES, make_series

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_release_pair_opens_the_drawn_call_tree_diff(page: Any, tmp_path: Path) -> None:
    make_series(tmp_path, runs=6)
    page.goto(f"/series/{SERIES}/releases/1.2/")
    page.locator("#calltree-diff").click()
    page.wait_for_url("**/compare/?base=1.1&new=1.2*")
    chart = page.locator("#calltree-chart[data-rendered=true]")
    chart.wait_for()
    # Plotly drew one icicle with a frame per function on the path tree (root included).
    frames = page.locator("#calltree-chart g.slice")
    assert frames.count() == 6  # threads, RunTask, V8.Execute, Layout, Paint, V8.Compile
    assert "V8.Execute ★" in chart.text_content()
    assert "RunTask" in page.locator("#calltree-words").text_content()
    # The table sorts by a header click (change %, largest last, then first).
    header = page.locator("#calltree-table thead th").nth(5)
    header.click()
    header.click()
    first = page.locator("#calltree-table tbody tr").first.locator("td").nth(1)
    assert first.text_content() in ("V8.Execute", "V8.Compile")
    page.screenshot(path=str(ARTIFACTS / "calltree.png"), full_page=True)
    # A caller in the table roots the tree at it; its function page says why it rose.
    page.locator("#calltree-table a", has_text="RunTask").first.click()
    page.wait_for_url("**calls=RunTask**")
    assert "`RunTask` +" in page.locator("#calltree-words").text_content()
    runtask = Function.objects.get(series__name=SERIES, name="RunTask")
    page.goto(f"/series/{SERIES}/functions/{runtask.pk}/")
    assert "from `V8.Execute`" in page.locator("#why .why-words").first.text_content()
    page.screenshot(path=str(ARTIFACTS / "calltree-function.png"), full_page=True)
