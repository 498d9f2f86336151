"""Verdicts between consecutive releases: one module per rule, and the rules' registry.

- :mod:`.codes`: the verdict codes every rule shares, absent releases, the minimum
  practical change (:func:`practical_verdicts`), a metric's direction (:func:`oriented`);
- :mod:`.paper`: seed 003's rule on each adjacent pair (:func:`compare`, the DESIGN
  contract, and :func:`pair_statistics`, its vectorised form);
- :mod:`.shifts`: the default rule, judged from a bounded window of releases around each
  boundary and final once the releases after it exist (:func:`shift_verdicts`,
  :func:`shift_windows`);
- :mod:`.segmentation`: the penalised segmentation the shift rule starts from;
- :mod:`.fallback`: digressions (deviations that come back);
- :mod:`.matrix`: a whole matrix under either rule (:func:`compare_matrix`);
- :mod:`.rules`: the rules as objects (:data:`RULES`, :func:`get_rule`): names, words,
  which verdicts are provisional.

Every difference is later − earlier; whether larger is worse is the metric's
``direction``.
"""

from importlib import import_module
from typing import Any

# Names load their module on first use (PEP 562), as in ``deviations.stats``: Django's
# models name the rules (``.rules``, no numpy) when every command starts, and a process
# that only reads verdict codes does not pay for scipy.
_EXPORTS = {
    **dict.fromkeys(
        ("APPEARED", "IMPROVEMENT", "NONSIGNIFICANT_OVERLAP", "NO_VERDICT", "REGRESSION",
         "SIGNIFICANT_OVERLAP", "VANISHED", "VERDICTS", "Estimator", "Verdict",
         "absent_releases", "oriented", "practical_verdicts", "verdict_name"), "codes"),
    **dict.fromkeys(("DIGRESSION_SPAN", "digressions", "level_digressions"), "fallback"),
    **dict.fromkeys(("ComparisonMatrix", "compare_matrix"), "matrix"),
    **dict.fromkeys(("Comparison", "PairStatistics", "compare", "interval_gap",
                     "pair_statistics"), "paper"),
    **dict.fromkeys(("ALPHA", "DEFAULT_RULE", "EARLY_ALPHA", "RULES", "RULE_NAMES",
                     "ReleaseRule", "RuleName", "get_rule"), "rules"),
    **dict.fromkeys(("SEGMENT_PENALTY", "SEGMENT_PENALTY_COST", "SEGMENT_PENALTY_RUNS",
                     "optimal_segments"), "segmentation"),
    **dict.fromkeys(("Shifts", "Windows", "shift_verdicts", "shift_windows"), "shifts"),
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
