"""Pure statistics core: numpy/scipy only, no Django (docs/statistics.md).

The names of the project's statistics API (DESIGN.md, "Statistics API") are importable
from here; the modules hold more:

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

The names load their module on first use (PEP 562), so importing one module does not
import the others (scipy.stats alone takes a second to import).
"""

from importlib import import_module
from typing import Any

_EXPORTS = {
    "Comparison": "compare",
    "ComparisonMatrix": "compare",
    "compare": "compare",
    "compare_matrix": "compare",
    "bhattacharyya": "histograms",
    "detect_changes": "histograms",
    "hellinger": "histograms",
    "Interval": "intervals",
    "mean_ci": "intervals",
    "median_ci": "intervals",
    "paired_ci": "paired",
    "SequentialTest": "sequential",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f"{__name__}.{_EXPORTS[name]}"), name)
