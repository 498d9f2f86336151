"""Details of the trace pages (issue 14, "Pages"), without a browser: the run page's parse
summary as a table and its trace file, the matrix's From/to range, the function page's one
unit, and the links between pages. The layout is checked in test_layout_browser.py."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.test import Client

from deviations.traces import charts
from deviations.traces.models import Function, Run, Series
from deviations.traces.uploads.runs import ThreadOptions, get_release, register_run
from tests.conftest import renderer_events

pytestmark = pytest.mark.django_db


def two_releases(tmp_path: Path, paint_us: tuple[int, int] = (100, 300)) -> None:
    """Series "small": Paint from paint_us[0] to paint_us[1] µs, Layout steady."""
    for version, paint in zip(("1.0", "1.1"), paint_us, strict=True):
        files = []
        for k in range(3):
            path = tmp_path / f"{version}-{k}.json"
            path.write_text(json.dumps(renderer_events([("Paint", 0, paint + k),
                                                        ("Layout", 10_000, 50 + k)])))
            files.append(str(path))
        call_command("ingest_traces", "--series", "small", "--release", version, *files,
                     stdout=io.StringIO())
        # Two releases: the rule that can flag them (the recommended one needs more) and
        # links without a rule parameter (it is the series' default).
        Series.objects.filter(name="small").update(default_rule="paper")


def test_run_page_shows_the_summary_as_a_table_and_no_error(client: Client, tmp_path) -> None:
    two_releases(tmp_path)
    run = Run.objects.filter(status=Run.DONE).first()
    html = client.get(f"/runs/{run.pk}/").content.decode()
    assert '<table class="grid" id="run-summary">' in html
    assert "<th>Events read</th>" in html
    assert "CrRendererMain of Renderer (pid 7, tid 1)" in html
    assert "{&#x27;events&#x27;" not in html
    assert "'events'" not in html
    assert "Error" not in html
    assert 'id="run-error"' not in html
    assert 'href="/series/small/"' in html  # the series, from the run
    # The CLI keeps the file too: the page links to it, byte for byte.
    assert f'href="/runs/{run.pk}/file"' in html
    assert "kept as long as the run" in html
    response = client.get(f"/runs/{run.pk}/file")
    assert b"".join(response.streaming_content) == (tmp_path / run.file_name).read_bytes()


def test_failed_run_shows_its_error(client: Client, tmp_path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{nope")
    with pytest.raises(Exception):  # noqa: B017, PT011 - the CLI exits non-zero
        call_command("ingest_traces", "--series", "s", "--release", "1", str(bad),
                     stdout=io.StringIO())
    run = Run.objects.get()
    html = Client().get(f"/runs/{run.pk}/").content.decode()
    assert re.search(r'<dd id="run-error" class="error">bad.json: ', html)
    assert "None: the file could not be parsed." in html


def test_a_pending_run_offers_its_trace_file(client: Client, settings, tmp_path) -> None:
    settings.MEDIA_ROOT = tmp_path / "media"
    data = json.dumps({"traceEvents": renderer_events([("Paint", 0, 10)])}).encode()
    entry = register_run(get_release("up", "1.0"), io.BytesIO(data), "my trace.json",
                         ThreadOptions())
    run = entry.run
    assert run.status == Run.PENDING
    assert run.file_stored
    html = client.get(f"/runs/{run.pk}/").content.decode()
    assert f'href="/runs/{run.pk}/file"' in html
    assert "Not parsed yet" in html
    response = client.get(f"/runs/{run.pk}/file")
    assert response.status_code == 200
    assert b"".join(response.streaming_content) == data
    assert 'filename="my trace.json"' in response["Content-Disposition"]


def test_backwards_range_says_so(client: Client, tmp_path) -> None:
    two_releases(tmp_path)
    html = client.get("/series/small/?first=1.1&last=1.0").content.decode()
    assert "From 1.1 comes after to 1.0" in html
    same = client.get("/series/small/?first=1.0&last=1.0").content.decode()
    assert "a range needs two releases" in same
    assert 'id="range-problem"' not in client.get("/series/small/?first=1.0&last=1.1")\
        .content.decode()


def figure(html: str, element: str) -> dict[str, Any]:
    found = re.search(rf'<script id="{element}" type="application/json">(.*?)</script>', html)
    assert found is not None
    return dict(json.loads(found.group(1)))


def test_matrix_release_labels_link_to_release_pages(client: Client, tmp_path) -> None:
    two_releases(tmp_path)
    html = client.get("/series/small/?rule=shifts").content.decode()
    xaxis = figure(html, "matrix-figure")["layout"]["xaxis"]
    assert xaxis["ticktext"] == [
        '<a href="/series/small/releases/1.1/?rule=shifts" target="_self">1.1</a>']  # kept
    assert xaxis["tickvals"] == ["1.1"]


def test_release_page_links_functions_and_the_previous_release(client: Client, tmp_path):
    two_releases(tmp_path)
    paint = Function.objects.get(name="Paint")
    layout = Function.objects.get(name="Layout")
    html = client.get("/series/small/releases/1.1/").content.decode()
    # Links keep the rule shown (the series' rule, paper, named: the site's default differs).
    assert f'href="/series/small/functions/{paint.pk}/?rule=paper"' in html
    assert f'href="/series/small/functions/{layout.pk}/?rule=paper"' in html  # the table too
    assert 'Against <a href="/series/small/releases/1.0/?rule=paper">1.0</a>' in html


@pytest.mark.parametrize(("paint_us", "unit"), [((100, 300), "µs"), ((4000, 9000), "ms")])
def test_function_page_uses_one_unit(client: Client, tmp_path, paint_us, unit) -> None:
    two_releases(tmp_path, paint_us)
    paint = Function.objects.get(name="Paint")
    html = client.get(f"/series/small/functions/{paint.pk}/?runs=1&at=1.1").content.decode()
    assert f"Median ({unit}) [95% CI]" in html
    assert f"Change ({unit}) [95% CI]" in html
    other = "ms" if unit == "µs" else "µs"
    assert f"({other})" not in html
    fig = figure(html, "function-figure")
    assert fig["layout"]["yaxis"]["title"]["text"] == f"time ({unit})"
    assert figure(html, "narrowing-figure")["layout"]["yaxis2"]["title"]["text"] \
        == f"CI width ({unit})"
    median = fig["data"][1]
    assert median["name"] == "median CI"
    shown = f"{paint_us[1] + 1:.1f}" if unit == "µs" else f"{(paint_us[1] + 1) / 1000:.3f}"
    assert median["y"][1] == float(shown)
    assert f"<td class=\"num\">{shown} [" in html  # the table in the chart's unit
    # The release the matrix click came from is outlined, in the chart and the table.
    assert [s for s in fig["layout"]["shapes"] if s.get("name") == "highlight"][0]["x0"] == 0.5
    assert re.search(r'<tr class="verdict-\w+ highlight">\s*<td><a href="/series/small/'
                     r'releases/1.1/\?rule=paper">1.1</a>', html)


def test_unit_for() -> None:
    assert charts.unit_for([100.0, 900.0, 5000.0]) == "us"
    assert charts.unit_for([1000.0, 2000.0, float("nan")]) == "ms"
    assert charts.unit_for([]) == "us"



def test_release_page_uses_one_unit(client: Client, tmp_path) -> None:
    two_releases(tmp_path, (4000, 9000))
    html = client.get("/series/small/releases/1.1/").content.decode()
    assert "Change (ms) [95% CI]" in html
    assert "Self (ms)" in html
    assert "µs" not in html
    assert '<td class="num">5.000 [' in html  # 9,001 - 4,001 µs
