"""Links between the trace pages, in Debian's Chromium: a matrix point opens its function
with that release highlighted, a release label opens the release; and the matrix's rows
and legend keep their sizes whatever the number of rows."""

from __future__ import annotations

import io
from typing import Any

import pytest
from django.core.management import call_command

from deviations.management.commands.demo import SERIES
from deviations.traces import charts, demo
from tests.browser_checks import open_page
from tests.traces.test_matrix_browser import hover

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def demo_series() -> None:
    call_command("demo", "--runs", "5", stdout=io.StringIO())


def test_clicked_point_stays_highlighted_on_the_function_page(page: Any, demo_series) -> None:
    open_page(page, f"/series/{SERIES}/", charts=1)
    _, point = hover(page, "regression", "Paint", "Paint")
    page.mouse.click(point["x"], point["y"])
    page.wait_for_url("**/functions/*/**")
    page.locator("#function-chart[data-rendered=true]").wait_for()
    at = demo.RELEASES[8]
    assert f"at={at}" in page.url
    assert page.locator("#releases tr.highlight").count() == 1
    assert page.locator("#releases tr.highlight td").first.inner_text() == at
    outlined = page.evaluate("""() => document.getElementById('function-chart')._fullLayout
        .shapes.filter(s => s.name === 'highlight').map(s => [s.x0, s.x1])""")
    assert outlined == [[7.5, 8.5]]  # the slot of the 9th release


LABEL_MIDDLE = """(release) => {
  const text = [...document.querySelectorAll('#matrix .xtick text')]
    .find(t => t.textContent === release);
  text.scrollIntoView({block: "center"});  // controls above the matrix may push it below the fold
  const b = text.getBBox(), m = text.getScreenCTM();
  const p = new DOMPoint(b.x + b.width / 2, b.y + b.height / 2).matrixTransform(m);
  return [p.x, p.y];
}"""


def test_release_label_of_the_matrix_opens_the_release(page: Any, demo_series) -> None:
    open_page(page, f"/series/{SERIES}/", charts=1)
    # Where a person would click: the middle of the slanted label.
    x, y = page.evaluate(LABEL_MIDDLE, demo.RELEASES[5])
    page.mouse.click(x, y)
    page.wait_for_url(f"**/releases/{demo.RELEASES[5]}/**")
    assert page.inner_text("h1") == f"Release {demo.RELEASES[5]}"
    # ... whose function names open the function page.
    page.locator("table.grid td.fname a").first.click()
    page.wait_for_url("**/functions/*/**")


ROW_GAPS = """() => {
  const ax = document.getElementById('matrix')._fullLayout.yaxis;
  const ys = ax._categories.map((c, i) => ax.l2p(i));
  return ys.slice(1).map((y, i) => y - ys[i]);
}"""

LEGEND_SYMBOLS = """() => Object.fromEntries(
  [...document.querySelectorAll('#matrix .legend .traces')].map(g => [
             g.querySelector('.legendtext').textContent,
             g.querySelector('.legendpoints path').getBoundingClientRect().width]))"""


@pytest.mark.parametrize("per", [2, 16])
def test_matrix_rows_are_a_row_apart_and_legend_triangles_alike(
    page: Any, demo_series, per: int
) -> None:
    open_page(page, f"/series/{SERIES}/?per={per}", charts=1)
    gaps = page.evaluate(ROW_GAPS)
    assert len(gaps) == per - 1
    assert all(abs(g - charts.ROW_PX) < 1 for g in gaps), gaps
    box = page.locator("#matrix").bounding_box()
    height = page.evaluate("() => document.getElementById('matrix')._fullLayout.height")
    assert abs(box["height"] - height) < 2  # the div is the figure's height, no blank band
    sizes = page.evaluate(LEGEND_SYMBOLS)
    assert sizes["regression"] == pytest.approx(sizes["improvement"], abs=0.5), sizes
