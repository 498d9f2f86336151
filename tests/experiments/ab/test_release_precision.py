"""Seed 004's "how many more samples?" for two releases of a trace series (API)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from deviations.traces.models import Function
from deviations.traces.uploads.runs import ThreadOptions, get_release, ingest_local_file
from tests.conftest import renderer_events

pytestmark = pytest.mark.django_db


@pytest.fixture
def series(tmp_path, committed):
    rng = np.random.default_rng(6)
    for version, level in (("1.0", 1000.0), ("1.1", 1100.0)):
        release = get_release("web", version)
        for k in range(6):
            dur = float(np.round(level + rng.normal(0, 30)))
            path = tmp_path / f"{version}-{k}.json"
            path.write_text(json.dumps(renderer_events([("Layout", 0, dur)])))
            committed(ingest_local_file, release, path, ThreadOptions())
    return Function.objects.get(name="Layout")


def test_two_releases_how_many_more_runs(client, series):
    url = f"/api/ab/releases/precision?series=web&base=1.0&new=1.1&function={series.pk}"
    body = client.get(url + "&min_change=5").json()
    assert body["n_base"] == body["n_new"] == 6
    assert body["diff"] == pytest.approx(100, abs=40)
    assert body["lo"] < body["diff"] < body["hi"]
    assert body["excludes_zero"]
    strict = client.get(url + "&min_change=1").json()  # 10 µs: needs more runs
    assert not strict["narrow_enough"]
    assert strict["more_runs_per_release"] > 0
    assert "runs of each release" in strict["sentence"]
    loose = client.get(url + "&min_change=50").json()
    # narrow, but 6 runs are fewer than MIN_N = 30: a pilot may not have met a slow run yet
    # (docs/statistics.md, §3.11)
    assert not loose["narrow_enough"]
    assert loose["width"] <= loose["min_change"]
    assert loose["more_runs_per_release"] == 30 - 6
    missing = client.get(url.replace("1.1", "9.9"))
    assert missing.status_code == 400
    assert "no release '9.9'" in missing.json()["detail"]


def test_the_compare_view_links_to_how_many_more_runs(client, series):
    page = client.get("/series/web/compare/?base=1.0&new=1.1").content.decode()
    assert "How many more runs?" in page
    link = f"/series/web/compare/precision/?base=1.0&amp;new=1.1&amp;function={series.pk}"
    assert link in page
    assert "to tell a 2% change" in page
    body = client.get(link.replace("&amp;", "&") + "&metric=self&min_change=2")
    assert body.status_code == 200
    html = body.content.decode()
    api = client.get(f"/api/ab/releases/precision?series=web&base=1.0&new=1.1"
                     f"&function={series.pk}&min_change=2").json()
    assert f'<strong id="more-runs">{api["more_runs_per_release"]}</strong>' in html
    assert "to tell a change of 2% of its mean from noise at 95%" in html
    bad = client.get(f"/series/web/compare/precision/?base=1.0&new=9.9&function={series.pk}")
    assert bad.status_code == 400
    assert "no release" in bad.content.decode()

