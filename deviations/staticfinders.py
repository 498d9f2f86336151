"""Serve plotly.js from the plotly Python package as ``static/plotly/plotly.min.js``.

The dashboard runs offline (no CDN), and the JavaScript must match the Python package's
figure schema: taking the file the package ships keeps both at one version, without a
4.8 MB copy in the repository.
"""

from pathlib import Path
from typing import Any

import plotly
from django.contrib.staticfiles.finders import BaseFinder
from django.core.files.storage import FileSystemStorage

PLOTLY_JS = Path(plotly.__file__).resolve().parent / "package_data" / "plotly.min.js"
STATIC_PATH = "plotly/plotly.min.js"


class PlotlyFinder(BaseFinder):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.storage = FileSystemStorage(location=str(PLOTLY_JS.parent))
        self.storage.prefix = "plotly"  # type: ignore[attr-defined]

    def check(self, **kwargs: Any) -> list[Any]:
        return []

    def find(self, path: str, find_all: bool = False, **kwargs: Any) -> Any:
        if path != STATIC_PATH:
            return [] if find_all else None
        return [str(PLOTLY_JS)] if find_all else str(PLOTLY_JS)

    def list(self, ignore_patterns: Any) -> Any:
        yield PLOTLY_JS.name, self.storage
