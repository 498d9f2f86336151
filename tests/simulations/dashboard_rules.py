"""The dashboard's existing release rules as the harness applies them (issue 19, item 6).

A *rule* of the harness is any ``Callable[[np.ndarray], np.ndarray]``: it takes
``samples`` (functions, releases, runs; µs, NaN-padded) and returns int8 verdict codes
(functions, releases - 1) with the codes of ``deviations.stats.releases`` (2 regression,
3 improvement, anything else no flag; trace times are lower-is-better).

The rules here are ``paper`` (median and mean estimators), ``recommended`` and
``segments`` exactly as the dashboard decides and shows them:

* **Columns** (``deviations/traces/analysis.py``, ``current_columns``): only releases with
  at least two runs (``MIN_RUNS``) are columns, compared with the next column. A
  boundary touching a one-run release gets no verdict (code -1), and the pair of
  columns that spans it is no boundary of the series: its verdict is dropped (neither a
  hit nor a false flag). A series with fewer than two such releases has no analysis.
* **Verdicts**: ``compare_matrix(rule="paper", estimator=...)``,
  ``compare_matrix(rule="recommended")`` and ``segment_verdicts`` with the analysis'
  parameters (``FDR`` 0.05, ``MIN_RELATIVE_EFFECT`` 0.1, window 3) on the columns. The
  simulated runs are never 0 µs, so no release is absent (no appeared / vanished).
* **Minimum practical change** (``deviations/traces/selectors.py``, ``stored_analysis``):
  ``practical_verdicts(verdict, diff, estimate[:, :-1], min_relative=0.10,
  min_absolute=20.0)`` with the series' default floors (``Series.min_relative_change``,
  ``min_absolute_change_us``), ``diff`` and ``estimate`` of the rule's estimator (the
  mean for ``paper_mean``, the median otherwise). The ``_raw`` rules leave it out.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from deviations.stats.intervals import MIN_RUNS
from deviations.stats.releases import (
    NO_VERDICT,
    compare_matrix,
    practical_verdicts,
    segment_verdicts,
)

Rule = Callable[[np.ndarray], np.ndarray]

# deviations/traces/analysis.py
FDR = 0.05
MIN_RELATIVE_EFFECT = 0.1
WINDOW = 3
# deviations/traces/models.py, Series: the default minimum practical change
MIN_RELATIVE_CHANGE = 0.10
MIN_ABSOLUTE_CHANGE_US = 20.0


def columns(samples: np.ndarray) -> np.ndarray:
    """Releases that are columns of the dashboard's analysis: at least ``MIN_RUNS`` runs
    (runs belong to a release, not to a function: the widest function counts)."""
    runs = np.sum(~np.isnan(samples), axis=2).max(axis=0, initial=0)
    out: np.ndarray = np.flatnonzero(runs >= MIN_RUNS)
    return out


def on_columns(decide: Callable[[np.ndarray], np.ndarray]) -> Rule:
    """The rule ``decide`` (of a matrix of columns) applied as the dashboard does: to the
    releases with at least two runs, its verdicts put back on the boundaries between
    adjacent releases (module docstring)."""

    def rule(samples: np.ndarray) -> np.ndarray:
        F, R = samples.shape[:2]  # noqa: N806
        out = np.full((F, max(R - 1, 0)), NO_VERDICT, dtype=np.int8)
        cols = columns(samples)
        if len(cols) < 2:
            return out
        codes = decide(samples[:, cols, :])
        adjacent = np.flatnonzero(np.diff(cols) == 1)
        out[:, cols[adjacent]] = codes[:, adjacent]
        return out

    return rule


def _floored(verdict: np.ndarray, diff: np.ndarray, estimate: np.ndarray) -> np.ndarray:
    return practical_verdicts(verdict, diff, estimate[:, :-1], min_relative=MIN_RELATIVE_CHANGE,
                              min_absolute=MIN_ABSOLUTE_CHANGE_US)


def _paper(estimator: str, floors: bool) -> Callable[[np.ndarray], np.ndarray]:
    def decide(x: np.ndarray) -> np.ndarray:
        m = compare_matrix(x, rule="paper", estimator=estimator)  # type: ignore[arg-type]
        if not floors:
            return m.verdict
        shown = m.mean if estimator == "mean" else m.median
        return _floored(m.verdict, m.diff, shown.estimate)

    return decide


def _recommended(floors: bool) -> Callable[[np.ndarray], np.ndarray]:
    def decide(x: np.ndarray) -> np.ndarray:
        m = compare_matrix(x, rule="recommended", window=WINDOW, fdr=FDR,
                           min_relative_effect=MIN_RELATIVE_EFFECT)
        return _floored(m.verdict, m.diff, m.median.estimate) if floors else m.verdict

    return decide


def _segments(floors: bool) -> Callable[[np.ndarray], np.ndarray]:
    def decide(x: np.ndarray) -> np.ndarray:
        verdict = segment_verdicts(x, fdr=FDR, min_relative_effect=MIN_RELATIVE_EFFECT).verdict
        if not floors:
            return verdict
        m = compare_matrix(x, rule="paper", estimator="median")
        return _floored(verdict, m.diff, m.median.estimate)

    return decide


RULES: dict[str, Rule] = {
    "paper": on_columns(_paper("median", True)),
    "paper_mean": on_columns(_paper("mean", True)),
    "recommended": on_columns(_recommended(True)),
    "segments": on_columns(_segments(True)),
    "paper_raw": on_columns(_paper("median", False)),
    "paper_mean_raw": on_columns(_paper("mean", False)),
    "recommended_raw": on_columns(_recommended(False)),
    "segments_raw": on_columns(_segments(False)),
}
"""The dashboard's rules with the series' default minimum practical change, and without
it (``_raw``)."""
