"""Issue 20's acceptance: each tool's real output, a history of releases with one planted
30% change, goes in through the CLI, the REST API and the upload page; the change is
flagged on its release and nothing else is.

The files are what the tools wrote (tests/ingest/results_fixtures/README.md: which tool,
which version, which command; 16 releases, the planted benchmark 30% slower from the 9th).
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import Client

from deviations.core.models import ApiToken
from deviations.stats.releases import IMPROVEMENT, REGRESSION
from deviations.traces import selectors
from deviations.traces.models import Series

pytestmark = pytest.mark.django_db

FIXTURES = Path(__file__).resolve().parents[1] / "ingest" / "results_fixtures"
#: Per tool: the planted metric, and what else legitimately moves with it (Perfherder's
#: suite value is the geometric mean of its subtests: it moves by 1.3^(1/3) with them).
PLANTED = {
    "google-benchmark": ("BM_planted/real_time", set()),
    "pytest-benchmark": ("test_bench.py::test_planted", set()),
    "hyperfine": ("planted", set()),
    "asv": ("bench.Suite.time_planted", set()),
    "perfherder": ("workloads [python]/planted", {"workloads [python]"}),
    "bmf": ("planted", set()),
    "csv": ("planted", set()),
}
PLANTED_FROM = 9  # r09: the first release of the planted change


def releases(tool: str) -> list[tuple[str | None, Path]]:
    """(release, file) in order; a CSV names its own releases (1.1 … 1.16)."""
    files = sorted((FIXTURES / tool).glob("r[0-9][0-9].*"))
    assert len(files) >= 8
    return [(None if tool == "csv" else f.name.split(".")[0], f) for f in files]


def planted_release(tool: str) -> str:
    return f"1.{PLANTED_FROM}" if tool == "csv" else f"r{PLANTED_FROM:02d}"


def check_flags(series_name: str, tool: str) -> None:
    series = Series.objects.get(name=series_name)
    found = selectors.stored_analysis(series, "self", "median", series.default_rule)
    assert found is not None
    names = selectors.function_names(series)
    versions = selectors.release_versions(found["release_ids"])
    flags = {(names[int(found["function_ids"][f])], versions[p + 1])
             for f, p in zip(*np.nonzero(np.isin(found["verdict"], [REGRESSION, IMPROVEMENT])),
                             strict=True)}
    planted, also = PLANTED[tool]
    at = planted_release(tool)
    assert (planted, at) in flags, flags
    assert flags <= {(planted, at)} | {(name, at) for name in also}, flags
    # A slower benchmark is a regression (times: lower is better).
    row = list(found["function_ids"]).index(
        next(fid for fid, n in names.items() if n == planted))
    assert found["verdict"][row, versions.index(at) - 1] == REGRESSION


@pytest.mark.parametrize("tool", sorted(PLANTED))
def test_cli(tool: str) -> None:
    for release, path in releases(tool):
        args = ["--series", f"cli-{tool}"] + (["--release", release] if release else [])
        call_command("ingest_results", *args, str(path), stdout=io.StringIO())
    check_flags(f"cli-{tool}", tool)


@pytest.mark.parametrize("tool", sorted(PLANTED))
def test_api(tool: str, client: Client, committed: Any) -> None:
    token = ApiToken.issue(get_user_model().objects.create_user("ci"), "CI")[1]
    for release, path in releases(tool):
        upload = io.BytesIO(path.read_bytes())
        upload.name = path.name
        response = committed(client.post, f"/api/series/api-{tool}/results",
                             {"file": upload, **({"release": release} if release else {})},
                             headers={"Authorization": f"Bearer {token}"})
        assert response.status_code == 201, response.content
        assert response.json()["format"] == tool
    check_flags(f"api-{tool}", tool)


@pytest.mark.parametrize("tool", sorted(PLANTED))
def test_upload_page(tool: str, client: Client, committed: Any) -> None:
    client.force_login(get_user_model().objects.create_user("u"))
    for release, path in releases(tool):
        upload = io.BytesIO(path.read_bytes())
        upload.name = path.name
        response = committed(client.post, "/upload/", {
            "series": f"page-{tool}", "release": release or "", "files": [upload],
            "thread_name": "CrRendererMain", "process_name": "Renderer"})
        assert response.status_code == 302, response.content
    check_flags(f"page-{tool}", tool)
