"""Which change rule a probe uses, with which parameters, and running it.

A probe's blank parameters come from the global ``HistogramRuleDefaults`` row, whose blank
values come from the defaults of ``deviations.stats.histograms`` (docs/histograms.md). The
models validate a probe's parameters by running the rule on a tiny series, and detection
runs it on real ones: both call ``scan`` from here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the models import this module: numpy only when a rule runs (start-up)
    import numpy as np

    from deviations.stats.histograms import ChangeScan
    from deviations.stats.proportions import CountScan

RULE_ADAPTIVE, RULE_MOZILLA = "adaptive", "mozilla"
RULE_CHOICES = [
    (RULE_ADAPTIVE, "adaptive (cutoff follows the probe's noise)"),
    (RULE_MOZILLA, "Mozilla's fixed rule (seed 001)"),
]
#: Parameters of both rules, of the fixed (Mozilla) rule, of the adaptive rule.
COMMON = ("min_count", "past_builds", "min_past", "future_builds")
FIXED = ("cutoff", "max_past_std")
ADAPTIVE = ("k", "floor", "stability_ratio")
_INT_PARAMS = {"past_builds", "min_past", "future_builds"}


def rule_of(probe: Any, defaults: Any) -> tuple[str, dict[str, Any]]:
    """The rule and its keyword arguments: the probe's values, else the global ones, else
    the statistics module's defaults (left out of the dict)."""
    rule = probe.rule or defaults.rule or RULE_ADAPTIVE
    names = COMMON + (
        FIXED if rule == RULE_MOZILLA else ADAPTIVE
    )
    params: dict[str, Any] = {}
    for name in names:
        value = getattr(probe, name)
        if value is None:
            value = getattr(defaults, name)
        if value is not None:
            params[name] = int(value) if name in _INT_PARAMS else float(value)
    return rule, params


#: Histogram types judged on their counts as well as their shape
#: (``deviations.stats.proportions``): their buckets are categories, not a scale.
COUNT_TYPES = ("boolean", "flag", "enumerated", "categorical")


def judged_on_counts(probe: Any) -> bool:
    return probe.histogram_type in COUNT_TYPES


def count_scan(counts: np.ndarray, params: dict[str, Any]) -> CountScan:
    """The count rule on counts of shape (..., builds, buckets), with the probe's
    parameters the two rules share (builds before and after, the data filter)."""
    from deviations.stats.proportions import detect_count_changes  # see scan()

    shared = {k: params[k] for k in COMMON if k in params}
    return detect_count_changes(counts, **shared)


def scan(rule: str, counts: np.ndarray, params: dict[str, Any]) -> ChangeScan:
    """Run the rule on counts of shape (..., builds, buckets)."""
    # Imported here, not at the top: the models import this module when Django starts,
    # and a command that runs no rule should not pay numpy's import (start-up time).
    from deviations.stats.histograms import detect_changes, detect_changes_adaptive

    if rule == RULE_MOZILLA:
        return detect_changes(counts, **params)
    return detect_changes_adaptive(counts, **params)
