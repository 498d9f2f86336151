"""Untrusted text (function and probe names) made safe where it is shown.

Django escapes what templates print; Plotly renders a small HTML subset in titles, tick
labels, legends and hover labels, so every uploaded string put in a figure goes through
``plotly_text`` first. Email headers and one-line summaries must not contain line breaks
(a name ``"x\nBcc: y"`` would otherwise add a header, or stop Django from sending):
``one_line``. CSV cells starting with ``= + - @`` are formulas to spreadsheets:
``csv_cell``. A client-given file name becomes a base name fit to show and store:
``safe_file_name``.
"""

import re
from html import escape

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]+")
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def plotly_text(s: object) -> str:
    """``s`` as text Plotly shows literally: ``& < > " '`` become entities.

    Plotly decodes these entities when it renders, so the user sees the original
    characters while no tag (``<b>``, ``<a href>``, ``<img>``) is ever interpreted. Quotes
    become numeric entities: Plotly's table of named ones lacks ``&quot;`` (tick labels
    showed it literally; issue 23), while it decodes every ``&#NN;``.
    """
    return escape(str(s), quote=False).replace('"', "&#34;").replace("'", "&#39;")


def has_control(s: str) -> bool:
    """Whether ``s`` holds a control character (NUL, tab, line break, ...): no name or
    label may (PostgreSQL's text cannot hold NUL; the others break headers and pages)."""
    return _CONTROL.search(s) is not None


def one_line(s: object) -> str:
    """``s`` with every run of control characters (line breaks, tabs, NUL) replaced by
    one space: safe in an email header and in a one-line summary."""
    return _CONTROL.sub(" ", str(s))


def csv_cell(value: object) -> object:
    """A CSV cell a spreadsheet shows as text: a string starting with ``= + - @`` (or a tab
    or carriage return) gets a leading ``'`` (OWASP's advice for CSV injection). Numbers
    are left as numbers, so ``-3.5`` stays a negative number."""
    if isinstance(value, str) and value.startswith(_FORMULA_START):
        return "'" + value
    return value


def safe_file_name(name: str) -> str:
    """The base name of a client-given file name, without control characters, at most 255."""
    base = name.replace("\\", "/").rsplit("/", 1)[-1]
    cleaned = "".join(ch for ch in base if ch.isprintable()).strip()
    return (cleaned or "unnamed")[:255]
