"""Writes of the histogram pages and API besides ingest: triage of a detected change (by
the probe's owners, or anyone while it has none: ``deviations.core.access``)."""

from __future__ import annotations

from typing import Any

from django.utils import timezone

from deviations.core import access
from deviations.core.errors import UserError
from deviations.core.models import Ownership
from deviations.histograms.models import HistogramChange

STATES = [s for s, _ in HistogramChange.STATES]


def set_state(change: HistogramChange, state: str, user: Any) -> None:
    """Triage: record the new state, who set it and when."""
    access.check_write(user, Ownership.PROBE, [change.probe.name])
    if state not in STATES:
        raise UserError(f"state must be one of {', '.join(STATES)}")
    change.state = state
    change.state_by = user if getattr(user, "is_authenticated", False) else None
    change.state_at = timezone.now()
    change.save(update_fields=["state", "state_by", "state_at"])
