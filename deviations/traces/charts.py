"""Plotly figure builders: the deviation matrix and confidence-interval charts (seed 003 §V).

Every builder is a pure function returning a plain ``{"data": [...], "layout": {...}}``
dict that ``json.dumps(..., allow_nan=False)`` accepts (numpy converted to lists, NaN
to ``None``), ready for ``Plotly.newPlot(div, fig.data, fig.layout)``. No Django, no
HTTP, no database.

Conventions shared by the builders:

- Times come in microseconds (as stored) and are shown in ``unit`` (default ms),
  rounded to :data:`SIG_DIGITS` significant digits, which also keeps payloads small.
- Every string that may come from an upload (function names, release versions,
  labels, titles) goes through :func:`plotly_text` before it reaches the figure,
  and hover templates only hold constant text plus ``%{...}`` references: Plotly
  renders a subset of HTML in hover labels, tick labels and titles.
- Colours are the Okabe–Ito colour-blind-safe pair: vermillion for regressions
  (slower), blue for improvements (faster); shapes repeat the information
  (triangle up / down), so the chart still reads in grey scale.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final, Literal, Protocol
from urllib.parse import urlsplit

import numpy as np
import numpy.typing as npt

from deviations.core.text import plotly_text
from deviations.stats.releases import (
    APPEARED,
    IMPROVEMENT,
    NONSIGNIFICANT_OVERLAP,
    REGRESSION,
    SIGNIFICANT_OVERLAP,
    VANISHED,
)

__all__ = ["MATRIX_CUSTOMDATA", "ci_narrowing", "deviation_matrix",
           "function_cis",
           "marker_size", "plotly_text", "unit_for"]

Figure = dict[str, Any]
#: "raw": values shown as stored, for a metric series' rows (each in its own unit).
Unit = Literal["us", "ms", "s", "raw"]

US_PER_UNIT: Final = {"us": 1.0, "ms": 1e3, "s": 1e6, "raw": 1.0}
UNIT_LABEL: Final = {"us": "µs", "ms": "ms", "s": "s", "raw": ""}
SIG_DIGITS: Final = 4
"""Significant digits sent to the browser: run-to-run noise is far above 0.01%."""

REGRESSION_COLOR: Final = "#D55E00"  # Okabe–Ito vermillion
IMPROVEMENT_COLOR: Final = "#0072B2"  # Okabe–Ito blue
SIGNIFICANT_COLOR: Final = "#7F7F7F"
NONSIGNIFICANT_COLOR: Final = "#D0D0D0"
DIGRESSION_COLOR: Final = "#000000"
APPEARED_COLOR: Final = "#009E73"  # Okabe–Ito bluish green
VANISHED_COLOR: Final = "#CC79A7"  # Okabe–Ito reddish purple
MEDIAN_COLOR: Final = "#333333"
MEAN_COLOR: Final = "#A0A0A0"
HIGHLIGHT_COLOR: Final = "#F0E442"  # Okabe–Ito yellow

SIZE_MIN: Final = 7.0
SIZE_MAX: Final = 22.0
GAP_FOR_MAX: Final = 1.0
"""Relative gap ``|gap| / estimate(a)`` that gets the largest triangle (a doubling)."""

MATRIX_CUSTOMDATA: Final = ("url", "release_a", "estimate_a", "lo_a", "hi_a", "estimate_b",
                             "lo_b", "hi_b", "diff", "diff_lo", "diff_hi", "gap", "relative",
                             "p_value", "runs", "note")
"""Columns of ``customdata`` of every matrix point: the two releases' estimates with their
intervals, then the comparison behind the verdict (``diff`` with its interval, ``relative``:
the effect size, ``p_value``, ``runs``: "n before vs n after"), the gap between the two
releases' intervals; ``note``: deviation traces only."""


class _Intervals(Protocol):
    estimate: npt.ArrayLike
    lo: npt.ArrayLike
    hi: npt.ArrayLike


def _texts(items: Sequence[object]) -> list[str]:
    return [plotly_text(s) for s in items]


def _round_sig(a: npt.ArrayLike, digits: int = SIG_DIGITS) -> npt.NDArray[np.float64]:
    """Round to ``digits`` significant digits so that ``repr`` is the short decimal.

    Dividing the rounded integer by an exact power of ten (or multiplying by one)
    is correctly rounded, so the result prints as at most ``digits`` digits.
    """
    x = np.array(a, dtype=np.float64)
    ok = np.isfinite(x) & (x != 0)
    v = x[ok]
    exp = np.clip(digits - 1 - np.floor(np.log10(np.abs(v))), -22, 22)
    scale = 10.0 ** np.abs(exp)
    x[ok] = np.where(exp >= 0, np.rint(v * scale) / scale, np.rint(v / scale) * scale)
    return x


def _json(a: npt.ArrayLike, per: float = 1.0) -> list[Any]:
    """Rounded values in the display unit as a list, NaN and infinities as ``None``."""
    x = _round_sig(np.asarray(a, dtype=np.float64) / per)
    out = x.astype(object)
    out[~np.isfinite(x)] = None
    return list(out.tolist())


def _check_url(url: str) -> str:
    # The page navigates to it on click: no javascript: or data: URLs.
    if urlsplit(url).scheme not in ("", "http", "https"):
        raise ValueError(f"function URL must be relative or http(s): {url!r}")
    return url


def _shape(name: str, a: npt.ArrayLike, shape: tuple[int, ...], dtype: Any = np.float64) -> Any:
    x = np.asarray(a, dtype=dtype)
    if x.shape != shape:
        raise ValueError(f"{name} must have shape {shape}, got {x.shape}")
    return x


def unit_for(times_us: npt.ArrayLike) -> Unit:
    """The unit a page shows these times in: ms when their median is 1 ms or more, else µs.

    One unit per page (chart, table and hover alike), picked once from the page's values.
    """
    x = np.asarray(times_us, dtype=np.float64)
    x = x[np.isfinite(x)]
    return "ms" if x.size and float(np.median(np.abs(x))) >= US_PER_UNIT["ms"] else "us"


def marker_size(gap: npt.ArrayLike, estimate: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """Triangle diameter (px) of a deviation: area linear in the relative change.

    ``r = min(|gap| / estimate, GAP_FOR_MAX) / GAP_FOR_MAX`` and
    ``size = sqrt(SIZE_MIN² + (SIZE_MAX² - SIZE_MIN²) r)``: no change gets ``SIZE_MIN``,
    a doubling or more ``SIZE_MAX``, and the marker's area grows in proportion to the
    change in between (Plotly sizes are diameters). The matrix passes the verdict's
    relative change and an estimate of 1. NaN or non-positive estimates get ``SIZE_MIN``.
    """
    g = np.abs(np.asarray(gap, dtype=np.float64))
    e = np.asarray(estimate, dtype=np.float64)
    rel = np.divide(g, e, out=np.zeros(np.broadcast(g, e).shape), where=(e > 0) & np.isfinite(g))
    r = np.clip(rel, 0.0, GAP_FOR_MAX) / GAP_FOR_MAX
    size: npt.NDArray[np.float64] = np.sqrt(SIZE_MIN**2 + (SIZE_MAX**2 - SIZE_MIN**2) * r)
    return np.round(size, 1)


_HOVER_MATRIX = (
    "<b>%{y}</b><br>%{customdata[1]} → %{x}<br>"
    "before: %{customdata[2]:.4~g} [%{customdata[3]:.4~g}, %{customdata[4]:.4~g}] UNIT<br>"
    "after: %{customdata[5]:.4~g} [%{customdata[6]:.4~g}, %{customdata[7]:.4~g}] UNIT<br>"
    "change: %{customdata[8]:+.4~g} [%{customdata[9]:+.4~g}, %{customdata[10]:+.4~g}] UNIT"
    " (%{customdata[12]:+.1%}), p = %{customdata[13]:.2~g}, %{customdata[14]}<br>"
)

# code -> (trace name, symbol, colour); order is the legend order.
_KINDS: Final = (
    (REGRESSION, "regression", "triangle-up", REGRESSION_COLOR),
    (IMPROVEMENT, "improvement", "triangle-down", IMPROVEMENT_COLOR),
    (SIGNIFICANT_OVERLAP, "significant overlap", "circle", SIGNIFICANT_COLOR),
    (NONSIGNIFICANT_OVERLAP, "non-significant overlap", "square", NONSIGNIFICANT_COLOR),
    # Absent from every run on one side: not a measured change (stats.releases).
    (APPEARED, "appeared", "star", APPEARED_COLOR),
    (VANISHED, "vanished", "x", VANISHED_COLOR),
)
_OVERLAP_SIZE: Final = {SIGNIFICANT_OVERLAP: 5, NONSIGNIFICANT_OVERLAP: 4, APPEARED: 9,
                        VANISHED: 8}
ROW_PX: Final = 20
MATRIX_TOP_PX: Final = 90
"""Room above the rows: the title and the legend."""
LABEL_CHARS: Final = 36
"""Longest function name a row label shows whole."""
MAX_HEIGHT_PX: Final = 8_000
AUTO_MAX_SQUARES: Final = 3_000
"""Most non-significant squares ``show="auto"`` draws.

They are most cells of a large matrix and most of its payload (~200 bytes each), and the
page draws far faster without them; a page of 100 functions × 100 releases has ~9,000."""
SVG_MAX_POINTS: Final = 5_000
"""Up to this many points the matrix is drawn as SVG (``scatter``), beyond it with WebGL
(``scattergl``): without a GPU a WebGL plot pays a fixed cost before its first point that
SVG only reaches at several thousand points (docs/architecture.md, "Pages read stored
matrices", has the measurements)."""


def deviation_matrix(
    functions: Sequence[str], releases: Sequence[str], verdict: npt.ArrayLike,
    gap: npt.ArrayLike, diff: npt.ArrayLike, diff_lo: npt.ArrayLike, diff_hi: npt.ArrayLike,
    estimate: npt.ArrayLike, lo: npt.ArrayLike, hi: npt.ArrayLike, digression: npt.ArrayLike,
    function_urls: Sequence[str] | None = None, *, title: str = "Deviation matrix",
    show: Literal["auto", "all", "deviations"] = "auto", unit: Unit = "ms",
    release_urls: Sequence[str] | None = None,
    provisional: npt.ArrayLike | None = None,
    relative: npt.ArrayLike | None = None,
    p_value: npt.ArrayLike | None = None,
    n_before: npt.ArrayLike | None = None,
    n_after: npt.ArrayLike | None = None,
    early: npt.ArrayLike | None = None,
    pair_ranges: Sequence[str] | None = None,
) -> Figure:
    """The deviation matrix of seed 003, Figure 9: functions × consecutive release pairs.

    Parameters
    ----------
    functions, releases : sequences of str, lengths F and R
    verdict : int8 array (F, R-1)
        Codes of :mod:`deviations.stats.releases`; ``-1`` cells are left out.
    gap, diff, diff_lo, diff_hi : float arrays (F, R-1), microseconds
    estimate, lo, hi : float arrays (F, R), microseconds
        Per-release intervals of the estimator the verdicts used.
    digression : bool array (F, R-1)
        Pairs that start a digression.
    function_urls : sequence of str, length F, optional
        Relative or http(s) URL of each function's page, carried in ``customdata[0]``
        of each of its points (``None`` when not given) for a click handler.
    provisional : bool array (F, R-1), optional
        Pairs whose verdict later releases may still change: a deviation's hover says
        so (and ``early``: those sent before they are final).
    relative, p_value, n_before, n_after : arrays (F, R-1), optional
        The comparison behind each verdict (``diff`` is its difference): its relative
        change (default ``diff / estimate`` of the earlier release), p-value and the runs
        on either side; the triangles are sized by ``|relative|``.
    show : {"auto", "all", "deviations"}
        ``"deviations"`` leaves out the non-significant overlaps (most cells of a large
        matrix and most of the payload; a subtitle says so). ``"auto"`` does so only
        above :data:`AUTO_MAX_SQUARES` of them.
    release_urls : sequence of str, length R, optional
        Relative or http(s) URL of each release's page: its tick label links there.
    pair_ranges : sequence of str, length R-1, optional
        Each pair's culprit range (``r1234..r1240``, untrusted text): a deviation's hover
        names it.

    Notes
    -----
    Encoding: x is the pair's later release (category axis in release order), y the
    function (category axis, first function on top). One ``scatter`` trace (``scattergl``
    above :data:`SVG_MAX_POINTS` points) per
    kind, only cells that have that verdict: regression ``triangle-up`` (vermillion),
    improvement ``triangle-down`` (blue), both sized by :func:`marker_size`;
    significant overlap a small grey ``circle``, non-significant overlap a smaller
    light grey ``square``; a function absent from every run of the earlier release
    ``appeared`` (green ``star``), of the later one ``vanished`` (purple ``x``). A
    last trace, "digression starts", draws a black ring around deviations that start
    a digression (and their hover says so). Hover
    shows the function, "a → b", both estimates with their CIs, the difference
    with its CI, the gap and the verdict, from ``customdata`` (columns in
    :data:`MATRIX_CUSTOMDATA`, numbers in ``unit``).
    """
    n_f, n_r = len(functions), len(releases)
    if n_r < 2:
        raise ValueError("need at least two releases")
    if show not in ("auto", "all", "deviations"):
        raise ValueError(f"show must be 'auto', 'all' or 'deviations', got {show!r}")
    pairs = (n_f, n_r - 1)
    v = _shape("verdict", verdict, pairs, np.int8)
    if show == "auto":
        many = np.count_nonzero(v == NONSIGNIFICANT_OVERLAP) > AUTO_MAX_SQUARES
        show = "deviations" if many else "all"
    shown = np.count_nonzero(v >= 0) - (
        np.count_nonzero(v == NONSIGNIFICANT_OVERLAP) if show == "deviations" else 0
    )
    kind = "scatter" if shown <= SVG_MAX_POINTS else "scattergl"
    dig = _shape("digression", digression, pairs, np.bool_)
    late = (np.zeros(pairs, dtype=np.bool_) if provisional is None
            else _shape("provisional", provisional, pairs, np.bool_))
    g, d, dlo, dhi = (_shape(n, a, pairs) for n, a in
                      (("gap", gap), ("diff", diff), ("diff_lo", diff_lo), ("diff_hi", diff_hi)))
    est, elo, ehi = (_shape(n, a, (n_f, n_r)) for n, a in
                     (("estimate", estimate), ("lo", lo), ("hi", hi)))
    if relative is None:
        with np.errstate(invalid="ignore", divide="ignore"):
            rel = d / np.abs(est[:, :-1])
    else:
        rel = _shape("relative", relative, pairs)
    pv = np.full(pairs, np.nan) if p_value is None else _shape("p_value", p_value, pairs)
    nb = (np.zeros(pairs, dtype=np.int64) if n_before is None
          else _shape("n_before", n_before, pairs, np.int64))
    na = (np.zeros(pairs, dtype=np.int64) if n_after is None
          else _shape("n_after", n_after, pairs, np.int64))
    soon = (np.zeros(pairs, dtype=np.bool_) if early is None
            else _shape("early", early, pairs, np.bool_))
    if function_urls is not None and len(function_urls) != n_f:
        raise ValueError(f"function_urls must have {n_f} entries, got {len(function_urls)}")
    urls = [None] * n_f if function_urls is None else [_check_url(u) for u in function_urls]
    fnames, rnames = _texts(functions), _texts(releases)
    if pair_ranges is not None and len(pair_ranges) != n_r - 1:
        raise ValueError(f"pair_ranges must have {n_r - 1} entries, got {len(pair_ranges)}")
    commits = [""] * (n_r - 1) if pair_ranges is None else [
        f" · commits {t}" for t in _texts(pair_ranges)]
    per = US_PER_UNIT[unit]
    hover = _HOVER_MATRIX.replace("UNIT", UNIT_LABEL[unit])

    data: list[dict[str, Any]] = []
    rings_x: list[str] = []
    rings_y: list[str] = []
    rings_size: list[float] = []
    for code, name, symbol, color in _KINDS:
        if show == "deviations" and code == NONSIGNIFICANT_OVERLAP:
            continue
        fi, pi = np.nonzero(v == code)
        if code in (APPEARED, VANISHED) and not len(fi):
            continue  # rare: in the legend only when present
        cols = [_json(a[fi, pi], per) for a in (est, elo, ehi)]
        cols += [_json(a[fi, pi + 1], per) for a in (est, elo, ehi)]
        cols += [_json(a[fi, pi], per) for a in (d, dlo, dhi, g)]
        cols.append(_json(rel[fi, pi]))
        cols.append(_json(pv[fi, pi]))
        cols.append([f"{b} runs before, {a} after" if a or b else "" for b, a in
                     zip(nb[fi, pi].tolist(), na[fi, pi].tolist(), strict=True)])
        x = [rnames[p + 1] for p in pi.tolist()]
        y = [fnames[f] for f in fi.tolist()]
        lead = [[urls[f], rnames[p]] for f, p in zip(fi.tolist(), pi.tolist(), strict=True)]
        custom = [a + list(b) for a, b in zip(lead, zip(*cols, strict=True), strict=True)]
        marker: dict[str, Any] = {"symbol": symbol, "color": color}
        template = hover + f"<b>{name}</b>"
        if code in (REGRESSION, IMPROVEMENT):
            sizes = marker_size(rel[fi, pi], np.ones(len(fi)))
            marker["size"] = sizes.tolist()
            starts = dig[fi, pi]
            for c, s, p, e, q in zip(custom, starts.tolist(), late[fi, pi].tolist(),
                                     soon[fi, pi].tolist(), pi.tolist(), strict=True):
                c.append((" · starts a digression (comes back later)" if s else "")
                         + (" · early (sent before it is final)" if e else
                            " · provisional (later releases may change it)" if p else "")
                         + commits[q])
            template += "%{customdata[15]}"
            rings_x += [x[i] for i in np.flatnonzero(starts)]
            rings_y += [y[i] for i in np.flatnonzero(starts)]
            rings_size += (sizes[starts] + 6).tolist()
        else:
            marker["size"] = _OVERLAP_SIZE[code]
        data.append({
            "type": kind, "mode": "markers", "name": name, "x": x, "y": y,
            "customdata": custom, "hovertemplate": template + "<extra></extra>",
            "marker": marker,
        })
    data.append({
        "type": kind, "mode": "markers", "name": "digression starts",
        "x": rings_x, "y": rings_y, "hoverinfo": "skip",
        "marker": {"symbol": "circle-open", "color": DIGRESSION_COLOR, "size": rings_size,
                   "line": {"width": 1.5}},
    })
    text = plotly_text(title)
    ticks = rnames[1:]
    if release_urls is not None:
        if len(release_urls) != n_r:
            raise ValueError(f"release_urls must have {n_r} entries, got {len(release_urls)}")
        ticks = [f'<a href="{plotly_text(_check_url(u))}" target="_self">{r}</a>'
                 for u, r in zip(release_urls[1:], ticks, strict=True)]
    # The height follows the rows (ROW_PX each) plus room for the title and legend and for
    # the slanted release labels (~7 px a character at 45°, then the axis title), so that
    # two rows are ROW_PX apart as a hundred are, not spread over a fixed minimum height.
    bottom = int(7 * max(len(r) for r in releases) * 0.71 + 45)
    # Long names (source paths) would take a quarter of the width: the label keeps their
    # end, the hover the whole name.
    labels = [n if len(n) <= LABEL_CHARS else "…" + n[-(LABEL_CHARS - 1):] for n in functions]
    if show == "deviations":
        text += " (non-significant overlaps not shown)"
    layout = {
        "title": {"text": text},
        "xaxis": {"type": "category", "categoryorder": "array", "categoryarray": rnames[1:],
                  "tickmode": "array", "tickvals": rnames[1:], "ticktext": ticks,
                  "title": {"text": "release (compared with the one before)"},
                  "tickangle": -45, "automargin": True, "showgrid": False},
        # Every row labelled (Plotly thins category ticks otherwise): the page shows a
        # page of functions at a time, 20 px a row.
        "yaxis": {"type": "category", "categoryorder": "array", "categoryarray": fnames,
                  "tickmode": "array", "tickvals": fnames, "ticktext": _texts(labels),
                  # A fixed range, first function on top, half a row more than the rows
                  # at each end (autorange would pad it for the largest triangle and
                  # squeeze the rows).
                  "range": [n_f, -1], "autorange": False,
                  "automargin": True, "showgrid": False},
        "hovermode": "closest",
        "height": int(min(MATRIX_TOP_PX + bottom + ROW_PX * (n_f + 1), MAX_HEIGHT_PX)),
        "margin": {"t": MATRIX_TOP_PX, "b": bottom, "r": 20},
        # Legend symbols at one size: the regression triangle's size is the first
        # regression's, otherwise (often the smallest).
        "legend": {"orientation": "h", "x": 0, "y": 1.0, "yanchor": "bottom",
                   "itemsizing": "constant"},
        "plot_bgcolor": "#FFFFFF",
    }
    return {"data": data, "layout": layout}


def _eli(name: str, iv: _Intervals | Sequence[npt.ArrayLike], n: int) -> list[Any]:
    """``[estimate, lo, hi]`` of an interval-like object or a 3-sequence, each shape ``(n,)``."""
    parts = (iv.estimate, iv.lo, iv.hi) if hasattr(iv, "estimate") else tuple(iv)  # type: ignore[union-attr]
    if len(parts) != 3:
        raise ValueError(f"{name} must be (estimate, lo, hi)")
    return [_shape(f"{name} {k}", p, (n,)) for k, p in zip(("est", "lo", "hi"), parts, strict=True)]


def _error_bar_trace(
    name: str, x: Any, eli: list[Any], per: float, color: str, **extra: Any
) -> dict[str, Any]:
    est, lo, hi = (np.asarray(_json(a, per), dtype=np.float64) for a in eli)
    return {
        "type": "scatter", "name": name, "x": x, "y": _json(est),
        "error_y": {"type": "data", "symmetric": False, "array": _json(hi - est),
                    "arrayminus": _json(est - lo), "color": color, "thickness": 1.5, "width": 4},
        "marker": {"color": color, "size": 7}, **extra,
    }


def _release_axis(rnames: list[str], max_labels: int = 40) -> dict[str, Any]:
    step = max(1, -(-len(rnames) // max_labels))
    return {"tickmode": "array", "tickvals": list(range(0, len(rnames), step)),
            "ticktext": rnames[::step], "tickangle": -45, "automargin": True, "zeroline": False,
            "range": [-0.6, len(rnames) - 0.4], "title": {"text": "release"}}


MEDIAN_DX: Final = -0.1
MEAN_DX: Final = 0.14
SAMPLES_DX: Final = -0.3
"""Offsets within a release's slot [-0.5, 0.5]: runs, median CI, mean CI side by side."""


def _axis_title(unit: Unit, label: str) -> str:
    return (label or "value") if unit == "raw" else f"time ({label})"


def function_cis(
    releases: Sequence[str], median: _Intervals | Sequence[npt.ArrayLike],
    mean: _Intervals | Sequence[npt.ArrayLike], verdict: npt.ArrayLike,
    digression: npt.ArrayLike, *, unit: Unit = "ms",
    samples: Sequence[Sequence[float]] | None = None, diff: npt.ArrayLike | None = None,
    gap: npt.ArrayLike | None = None, title: str = "", highlight: str | None = None,
    unit_label: str | None = None, sample_urls: Sequence[Sequence[str]] | None = None,
) -> Figure:
    """One function's CIs across releases: seed 003, Figures 6–8.

    ``unit="raw"`` with ``unit_label`` (a metric series' metric: values as stored, in
    their own unit) labels the axis and hovers with that unit instead of a time's.

    ``median`` and ``mean`` have ``estimate``, ``lo``, ``hi`` of shape ``(R,)``
    (attributes or a 3-sequence), in microseconds; ``verdict``/``digression`` have
    shape ``(R-1,)``; ``samples[r]`` are the runs of release ``r`` (microseconds).
    ``diff`` and ``gap`` (``(R-1,)``, microseconds) are those the verdicts came with;
    by default they are computed from the median intervals.

    Encoding: x is the release (numeric slots labelled with the release names).
    The median CI is a dark point with error bars joined by a thin line; the mean CI
    a lighter open point to its right (Figure 8 compares the two). A deviation of
    the pair ``a → b`` shades the span from ``a`` to ``b`` (vermillion: regression,
    blue: improvement) and puts a triangle (up / down) on top of ``b``'s median CI
    whose hover gives the verdict, difference and gap; a black outline marks the
    start of a digression. With ``samples``, the runs appear as a strip left of the
    median, spread by a deterministic low-discrepancy jitter; with ``sample_urls`` (the
    page of each run, shaped as ``samples``) a run's point opens its page, which holds the
    file it was measured from. ``highlight`` (a release name, e.g. the matrix cell clicked
    to come here) outlines that release's slot.
    """
    n_r = len(releases)
    med, mea = _eli("median", median, n_r), _eli("mean", mean, n_r)
    v = _shape("verdict", verdict, (n_r - 1,), np.int8)
    dig = _shape("digression", digression, (n_r - 1,), np.bool_)
    per, ul = US_PER_UNIT[unit], UNIT_LABEL[unit]
    rnames = _texts(releases)
    idx = np.arange(n_r, dtype=np.float64)
    tmpl = (f"%{{customdata[0]}}<br>%{{y:.4~g}} {ul} "
            "[%{customdata[1]:.4~g}, %{customdata[2]:.4~g}]<extra>NAME</extra>")
    data: list[dict[str, Any]] = []
    if samples is not None:
        if len(samples) != n_r:
            raise ValueError(f"samples must have {n_r} entries, got {len(samples)}")
        if sample_urls is not None and [len(u) for u in sample_urls] != [len(s) for s in samples]:
            raise ValueError("sample_urls must have the shape of samples")
        xs: list[float] = []
        ys: list[Any] = []
        custom: list[list[str]] = []
        for r, runs in enumerate(samples):
            k = np.arange(len(runs))
            xs += _round_sig(r + SAMPLES_DX + 0.14 * ((k * 0.6180339887) % 1.0 - 0.5), 5).tolist()
            ys += _json(runs, per)
            urls = sample_urls[r] if sample_urls is not None else [""] * len(runs)
            custom += [[u, rnames[r]] for u in urls]
        click = "<br>click: the run and its file" if sample_urls is not None else ""
        data.append({"type": "scatter", "mode": "markers", "name": "runs", "x": xs, "y": ys,
                     "customdata": custom, "marker": {"color": MEAN_COLOR, "size": 4},
                     "hovertemplate": (f"%{{customdata[1]}}<br>run: %{{y:.4~g}} {ul}{click}"
                                       "<extra></extra>")})
    for name, eli, dx, color, symbol, mode in (
        ("median CI", med, MEDIAN_DX, MEDIAN_COLOR, "circle", "lines+markers"),
        ("mean CI", mea, MEAN_DX, MEAN_COLOR, "circle-open", "markers"),
    ):
        bounds = zip(rnames, _json(eli[1], per), _json(eli[2], per), strict=True)
        custom = [[r, a, b] for r, a, b in bounds]
        trace = _error_bar_trace(name, (idx + dx).tolist(), eli, per, color, mode=mode,
                                 line={"width": 1}, customdata=custom,
                                 hovertemplate=tmpl.replace("NAME", name))
        trace["marker"]["symbol"] = symbol
        data.append(trace)
    est_m, lo_m, hi_m = med
    d = est_m[1:] - est_m[:-1] if diff is None else _shape("diff", diff, (n_r - 1,))
    if gap is None:  # the signed distance between consecutive median intervals
        gap = np.sign(d) * np.maximum(np.maximum(lo_m[1:] - hi_m[:-1], lo_m[:-1] - hi_m[1:]), 0)
    g = _shape("gap", gap, (n_r - 1,))
    shapes: list[dict[str, Any]] = []
    for code, name, symbol, color in _KINDS[:2]:
        pi = np.flatnonzero(v == code)
        note = [" · starts a digression" if s else "" for s in dig[pi].tolist()]
        custom = [[rnames[p], rnames[p + 1], *rest] for p, *rest in
                  zip(pi.tolist(), _json(d[pi], per), _json(g[pi], per), note, strict=True)]
        outline = {"color": DIGRESSION_COLOR, "width": np.where(dig[pi], 2, 0).tolist()}
        data.append({
            "type": "scatter", "mode": "markers", "name": name, "x": (pi + 1).tolist(),
            "y": _json(hi_m[pi + 1], per), "customdata": custom,
            "marker": {"symbol": symbol, "color": color, "size": 13, "line": outline},
            "hovertemplate": (f"<b>{name}</b>%{{customdata[4]}}<br>"
                              "%{customdata[0]} → %{customdata[1]}<br>"
                              f"diff: %{{customdata[2]:+.4~g}} {ul}<br>"
                              f"gap: %{{customdata[3]:+.4~g}} {ul}<extra></extra>"),
        })
        shapes += [{"type": "rect", "xref": "x", "yref": "paper", "x0": p, "x1": p + 1,
                    "y0": 0, "y1": 1, "fillcolor": color, "opacity": 0.08, "line": {"width": 0},
                    "layer": "below"} for p in pi.tolist()]
    if highlight in releases:
        k = list(releases).index(highlight)
        shapes.append({"type": "rect", "xref": "x", "yref": "paper", "x0": k - 0.5,
                       "x1": k + 0.5, "y0": 0, "y1": 1, "fillcolor": HIGHLIGHT_COLOR,
                       "opacity": 0.25, "line": {"color": "#B8860B", "width": 1.5},
                       "layer": "below", "name": "highlight"})
    layout = {
        "title": {"text": plotly_text(title)}, "xaxis": _release_axis(rnames),
        "yaxis": {"title": {"text": _axis_title(unit, ul)}}, "shapes": shapes,
        "hovermode": "closest",
        "legend": {"orientation": "h", "x": 0, "y": 1.0, "yanchor": "bottom"},
    }
    return {"data": data, "layout": layout}


def ci_narrowing(
    n_runs: Sequence[int], estimate: npt.ArrayLike, lo: npt.ArrayLike, hi: npt.ArrayLike,
    *, labels: Sequence[str] | None = None, unit: Unit = "ms", title: str = "",
    unit_label: str | None = None,
) -> Figure:
    """How a CI narrows as runs are added: seed 003, Figure 10 (5, 10, 20, 50 runs).

    ``unit_label``: as :func:`function_cis`'s (a metric's own unit with ``unit="raw"``).

    ``estimate``, ``lo``, ``hi`` (microseconds) have shape ``(N,)`` for one release, or
    ``(N, K)`` for K releases side by side (e.g. the two releases of a pair, whose
    gap opens as the intervals narrow); ``labels`` names the K columns.

    Encoding: top panel, one point with error bars per number of runs (x slots
    labelled "n runs"), the K releases offset within a slot, one colour each; bottom
    panel, the CI width against the number of runs with a dashed ``1/√n``
    reference through the first width of each release (the rate the CLT predicts).
    """
    n = np.asarray(n_runs, dtype=np.int64)
    one = np.ndim(estimate) == 1
    shape = (n.size,) if one else (n.size, np.shape(estimate)[-1])
    est, elo, ehi = (_shape(nm, a, shape).reshape(n.size, -1) for nm, a in
                     (("estimate", estimate), ("lo", lo), ("hi", hi)))
    if n.ndim != 1 or np.any(n < 1):
        raise ValueError("n_runs must be a sequence of positive run counts")
    n_k = est.shape[1]
    names = _texts(labels) if labels is not None else [f"release {k + 1}" for k in range(n_k)]
    if len(names) != n_k:
        raise ValueError(f"labels must have {n_k} entries, got {len(names)}")
    per, ul = US_PER_UNIT[unit], UNIT_LABEL[unit] if unit_label is None else unit_label
    palette = (MEDIAN_COLOR, REGRESSION_COLOR, IMPROVEMENT_COLOR, "#009E73", "#CC79A7", "#E69F00")
    tmpl = (f"%{{customdata[0]}}, %{{customdata[1]}} runs<br>%{{customdata[2]:.4~g}} {ul} "
            "[%{customdata[3]:.4~g}, %{customdata[4]:.4~g}]<br>"
            f"width: %{{customdata[5]:.4~g}} {ul}<extra></extra>")
    data: list[dict[str, Any]] = []
    for k, name in enumerate(names):
        color = palette[k % len(palette)]
        x = np.round(np.arange(n.size) + 0.3 * (k - (n_k - 1) / 2) / n_k, 3).tolist()
        width = ehi[:, k] - elo[:, k]
        cols = [_json(a, per) for a in (est[:, k], elo[:, k], ehi[:, k], width)]
        custom = [[name, m, *c] for m, *c in zip(n.tolist(), *cols, strict=True)]
        common = {"customdata": custom, "hovertemplate": tmpl, "legendgroup": str(k)}
        data.append(_error_bar_trace(name, x, [est[:, k], elo[:, k], ehi[:, k]], per, color,
                                     mode="markers", **common))
        data.append({"type": "scatter", "mode": "lines+markers", "name": name, "x": x,
                     "y": cols[3], "yaxis": "y2", "showlegend": False, "line": {"color": color},
                     **common})
        ok = np.flatnonzero(np.isfinite(width))
        if ok.size:
            ref = width[ok[0]] * np.sqrt(n[ok[0]] / n)
            data.append({"type": "scatter", "mode": "lines", "name": "∝ 1/√n", "x": x,
                         "y": _json(ref, per), "yaxis": "y2", "showlegend": k == 0,
                         "legendgroup": "ref", "hoverinfo": "skip",
                         "line": {"color": color, "dash": "dash", "width": 1}})
    layout = {
        "title": {"text": plotly_text(title)},
        "xaxis": {"tickmode": "array", "tickvals": list(range(n.size)), "anchor": "y2",
                  "ticktext": [f"{m} runs" for m in n.tolist()], "zeroline": False,
                  "range": [-0.6, n.size - 0.4]},
        # Panels tall enough for their titles (each title stays beside its own panel),
        # the lower one a third of the height.
        "height": 560,
        "yaxis": {"domain": [0.48, 1.0], "title": {"text": f"estimate, CI ({ul})"}},
        "yaxis2": {"domain": [0.0, 0.36], "title": {"text": f"CI width ({ul})"},
                   "rangemode": "tozero"},
        "hovermode": "closest",
        "legend": {"orientation": "h", "x": 0, "y": 1.0, "yanchor": "bottom"},
    }
    return {"data": data, "layout": layout}


#: The icicle's colour scale, on the relative change (later − earlier) clipped to ±50%:
#: Okabe–Ito blue (faster) through white to vermillion (slower); grey where there is none.
CHANGE_LIMIT_PCT: Final = 50.0
NO_CHANGE_COLOR: Final = "#bbbbbb"


def calltree_icicle(tree: dict[str, list[Any]], *, title: str = "") -> Figure:
    """Two releases' call trees as one icicle (``calltree.CallTreeDiff.tree``).

    Each frame's width is its time (µs, the mean of both releases), its colour its
    relative change of the median (diverging, clipped at ±:data:`CHANGE_LIMIT_PCT`), its
    outline thick and its label starred when the change is significant under the
    comparison's false-discovery control. Names are escaped (``plotly_text``); the hover
    holds both medians and the difference with its interval.
    """
    rows = tree["hover"]
    size = np.asarray(tree["values"], dtype=np.float64)
    where = {node: k for k, node in enumerate(tree["ids"])}
    drawn = np.zeros(len(size))
    for k, parent in enumerate(tree["parents"]):
        if parent:
            drawn[where[parent]] += size[k]
    own = np.maximum(size - drawn, 0.0)
    change = [c if c is not None else 0.0 for c in tree["change"]]
    sig = tree["significant"]
    labels = [plotly_text(name) + (" ★" if s else "") for name, s in
              zip(tree["labels"], sig, strict=True)]
    # customdata[0] is no URL (charts.js opens a clicked point's customdata[0] when it is
    # one, and a function may be named "/..."): a click zooms into the frame instead.
    custom = [["", plotly_text(r["callee"] or r["caller"]),
               *(_json([r[k] if r[k] is not None else np.nan], 1000.0)[0]
                 for k in ("base_median", "new_median", "diff", "diff_lo", "diff_hi")),
               f"{r['change_pct']:+.1f}%" if r["change_pct"] is not None else "—",
               "significant" if r["significant"] else "not significant"]
              for r in rows]
    data = [{
        "type": "icicle",
        "ids": [plotly_text(i) for i in tree["ids"]],
        "parents": [plotly_text(p) for p in tree["parents"]],
        "labels": labels,
        # "remainder": each frame's own value is its size less its drawn children's, so
        # rounding can never make children outgrow their parent (Plotly then draws none).
        "values": _json(own, 1000.0),
        "branchvalues": "remainder",
        "sort": False,
        "tiling": {"orientation": "v"},
        "marker": {
            "colors": _json(np.clip(change, -CHANGE_LIMIT_PCT, CHANGE_LIMIT_PCT)),
            "colorscale": [[0.0, IMPROVEMENT_COLOR], [0.5, "#ffffff"], [1.0, REGRESSION_COLOR]],
            "cmin": -CHANGE_LIMIT_PCT, "cmax": CHANGE_LIMIT_PCT, "cmid": 0.0,
            "showscale": True,
            "colorbar": {"title": {"text": "change %<br>(later − earlier)"}},
            "line": {"width": [3 if s else 0.5 for s in sig],
                     "color": ["#000000" if s else "#ffffff" for s in sig]},
        },
        "customdata": custom,
        "hovertemplate": ("%{customdata[1]}<br>median %{customdata[2]:.4~g} → "
                          "%{customdata[3]:.4~g} ms<br>diff %{customdata[4]:+.4~g} ms "
                          "[%{customdata[5]:+.4~g}, %{customdata[6]:+.4~g}] "
                          "(%{customdata[7]}), %{customdata[8]}<extra></extra>"),
        "maxdepth": 6,
    }]
    layout = {"title": {"text": plotly_text(title)}, "height": 620,
              "margin": {"t": 50, "l": 10, "r": 10, "b": 10}}
    return {"data": data, "layout": layout}
