"""Plotly figure dicts for the histogram pages: a probe's distance series and the
before/after overlay. No HTTP, no database.

Probe names come from uploads: every one goes through :func:`plotly_text` before it
reaches a figure (Plotly renders a subset of HTML in titles, labels and hover text), and
hover templates hold only constant text and ``%{...}`` references.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from deviations.core.text import plotly_text


def _clean(values: list[float | None]) -> list[float | None]:
    return [v if v is not None and math.isfinite(v) else None for v in values]


def distance_figure(
    probe_name: str, scan: dict[str, Any], changes: list[tuple[str, float, str]],
    held_back: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The Hellinger distance of each build to its previous usable build, the cutoff the
    rule held it to, a marker per detected change ``(build_id, distance, kind)`` and an
    open one per build above the cutoff that the rule did not report (``held_back``:
    ``build_id``, ``distance``, ``explanation``), whose hover says why."""
    builds = list(scan.get("builds", []))
    reasons = list(scan.get("reason", [""] * len(builds)))
    data: list[dict[str, Any]] = [
        {
            "type": "scatter", "mode": "lines+markers", "name": "distance",
            "x": builds, "y": _clean(scan.get("distance", [])),
            "customdata": reasons,
            "hovertemplate": "build %{x}<br>distance %{y:.4f}<br>%{customdata}<extra></extra>",
            "marker": {"size": 6}, "line": {"width": 1.5},
        },
        {
            "type": "scatter", "mode": "lines", "name": "cutoff", "x": builds,
            "y": _clean(scan.get("cutoff", [])), "line": {"dash": "dash", "width": 1.5},
            "hovertemplate": "cutoff %{y:.4f}<extra></extra>",
        },
    ]
    if changes:
        data.append({
            "type": "scatter", "mode": "markers", "name": "detected change",
            "x": [c[0] for c in changes], "y": [c[1] for c in changes],
            "customdata": [c[2] for c in changes],
            "marker": {"size": 14, "symbol": "diamond", "color": "#c0392b",
                       "line": {"width": 1, "color": "#000"}},
            "hovertemplate": "change at %{x}<br>%{customdata}, distance %{y:.4f}"
                             "<extra></extra>",
        })
    if held_back:
        data.append({
            "type": "scatter", "mode": "markers", "name": "above cutoff, not reported",
            "x": [h["build_id"] for h in held_back], "y": [h["distance"] for h in held_back],
            "customdata": [h["explanation"] for h in held_back],
            "marker": {"size": 13, "symbol": "circle-open", "color": "#E69F00",
                       "line": {"width": 2}},
            "hovertemplate": "build %{x}: above the cutoff, not reported<br>%{customdata}"
                             "<extra></extra>",
        })
    return {
        "data": data,
        "layout": {
            "title": {"text": plotly_text(f"{probe_name}: distance to the previous build")},
            # Slanted build ids, the margin grown to hold them below the axis title.
            "xaxis": {"title": {"text": "build id", "standoff": 12}, "type": "category",
                      "tickangle": -45, "automargin": True},
            "yaxis": {"title": {"text": "Hellinger distance"}, "rangemode": "tozero",
                      "automargin": True},
            "hovermode": "closest", "margin": {"t": 50, "l": 60, "r": 20, "b": 40},
            "legend": {"orientation": "h", "y": 1.02, "yanchor": "bottom", "x": 1,
                       "xanchor": "right"},
        },
    }


def bucket_labels(edges: np.ndarray) -> list[str]:
    """``[lo, hi)`` per bucket, with ``≥ lo`` for an overflow bucket."""
    labels = []
    for lo, hi in zip(edges[:-1], edges[1:], strict=True):
        lo_s = f"{lo:g}"
        labels.append(f"≥{lo_s}" if not math.isfinite(hi) else f"[{lo_s}, {hi:g})")
    return labels
