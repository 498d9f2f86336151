"""The deviation matrix, function and release pages (server side)."""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client

from deviations.core import memo
from deviations.traces import charts
from deviations.traces.matrix import MatrixQuery
from deviations.traces.models import Function, Series
from tests.conftest import renderer_events

pytestmark = pytest.mark.django_db

PAINT = {
    "1.0": [100, 104, 98], "1.1": [102, 99, 103], "1.2": [300, 310, 295], "1.3": [301, 299, 306]
}


@pytest.fixture
def series(tmp_path: Path) -> str:
    for version, durations in PAINT.items():
        files = []
        for k, dur in enumerate(durations):
            path = tmp_path / f"{version}-{k}.json"
            events = renderer_events([("Paint", 0, dur), ("Layout", 10_000, 100 + k),
                                      ("<img src=x onerror=alert(1)>", 20_000, 5 + k)])
            path.write_text(json.dumps(events))
            files.append(str(path))
        call_command("ingest_traces", "--series", "s", "--release", version, *files,
                     stdout=io.StringIO())
    # Four releases of three runs: too short for the shift rule (a level needs several
    # releases: test_the_shift_rule_is_the_default_and_the_legend_names_it), so these
    # pages show seed 003's rule, which judges each pair alone.
    Series.objects.filter(name="s").update(default_rule="paper")
    return "s"


def figure_of(html: str, element_id: str) -> dict[str, Any]:
    tag = f'<script id="{element_id}" type="application/json">'
    start = html.index(tag) + len(tag)
    return json.loads(html[start : html.index("</script>", start)])


def test_matrix_page_shows_the_regression(client: Client, series: str) -> None:
    html = client.get("/series/s/").content.decode()
    figure = figure_of(html, "matrix-figure")
    regression = next(t for t in figure["data"] if t["name"] == "regression")
    assert regression["x"] == ["1.2"]
    assert regression["y"] == ["Paint"]
    url = regression["customdata"][0][0]
    assert url.startswith(f"/series/s/functions/{Function.objects.get(name='Paint').pk}/")
    assert client.get(url).status_code == 200
    assert "&lt;img src=x onerror=alert(1)&gt;" in html
    assert "<img src=x" not in html


def test_pages_load_the_plotly_bundle_their_traces_need(
    client: Client, series: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    paint = Function.objects.get(name="Paint")
    for url in ("/series/s/", f"/series/s/functions/{paint.pk}/?runs=1"):
        html = client.get(url).content.decode()
        assert '<script defer src="/static/plotly/plotly-basic.min.js">' in html
        assert "plotly/plotly.min.js" not in html
    # Above SVG_MAX_POINTS the matrix is WebGL (scattergl), which the basic bundle lacks.
    # (A constant is not part of the kept page's key: the page cache is emptied.)
    monkeypatch.setattr(charts, "SVG_MAX_POINTS", 0)
    memo.forget()
    html = client.get("/series/s/").content.decode()
    assert {t["type"] for t in figure_of(html, "matrix-figure")["data"]} == {"scattergl"}
    assert '<script defer src="/static/plotly/plotly.min.js">' in html
    assert "plotly-basic" not in html


def test_controls_round_trip_and_exports(client: Client, series: str) -> None:
    query = MatrixQuery(metric="total", rule="paper", q="pai", only=True, sort="name",
                        first="1.1", per=5)
    assert MatrixQuery.from_params(dict(pair.split("=") for pair in query.params().split("&"))) \
        == query
    page = client.get("/series/s/?" + query.params())
    assert f'href="/series/s/?{query.params()}"'.replace("&", "&amp;") in page.content.decode()
    rows = client.get("/series/s/?" + query.params(format="json")).json()
    assert {r["function"] for r in rows} == {"Paint"}
    assert {r["from_release"] for r in rows} == {"1.1", "1.2"}  # the range starts at 1.1
    as_csv = list(csv.DictReader(io.StringIO(
        client.get("/series/s/?" + query.params(format="csv")).content.decode())))
    assert [r["to_release"] for r in as_csv] == [r["to_release"] for r in rows]
    assert client.get("/series/s/matrix.json?" + query.params()).json() == rows


def test_matrix_json_equals_the_export_command(client: Client, series: str) -> None:
    out = io.StringIO()
    call_command("export", "--series", "s", "--what", "deviations", stdout=out)
    exported = sorted(json.loads(out.getvalue()), key=lambda r: (r["function"], r["to_release"]))
    shown = sorted(client.get("/series/s/matrix.json").json(),
                   key=lambda r: (r["function"], r["to_release"]))
    assert shown == exported


def test_bad_controls_fall_back_to_defaults(client: Client, series: str) -> None:
    response = client.get("/series/s/?metric=evil&rule=<x>&page=-3&per=abc")
    assert response.status_code == 200
    assert MatrixQuery.from_params({"metric": "evil", "page": "-3"}) == MatrixQuery(page=1)


def test_function_page_table_and_runs(client: Client, series: str) -> None:
    paint = Function.objects.get(name="Paint")
    page = client.get(f"/series/s/functions/{paint.pk}/?runs=1")
    html = page.content.decode()
    figure = figure_of(html, "function-figure")
    runs = next(t for t in figure["data"] if t["name"] == "runs")
    assert len(runs["y"]) == 12  # 4 releases × 3 runs
    # x: the release's position, jittered (a strip chart).
    shown = sorted((round(x), y) for x, y in zip(runs["x"], runs["y"], strict=True))
    traced = sorted((r, d) for r, durations in enumerate(PAINT.values()) for d in durations)
    assert [x for x, _ in shown] == [v for v, _ in traced]
    scale = shown[0][1] / traced[0][1]  # the chart's unit
    assert [y for _, y in shown] == pytest.approx([d * scale for _, d in traced])
    assert "narrowing-figure" in html
    rows = client.get(f"/series/s/functions/{paint.pk}/?format=json").json()
    assert [r["verdict"] for r in rows] == [None, "nonsignificant_overlap", "regression",
                                            "nonsignificant_overlap"]
    # The table words the verdicts as the matrix's legend does; exports keep the codes.
    assert "<td>regression (slower)" in html
    assert "<td>no significant difference" in html
    assert ">nonsignificant_overlap<" not in html
    assert rows[2]["median"] == pytest.approx(300)


def test_release_page_lists_the_top_changes(client: Client, series: str) -> None:
    html = client.get("/series/s/releases/1.2/").content.decode()
    assert 'id="regressions"' in html
    # Links keep the rule shown (the series' default here, paper).
    assert "Against <a href=\"/series/s/releases/1.1/?rule=paper\">1.1</a>" in html
    # each change links to "how many more runs?" for the two releases (issue 22, part 4)
    assert "/series/s/compare/precision/?base=1.1&amp;new=1.2&amp;function=" in html
    assert ">how many more?</a>" in html
    rows = client.get("/series/s/releases/1.2/?format=json").json()
    assert [(r["function"], r["verdict"]) for r in rows] == [("Paint", "regression")]


def test_series_list_shows_the_latest_pair(client: Client, series: str) -> None:
    html = client.get("/").content.decode()
    assert "1.2 → 1.3" in html
    assert client.get("/?format=json").json() == [{
        "series": "s", "releases": 4, "runs": 12, "latest_from": "1.2", "latest_to": "1.3",
        "regressions": 0, "improvements": 0, "newest_not_compared": None,
        "releases_lacking_runs": "",
    }]


def test_releases_with_one_run_or_none_are_named_not_dropped(
    client: Client, series: str, tmp_path: Path
) -> None:
    """A release with one run is a column: the shift rule judges it, and pages say the
    paper rule cannot. A release with no done run is no column, and every page says so:
    the series list (the newest one is not silently skipped), the matrix page, the
    release."""
    path = tmp_path / "1.4-0.json"
    path.write_text(json.dumps(renderer_events([("Paint", 0, 300)])))
    call_command("ingest_traces", "--series", "s", "--release", "1.4", str(path),
                 stdout=io.StringIO())
    home = client.get("/").content.decode()
    assert "1.3 → 1.4" in home
    row = client.get("/?format=json").json()[0]
    assert (row["newest_not_compared"], row["releases_lacking_runs"]) == (None, "")
    html = client.get("/series/s/").content.decode()  # the series' rule: paper
    assert 'id="one-run"' in html
    assert "1 release of this series has one run: the seed 003 paper rule needs 2" in html
    paint = Function.objects.get(name="Paint", series__name="s")
    rows = client.get(f"/series/s/functions/{paint.pk}/?format=json").json()
    assert (rows[-1]["release"], rows[-1]["n"], rows[-1]["verdict"]) == ("1.4", 1, None)
    rows = client.get(f"/series/s/functions/{paint.pk}/?format=json&rule=shifts").json()
    assert rows[-1]["verdict"] in ("nonsignificant_overlap", "significant_overlap")
    release = client.get("/series/s/releases/1.4/").content.decode()
    assert "This release has 1 done run: the seed 003 paper rule needs 2" in release
    # A release whose runs all failed: no column, named everywhere.
    bad = tmp_path / "1.5-0.json"
    bad.write_text("{not json")
    with pytest.raises(CommandError):
        call_command("ingest_traces", "--series", "s", "--release", "1.5", str(bad),
                     stdout=io.StringIO())
    home = client.get("/").content.decode()
    assert "1.3 → 1.4" in home
    assert "newest release 1.5 has 0 done runs: not compared yet (no done run)" in home
    assert "1 with no done run yet, not compared: 1.5" in home
    row = client.get("/?format=json").json()[0]
    assert (row["newest_not_compared"], row["releases_lacking_runs"]) == ("1.5", "1.5")
    html = client.get("/series/s/").content.decode()
    assert 'id="lacking-runs"' in html
    release = client.get("/series/s/releases/1.5/").content.decode()
    assert "This release has no done run yet: it is not a column of the matrix" in release


@pytest.fixture
def long_series(tmp_path: Path) -> str:
    """Series "long": 12 releases of 5 runs (the shift rule's own default), Paint ×2 from
    release 1.6 on, Layout steady."""
    for r in range(12):
        version = f"1.{r}"
        files = []
        for k in range(5):
            path = tmp_path / f"long-{version}-{k}.json"
            paint = (100 if r < 6 else 200) + 3 * ((k + r) % 5)
            path.write_text(json.dumps(renderer_events([("Paint", 0, paint),  # unique files
                                                        ("Layout", 10_000, 50 + k + 7 * r)])))
            files.append(str(path))
        call_command("ingest_traces", "--series", "long", "--release", version, *files,
                     stdout=io.StringIO())
    return "long"


def test_provisional_verdicts_are_marked(client: Client, long_series: str) -> None:
    """The shift rule's verdict at a boundary is final once 5 releases of 5 runs follow it:
    the newest 4 pairs say how many releases they still wait for; the paper rule's verdicts
    depend on their pair only."""
    out = io.StringIO()
    call_command("export", "--series", "long", "--what", "deviations", "--rule", "shifts",
                 stdout=out)
    rows = json.loads(out.getvalue())
    by_pair = {(r["function"], r["to_release"]): r for r in rows}
    for r in range(1, 12):
        row = by_pair["Layout", f"1.{r}"]
        assert row["provisional"] is (r >= 8), row
        # Final once release r+4 exists: r - 7 more releases of 5 runs.
        assert row["final_within"] == max(0, r - 7), row
    paint = by_pair["Paint", "1.6"]
    assert (paint["verdict"], paint["provisional"]) == ("regression", False)
    assert paint["diff"] > 0
    assert paint["diff_lo"] > 0
    assert paint["p_value"] <= 1e-3
    out = io.StringIO()
    call_command("export", "--series", "long", "--what", "deviations", "--rule", "paper",
                 stdout=out)
    assert not any(r["provisional"] for r in json.loads(out.getvalue()))
    html = client.get("/series/long/?rule=shifts").content.decode()
    assert 'id="provisional"' in html
    assert 'id="provisional"' not in client.get("/series/long/?rule=paper").content.decode()


def test_function_page_with_the_mean_estimator(client: Client, series: str) -> None:
    paint = Function.objects.get(name="Paint")
    rows = client.get(f"/series/s/functions/{paint.pk}/?estimator=mean&rule=paper"
                      "&format=json").json()
    means = [sum(v) / len(v) for v in PAINT.values()]
    assert [r["mean"] for r in rows] == pytest.approx(means)
    assert rows[2]["diff"] == pytest.approx(means[2] - means[1])  # the mean's difference
    assert rows[2]["median"] == pytest.approx(300)  # both intervals are shown
    assert client.get(f"/series/s/functions/{paint.pk}/?estimator=mean&runs=1").status_code \
        == 200


def test_matrix_pages_keep_what_they_assembled_until_a_new_analysis(
    client: Client, series: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from deviations.traces import store

    def read(url: str) -> dict[str, int]:
        """Deviation records and blocks of cells read by a request."""
        store.reset_reads()
        assert client.get(url).status_code == 200
        return {"records": store.READS["records"], "blocks": store.READS["blocks"]}

    def records_read(url: str) -> int:
        return read(url)["records"]

    assert read("/series/s/")["records"] >= 1
    # The same page again reads nothing; another page, filter or sort of the same analysis
    # and window ranks from what it kept (no record read again) and reads only its rows'
    # cells; another window of releases reads its own records once.
    assert read("/series/s/") == {"records": 0, "blocks": 0}
    assert records_read("/series/s/?sort=name&q=pai") == 0
    assert records_read("/series/s/matrix.json?per=1&page=2") == 0
    assert records_read("/series/s/?sort=name&q=pai&first=1.1") >= 1
    assert records_read("/series/s/matrix.json?first=1.1&sort=gap") == 0
    # A new release is a new analysis (generation): the page shows it at once.
    files = []
    for k, dur in enumerate([305, 300, 302]):
        path = tmp_path / f"1.4-{k}.json"
        path.write_text(json.dumps(renderer_events([("Paint", 0, dur)])))
        files.append(str(path))
    call_command("ingest_traces", "--series", "s", "--release", "1.4", *files,
                 stdout=io.StringIO())
    assert records_read("/series/s/") >= 1
    figure = figure_of(client.get("/series/s/").content.decode(), "matrix-figure")
    assert "1.4" in {x for t in figure["data"] for x in t["x"]}


def test_a_new_minimum_change_shows_at_once_on_a_kept_page(client: Client, series: str) -> None:
    """The kept matrix is read through the series' minimum practical change: changing it
    (admin, API) must not wait for the next analysis."""
    from deviations.traces.models import Series

    def regressions() -> list[str]:
        figure = figure_of(client.get("/series/s/?rule=paper").content.decode(), "matrix-figure")
        return [y for t in figure["data"] if t["name"] == "regression" for y in t["y"]]

    assert regressions() == ["Paint"]
    Series.objects.filter(name="s").update(min_absolute_change_us=1_000)  # Paint: +200 µs
    assert regressions() == []


def test_kept_arrays_cannot_be_modified(series: str) -> None:
    from deviations.traces.matrix import _assembled, release_window
    from deviations.traces.models import Series

    shown = Series.objects.get(name="s")
    window = release_window(shown, MatrixQuery())
    assert window is not None
    assembled = _assembled(shown, MatrixQuery(), window)
    assert assembled is not None
    found = assembled.found
    with pytest.raises(ValueError, match="read-only"):
        found["verdict"][0, 0] = 0


def export_rows(*rule: str) -> list[dict[str, Any]]:
    out = io.StringIO()
    call_command("export", "--series", "s", "--what", "deviations", *rule, stdout=out)
    return sorted(json.loads(out.getvalue()), key=lambda r: (r["function"], r["to_release"]))


def test_the_shift_rule_is_the_default_and_the_legend_names_it(
    client: Client, long_series: str
) -> None:
    assert Series.objects.get(name="long").default_rule == "shifts"
    html = client.get("/series/long/").content.decode()
    legend = re.search(r'<p class="muted" id="rule-legend">Rule: <b>([^<]*)</b>([^.]*)\.', html)
    assert legend is not None
    assert legend.group(1).startswith("level shifts: ")
    assert legend.group(2) == (", this series' default; a verdict is final once the releases "
                               "after it hold 25 runs (at least 5, at most 12 releases)")
    options = re.findall(r'<option value="(\w+)" (selected)?>([^<]*)</option>',
                         html[html.index('name="rule"'):])[:2]
    assert options == [("shifts", "selected", "level shifts (default)"),
                       ("paper", "", "seed 003 paper rule")]
    assert 'id="provisional"' in html  # the newest pairs wait for releases
    # Exports: the default is the series' rule; --rule shifts the same rows.
    out = io.StringIO()
    call_command("export", "--series", "long", "--what", "deviations", stdout=out)
    rows = sorted(json.loads(out.getvalue()), key=lambda r: (r["function"], r["to_release"]))
    out = io.StringIO()
    call_command("export", "--series", "long", "--what", "deviations", "--rule", "shifts",
                 stdout=out)
    assert rows == sorted(json.loads(out.getvalue()),
                          key=lambda r: (r["function"], r["to_release"]))
    assert [(r["function"], r["to_release"]) for r in rows
            if r["verdict"] in ("regression", "improvement")] == [("Paint", "1.6")]
    shown = sorted(client.get("/series/long/matrix.json").json(),
                   key=lambda r: (r["function"], r["to_release"]))
    assert shown == rows
    assert client.get("/series/long/?format=json&rule=shifts").json() == \
        client.get("/series/long/?format=json").json()
    # Another default: the selector, the legend and the export follow it.
    Series.objects.filter(name="long").update(default_rule="paper")
    html = client.get("/series/long/").content.decode()
    assert '<option value="paper" selected>seed 003 paper rule (default)</option>' in html
    assert "Rule: <b>seed 003 paper rule: " in html
    html = client.get("/series/long/?rule=shifts").content.decode()
    assert "Rule: <b>level shifts: " in html
    assert "this series' default" not in html


def test_a_series_of_one_run_releases_has_an_analysis(client: Client, tmp_path: Path) -> None:
    """Most CI series measure each release once (issue 19): every release is a column, and
    a step with enough releases either side of it is flagged, provisional until 12
    releases follow it, with the releases and runs it was judged from."""
    for r in range(16):
        path = tmp_path / f"one-{r}.json"
        paint = (200 if r >= 8 else 100) + (r * 7) % 5
        path.write_text(json.dumps(renderer_events([("Paint", 0, paint),
                                                    ("Layout", 10_000, 50 + r % 3)])))
        call_command("ingest_traces", "--series", "ci", "--release", f"2.{r}", str(path),
                     stdout=io.StringIO())
    html = client.get("/series/ci/").content.decode()
    assert "No analysis yet" not in html
    figure = figure_of(html, "matrix-figure")
    regression = next(t for t in figure["data"] if t["name"] == "regression")
    assert (regression["x"], regression["y"]) == (["2.8"], ["Paint"])
    rows = export_rows_of("ci")
    paint = next(r for r in rows if r["function"] == "Paint" and r["to_release"] == "2.8")
    assert (paint["verdict"], paint["provisional"], paint["runs_before"],
            paint["runs_after"]) == ("regression", True, 8, 8)
    assert paint["final_within"] == 4  # 12 releases after it: 2.19 makes it final
    assert paint["relative"] == pytest.approx(1.0, abs=0.1)


def export_rows_of(series: str) -> list[dict[str, Any]]:
    out = io.StringIO()
    call_command("export", "--series", series, "--what", "deviations", stdout=out)
    return list(json.loads(out.getvalue()))
