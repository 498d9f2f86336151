"""Serve plotly.js, one version in two bundles, without a CDN or a copy in the repository.

- ``plotly/plotly-basic.min.js``: npm's ``plotly.js-basic-dist-min`` (trace types
  :data:`BASIC_TRACES`, 1.2 MB), pinned in ``package.json`` and installed into
  ``node_modules/`` by ``npm ci`` (``make install``). Pages load it unless a figure needs
  another trace type (:func:`bundle_for`).
- ``plotly/plotly.min.js``: the full bundle (4.8 MB) that the plotly Python package ships,
  for the other figures: the matrix above ``charts.SVG_MAX_POINTS`` points (``scattergl``).

In headless Chromium without a GPU, loading and evaluating the full bundle takes ~1.2 s,
the basic one ~0.3 s (docs/architecture.md, "Pages read stored matrices").

Without ``node_modules`` (no npm on the machine) the basic path serves the full bundle:
pages still draw, and the system check warns. It also warns when the two bundles are not
the same plotly.js version: the Python package's figure schema (used by the tests) and the
JavaScript that draws the figures should agree.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, Final

import plotly
from django.conf import settings
from django.contrib.staticfiles.finders import BaseFinder
from django.core.checks import CheckMessage
from django.core.checks import Warning as CheckWarning
from django.core.files.storage import FileSystemStorage

PREFIX: Final = "plotly"
FULL_JS = Path(plotly.__file__).resolve().parent / "package_data" / "plotly.min.js"
BASIC_JS = (Path(settings.BASE_DIR) / "node_modules" / "plotly.js-basic-dist-min"
            / "plotly-basic.min.js")
FULL_PATH: Final = f"{PREFIX}/plotly.min.js"
BASIC_PATH: Final = f"{PREFIX}/plotly-basic.min.js"
BASIC_TRACES: Final = frozenset({"scatter", "bar", "pie"})
"""Trace types of ``plotly.js-basic-dist-min`` (error bars, shapes, legends and hover come
with them); tests/test_matrix_browser.py compares it with the bundle's own list."""

_VERSION = re.compile(rb"plotly\.js[^\n]* v(\d+\.\d+\.\d+)")


def bundle_for(figures: Iterable[Mapping[str, Any] | None]) -> str:
    """Static path of the smallest bundle that draws every trace of ``figures``."""
    for figure in figures:
        for trace in (figure or {}).get("data", ()):
            if trace.get("type", "scatter") not in BASIC_TRACES:
                return FULL_PATH
    return BASIC_PATH


def js_version(path: Path) -> str | None:
    """The plotly.js version in the banner comment that opens a bundle."""
    with path.open("rb") as f:
        found = _VERSION.search(f.read(200))
    return found.group(1).decode() if found else None


def sources() -> dict[str, Path]:
    """File served at each static path; the basic path falls back to the full bundle."""
    return {FULL_PATH: FULL_JS, BASIC_PATH: BASIC_JS if BASIC_JS.is_file() else FULL_JS}


class _Files(FileSystemStorage):
    """Storage of fixed names (relative to ``prefix``) mapped to files anywhere on disk."""

    def __init__(self, files: dict[str, Path]) -> None:
        super().__init__(location=str(FULL_JS.parent))
        self.prefix = PREFIX
        self.files = files

    def path(self, name: str) -> str:
        return str(self.files[name])


class PlotlyFinder(BaseFinder):
    def check(self, **kwargs: Any) -> list[CheckMessage]:
        if not BASIC_JS.is_file():
            return [CheckWarning(
                f"{BASIC_JS} is missing: pages load the full plotly.js (4.8 MB) instead of "
                "the basic bundle (1.2 MB), ~1 s slower.",
                hint="Run `npm ci` in the project folder (`make install` does).",
                id="deviations.W001",
            )]
        basic, full = js_version(BASIC_JS), js_version(FULL_JS)
        if basic != full:
            return [CheckWarning(
                f"{BASIC_JS} is plotly.js {basic}, the plotly Python package ships {full}.",
                hint="Pin plotly.js-basic-dist-min in package.json to the Python package's "
                     "plotly.js version, then `npm install`.",
                id="deviations.W002",
            )]
        return []

    def find(self, path: str, find_all: bool = False, **kwargs: Any) -> Any:
        found = sources().get(path)
        if found is None:
            return [] if find_all else None
        return [str(found)] if find_all else str(found)

    def list(self, ignore_patterns: Any) -> Iterator[tuple[str, _Files]]:
        files = {p.removeprefix(f"{PREFIX}/"): f for p, f in sources().items()}
        storage = _Files(files)
        for name in files:
            yield name, storage
