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

``recommended`` replays (``tests/simulations/finality.py``) incrementally, as the
dashboard's analysis updates a stored matrix (:class:`Recommended`): the same verdicts as
the rule applied to every prefix (tested), at a fraction of the cost.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from deviations.stats.intervals import MIN_RUNS
from deviations.stats.multiple import benjamini_hochberg_rejections
from deviations.stats.releases import (
    NO_VERDICT,
    ComparisonMatrix,
    adjacent_change,
    compare_matrix,
    practical_verdicts,
    recommended_verdict_codes,
    segment_verdicts,
    window_tests,
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


# The harness hands every rule the same matrix in turn: the column matrix and the analyses
# the floored and raw variants share are computed once per matrix (one entry each, kept
# while the same array object comes back).
_LAST: dict[str, tuple[np.ndarray, object]] = {}


def _once(key: str, x: np.ndarray, compute: Callable[[np.ndarray], object]) -> object:
    held = _LAST.get(key)
    if held is not None and held[0] is x:
        return held[1]
    got = compute(x)
    _LAST[key] = (x, got)
    return got


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
        x = _once("columns", samples, lambda s: s[:, cols, :])
        assert isinstance(x, np.ndarray)
        codes = decide(x)
        adjacent = np.flatnonzero(np.diff(cols) == 1)
        out[:, cols[adjacent]] = codes[:, adjacent]
        return out

    return rule


def _floored(verdict: np.ndarray, diff: np.ndarray, estimate: np.ndarray) -> np.ndarray:
    return practical_verdicts(verdict, diff, estimate[:, :-1], min_relative=MIN_RELATIVE_CHANGE,
                              min_absolute=MIN_ABSOLUTE_CHANGE_US)


def _matrix(x: np.ndarray, rule: str, estimator: str = "median") -> ComparisonMatrix:
    got = _once(f"{rule}/{estimator}", x, lambda a: compare_matrix(
        a, rule=rule, estimator=estimator, window=WINDOW, fdr=FDR,  # type: ignore[arg-type]
        min_relative_effect=MIN_RELATIVE_EFFECT))
    assert isinstance(got, ComparisonMatrix)
    return got


def _paper(estimator: str, floors: bool) -> Callable[[np.ndarray], np.ndarray]:
    def decide(x: np.ndarray) -> np.ndarray:
        m = _matrix(x, "paper", estimator)
        if not floors:
            return m.verdict
        shown = m.mean if estimator == "mean" else m.median
        return _floored(m.verdict, m.diff, shown.estimate)

    return decide


def _recommended(floors: bool) -> Callable[[np.ndarray], np.ndarray]:
    def decide(x: np.ndarray) -> np.ndarray:
        m = _matrix(x, "recommended")
        return _floored(m.verdict, m.diff, m.median.estimate) if floors else m.verdict

    return decide


def _segments(floors: bool) -> Callable[[np.ndarray], np.ndarray]:
    def decide(x: np.ndarray) -> np.ndarray:
        got = _once("segments", x, lambda a: segment_verdicts(
            a, fdr=FDR, min_relative_effect=MIN_RELATIVE_EFFECT).verdict)
        assert isinstance(got, np.ndarray)
        verdict = got
        if not floors:
            return verdict
        m = _matrix(x, "paper")
        return _floored(verdict, m.diff, m.median.estimate)

    return decide


class Recommended:
    """The ``recommended`` rule (:func:`on_columns` of ``compare_matrix``) with an
    incremental replay.

    :meth:`replay` adds the columns one at a time as ``deviations/traces/analysis.py``
    updates a stored analysis: the window tests (``window_tests``) of the boundaries
    whose windows hold the new column only, then the global steps over the whole matrix
    (Benjamini–Hochberg rejections, ``recommended_verdict_codes`` with the adjacent
    medians' changes, as ``analysis._globals``), then the minimum practical change. The
    simulated runs are never 0 µs, so no release is absent (no appeared / vanished).
    """

    def __init__(self, floors: bool) -> None:
        self.floors = floors
        self._rule = on_columns(_recommended(floors))

    def __call__(self, samples: np.ndarray) -> np.ndarray:
        return self._rule(samples)

    def replay(self, samples: np.ndarray) -> np.ndarray:
        """Codes after each release, shape (R - 1, F, R - 1) (``finality.replay``); a
        boundary not there yet is -2 (``baselines.NOT_YET``)."""
        F, R = samples.shape[:2]  # noqa: N806
        out = np.full((max(R - 1, 0), F, max(R - 1, 0)), -2, dtype=np.int8)
        cols = columns(samples)
        x = samples[:, cols, :]
        C = len(cols)  # noqa: N806
        med = np.nanmedian(x, axis=2) if C else np.zeros((F, 0))
        z, p, shift = (np.full((F, max(C - 1, 0)), np.nan) for _ in range(3))
        by_prefix: dict[int, np.ndarray] = {}
        for c in range(2, C + 1):
            # Boundary j pools columns j-2 .. j+3: the new column c-1 is in the windows of
            # boundaries c-4 .. c-2, recomputed from columns c-6 .. c-1.
            first = max(0, c - 1 - WINDOW)
            lo = max(0, first - (WINDOW - 1))
            got = window_tests(x[:, lo:c], WINDOW, range(first - lo, c - 1 - lo))
            z[:, first : c - 1], p[:, first : c - 1] = got.z, got.p_value
            shift[:, first : c - 1] = got.shift
            paired = np.ones((F, c - 1), dtype=np.bool_)
            verdict = recommended_verdict_codes(
                benjamini_hochberg_rejections(p[:, : c - 1], FDR), z[:, : c - 1],
                shift[:, : c - 1], paired, window=WINDOW,
                min_relative_effect=MIN_RELATIVE_EFFECT,
                adjacent=adjacent_change(med[:, :c]),
            )
            if self.floors:
                verdict = _floored(verdict, np.diff(med[:, :c], axis=1), med[:, :c])
            by_prefix[c] = verdict
        adjacent = np.flatnonzero(np.diff(cols) == 1)
        for r in range(2, R + 1):
            row = out[r - 2]
            row[:, : r - 1] = NO_VERDICT
            c = int(np.sum(cols < r))
            if c >= 2:
                here = adjacent[adjacent < c - 1]
                row[:, cols[here]] = by_prefix[c][:, here]
        return out


RULES: dict[str, Rule] = {
    "paper": on_columns(_paper("median", True)),
    "paper_mean": on_columns(_paper("mean", True)),
    "recommended": Recommended(True),
    "segments": on_columns(_segments(True)),
    "paper_raw": on_columns(_paper("median", False)),
    "paper_mean_raw": on_columns(_paper("mean", False)),
    "recommended_raw": Recommended(False),
    "segments_raw": on_columns(_segments(False)),
}
"""The dashboard's rules with the series' default minimum practical change, and without
it (``_raw``)."""
