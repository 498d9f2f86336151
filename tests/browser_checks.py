"""Layout checks shared by the pages' browser tests: nothing in a Plotly figure overlaps or
is cut, and the page does not scroll sideways.

Each SVG text Plotly draws (titles, axis titles, tick labels, legend entries, annotations;
hover labels excepted) is taken as the quadrilateral of its box in its own coordinates
mapped to the screen (``getBBox`` through ``getScreenCTM``), so rotated tick labels are
compared as the slanted rectangles they are rather than by their much larger upright
bounding boxes. Two quadrilaterals overlap when no edge of either separates them
(separating axis theorem); a text is cut when a corner leaves its figure's ``div``.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations
from typing import Any

from tests.conftest import ARTIFACTS

WIDTH = 1400
TOLERANCE_PX = 1.0
"""Overlaps and overhangs up to this depth are rounding, not a defect."""

_TEXTS_JS = """() => [...document.querySelectorAll('.js-plotly-plot')].map(gd => {
  const box = gd.getBoundingClientRect();
  const texts = [];
  for (const el of gd.querySelectorAll('.main-svg text, .infolayer text, .legend text')) {
    if (el.closest('.hoverlayer') || !el.textContent.trim()) continue;
    const style = getComputedStyle(el);
    if (style.display === 'none' || style.visibility === 'hidden' || +style.opacity === 0) continue;
    let hidden = false;
    for (let p = el.parentElement; p && p !== gd; p = p.parentElement) {
      const s = getComputedStyle(p);
      if (s.display === 'none' || +s.opacity === 0) { hidden = true; break; }
    }
    if (hidden) continue;
    const b = el.getBBox(), m = el.getScreenCTM();
    if (!b.width || !b.height || !m) continue;
    const corner = (x, y) => [m.a * x + m.c * y + m.e, m.b * x + m.d * y + m.f];
    const group = el.closest('g[class]');
    texts.push({text: el.textContent, kind: (el.getAttribute('class') || '') + ' in '
                + (group ? group.getAttribute('class') : ''),
                quad: [corner(b.x, b.y), corner(b.x + b.width, b.y),
                       corner(b.x + b.width, b.y + b.height), corner(b.x, b.y + b.height)]});
  }
  // Each axis title beside its own axis: its extent along the axis within the axis'.
  const titles = [];
  const svg = gd.querySelector('.main-svg').getBoundingClientRect();
  for (const [name, ax] of Object.entries(gd._fullLayout || {})) {
    if (!/^[xy]axis[0-9]*$/.test(name) || !ax._length) continue;
    const id = name[0] + name.slice(5);
    const el = gd.querySelector('.g-' + id + 'title text');
    if (!el || !el.textContent.trim()) continue;
    const r = el.getBoundingClientRect();
    const start = (name[0] === 'x' ? svg.left : svg.top) + ax._offset;
    titles.push({axis: name, text: el.textContent,
                 span: name[0] === 'x' ? [r.left, r.right] : [r.top, r.bottom],
                 extent: [start, start + ax._length]});
  }
  return {id: gd.id, box: [box.left, box.top, box.right, box.bottom], texts, titles};
})"""

_WIDE_JS = """() => ({scroll: document.documentElement.scrollWidth,
                     inner: document.documentElement.clientWidth})"""


@dataclass(frozen=True)
class Text:
    figure: str
    text: str
    kind: str
    quad: list[list[float]]


def _overlap_depth(a: list[list[float]], b: list[list[float]]) -> float:
    """How deep two convex quadrilaterals overlap: the least penetration over the edge
    normals of both (separating axis theorem); <= 0 when an axis separates them."""
    depth = float("inf")
    for quad in (a, b):
        for i in range(4):
            (x0, y0), (x1, y1) = quad[i], quad[(i + 1) % 4]
            nx, ny = y0 - y1, x1 - x0
            norm = (nx * nx + ny * ny) ** 0.5
            if norm == 0:
                continue
            pa = [(x * nx + y * ny) / norm for x, y in a]
            pb = [(x * nx + y * ny) / norm for x, y in b]
            depth = min(depth, min(max(pa), max(pb)) - max(min(pa), min(pb)))
    return depth


def layout_problems(page: Any) -> list[str]:
    """Overlapping or cut texts of every Plotly figure on the page, and sideways scroll."""
    problems = []
    for fig in page.evaluate(_TEXTS_JS):
        left, top, right, bottom = fig["box"]
        texts = [Text(fig["id"], t["text"], t["kind"], t["quad"]) for t in fig["texts"]]
        for t in texts:
            xs = [p[0] for p in t.quad]
            ys = [p[1] for p in t.quad]
            if (min(xs) < left - TOLERANCE_PX or max(xs) > right + TOLERANCE_PX
                    or min(ys) < top - TOLERANCE_PX or max(ys) > bottom + TOLERANCE_PX):
                problems.append(f"#{t.figure}: {t.text!r} ({t.kind}) is cut by the figure's edge")
        for t in fig["titles"]:
            (lo, hi), (start, end) = t["span"], t["extent"]
            if lo < start - TOLERANCE_PX or hi > end + TOLERANCE_PX:
                problems.append(f"#{fig['id']}: the title {t['text']!r} of {t['axis']} spans "
                                f"{lo:.0f}-{hi:.0f} px, beyond its axis ({start:.0f}-{end:.0f})")
        for a, b in combinations(texts, 2):
            if _overlap_depth(a.quad, b.quad) > TOLERANCE_PX:
                problems.append(
                    f"#{a.figure}: {a.text!r} ({a.kind}) overlaps {b.text!r} ({b.kind})")
    wide = page.evaluate(_WIDE_JS)
    if wide["scroll"] > wide["inner"] + TOLERANCE_PX:
        problems.append(f"the page scrolls sideways: {wide['scroll']} px wide in {wide['inner']}")
    return problems


def open_page(page: Any, url: str, charts: int = 0) -> None:
    """Open ``url`` at WIDTH px and wait until its ``charts`` Plotly figures are drawn."""
    page.set_viewport_size({"width": WIDTH, "height": 900})
    page.goto(url)
    if charts:
        page.wait_for_function(
            f"document.querySelectorAll('.js-plotly-plot .main-svg').length >= {charts}")
        page.wait_for_function(
            "[...document.querySelectorAll('.js-plotly-plot')].every(gd => gd._fullLayout)")
        page.wait_for_timeout(300)  # automargin redraws once after the first draw


def check_layout(page: Any, name: str) -> None:
    """Screenshot the whole page to test-artifacts/<name>.png, then fail on any overlap or
    cut text (the screenshot is taken first, to look at what failed)."""
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)
    problems = layout_problems(page)
    assert not problems, f"{name}: " + "\n".join(problems)
