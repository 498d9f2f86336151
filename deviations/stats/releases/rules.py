"""The release rules as objects: what pages, alerts and exports ask of a rule.

One :class:`ReleaseRule` per rule, in :data:`RULES`: its name (stored, in URLs and
exports), the words users read (label, legend, method), the interval of a release it
shows, the runs a release needs for its verdicts, and which of its verdicts are still
provisional. The verdicts themselves come from the rule's module (:mod:`.paper`,
:mod:`.shifts`); nothing outside this package branches on a rule's name.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Literal

if TYPE_CHECKING:  # numpy is loaded when a rule is asked about a series, not at import:
    # Django's models name the rules when every command starts.
    import numpy.typing as npt

    from .._typing import BoolArray, IntArray

__all__ = [
    "ALPHA",
    "DEFAULT_RULE",
    "EARLY_ALPHA",
    "MAX_AFTER",
    "MAX_BEFORE",
    "MIN_AFTER",
    "MIN_BEFORE",
    "MIN_ABSOLUTE_CHANGE_US",
    "MIN_RELATIVE_CHANGE",
    "RULES",
    "RULE_NAMES",
    "RUNS_AFTER",
    "RUNS_BEFORE",
    "ReleaseRule",
    "RuleName",
    "get_rule",
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

RuleName = Literal["shifts", "paper"]
RULE_NAMES: Final[tuple[RuleName, ...]] = ("shifts", "paper")
DEFAULT_RULE: Final[RuleName] = "shifts"


@dataclass(frozen=True)
class ReleaseRule:
    """A release rule as users meet it.

    Attributes
    ----------
    name : str
        Stored and in URLs, exports and the API (``rule=shifts``).
    label : str
        What the rule selector, titles and exports call it.
    legend : str
        How a flag is decided, in the matrix legend.
    method : str
        One line of how a verdict was reached, in alerts and emails.
    interval : {"order", "olive"}
        The per-release median interval the rule's pages show: distribution-free order
        statistics, or Olive's (seed 003).
    min_runs : int
        Runs each release of a pair needs for a verdict.
    final_after : str
        When a verdict is final, in words.
    """

    name: RuleName
    label: str
    legend: str
    method: str
    interval: Literal["order", "olive"]
    min_runs: int
    final_after: str

    def final_at(self, runs: npt.ArrayLike) -> IntArray:
        """Per boundary of a series with ``runs`` runs per release: the release whose
        arrival made its verdict final, -1 while it is provisional. The paper rule's
        verdicts depend on their two releases only (final with the later one)."""
        import numpy as np

        from .shifts import shift_windows

        counts = np.asarray(runs, dtype=np.int64)
        if self.name == "shifts":
            return shift_windows(counts).final_at
        out: IntArray = np.arange(1, max(len(counts), 1), dtype=np.int64)
        return out

    def provisional(self, runs: npt.ArrayLike) -> BoolArray:
        """Per boundary: later releases may still change its verdict."""
        out: BoolArray = self.final_at(runs) < 0
        return out

    def releases_to_final(self, runs: npt.ArrayLike) -> IntArray:
        """Per boundary: at most how many more releases until its verdict is final (0 when
        final; fewer when the next releases bring enough runs)."""
        import numpy as np

        from .shifts import shift_windows

        counts = np.asarray(runs, dtype=np.int64)
        B = max(len(counts) - 1, 0)
        if self.name != "shifts":
            return np.zeros(B, dtype=np.int64)
        win = shift_windows(counts)
        newest = len(counts) - 1
        out: IntArray = np.where(win.final, 0, np.arange(B) + MAX_AFTER - newest)
        return out


RULES: Final[dict[str, ReleaseRule]] = {
    "shifts": ReleaseRule(
        name="shifts",
        label="level shifts",
        legend=(
            "level shifts: the level of the runs changes at this release (segmentation of "
            f"a window of releases around it) and a Mann–Whitney test of the runs of the "
            f"level after against the level before has p ≤ {ALPHA:g}, with the interval of "
            "the shift (Hodges–Lehmann) excluding 0; one-run releases are judged too"
        ),
        method=(
            "level-shift rule: the level changes at this release (segmentation of a window "
            f"of releases), Mann–Whitney test of the runs after against before at p ≤ "
            f"{ALPHA:g}, Hodges–Lehmann shift"
        ),
        interval="order",
        min_runs=1,
        final_after=(
            f"final once the releases after it hold {RUNS_AFTER} runs (at least "
            f"{MIN_AFTER}, at most {MAX_AFTER} releases)"
        ),
    ),
    "paper": ReleaseRule(
        name="paper",
        label="seed 003 paper rule",
        legend=(
            "seed 003 paper rule: the two releases' intervals (Olive) do not overlap and "
            "the difference's interval excludes 0; needs two runs in each release"
        ),
        method=(
            "seed 003 rule: the median intervals of the two releases do not overlap and "
            "the difference's 95% interval excludes 0"
        ),
        interval="olive",
        min_runs=2,
        final_after="final as soon as both releases exist",
    ),
}


def get_rule(name: str) -> ReleaseRule:
    """The rule called ``name``; ValueError for an unknown one."""
    try:
        return RULES[name]
    except KeyError:
        raise ValueError(f"unknown rule {name!r}, expected one of {RULE_NAMES}") from None
