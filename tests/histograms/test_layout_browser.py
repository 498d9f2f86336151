"""The histogram pages at 1400 px in Debian's Chromium: a screenshot in test-artifacts/
(layout-histograms-<page>.png) and no text of a figure overlapping another or cut
(tests/browser_checks.py), on the demo probes; a probe with one build gets a message
instead of a chart, and a build above the cutoff that the persistence rule held back
shows its reason.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command

from deviations.histograms.models import Probe
from tests.browser_checks import check_layout, open_page
from tests.conftest import plain_histogram

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

STEADY = [4000, 3000, 2000, 1000]
SPIKE = [1000, 2000, 3000, 4000]


def ingest(tmp_path: Path, write_histograms: Any, records: list[dict[str, Any]]) -> None:
    path = write_histograms("h.json", records)
    call_command("ingest_histograms", str(path), stdout=io.StringIO())


def test_probe_list(page: Any) -> None:
    call_command("demo", "--runs", "2", stdout=io.StringIO())
    open_page(page, "/histograms/")
    assert page.locator("#probes tbody tr").count() >= 4
    check_layout(page, "layout-histograms-probe-list")


def test_changes_feed(page: Any) -> None:
    call_command("demo", "--runs", "2", stdout=io.StringIO())
    open_page(page, "/histograms/changes/")
    assert page.locator("#changes tbody tr").count() >= 1
    check_layout(page, "layout-histograms-changes")


def test_probe_page_with_a_change(page: Any) -> None:
    call_command("demo", "--runs", "2", stdout=io.StringIO())
    probe = Probe.objects.filter(changes__isnull=False).order_by("pk").first()
    assert probe is not None
    open_page(page, probe.get_absolute_url(), charts=2)
    page.locator("#overlay-chart .main-svg").first.wait_for()
    check_layout(page, "layout-histograms-probe")


def test_probe_with_one_build_says_so(page: Any, tmp_path: Path, write_histograms: Any) -> None:
    ingest(tmp_path, write_histograms, [plain_histogram("ONE_BUILD", "20240101", STEADY)])
    open_page(page, Probe.objects.get(name="ONE_BUILD").get_absolute_url())
    assert "One build so far (20240101)" in page.inner_text("#one-build")
    assert page.locator(".js-plotly-plot").count() == 0  # no chart of the build against itself
    check_layout(page, "layout-histograms-probe-one-build")


def test_spike_held_back_by_persistence_shows_why(
    page: Any, tmp_path: Path, write_histograms: Any
) -> None:
    # Twelve steady builds, one spike, then steady again: above the cutoff, not persistent.
    shapes = [STEADY] * 12 + [SPIKE] + [STEADY] * 4
    ingest(tmp_path, write_histograms,
           [plain_histogram("SPIKY", f"202401{d + 1:02d}", c) for d, c in enumerate(shapes)])
    open_page(page, Probe.objects.get(name="SPIKY").get_absolute_url(), charts=2)
    rows = page.locator("#held-back tbody tr")
    assert rows.count() >= 1
    assert "persistence rule" in rows.first.inner_text()
    assert "20240113" in rows.first.inner_text()
    names = page.evaluate(
        "() => document.getElementById('distance-chart')._fullData.map(t => t.name)")
    assert "above cutoff, not reported" in names
    check_layout(page, "layout-histograms-probe-held-back")
