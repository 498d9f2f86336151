"""Plotly figure dicts of A/B runs: the per-slice paired differences as bars (seed 002's
figure), with the estimate, its interval as a band and the A/A floor. No HTTP, no database.

Metric, build and slice names come from uploads: they go through :func:`plotly_text`
before they reach a figure, and hover templates hold only constant text and ``%{...}``.
"""

from __future__ import annotations

from typing import Any

from deviations.core.text import plotly_text


def differences_figure(c: dict[str, Any]) -> dict[str, Any]:
    """Bars of ``b_i - a_i`` per slice pair, coloured by sign, a spike (a pair beyond the
    spike fence) outlined in orange; the estimate (the Hodges–Lehmann location, or the mean
    for runs stored before it) as a dashed line, its interval as a shaded band, the A/A
    floor ``±floor`` as dotted lines."""
    slices = [plotly_text(s) for s in c["slices"]]
    n = len(slices)
    unit = plotly_text(c["unit"])
    better_negative = c["direction"] == "lower_is_better"
    colours = [
        "#999" if d == 0 else ("#2e7d32" if (d < 0) == better_negative else "#c62828")
        for d in c["differences"]
    ]
    spiked = {p["index"] for p in (c.get("spikes") or {}).get("pairs", [])}
    outline = [3 if i in spiked else 0 for i in range(n)]
    shapes: list[dict[str, Any]] = [
        {"type": "rect", "xref": "paper", "x0": 0, "x1": 1, "y0": c["diff_lo"],
         "y1": c["diff_hi"], "fillcolor": "rgba(33, 113, 181, 0.18)", "line": {"width": 0},
         "layer": "below"},
        {"type": "line", "xref": "paper", "x0": 0, "x1": 1, "y0": c["diff"], "y1": c["diff"],
         "line": {"dash": "dash", "color": "#2171b5", "width": 2}},
        {"type": "line", "xref": "paper", "x0": 0, "x1": 1, "y0": 0, "y1": 0,
         "line": {"color": "#000", "width": 1}},
    ]
    if c.get("aa_floor") is not None:
        for y in (c["aa_floor"], -c["aa_floor"]):
            shapes.append({"type": "line", "xref": "paper", "x0": 0, "x1": 1, "y0": y, "y1": y,
                           "line": {"dash": "dot", "color": "#6a3d9a", "width": 1.5}})
    title = (f"{plotly_text(c['label'])}: {plotly_text(c['build'])} − "
             f"{plotly_text(c['baseline'])} per slice pair")
    return {
        "data": [{
            "type": "bar", "name": "B − A", "x": slices, "y": c["differences"],
            "marker": {"color": colours, "line": {"color": "#ff8f00", "width": outline}},
            "customdata": [[a, b] for a, b in zip(c["a"], c["b"], strict=True)],
            "hovertemplate": "pair %{x}<br>difference %{y:.4g}<br>A %{customdata[0]:.4g}, "
                             "B %{customdata[1]:.4g}<extra></extra>",
        }],
        "layout": {
            "title": {"text": title},
            "xaxis": {"title": {"text": f"slice pair (n = {n})"}, "type": "category"},
            "yaxis": {"title": {"text": f"difference ({unit})" if unit else "difference"},
                      "zeroline": False},
            "shapes": shapes, "showlegend": False, "bargap": 0.25,
            "margin": {"t": 50, "l": 70, "r": 20, "b": 60}, "height": 320,
        },
    }
