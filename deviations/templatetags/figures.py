"""``{{ figure|figure_script:"id" }}``: a Plotly figure as a JSON data block in the page.

Django's ``json_script`` escapes with ``str.translate``, ~0.4 s for the 1.7 MB figure of a
page of the matrix; msgspec's encoder and three ``str.replace`` passes do the same in a few
milliseconds. ``<``, ``>`` and ``&`` become JSON escapes, so nothing in the data (function
names come from uploads) can close the script element or read as markup.
"""

import msgspec
from django import template
from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe

register = template.Library()


@register.filter(is_safe=True)
def figure_script(value: object, element_id: str) -> SafeString:
    data = msgspec.json.encode(value).decode()
    data = data.replace("<", "\\u003C").replace(">", "\\u003E").replace("&", "\\u0026")
    return format_html(
        '<script id="{}" type="application/json">{}</script>', element_id, mark_safe(data)  # noqa: S308
    )
