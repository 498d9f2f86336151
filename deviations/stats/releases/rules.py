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

from .defaults import (  # re-exported: the rules' defaults are part of what a rule is
    ALPHA,
    EARLY_ALPHA,
    MAX_AFTER,
    MAX_BEFORE,
    MIN_ABSOLUTE_CHANGE_US,
    MIN_AFTER,
    MIN_BEFORE,
    MIN_RELATIVE_CHANGE,
    RUNS_AFTER,
    RUNS_BEFORE,
)

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
        """Per boundary: how many more releases until its verdict is final (0 when final),
        if each brings as many runs as the newest release (fewer runs: more releases, at
        most :data:`MAX_AFTER` after the boundary)."""
        import numpy as np

        from .shifts import shift_windows

        counts = np.asarray(runs, dtype=np.int64)
        B = max(len(counts) - 1, 0)
        out: IntArray = np.zeros(B, dtype=np.int64)
        if self.name != "shifts" or not B:
            return out
        pending = ~shift_windows(counts).final
        like = max(int(counts[-1]), 1)
        for more in range(1, MAX_AFTER + 1):
            if not pending.any():
                break
            grown = np.concatenate([counts, np.full(more, like, dtype=np.int64)])
            done = shift_windows(grown).final[:B] & pending
            out[done] = more
            pending &= ~done
        return out


RULES: Final[dict[str, ReleaseRule]] = {
    "shifts": ReleaseRule(
        name="shifts",
        label="level shifts",
        legend=(
            "level shifts: the level of the runs changes at this release (segmentation of "
            "a window of releases around it); the runs of the level after against the "
            "level before (Mann–Whitney and Brunner–Munzel, corrected for runs of one "
            "release moving together) and the releases against each other (Student's t) "
            f"all have p ≤ {ALPHA:g}, and the interval of the shift between the releases' "
            "medians (Hodges–Lehmann) excludes 0; one-run releases are judged too"
        ),
        method=(
            "level-shift rule: the level changes at this release (segmentation of a window "
            "of releases); runs and releases after against before (Mann–Whitney, "
            f"Brunner–Munzel, t) at p ≤ {ALPHA:g}; Hodges–Lehmann shift"
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
