"""Every trace page at 1400 px in Debian's Chromium: a screenshot in test-artifacts/
(layout-<data>-<page>.png) and no text of a figure overlapping another or cut
(tests/browser_checks.py), on the demo series and on real TracerBench traces.
"""

from __future__ import annotations

import csv
import io
import uuid
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command

from deviations.management.commands.demo import SERIES as DEMO
from deviations.traces.analysis import analyse_series
from deviations.traces.models import Function, Release, Run, Series
from deviations.traces.uploads.runs import ThreadOptions, get_release, ingest_local_file
from tests.browser_checks import check_layout, open_page
from tests.conftest import SHARED_DATA

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

TRACES = SHARED_DATA / "traces"
TRACERBENCH = "tracerbench"
TRACERBENCH_RELEASES = 5
"""The first releases of the index with at least two runs (a matrix needs two per column)."""


def tracerbench() -> str:
    """Ingest the first TracerBench releases with two or more runs through ingest's own
    function (as the CLI does), then analyse the series."""
    if not TRACES.is_dir():
        pytest.skip(f"{TRACES} is absent (shared data)")
    by_release: dict[str, list[Path]] = defaultdict(list)
    with (TRACES / "tracerbench_runs_INDEX.csv").open() as f:
        for row in csv.DictReader(f):
            by_release[row["chrome"]].append(TRACES / "tracerbench_runs" / row["file"])
    chosen = [v for v, files in by_release.items() if len(files) >= 2][:TRACERBENCH_RELEASES]
    for version in chosen:
        release = get_release(TRACERBENCH, version)
        for path in by_release[version]:
            ingest_local_file(release, path, ThreadOptions())
    analyse_series(Series.objects.get(name=TRACERBENCH).pk)
    return TRACERBENCH


def demo() -> str:
    call_command("demo", "--runs", "5", stdout=io.StringIO())
    return DEMO


DATA = {"demo": demo, "tracerbench": tracerbench}


def busiest_function(series: str) -> Function:
    """A function of the series with times in every release (the largest total)."""
    return Function.objects.filter(series__name=series).order_by("id").first()  # type: ignore[return-value]


def pages(series: str) -> dict[str, tuple[str, int]]:
    """page name -> (URL, number of Plotly figures drawn on it)."""
    releases = list(Release.objects.filter(series__name=series).order_by("order", "id"))
    function = busiest_function(series)
    run = Run.objects.filter(series__name=series, status=Run.DONE).order_by("id").first()
    assert run is not None
    batch = uuid.uuid4()
    Run.objects.filter(release=releases[-1]).update(upload_batch=batch)
    return {
        "series-list": ("/", 0),
        "matrix": (f"/series/{series}/", 1),
        "matrix-2-rows": (f"/series/{series}/?per=2", 1),
        "function": (f"/series/{series}/functions/{function.pk}/?runs=1", 2),
        "release": (f"/series/{series}/releases/{releases[-1].version}/", 0),
        "run": (f"/runs/{run.pk}/", 0),
        "upload-status": (f"/upload/{batch}/", 0),
    }


@pytest.mark.parametrize("data", sorted(DATA))
@pytest.mark.parametrize("name", ["series-list", "matrix", "matrix-2-rows", "function",
                                  "release", "run", "upload-status"])
def test_page_layout(page: Any, data: str, name: str) -> None:
    series = DATA[data]()
    url, charts = pages(series)[name]
    open_page(page, url, charts)
    if name == "upload-status":
        page.locator("#batch-summary a").wait_for()
    check_layout(page, f"layout-{data}-{name}")
    if name.startswith("matrix"):
        # The rows' labels (long source paths in TracerBench) leave the cells most of the width.
        size = page.evaluate("() => document.getElementById('matrix')._fullLayout._size")
        assert size["w"] >= 0.7 * (size["l"] + size["w"] + size["r"]), size
