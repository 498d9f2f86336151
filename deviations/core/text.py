"""Untrusted text (function and probe names) made safe for Plotly labels.

Django escapes what templates print; Plotly renders a small HTML subset in titles, tick
labels, legends and hover labels, so every uploaded string put in a figure goes through
``plotly_text`` first.
"""

from html import escape


def plotly_text(s: object) -> str:
    """``s`` as text Plotly shows literally: ``& < > " '`` become entities.

    Plotly decodes these entities when it renders, so the user sees the original
    characters while no tag (``<b>``, ``<a href>``, ``<img>``) is ever interpreted.
    """
    return escape(str(s), quote=True)
