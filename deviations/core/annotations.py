"""Annotations of releases and builds: the rules every feature's annotations share.

- Writing one needs the right to write to the series or probe (``core.access.check_write``:
  a signed-in user or a token, owners only when it has owners); it does not claim it.
- Deleting one: its author, an owner of the series or probe, or staff.
- The text is one line of 1 to 500 characters; it is shown escaped: by templates in pages,
  by ``plotly_text`` in the marks :func:`chart_marks` adds to a figure.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence
from typing import Any, Final

from deviations.core import access
from deviations.core.errors import UserError
from deviations.core.models import Ownership
from deviations.core.packing import name_digest
from deviations.core.text import one_line, plotly_text

MAX_TEXT: Final = 500
LABEL_CHARS: Final = 24
"""Characters of a note shown on a chart; the whole note is in its hover text."""
COLOR: Final = "#6A3D9A"


def clean_text(text: str) -> str:
    """The note as stored: one line, trimmed; ``UserError`` when empty or too long."""
    cleaned = one_line(text or "").strip()
    if not cleaned:
        raise UserError("an annotation needs a text")
    if len(cleaned) > MAX_TEXT:
        raise UserError(f"an annotation has at most {MAX_TEXT} characters, not {len(cleaned)}")
    return cleaned


def check_write(user: Any, kind: str, name: str) -> None:
    """``ForbiddenError`` unless ``user`` may annotate the series or probe ``name``."""
    access.check_write(user, kind, [name])


def check_delete(user: Any, author_id: int | None, kind: str, name: str) -> None:
    """``ForbiddenError`` unless ``user`` wrote the note, owns ``name`` or is staff."""
    if not getattr(user, "is_authenticated", False):
        raise access.ForbiddenError("sign in or send an API token to delete an annotation")
    scope = getattr(user, "token_scope", "")
    if scope and not fnmatch.fnmatchcase(name, scope):  # the token's scope bounds it first
        raise access.ForbiddenError(
            f"this token may write only to names matching {scope!r}, not to {name!r}")
    if user.is_staff or user.is_superuser or (author_id is not None and user.pk == author_id):
        return
    if Ownership.objects.filter(kind=kind, name_sha1=name_digest(name), user=user).exists():
        return
    raise access.ForbiddenError(
        "only its author, an owner of the "
        f"{'series' if kind == Ownership.SERIES else 'probe'} or an administrator may "
        "delete this annotation"
    )


def chart_marks(
    figure: dict[str, Any], marks: Sequence[tuple[Any, str, str]], *, xref: str = "x"
) -> dict[str, Any]:
    """``figure`` with a dotted vertical line and a label per mark ``(x, text, by)``.

    ``x`` is a position on the figure's x axis (a category or a number); ``text`` and
    ``by`` (author and date) are escaped here. Marks at the same ``x`` share one line and
    stack their labels. Returns ``figure`` (its layout is changed in place).
    """
    layout = figure.setdefault("layout", {})
    shapes = layout.setdefault("shapes", [])
    notes = layout.setdefault("annotations", [])
    seen: dict[Any, int] = {}
    for x, text, by in marks:
        level = seen.get(x, 0)
        if level == 0:
            shapes.append({"type": "line", "xref": xref, "yref": "paper", "x0": x, "x1": x,
                           "y0": 0, "y1": 1, "line": {"color": COLOR, "width": 1,
                                                      "dash": "dot"}})
        seen[x] = level + 1
        label = text if len(text) <= LABEL_CHARS else text[: LABEL_CHARS - 1] + "…"
        notes.append({
            "x": x, "xref": xref, "y": 1 - 0.06 * level, "yref": "paper", "yanchor": "top",
            "text": plotly_text(label), "hovertext": plotly_text(f"{text} ({by})"),
            "showarrow": False, "xanchor": "left", "font": {"size": 10, "color": COLOR},
            "bgcolor": "rgba(255,255,255,0.8)",
        })
    return figure


def byline(annotation: Any) -> str:
    """``"alice, 2026-11-24"``: who wrote a note, and when."""
    return f"{author_name(annotation) or 'a deleted user'}, {annotation.created:%Y-%m-%d}"


def author_name(annotation: Any) -> str | None:
    return annotation.author.get_username() if annotation.author else None
