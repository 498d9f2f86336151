"""Notes on builds of a probe: write, delete (services) and read (selectors).

The rules (who may, the text, the chart marks) are ``deviations.core.annotations``'.
"""

from __future__ import annotations

from typing import Any

from deviations.core import annotations as rules
from deviations.core.errors import UserError
from deviations.core.models import Ownership
from deviations.histograms.models import BuildAnnotation, HistogramSnapshot, Probe


def annotate_build(user: Any, probe: Probe, build_id: str, text: str) -> BuildAnnotation:
    """A new note on a stored build of ``probe``; ``UserError`` for a build the probe has no
    histogram for or a bad text, ``ForbiddenError`` (403)."""
    rules.check_write(user, Ownership.PROBE, probe.name)
    build_id = (build_id or "").strip()
    if not HistogramSnapshot.objects.filter(probe=probe, build_id=build_id).exists():
        raise UserError(f"probe {probe.name!r} has no build {build_id!r}", status=404)
    return BuildAnnotation.objects.create(
        probe=probe, build_id=build_id, text=rules.clean_text(text), author=user
    )


def delete_annotation(user: Any, annotation: BuildAnnotation) -> None:
    """Delete a note: its author, an owner of the probe or staff (else ``ForbiddenError``)."""
    rules.check_delete(user, annotation.author_id, Ownership.PROBE, annotation.probe.name)
    annotation.delete()


def probe_annotations(probe: Probe) -> list[BuildAnnotation]:
    """The probe's notes, oldest first (pages sort them by build)."""
    return list(BuildAnnotation.objects.filter(probe=probe).select_related("author", "probe")
                .order_by("created", "id"))


def chart_marks(annotations: list[BuildAnnotation], builds: list[str]
                ) -> list[tuple[Any, str, str]]:
    """``(build_id, text, by)`` of the notes on builds the chart shows."""
    shown = set(builds)
    return [(a.build_id, a.text, rules.byline(a)) for a in annotations if a.build_id in shown]



def annotation_out(annotation: BuildAnnotation) -> dict[str, Any]:
    return {
        "id": annotation.pk, "probe": annotation.probe.name, "build_id": annotation.build_id,
        "text": annotation.text,
        "author": rules.author_name(annotation),
        "created": annotation.created.isoformat(),
    }


def add_marks(figure: dict[str, Any], probe: Probe, builds: list[str]) -> None:
    """Mark on ``figure`` (x axis: build ids) the probe's notes on the builds it shows."""
    rules.chart_marks(figure, chart_marks(probe_annotations(probe), builds))
