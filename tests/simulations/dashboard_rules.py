"""The dashboard's release rules as the harness applies them (issue 19, item 6).

A *rule* of the harness is any ``Callable[[np.ndarray], np.ndarray]``: it takes
``samples`` (functions, releases, runs; µs, NaN-padded) and returns int8 verdict codes
(functions, releases - 1) with the codes of ``deviations.stats.releases`` (2 regression,
3 improvement, anything else no flag; trace times are lower-is-better).

The rules here are ``shifts`` (the default) and ``paper`` (median and mean estimators)
exactly as the dashboard decides and shows them:

* **Columns** (``deviations/traces/analysis.py``, ``current_columns``): every release with
  a done run is a column; the shift rule judges one-run releases, the paper rule gives a
  pair with a one-run side no verdict (code -1).
* **Verdicts**: ``shift_verdicts`` (``stats.releases.shifts``) and
  ``compare_matrix(rule="paper", estimator=...)`` with the analysis' parameters. The
  simulated runs are never 0 µs, so no release is absent (no appeared / vanished).
* **Minimum practical change** (``deviations/traces/selectors.py``, ``stored_analysis``):
  ``practical_verdicts(verdict, diff, before, ...)`` with a new series' default floors
  (``stats.releases.rules.MIN_RELATIVE_CHANGE``, ``MIN_ABSOLUTE_CHANGE_US``) on the
  comparison behind each verdict (the shift rule's Hodges–Lehmann shift against the
  median before; the paper rule's difference of the two releases' estimates). The
  ``_raw`` rules leave it out.

``shifts`` replays (``tests/simulations/finality.py``) as the dashboard's analysis updates a
stored matrix (:class:`Shifts`): after each release only the boundaries whose verdict is
not final yet are judged again; a final one is kept as it was.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from deviations.stats.releases import (
    ComparisonMatrix,
    compare_matrix,
    practical_verdicts,
    shift_verdicts,
    shift_windows,
)
from deviations.stats.releases.rules import MIN_ABSOLUTE_CHANGE_US, MIN_RELATIVE_CHANGE

Rule = Callable[[np.ndarray], np.ndarray]

# The harness hands every rule the same matrix in turn: the analyses the floored and raw
# variants share are computed once per matrix (one entry each, kept while the same array
# object comes back).
_LAST: dict[str, tuple[np.ndarray, object]] = {}


def _once(key: str, x: np.ndarray, compute: Callable[[np.ndarray], object]) -> object:
    held = _LAST.get(key)
    if held is not None and held[0] is x:
        return held[1]
    got = compute(x)
    _LAST[key] = (x, got)
    return got


def floored(verdict: np.ndarray, diff: np.ndarray, before: np.ndarray) -> np.ndarray:
    """The default minimum practical change, as ``stored_analysis`` applies it."""
    return practical_verdicts(verdict, diff, before, min_relative=MIN_RELATIVE_CHANGE,
                              min_absolute=MIN_ABSOLUTE_CHANGE_US)


def runs_of(samples: np.ndarray) -> np.ndarray:
    """Runs per release (a release's runs, whatever function: the widest counts)."""
    out: np.ndarray = np.sum(~np.isnan(samples), axis=2).max(axis=0, initial=0)
    return out


def _paper(estimator: str, floors: bool) -> Rule:
    def rule(x: np.ndarray) -> np.ndarray:
        m = _once(f"paper/{estimator}", x, lambda a: compare_matrix(
            a, rule="paper", estimator=estimator))  # type: ignore[arg-type]
        assert isinstance(m, ComparisonMatrix)
        if not floors:
            return m.verdict
        shown = m.mean if estimator == "mean" else m.median
        return floored(m.verdict, m.diff, shown.estimate[:, :-1])

    return rule


class Shifts:
    """The ``shifts`` rule, with a replay that judges, after each release, the boundaries
    not final yet (the dashboard's incremental analysis); a final verdict is kept."""

    def __init__(self, floors: bool, alpha: float | None = None,
                 after: int | None = None) -> None:
        self.floors = floors
        # None: the rule's own ALPHA and window (variants trace the trade-offs): ``after``
        # releases of 5 runs after a boundary make it final.
        self.extra: dict[str, object] = {}
        if alpha is not None:
            self.extra |= {"alpha": alpha, "early_alpha": min(1e-6, alpha)}
        if after is not None:
            self.extra |= {"min_after": after, "runs_after": 5 * after}
        self.key = "shifts" + "".join(f"/{k}={v}" for k, v in sorted(self.extra.items()))

    def _verdicts(self, a: np.ndarray) -> object:
        return shift_verdicts(a, runs=runs_of(a), **self.extra)  # type: ignore[arg-type]

    def _decide(self, got: object) -> np.ndarray:
        verdict, diff, before = got.verdict, got.diff, got.before  # type: ignore[attr-defined]
        return floored(verdict, diff, before) if self.floors else verdict

    def __call__(self, samples: np.ndarray) -> np.ndarray:
        got = _once(self.key, samples, self._verdicts)
        return self._decide(got)

    def replay(self, samples: np.ndarray) -> np.ndarray:
        """Codes after each release, shape (R - 1, F, R - 1) (``finality.replay``); a
        boundary not there yet is -2 (``baselines.NOT_YET``)."""
        F, R = samples.shape[:2]  # noqa: N806
        out = np.full((max(R - 1, 0), F, max(R - 1, 0)), -2, dtype=np.int8)
        runs = runs_of(samples)
        window = {k: v for k, v in self.extra.items() if k in ("min_after", "runs_after")}
        if window:
            window["max_after"] = max(12, int(window["min_after"]))  # type: ignore[call-overload]
        kept = np.full((F, max(R - 1, 0)), -2, dtype=np.int8)
        final = np.zeros(max(R - 1, 0), dtype=np.bool_)
        for r in range(2, R + 1):
            win = shift_windows(runs[:r], **window)  # type: ignore[arg-type]
            todo = [b for b in range(r - 1) if not final[b]]
            got = shift_verdicts(samples[:, :r], runs=runs[:r], boundaries=todo,
                                 **self.extra)  # type: ignore[arg-type]
            kept[:, todo] = self._decide(got)
            final[todo] = win.final[todo]
            out[r - 2, :, : r - 1] = kept[:, : r - 1]
        return out


RULES: dict[str, Rule] = {
    "shifts": Shifts(True),
    "paper": _paper("median", True),
    "paper_mean": _paper("mean", True),
    "shifts_raw": Shifts(False),
    "paper_raw": _paper("median", False),
    "paper_mean_raw": _paper("mean", False),
    # The level of the shift rule's test, for the trade-off between steps found and false
    # flags (docs/statistics.md §10b); "shifts" is ALPHA = 1e-3.
    "shifts_a3e-4": Shifts(True, 3e-4),
    "shifts_a3e-3": Shifts(True, 3e-3),
    "shifts_a1e-2": Shifts(True, 1e-2),
    # The window after a boundary: final after F releases of 5 runs (the rule: F = 5).
    "shifts_F3": Shifts(True, after=3),
    "shifts_F4": Shifts(True, after=4),
    "shifts_F6": Shifts(True, after=6),
    "shifts_F8": Shifts(True, after=8),
}
"""The dashboard's rules with a new series' default minimum practical change, and without
it (``_raw``)."""
