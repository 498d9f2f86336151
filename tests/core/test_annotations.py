"""The marks notes leave on a figure (deviations.core.annotations.chart_marks)."""

from __future__ import annotations

import pytest

from deviations.core.annotations import LABEL_CHARS, chart_marks, clean_text
from deviations.core.errors import UserError


def test_marks_escape_stack_and_shorten() -> None:
    figure = {"data": [], "layout": {"shapes": [{"type": "rect"}]}}
    long = "switched the bots to headless Chromium on new hardware"
    chart_marks(figure, [("1.0", "<b>x</b>", "alice, 2026-11-24"), ("1.0", long, "bob"),
                         (3, "new bot", "carol")])
    layout = figure["layout"]
    assert [s["type"] for s in layout["shapes"]] == ["rect", "line", "line"]  # one per x
    first, second, third = layout["annotations"]
    assert first["text"] == "&lt;b&gt;x&lt;/b&gt;"
    assert first["hovertext"] == "&lt;b&gt;x&lt;/b&gt; (alice, 2026-11-24)"
    assert second["y"] < first["y"]  # stacked under the first note of the same release
    assert len(second["text"]) == LABEL_CHARS
    assert second["text"].endswith("…")
    assert long in second["hovertext"]
    assert third["x"] == 3


def test_text_is_one_trimmed_line() -> None:
    assert clean_text("  new\nbot \t") == "new bot"
    with pytest.raises(UserError, match="needs a text"):
        clean_text("\n")
    with pytest.raises(UserError, match="at most 500"):
        clean_text("x" * 501)
