"""The deviation matrix in Debian's Chromium: hover, click through, escaping, and the
plotly.js bundle each page loads (the basic one, the full one for WebGL).

Screenshots go to test-artifacts/ (matrix*.png, function.png, xss-*.png).
"""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command

from deviations.core import staticfinders
from deviations.management.commands.demo import SERIES
from deviations.traces import charts, demo
from tests.conftest import ARTIFACTS, renderer_events

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

HOVER_POINT = """([trace, y]) => {
  const gd = document.getElementById('matrix');
  const t = gd._fullData.find(d => d.name === trace);
  const i = t.y.indexOf(y);
  const fl = gd._fullLayout, box = gd.getBoundingClientRect();
  // Category positions by index: release names such as "1.1" would read as numbers.
  const px = (ax, v) => ax.l2p(ax._categoriesMap[v]);
  return {x: box.left + fl._size.l + px(fl.xaxis, t.x[i]),
          y: box.top + fl._size.t + px(fl.yaxis, t.y[i]), custom: t.customdata[i]};
}"""


def hover(page: Any, trace: str, function: str, shown_as: str) -> tuple[str, list[Any]]:
    """Move the mouse onto a point of the matrix; the hover label's text and the point data.

    ``function`` is the point's y value (escaped), ``shown_as`` the name the label shows.
    The mouse jumps from outside the plot straight onto the point, so that no neighbour's
    label shows on the way, and the test waits for the label of this point.
    """
    point = page.evaluate(HOVER_POINT, [trace, function])
    page.mouse.move(0, 0)
    page.mouse.move(point["x"], point["y"])
    label = page.locator("#matrix .hoverlayer .hovertext").filter(has_text=shown_as)
    label.first.wait_for()
    return label.first.text_content(), point


def test_hover_a_triangle_and_click_through(page: Any) -> None:
    call_command("demo", "--runs", "5", stdout=io.StringIO())
    page.goto(f"/series/{SERIES}/?rule=shifts")
    page.locator("#matrix[data-rendered=true]").wait_for()
    page.screenshot(path=str(ARTIFACTS / "matrix.png"), full_page=True)
    text, point = hover(page, "regression", "Paint", "Paint")
    page.screenshot(path=str(ARTIFACTS / "matrix-hover.png"))
    before, after = demo.RELEASES[7], demo.RELEASES[8]
    out = io.StringIO()
    call_command("export", "--series", SERIES, "--what", "deviations", "--rule", "shifts",
                 stdout=out)
    row = next(r for r in json.loads(out.getvalue())
               if r["function"] == "Paint" and r["to_release"] == after)
    assert "Paint" in text
    assert f"{before} → {after}" in text
    assert "regression" in text
    shown = re.search(r"change: ([+-][0-9.]+) \[", text)
    assert shown is not None
    assert float(shown.group(1)) == pytest.approx(row["diff"] / 1000, abs=1.5e-3)  # ms
    assert f"({row['relative']:+.1%})" in text  # the verdict's own relative change
    assert "p = " in text
    assert "runs before" in text
    page.mouse.click(point["x"], point["y"])
    page.wait_for_url("**/functions/*/**")
    page.locator("#function-chart[data-rendered=true]").wait_for()
    assert page.inner_text("h1") == "Paint"
    assert "regression" in page.inner_text("#releases")
    triangles = page.evaluate(
        """() => document.getElementById('function-chart')._fullData
                 .filter(t => t.marker && t.marker.symbol === 'triangle-up')
                 .map(t => t.x.length)"""
    )
    assert sum(triangles) >= 1  # the deviation is marked on the chart
    assert page.locator("#function-chart .errorbar").count() >= 2 * len(demo.RELEASES)
    page.screenshot(path=str(ARTIFACTS / "function.png"), full_page=True)


def test_the_default_rule_is_the_shift_rule_and_the_legend_says_so(page: Any) -> None:
    call_command("demo", "--runs", "5", stdout=io.StringIO())
    page.goto(f"/series/{SERIES}/")
    page.locator("#matrix[data-rendered=true]").wait_for()
    page.screenshot(path=str(ARTIFACTS / "matrix-shifts.png"), full_page=True)
    assert page.inner_text("#rule-legend").startswith("Rule: level shifts: ")
    assert "this series' default" in page.inner_text("#rule-legend")
    rule = page.locator("select[name=rule]")
    assert rule.locator("option:checked").inner_text() == "level shifts (default)"
    assert rule.locator("option").all_inner_texts() == [
        "level shifts (default)", "seed 003 paper rule"]
    # The matrix draws the demo's planted changes, and only them.
    points = page.evaluate(
        """() => Object.fromEntries(document.getElementById('matrix')._fullData
                 .filter(t => t.name === 'regression' || t.name === 'improvement')
                 .map(t => [t.name, t.y.map((y, i) => y + ' ' + t.x[i]).sort()]))"""
    )
    assert points == {
        "regression": sorted([f"Paint {demo.RELEASES[8]}",
                              f"V8.ScriptCompiler {demo.RELEASES[4]}"]),
        "improvement": sorted([f"Layout {demo.RELEASES[12]}",
                               f"V8.ScriptCompiler {demo.RELEASES[8]}"]),
    }
    text, _ = hover(page, "regression", "Paint", "Paint")
    assert f"{demo.RELEASES[7]} → {demo.RELEASES[8]}" in text
    rule.select_option("paper")
    page.click("form.controls button[type=submit] >> nth=0")
    page.wait_for_url("**rule=paper**")
    assert page.inner_text("#rule-legend").startswith("Rule: seed 003 paper rule: ")
    assert "this series' default" not in page.inner_text("#rule-legend")


def test_hostile_function_name_is_text_everywhere(page: Any, tmp_path: Path) -> None:
    hostile = "<img src=x onerror=alert(1)>"
    for version, durations in {"1.0": [100, 102, 98], "1.1": [400, 410, 395]}.items():
        files = []
        for k, dur in enumerate(durations):
            path = tmp_path / f"{version}-{k}.json"
            path.write_text(json.dumps(renderer_events([(hostile, 0, dur), ("Ok", 1000, 50 + k)])))
            files.append(str(path))
        call_command("ingest_traces", "--series", "xss", "--release", version, *files,
                     stdout=io.StringIO())
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    # Two releases of three runs: only the paper rule can flag them (the series' default,
    # the recommended rule, needs more releases for its windows).
    page.goto("/series/xss/?rule=paper")
    page.locator("#matrix[data-rendered=true]").wait_for()
    text, point = hover(page, "regression", "&lt;img src=x onerror=alert(1)&gt;", hostile)
    assert hostile in text  # shown as the literal name
    assert page.locator("#functions").inner_text().startswith("Function")
    assert hostile in page.locator("#functions").inner_text()
    page.screenshot(path=str(ARTIFACTS / "xss-matrix.png"), full_page=True)
    page.mouse.click(point["x"], point["y"])
    page.locator("#function-chart[data-rendered=true]").wait_for()
    assert page.inner_text("h1") == hostile
    page.goto("/series/xss/releases/1.1/?rule=paper")
    assert hostile in page.inner_text("#regressions")
    page.screenshot(path=str(ARTIFACTS / "xss-release.png"), full_page=True)
    assert page.locator("img[src=x]").count() == 0
    assert dialogs == []


PLOTLY_STATE = """() => ({
  scripts: [...document.scripts].map(s => s.src).filter(s => s.includes('plotly')),
  traces: Object.keys(Plotly.PlotSchema.get().traces).sort(),
  drawn: document.getElementById('matrix')._fullData
    .filter(t => t.x.length).map(t => [t.name, t.type, t.visible]),
  canvases: document.querySelectorAll('#matrix canvas').length,
})"""


def small_series(tmp_path: Path) -> None:
    """Series "small": Paint triples from 1.0 to 1.1, Layout does not move."""
    for version, paint in {"1.0": [100, 102, 98], "1.1": [300, 306, 297]}.items():
        files = []
        for k, dur in enumerate(paint):
            path = tmp_path / f"{version}-{k}.json"
            path.write_text(json.dumps(renderer_events([("Paint", 0, dur),
                                                        ("Layout", 1000, 50 + k)])))
            files.append(str(path))
        call_command("ingest_traces", "--series", "small", "--release", version, *files,
                     stdout=io.StringIO())


def draw_matrix(page: Any) -> dict[str, Any]:
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto("/series/small/?rule=paper")  # two releases: the rule that can flag them
    page.locator("#matrix[data-rendered=true]").wait_for()
    state = page.evaluate(PLOTLY_STATE)
    assert errors == []
    return dict(state)


def test_matrix_is_drawn_with_the_basic_bundle(page: Any, tmp_path: Path) -> None:
    small_series(tmp_path)
    state = draw_matrix(page)
    assert [s.rsplit("/", 1)[1] for s in state["scripts"]] == ["plotly-basic.min.js"]
    assert state["traces"] == sorted(staticfinders.BASIC_TRACES), (
        "the basic path serves another bundle: run npm ci (make install does)"
    )
    assert state["drawn"] == [["regression", "scatter", True],
                              ["non-significant overlap", "scatter", True]]
    assert state["canvases"] == 0  # SVG only
    assert page.locator("#matrix .scatterlayer .trace").first.locator(".point").count() == 1
    page.screenshot(path=str(ARTIFACTS / "matrix-basic-bundle.png"), full_page=True)


def test_webgl_matrix_loads_the_full_bundle(
    page: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(charts, "SVG_MAX_POINTS", 0)  # as a page of more points would be
    small_series(tmp_path)
    state = draw_matrix(page)
    assert [s.rsplit("/", 1)[1] for s in state["scripts"]] == ["plotly.min.js"]
    assert "scattergl" in state["traces"]
    assert state["drawn"] == [["regression", "scattergl", True],
                              ["non-significant overlap", "scattergl", True]]
    assert state["canvases"] > 0
    text, _ = hover(page, "regression", "Paint", "Paint")
    assert "1.0 → 1.1" in text
    page.screenshot(path=str(ARTIFACTS / "matrix-webgl.png"), full_page=True)


def test_names_with_quotes_read_as_written_on_the_axes(page: Any, tmp_path: Path) -> None:
    """Issue 23: tick labels showed &quot; and &#x27; for names with quotes."""
    quoted = """Say "hi" & it's <fine>"""
    for version, durations in {"1.0": [100, 102, 98], "1.1": [400, 410, 395]}.items():
        files = []
        for k, dur in enumerate(durations):
            path = tmp_path / f"q{version}-{k}.json"
            path.write_text(json.dumps(renderer_events([(quoted, 0, dur)])))
            files.append(str(path))
        call_command("ingest_traces", "--series", "quotes", "--release", version, *files,
                     stdout=io.StringIO())
    page.goto("/series/quotes/?rule=paper")
    page.locator("#matrix[data-rendered=true]").wait_for()
    ticks = page.locator("#matrix .ytick text").all_text_contents()
    assert ticks == [quoted]


CROSS_LABEL = """() => {
  const r = document.querySelector('#matrix .hoverlayer .hovertext').getBoundingClientRect();
  return {left: r.left, right: r.right, y: r.top + r.height / 2};
}"""


def test_crossing_an_open_label_raises_nothing_and_the_next_label_shows(page: Any) -> None:
    """The pointer moved across an open hover label: plotly.js 4.1.1's label handler threw
    on every move ("Cannot set property target of #<Event>"), and the point under the
    label never got its own. The site's style lets the pointer through the labels."""
    call_command("demo", "--runs", "3", stdout=io.StringIO())
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(f"/series/{SERIES}/")
    page.locator("#matrix[data-rendered=true]").wait_for()
    hover(page, "regression", "Paint", "Paint")
    label = page.evaluate(CROSS_LABEL)
    # Across the whole label, left to right, in small steps: every move is over the label.
    page.mouse.move(label["left"] + 2, label["y"])
    page.mouse.move(label["right"] - 2, label["y"], steps=25)
    assert errors == []
    # Points lie under the label: what the pointer rests on now has a label of its own,
    # as anywhere else on the plot.
    page.locator("#matrix .hoverlayer .hovertext").first.wait_for()
    assert errors == []


MARGINS = """() => {
  const gd = document.getElementById('matrix'), fl = gd._fullLayout;
  const box = gd.getBoundingClientRect();
  const lefts = [...gd.querySelectorAll('.ytick text')].map(t => t.getBoundingClientRect().left);
  return {given: gd.layout.margin, drawn: fl._size, first: Math.min(...lefts) - box.left};
}"""


def test_the_matrix_is_drawn_once_with_room_for_its_labels(page: Any, tmp_path: Path) -> None:
    """Issue 24, the first draw: the left margin is measured for the function labels before
    Plotly draws (fit.js), so automargin pushes nothing and the 2,900 points of a page of
    the matrix are not drawn a second time. Wide names (W is the widest letter) are still
    not cut: automargin would have widened the margin, and the labels lie inside the
    figure."""
    wide = "W" * 30, "WWWW.mmmm::" + "W" * 40, "i" * 36
    for version, scale in {"1.0": 1, "1.1": 3}.items():
        files = []
        for k in range(3):
            path = tmp_path / f"w{version}-{k}.json"
            path.write_text(json.dumps(renderer_events(
                [(name, 1000 * j, (100 + k) * scale) for j, name in enumerate(wide)])))
            files.append(str(path))
        call_command("ingest_traces", "--series", "wide", "--release", version, *files,
                     stdout=io.StringIO())
    call_command("demo", "--runs", "3", stdout=io.StringIO())
    for url in ("/series/wide/?rule=paper", f"/series/{SERIES}/"):
        page.goto(url)
        page.locator("#matrix[data-rendered=true]").wait_for()
        state = page.evaluate(MARGINS)
        # The margins Plotly drew with are the ones given: nothing was pushed.
        assert state["drawn"]["l"] == state["given"]["l"], (url, state)
        assert state["drawn"]["b"] == state["given"]["b"], (url, state)
        assert state["drawn"]["t"] == state["given"]["t"], (url, state)
        assert state["first"] >= 0, (url, state)  # no label starts left of the figure
    page.screenshot(path=str(ARTIFACTS / "matrix-margins.png"), full_page=True)
