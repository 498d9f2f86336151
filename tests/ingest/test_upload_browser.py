"""The upload flow in Debian's Chromium, driven by Playwright (never `playwright install`).

Screenshots go to test-artifacts/ at the project root.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model

from deviations.traces.models import Run
from ingest import runs
from tests.conftest import ARTIFACTS

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def log_in(page: Any) -> None:
    get_user_model().objects.create_user("alice", password="correct horse")
    page.goto("/upload/")
    page.fill("#id_username", "alice")
    page.fill("#id_password", "correct horse")
    page.click("main form button[type=submit]")
    page.wait_for_url("**/upload/")


def test_upload_two_files_and_one_dropped(page: Any, tmp_path: Path, simple_events) -> None:
    log_in(page)
    good = tmp_path / "good.json"
    good.write_text(json.dumps({"traceEvents": simple_events}))
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    page.fill("#id_series", "browser-series")
    page.fill("#id_release", "56.0.2909.0")
    page.set_input_files("input[type=file]", [str(good), str(bad)])
    # A third file arrives by drag and drop onto the zone.
    page.evaluate(
        """(body) => {
            const dt = new DataTransfer();
            dt.items.add(new File([body], 'dropped.json', {type: 'application/json'}));
            document.getElementById('drop-zone').dispatchEvent(
                new DragEvent('drop', {dataTransfer: dt, bubbles: true, cancelable: true}));
        }""",
        json.dumps({"traceEvents": simple_events[:3]}),
    )
    assert page.locator("#file-list li").count() == 3
    page.screenshot(path=str(ARTIFACTS / "upload-form.png"), full_page=True)
    page.click("#upload-form button[type=submit]")
    page.wait_for_url("**/upload/*-*-*-*-*/")
    summary = page.locator("#batch-summary")
    summary.filter(has_text="2 done, 1 failed, 0 pending").wait_for()
    assert "3 file(s)" in summary.inner_text()
    failed_row = page.locator("tr[data-status=failed]")
    assert failed_row.inner_text().startswith("bad.json")
    page.screenshot(path=str(ARTIFACTS / "upload-status.png"), full_page=True)
    assert Run.objects.filter(status=Run.DONE).count() == 2


def test_run_page_updates_itself(page: Any, write_trace, simple_events) -> None:
    path = write_trace("slow.json", simple_events)
    release = runs.get_release("s", "1")
    with path.open("rb") as f:
        run = runs.register_run(release, f, "slow.json", runs.ThreadOptions(), keep_upload=True).run
    page.goto(f"/runs/{run.pk}/")
    assert page.inner_text("#run-status") == "pending"
    runs.process_run(run.pk)  # what the worker does meanwhile
    page.locator("#run-status", has_text="done").wait_for()
    assert '"slices": 4' in page.inner_text("#run-summary")
