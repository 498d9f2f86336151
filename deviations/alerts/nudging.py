"""Moving an alert to a neighbouring boundary (Chromeperf's "nudge").

A sheriff who sees that a change really happened one release earlier or later than the
detector said moves the alert there: from (R_i, R_i+1] to (R_i-1, R_i] or (R_i+1, R_i+2].
Neighbours are the adjacent releases of the alert's series that hold a done run (the
columns of its analysis: ``traces.analysis.MIN_COLUMN_RUNS`` is 1), or the adjacent builds
of the alert's probe; a canary's decision has no neighbours.

What a move keeps, so that it survives re-analysis and ``recording.sync``:

- the alert keeps its natural ``key``, numbers and explanation (the detector's, at the
  boundary it chose, kept in ``detected_*``); its ``from_*``/``to_*`` become the moved
  range, so its pages, its group, its emails and the compare links follow the move;
- ``recording.record`` never changes an alert's range, so a re-analysis that still
  reports the original verdict updates its numbers and leaves it moved; ``withdraw``
  never deletes a moved alert (a sheriff placed it); and a later verdict of the same thing
  and rule at exactly the moved range is the moved alert, not a second one;
- its group is recomputed (``recording.regroup``): it joins the groups its new range
  overlaps, the group it left shrinks or splits.

Moving back to the detector's boundary clears the move. Every move adds a note (who, from
where to where), so the history stays on the alert.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from django.db import transaction
from django.utils import timezone

from deviations.alerts.models import Alert, AlertNote
from deviations.alerts.recording import regroup
from deviations.alerts.services import check_sheriff
from deviations.core.errors import UserError
from deviations.histograms.models import HistogramSnapshot
from deviations.traces.models import Release, Run

Side = Literal["earlier", "later"]
SIDES: tuple[Side, ...] = ("earlier", "later")


@dataclass(frozen=True)
class Boundary:
    """A boundary an alert may move to: (from, to] as labels and sort keys."""

    side: Side
    from_label: str
    to_label: str
    from_key: str
    to_key: str


def _points(alert: Alert) -> list[tuple[str, str]]:
    """(label, sort key) of the releases or builds the alert's boundaries lie between, in
    order."""
    if alert.detector == Alert.TRACE and alert.series_id is not None:
        done = Run.objects.filter(series_id=alert.series_id, status=Run.DONE)
        return list(Release.objects.filter(series_id=alert.series_id,
                                           pk__in=done.values("release_id"))
                    .order_by("sort_key", "pk").values_list("version", "sort_key"))
    if alert.detector == Alert.HISTOGRAM and alert.probe_id is not None:
        return list(HistogramSnapshot.objects.filter(probe_id=alert.probe_id)
                    .order_by("sort_key", "pk").values_list("build_id", "sort_key"))
    raise UserError("a canary's alert has no neighbouring boundary to move to: its range is "
                    "the canary's start and decision", code="not_movable")


def neighbours(alert: Alert) -> list[Boundary]:
    """The boundaries next to the alert's current one, earlier first (none, one or two)."""
    points = _points(alert)
    labels = [label for label, _ in points]
    found = []
    if alert.from_label in labels:
        i = labels.index(alert.from_label)
        if i >= 1:
            (a, ak), (b, bk) = points[i - 1], points[i]
            found.append(Boundary("earlier", a, b, ak, bk))
    if alert.to_label in labels:
        j = labels.index(alert.to_label)
        if j + 1 < len(points):
            (a, ak), (b, bk) = points[j], points[j + 1]
            found.append(Boundary("later", a, b, ak, bk))
    return found


def _where(label_from: str, label_to: str) -> str:
    return f"{label_from} → {label_to}"


@transaction.atomic
def nudge(alert: Alert, user: Any, side: str) -> Alert:
    """Move ``alert`` to its ``side`` ("earlier" or "later") neighbouring boundary and
    regroup it; returns the alert as it now stands."""
    alert = Alert.objects.select_for_update().select_related("group").get(pk=alert.pk)
    check_sheriff(user, [alert])
    if side not in SIDES:
        raise UserError(f"side must be one of {', '.join(SIDES)}, not {side[:40]!r}",
                        code="side")
    target = next((b for b in neighbours(alert) if b.side == side), None)
    if target is None:
        what = "release of the series" if alert.detector == Alert.TRACE else "build of the probe"
        edge, label = (("oldest", alert.from_label) if side == "earlier"
                       else ("newest", alert.to_label))
        raise UserError(f"no {side} boundary to move to: {label} is the {edge} {what} "
                        "with data", code="side")
    was = _where(alert.from_label, alert.to_label)
    if not alert.nudged:
        alert.detected_from_label, alert.detected_to_label = alert.from_label, alert.to_label
        alert.detected_from_key, alert.detected_to_key = alert.from_key, alert.to_key
    alert.from_label, alert.to_label = target.from_label, target.to_label
    alert.from_key, alert.to_key = target.from_key, target.to_key
    back = (alert.from_key, alert.to_key, alert.from_label, alert.to_label) == (
        alert.detected_from_key, alert.detected_to_key, alert.detected_from_label,
        alert.detected_to_label)
    if back:
        alert.detected_from_label = alert.detected_to_label = ""
        alert.detected_from_key = alert.detected_to_key = ""
        alert.nudged_by, alert.nudged_at = None, None
    else:
        alert.nudged_by, alert.nudged_at = user, timezone.now()
    alert.save(update_fields=[
        "from_label", "to_label", "from_key", "to_key", "detected_from_label",
        "detected_to_label", "detected_from_key", "detected_to_key", "nudged_by",
        "nudged_at", "updated"])
    now = _where(alert.from_label, alert.to_label)
    AlertNote.objects.create(
        alert=alert, author=user,
        text=f"Moved from {was} to {now}" + (" (where the detector put it)." if back else "."),
    )
    regroup(alert)
    return alert
