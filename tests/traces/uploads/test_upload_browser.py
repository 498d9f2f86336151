"""The upload flow in Debian's Chromium, driven by Playwright (never `playwright install`).

Screenshots go to test-artifacts/ at the project root.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model

from deviations.traces.models import Run, Series
from deviations.traces.uploads import runs
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


def test_an_empty_file_among_several_is_refused_alone(
    page: Any, tmp_path: Path, simple_events
) -> None:
    """Issue 23: the page refused every file with "The submitted file is empty." and named
    none; now the empty one fails, named, and the others go in."""
    log_in(page)
    paths = []
    for name, text in (("first.json", json.dumps({"traceEvents": simple_events})),
                       ("empty.json", ""),
                       ("second.json", json.dumps({"traceEvents": simple_events[:3]}))):
        paths.append(tmp_path / name)
        paths[-1].write_text(text)
    page.fill("#id_series", "browser-series")
    page.fill("#id_release", "1.0")
    page.set_input_files("input[type=file]", [str(p) for p in paths])
    page.click("#upload-form button[type=submit]")
    page.wait_for_url("**/upload/*-*-*-*-*/")
    page.locator("#batch-summary").filter(has_text="2 done, 1 failed, 0 pending").wait_for()
    assert page.locator("tr[data-status=failed]").inner_text().startswith("empty.json")
    assert "empty.json: empty file" in page.locator("tr[data-status=failed]").inner_text()


def test_run_page_updates_itself(page: Any, write_trace, simple_events) -> None:
    path = write_trace("slow.json", simple_events)
    release = runs.get_release("s", "1")
    with path.open("rb") as f:
        run = runs.register_run(release, f, "slow.json", runs.ThreadOptions()).run
    page.goto(f"/runs/{run.pk}/")
    assert page.inner_text("#run-status") == "pending"
    assert page.locator("#run-file a[download]").count() == 1  # stored: offered
    runs.process_run(run.pk)  # what the worker does meanwhile
    page.locator("#run-status", has_text="done").wait_for()
    assert "Slices timed (function calls)\t4" in page.inner_text("#run-summary")
    assert "kept as long as the run" in page.inner_text("#run-file")  # and kept after
    assert page.locator("#run-error").count() == 0


def test_names_are_checked_before_any_byte_is_sent(
    page: Any, tmp_path: Path, simple_events
) -> None:
    """Issue 14: a typo made a new series, a bad name was refused only after the upload,
    under a stale "Sent…" line, and the status page did not link to the results."""
    Series.objects.create(name="chromium-linux")
    log_in(page)
    trace = tmp_path / "t.json"
    trace.write_text(json.dumps({"traceEvents": simple_events}))
    page.fill("#id_series", "chromium-linx")
    page.locator("#id_series").dispatch_event("change")
    page.locator("#series-hint", has_text="new series").wait_for()
    assert page.locator("#series-names option[value='chromium-linux']").count() == 1
    sent: list[str] = []
    page.on("request", lambda r: sent.append(r.method) if r.url.endswith("/upload/") else None)
    page.fill("#id_series", "chromium-linux")
    page.fill("#id_release", "a/b")
    page.set_input_files("input[type=file]", [str(trace)])
    page.click("#upload-form button[type=submit]")
    page.locator("#upload-error", has_text="release version 'a/b' is not valid").wait_for()
    assert "POST" not in sent  # refused before the bytes left
    assert page.inner_text("#upload-progress-text") == ""
    assert page.inner_text("#series-hint") == "existing series"
    page.fill("#id_release", "56.0.2909.0")
    page.click("#upload-form button[type=submit]")
    page.wait_for_url("**/upload/*-*-*-*-*/")
    results = page.locator("#batch-results")
    results.wait_for()
    assert results.get_attribute("href") == "/series/chromium-linux/"
    page.screenshot(path=str(ARTIFACTS / "upload-status-results.png"), full_page=True)
