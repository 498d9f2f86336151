"""Notes on releases of a series: write, delete (services) and read (selectors).

The rules (who may, the text, the chart marks) are ``deviations.core.annotations``'.
"""

from __future__ import annotations

from typing import Any

from deviations.core import annotations as rules
from deviations.core.models import Ownership
from deviations.traces.models import Release, ReleaseAnnotation, Series


def annotate_release(user: Any, release: Release, text: str) -> ReleaseAnnotation:
    """A new note on ``release``; ``UserError`` for a bad text, ``ForbiddenError`` (403)."""
    rules.check_write(user, Ownership.SERIES, release.series.name)
    return ReleaseAnnotation.objects.create(
        release=release, text=rules.clean_text(text), author=user
    )


def delete_annotation(user: Any, annotation: ReleaseAnnotation) -> None:
    """Delete a note: its author, an owner of the series or staff (else ``ForbiddenError``)."""
    rules.check_delete(user, annotation.author_id, Ownership.SERIES,
                       annotation.release.series.name)
    annotation.delete()


def series_annotations(series: Series) -> list[ReleaseAnnotation]:
    """The series' notes in release order, then oldest first."""
    return list(
        ReleaseAnnotation.objects.filter(release__series=series)
        .select_related("release", "author")
        .order_by("release__sort_key", "release__id", "created", "id")
    )



def chart_marks(
    annotations: list[ReleaseAnnotation], position: dict[str, Any]
) -> list[tuple[Any, str, str]]:
    """``(x, text, by)`` of the notes whose release has an ``x`` in ``position``
    (release version → x on a chart); the others are not on that chart."""
    return [(position[a.release.version], a.text, rules.byline(a)) for a in annotations
            if a.release.version in position]


def annotation_out(annotation: ReleaseAnnotation) -> dict[str, Any]:
    return {
        "id": annotation.pk, "series": annotation.release.series.name,
        "release": annotation.release.version, "text": annotation.text,
        "author": rules.author_name(annotation),
        "created": annotation.created.isoformat(),
    }


def add_marks(figure: dict[str, Any], series: Series, position: dict[str, Any],
              annotations: list[ReleaseAnnotation] | None = None) -> None:
    """Mark on ``figure`` the series' notes whose release it shows (``position``: release
    version → x on its x axis; ``annotations``: ``series_annotations(series)`` when the
    caller has them already)."""
    if annotations is None:
        annotations = series_annotations(series)
    rules.chart_marks(figure, chart_marks(annotations, position))
