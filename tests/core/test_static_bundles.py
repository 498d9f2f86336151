"""The two plotly.js bundles (deviations/staticfinders.py): which one a figure needs, where
each is found, the fallback without node_modules, and the system check's warnings.

That the pages draw with the bundle they load is shown in Chromium by
tests/traces/test_matrix_browser.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.contrib.staticfiles import finders
from django.core.management import call_command
from django.core.management.base import SystemCheckError

from deviations.core import staticfinders
from deviations.core.staticfinders import BASIC_PATH, FULL_PATH, PlotlyFinder, bundle_for

BANNER = b"/**\n* plotly.js (basic - minified) v{}\n* Copyright 2012-2026, Plotly, Inc.\n*/\n"


def figure(*types: str | None) -> dict[str, object]:
    return {"data": [{"x": [1]} if t is None else {"type": t, "x": [1]} for t in types]}


@pytest.mark.parametrize(("figures", "path"), [
    ([figure("scatter", "bar")], BASIC_PATH),
    ([figure(None)], BASIC_PATH),  # Plotly's default trace type is scatter
    ([figure("pie"), None], BASIC_PATH),  # a page without its optional second figure
    ([], BASIC_PATH),
    ([figure("scatter"), figure("scattergl")], FULL_PATH),
    ([figure("heatmap")], FULL_PATH),
])
def test_bundle_for_a_page_of_figures(figures: list[dict[str, object] | None], path: str) -> None:
    assert bundle_for(figures) == path


def test_the_installed_basic_bundle_is_found_and_of_the_python_packages_version() -> None:
    assert staticfinders.BASIC_JS.is_file(), "node_modules lacks the basic bundle: run npm ci"
    assert finders.find(BASIC_PATH) == str(staticfinders.BASIC_JS)
    assert finders.find(FULL_PATH) == str(staticfinders.FULL_JS)
    assert staticfinders.js_version(staticfinders.BASIC_JS) is not None
    assert PlotlyFinder().check() == []
    listed = {name: storage.path(name) for name, storage in PlotlyFinder().list(None)}
    assert listed == {"plotly-basic.min.js": str(staticfinders.BASIC_JS),
                      "plotly.min.js": str(staticfinders.FULL_JS)}
    assert {storage.prefix for _, storage in PlotlyFinder().list(None)} == {"plotly"}


def test_without_node_modules_the_full_bundle_is_served_and_the_check_warns(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(staticfinders, "BASIC_JS", tmp_path / "missing.js")
    finder = PlotlyFinder()
    assert finder.find(BASIC_PATH) == str(staticfinders.FULL_JS)
    assert finder.find(BASIC_PATH, find_all=True) == [str(staticfinders.FULL_JS)]
    assert finder.find("plotly/other.js") is None
    [warning] = finder.check()
    assert warning.id == "deviations.W001"
    assert "npm ci" in warning.hint
    with pytest.raises(SystemCheckError, match="deviations.W001"):
        call_command("check", "--fail-level", "WARNING")


def test_a_basic_bundle_of_another_version_is_served_but_the_check_warns(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    other = tmp_path / "plotly-basic.min.js"
    other.write_bytes(BANNER.replace(b"{}", b"9.9.9") + b"window.Plotly = {};\n")
    monkeypatch.setattr(staticfinders, "BASIC_JS", other)
    assert staticfinders.js_version(other) == "9.9.9"
    assert PlotlyFinder().find(BASIC_PATH) == str(other)
    [warning] = PlotlyFinder().check()
    assert warning.id == "deviations.W002"
    assert "9.9.9" in warning.msg
