"""Figures in pages: ``{{ figure|figure_script:"id" }}`` and ``{% plotly_script figure ... %}``.

``figure_script`` writes a Plotly figure as a JSON data block. Django's ``json_script``
escapes with ``str.translate``, ~0.4 s for the 1.7 MB figure of a page of the matrix;
msgspec's encoder and three ``str.replace`` passes do the same in a few milliseconds. ``<``,
``>`` and ``&`` become JSON escapes, so nothing in the data (function names come from
uploads) can close the script element or read as markup.

``plotly_script`` loads the plotly.js bundle that can draw the page's figures (the basic
one unless a figure has another trace type, ``staticfinders.bundle_for``), deferred: it is
fetched while the page is parsed and runs, in order with the page's other deferred scripts,
once the figures' data blocks are in the document.
"""

from collections.abc import Mapping
from typing import Any

import msgspec
from django import template
from django.templatetags.static import static
from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe

from deviations.core import staticfinders
from deviations.traces.charts import US_PER_UNIT

register = template.Library()


@register.filter(is_safe=True)
def figure_script(value: object, element_id: str) -> SafeString:
    data = msgspec.json.encode(value).decode()
    data = data.replace("<", "\\u003C").replace(">", "\\u003E").replace("&", "\\u0026")
    return format_html(
        '<script id="{}" type="application/json">{}</script>', element_id, mark_safe(data)  # noqa: S308
    )


VERDICT_LABELS = {
    "regression": "regression (slower)",
    "improvement": "improvement (faster)",
    "significant_overlap": "significant, not a deviation",
    "nonsignificant_overlap": "no significant difference",
    "appeared": "appeared (absent from every run before)",
    "vanished": "vanished (absent from every run after)",
}


@register.filter
def percent(value: float | None) -> str:
    """A relative change (0.25) as a signed percentage ("+25.0%")."""
    return "" if value is None else f"{100 * value:+.1f}%"


@register.filter
def percent_plain(value: float | None) -> str:
    """A fraction (0.02) as a percentage without sign or needless decimals ("2%")."""
    if value is None:
        return ""
    return f"{100 * value:.4g}%"


@register.filter
def pvalue(value: float | None) -> str:
    """A p-value in two significant digits, never "0" ("3.1e-06", "0.042")."""
    if value is None:
        return ""
    if value < 1e-3:
        return f"{value:.1e}" if value > 0 else "< 1e-300"
    return f"{value:.2g}"


@register.filter
def verdict_label(verdict: str | None) -> str:
    """A verdict as the matrix's legend words it (exports keep the codes' names)."""
    return VERDICT_LABELS.get(verdict or "", "—")


@register.simple_tag
def plotly_script(*figures: Mapping[str, Any] | None) -> SafeString:
    # fit.js: every figure's layout fitted to a narrow screen (deviationsFit), after the
    # bundle so that it may call Plotly.
    return format_html('<script defer src="{}"></script><script defer src="{}"></script>',
                       static(staticfinders.bundle_for(figures)), static("js/fit.js"))


_DECIMALS = {"us": 1, "ms": 3, "s": 6}


@register.filter
def in_unit(value_us: float | None, unit: str) -> str:
    """A time stored in µs, in the page's unit (``charts.unit_for``): the table then reads
    in the unit of the chart beside it."""
    if value_us is None:
        return ""
    if unit == "raw":  # a metric's value in its own unit: 5 significant digits, no exponent
        if value_us != 0 and abs(value_us) >= 1e5:
            return f"{float(f'{value_us:.5g}'):,.0f}"
        return f"{value_us:.5g}"
    return f"{value_us / US_PER_UNIT[unit]:.{_DECIMALS[unit]}f}"
