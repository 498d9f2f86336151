"""Pure statistics core: numpy/scipy only, no Django (docs/statistics.md).

The names of the project's statistics API (DESIGN.md, "Statistics API"); the modules
hold more:

- ``intervals``: Olive's (2005) median interval, the t interval of the mean, intervals of
  differences; vectorised forms over NaN-padded arrays;
- ``compare``: the verdict between consecutive releases (seed 003's rule, ``paper``, and
  the ``recommended`` windowed rank rule), digressions, the whole matrix at once;
- ``histograms``: Bhattacharyya and Hellinger distances, Mozilla's persistence rule and an
  adaptive one, change kinds, tuning from known changes;
- ``sequential``: anytime-valid confidence sequences and sequential tests (Lindon et al.
  2022);
- ``paired``: interleaved A/B comparisons (paired bootstrap, sign test, A/A floor, Holm,
  Welch).
"""

from deviations.stats.compare import Comparison, ComparisonMatrix, compare, compare_matrix
from deviations.stats.histograms import bhattacharyya, detect_changes, hellinger
from deviations.stats.intervals import Interval, mean_ci, median_ci
from deviations.stats.paired import paired_ci
from deviations.stats.sequential import SequentialTest

__all__ = [
    "Comparison",
    "ComparisonMatrix",
    "Interval",
    "SequentialTest",
    "bhattacharyya",
    "compare",
    "compare_matrix",
    "detect_changes",
    "hellinger",
    "mean_ci",
    "median_ci",
    "paired_ci",
]
