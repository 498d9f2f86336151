"""Seed 004's "how many more samples?" for two releases of a trace series (API)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from deviations.stats.paired import precision_ratio_two_sample, precision_two_sample
from deviations.traces.models import Function
from deviations.traces.uploads.runs import ThreadOptions, get_release, ingest_local_file
from tests.conftest import renderer_events

pytestmark = pytest.mark.django_db

def _upload(tmp_path, committed, series_name, absent_in=()):
    """Six runs of 1.0 (~1000 µs) and 1.1 (~1100 µs); returns Layout and, per release, its
    time in each run (0 where it did not run: ``absent_in`` (version, run index))."""
    rng = np.random.default_rng(6)
    durations: dict[str, list[float]] = {}
    for version, level in (("1.0", 1000.0), ("1.1", 1100.0)):
        release = get_release(series_name, version)
        durations[version] = []
        for k in range(6):
            dur = float(np.round(level + rng.normal(0, 30)))
            name = "Other" if (version, k) in absent_in else "Layout"
            events = [("Layout", 0, dur)] if name == "Layout" else [("Other", 0, dur)]
            durations[version].append(dur if name == "Layout" else 0.0)
            path = tmp_path / f"{series_name}-{version}-{k}.json"
            path.write_text(json.dumps(renderer_events(events)))
            committed(ingest_local_file, release, path, ThreadOptions())
    return Function.objects.get(name="Layout", series__name=series_name), durations


@pytest.fixture
def web(tmp_path, committed):
    return _upload(tmp_path, committed, "web")


@pytest.fixture
def series(web):
    return web[0]


def test_two_releases_how_many_more_runs(client, series, web):
    url = f"/api/ab/releases/precision?series=web&base=1.0&new=1.1&function={series.pk}"
    body = client.get(url + "&min_change=5").json()
    assert body["n_base"] == body["n_new"] == 6
    # every run's time is > 0 and the threshold is a percentage: the change of the
    # geometric mean, in % (issue 22 part 4; docs/statistics.md §3.11). Was the
    # difference of means in µs (about +100 µs) before.
    assert body["estimand"] == "change of the geometric mean"
    assert body["scale"] == "log"
    assert body["unit"] == "%"
    assert body["diff"] == pytest.approx(10, abs=4)
    assert body["lo"] < body["diff"] < body["hi"]
    direct = precision_ratio_two_sample(web[1]["1.0"], web[1]["1.1"], 5.0)
    for key, field in (("diff", "estimate"), ("lo", "lo"), ("hi", "hi"), ("width", "width"),
                       ("min_change", "min_change")):
        assert body[key] == pytest.approx(getattr(direct, field), rel=1e-12)
    assert body["more_runs_per_release"] == direct.more_needed
    assert body["narrow_enough"] == direct.narrow_enough
    assert "change of the geometric mean" in body["sentence"]
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
    assert "to tell a change of 2% of its geometric mean from noise at 95%" in html
    assert "Estimand: the <strong>change of the geometric mean</strong>" in html
    bad = client.get(f"/series/web/compare/precision/?base=1.0&new=9.9&function={series.pk}")
    assert bad.status_code == 400
    assert "no release" in bad.content.decode()


def test_a_function_absent_from_a_run_keeps_the_difference_of_means(
        client, tmp_path, committed):
    """A run where the function took no time (0 µs) leaves the log scale out: the
    difference of means in µs against 5 % of the base's mean, as before part 4."""
    function, durations = _upload(tmp_path, committed, "app", absent_in={("1.1", 2)})
    assert durations["1.1"][2] == 0.0
    url = f"/api/ab/releases/precision?series=app&base=1.0&new=1.1&function={function.pk}"
    body = client.get(url + "&min_change=5").json()
    assert body["estimand"] == "difference of means"
    assert body["scale"] == "linear"
    assert body["unit"] == "µs"
    a, b = np.asarray(durations["1.0"]), np.asarray(durations["1.1"])
    direct = precision_two_sample(a, b, a.mean() * 5 / 100)
    for key, field in (("diff", "estimate"), ("lo", "lo"), ("hi", "hi"), ("width", "width"),
                       ("min_change", "min_change")):
        assert body[key] == pytest.approx(getattr(direct, field), rel=1e-12)
    assert body["more_runs_per_release"] == direct.more_needed
    assert "difference of means" in body["sentence"]
    html = client.get(f"/series/app/compare/precision/?base=1.0&new=1.1&function={function.pk}"
                      "&min_change=5").content.decode()
    assert "to tell a change of 5% of its mean from noise at 95%" in html
    assert "Estimand: the <strong>difference of means</strong>" in html
