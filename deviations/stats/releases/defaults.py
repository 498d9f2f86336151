"""The release rules' defaults: plain numbers, no import, so that :mod:`.rules` (read by
Django's models when every command starts) and :mod:`.shifts` (numpy, scipy) both take them
from here without importing each other at load time."""

from __future__ import annotations

from typing import Final

__all__ = [
    "ALPHA",
    "EARLY_ALPHA",
    "MAX_AFTER",
    "MAX_BEFORE",
    "MIN_ABSOLUTE_CHANGE_US",
    "MIN_AFTER",
    "MIN_BEFORE",
    "MIN_RELATIVE_CHANGE",
    "RUNS_AFTER",
    "RUNS_BEFORE",
]

#: The minimum practical change of a new series (``Series.min_relative_change`` and
#: ``min_absolute_change_us``; docs/statistics.md, "Minimum practical change", measures
#: the false flags and steps found at each setting): a significant change smaller than
#: either is "significant, not a deviation". Chrome's trace clock counts whole
#: microseconds, so a change under 2 µs is one or two ticks.
MIN_RELATIVE_CHANGE: Final = 0.02
MIN_ABSOLUTE_CHANGE_US: Final = 2.0

# The shift rule's parameters (docs/statistics.md, "The shift rule", measures each).
RUNS_AFTER: Final = 25
"""Runs after a boundary that make its verdict final (5 releases of 5 runs)."""
MIN_AFTER: Final = 5
"""Releases after a boundary at least, whatever their runs: one release's runs share its
build and machine session, so releases, not runs, are what the level after a boundary is
judged by when releases jitter (docs/statistics.md measures it)."""
MAX_AFTER: Final = 12
"""Releases after a boundary at most: one-run releases are final after 12 (Perfherder
also waits for 12 later points)."""
RUNS_BEFORE: Final = 50
"""Runs before a boundary that the window reaches back to (fewer when the level started
later: the comparison stops at the previous change)."""
MIN_BEFORE: Final = 10
"""Releases before a boundary the window reaches back to at least (when the series has
them), whatever their runs: as :data:`MIN_AFTER`."""
MAX_BEFORE: Final = 24
"""Releases before a boundary at most."""
ALPHA: Final = 1e-3
"""Two-sided level of the test of a change point: fixed per boundary, so a verdict does
not depend on how many other functions or releases there are."""
EARLY_ALPHA: Final = 1e-6
"""A provisional deviation with ``p`` at most this is marked early (its alert is sent
before the verdict is final)."""
