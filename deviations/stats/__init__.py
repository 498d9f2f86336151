"""Pure statistics core: numpy/scipy only, no Django (docs/statistics.md).

The names of the project's statistics API (DESIGN.md, "Statistics API") are importable
from here; the modules, one per concept, hold more:

- ``intervals``: the one interval type ``Interval(estimate, lo, hi)`` (and its array
  form), Olive's (2005) median interval, the t interval of the mean, intervals of
  differences; vectorised forms over NaN-padded arrays;
- ``releases``: the verdict between consecutive releases (seed 003's rule, ``paper``, and
  the ``recommended`` windowed rank rule), digressions, the whole matrix at once;
- ``twosample``: any two releases compared per function (``compare_two``: medians, an
  exact rank or median test, Benjamini–Hochberg over the functions, minimal changes);
- ``attribution``: a total's change split among its parts (self time and callees of a
  call tree: ``attribute_change``), medians with intervals, shares from means;
- ``multiple``: Benjamini–Hochberg and Holm;
- ``ranks``: the exact Mann–Whitney distributions behind the recommended rule;
- ``histograms``: Bhattacharyya and Hellinger distances, Mozilla's persistence rule and an
  adaptive one, change kinds; ``tuning``: choosing the adaptive rule's parameters from
  known changes;
- ``sequential``: anytime-valid confidence sequences and sequential tests (Lindon et al.
  2022); ``quantiles``: anytime-valid decisions on chosen quantiles of two arms (Howard and
  Ramdas 2022's quantile confidence sequences);
- ``paired``: interleaved A/B comparisons (paired bootstrap, sign test, A/A floor,
  Welch).

Sign convention, in every function: a difference is later − earlier (B − A, candidate −
baseline), so a positive difference means the later sample is larger. Whether larger is
worse is the metric's ``Direction``: ``"lower_is_better"`` (the default: times,
latencies) or ``"higher_is_better"`` (throughput, frames per second, scores); it decides
which sign is a regression, never the sign of the difference.

The names load their module on first use (PEP 562), so importing one module does not
import the others (docs/statistics.md, "Import time", has the figures). No module shares a
name with an exported name, so ``from deviations.stats import compare`` is the function
whatever was imported before.
"""

from importlib import import_module
from typing import Any

_EXPORTS = {
    "Direction": "_typing",
    "Interval": "intervals",
    "IntervalArray": "intervals",
    "mean_ci": "intervals",
    "mean_diff_ci": "intervals",
    "median_ci": "intervals",
    "median_diff_ci": "intervals",
    "Comparison": "releases",
    "ComparisonMatrix": "releases",
    "compare": "releases",
    "compare_matrix": "releases",
    "compare_two": "twosample",
    "benjamini_hochberg": "multiple",
    "holm": "multiple",
    "bhattacharyya": "histograms",
    "detect_changes": "histograms",
    "hellinger": "histograms",
    "SequentialTest": "sequential",
    "paired_ci": "paired",
    "welch_ci": "paired",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
