"""Plotly figure dicts of the canary page: the sequential p-value over time with alpha
marked (Lindon et al. 2022, Figs. 2/4), the quantile functions of both arms with their
time-uniform bands (Figs. 1/3/5) and the band on Q_B - Q_A (Fig. 8). No HTTP, no database.

Canary names, metrics and units come from users: each goes through ``plotly_text``, and
hover templates hold only constant text and ``%{...}`` references.
"""

from __future__ import annotations

import math
from typing import Any

from deviations.core.text import plotly_text

_A, _B, _D = "#2c7fb8", "#d95f0e", "#6a3d9a"
_MARGIN = {"t": 50, "l": 70, "r": 20, "b": 50}


def _axis_title(metric: str, unit: str, count: bool) -> str:
    what = "wait between events" if count else (metric or "value")
    return plotly_text(f"{what} ({unit})" if unit else what)


def pvalue_figure(points: list[tuple[int, int, float, float]], alpha: float) -> dict[str, Any]:
    """The running minimum of the sequential p-value (what the decision uses) and the
    p-value at each look, against observations in both arms; alpha as a dashed line."""
    n = [a + b for a, b, _, _ in points]
    return {
        "data": [
            {"type": "scatter", "mode": "lines", "name": "p-value (running minimum)",
             "x": n, "y": [p for _, _, p, _ in points], "line": {"width": 2, "color": _D},
             "hovertemplate": "n = %{x}<br>p = %{y:.3g}<extra></extra>"},
            {"type": "scatter", "mode": "lines", "name": "p-value at each look",
             "x": n, "y": [p for _, _, _, p in points],
             "line": {"width": 1, "dash": "dot", "color": "#888"},
             "hovertemplate": "n = %{x}<br>p now = %{y:.3g}<extra></extra>"},
        ],
        "layout": {
            "title": {"text": "Sequential p-value"},
            "xaxis": {"title": {"text": "observations (A + B)"}, "rangemode": "tozero"},
            # Powers of ten, not SI prefixes: a p-value of 1e-4 is not "100µ" (issue 23).
            "yaxis": {"title": {"text": "p-value"}, "type": "log", "range": [-4, 0.05],
                      "exponentformat": "power"},
            "shapes": [{"type": "line", "xref": "paper", "x0": 0, "x1": 1, "y0": alpha,
                        "y1": alpha, "line": {"dash": "dash", "color": "#c0392b"}}],
            "annotations": [{"xref": "paper", "x": 1, "y": math.log10(alpha), "yanchor": "bottom",
                             "xanchor": "right", "showarrow": False,
                             "text": f"α = {alpha:g}", "font": {"color": "#c0392b"}}],
            "margin": _MARGIN, "legend": {"orientation": "h", "y": -0.2},
        },
    }


def _band_traces(band: dict[str, Any], p: list[float], name: str, color: str,
                 fill: str) -> list[dict[str, Any]]:
    return [
        {"type": "scatter", "mode": "lines", "x": p, "y": band["lo"], "name": f"{name} band",
         "line": {"width": 0, "color": color}, "showlegend": False, "hoverinfo": "skip"},
        {"type": "scatter", "mode": "lines", "x": p, "y": band["hi"], "name": f"{name} band",
         "line": {"width": 0, "color": color}, "fill": "tonexty", "fillcolor": fill,
         "hoverinfo": "skip"},
        {"type": "scatter", "mode": "lines", "x": p, "y": band["estimate"], "name": name,
         "line": {"width": 2, "color": color},
         "hovertemplate": "p = %{x:.3f}<br>%{y:.4g}<extra></extra>"},
    ]


def quantile_figure(summary: dict[str, Any], metric: str, unit: str,
                    count: bool) -> dict[str, Any]:
    """Empirical quantile functions of A and B with their bands (each arm at alpha / 2)."""
    p = summary.get("p", [])
    data: list[dict[str, Any]] = []
    if p:
        data = (_band_traces(summary["a"], p, "A (control)", _A, "rgba(44,127,184,0.2)")
                + _band_traces(summary["b"], p, "B (candidate)", _B, "rgba(217,95,14,0.2)"))
    return {
        "data": data,
        "layout": {
            "title": {"text": "Quantile functions with time-uniform bands"},
            "xaxis": {"title": {"text": "probability p"}, "range": [0, 1]},
            "yaxis": {"title": {"text": _axis_title(metric, unit, count)}},
            "margin": _MARGIN, "legend": {"orientation": "h", "y": -0.2},
        },
    }


def difference_figure(summary: dict[str, Any], metric: str, unit: str,
                      count: bool) -> dict[str, Any]:
    """The band on Q_B(p) - Q_A(p) (Fig. 8): above zero, B is larger at that quantile."""
    p = summary.get("p", [])
    data: list[dict[str, Any]] = []
    if p:
        data = _band_traces(summary["diff"], p, "Q_B − Q_A", _D, "rgba(106,61,154,0.2)")
    return {
        "data": data,
        "layout": {
            "title": {"text": "Difference of quantiles B − A with its band"},
            "xaxis": {"title": {"text": "probability p"}, "range": [0, 1]},
            "yaxis": {"title": {"text": "B − A: " + _axis_title(metric, unit, count)},
                      "zeroline": True, "zerolinecolor": "#000"},
            "margin": _MARGIN, "legend": {"orientation": "h", "y": -0.2},
        },
    }
