"""A whole functions × releases matrix at once (DESIGN's vectorised ``compare``)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from .._checks import check_confidence
from .._typing import BoolArray, Direction, FloatArray, Int8Array, IntArray
from ..intervals import IntervalArray, mean_ci_array, median_ci_array
from .codes import Estimator, _check_direction, absent_releases
from .fallback import digressions, level_digressions
from .paper import interval_gap, pair_statistics
from .rules import RuleName, get_rule
from .shifts import shift_verdicts

__all__ = ["ComparisonMatrix", "compare_matrix"]


@dataclass(frozen=True)
class ComparisonMatrix:
    """Per-release statistics and per-pair verdicts of a functions × releases matrix.

    Per release (shape ``(functions, releases)``): ``median``, ``mean`` (intervals with
    ``estimate``, ``lo``, ``hi``, ``se``, ``df``), ``n``; ``median`` is the interval the
    rule shows: Olive's for ``paper`` (seed 003), the order-statistic interval
    (:func:`~deviations.stats.intervals.median_ci_array`, ``method="order"``) for
    ``shifts``. Per consecutive pair ``r-1 → r`` (shape ``(functions, releases - 1)``,
    column ``r-1``): ``verdict`` (int8 codes, :data:`.codes.VERDICTS`), ``gap`` (between
    the two releases' shown intervals), and the numbers of the comparison that made the
    verdict: ``diff``, ``diff_lo``, ``diff_hi``, ``p_value``, ``relative`` (the paper
    rule: the two releases' estimates; ``shifts``: the Hodges–Lehmann shift between the
    levels on either side, :func:`.shifts.shift_verdicts`), ``digression``;
    ``provisional`` per pair (later releases may still change it). ``direction`` is the
    metric's direction the verdicts were decided with.
    """

    rule: RuleName
    estimator: Estimator
    confidence: float
    median: IntervalArray
    mean: IntervalArray
    n: IntArray
    verdict: Int8Array
    gap: FloatArray
    diff: FloatArray
    diff_lo: FloatArray
    diff_hi: FloatArray
    p_value: FloatArray
    relative: FloatArray
    digression: BoolArray
    provisional: BoolArray
    direction: Direction = "lower_is_better"


def _slice(ia: IntervalArray, s: slice) -> IntervalArray:
    """The releases ``s`` (along axis 1) of a (functions, releases) interval array."""
    return IntervalArray(estimate=ia.estimate[:, s], lo=ia.lo[:, s], hi=ia.hi[:, s],
                         se=ia.se[:, s], df=ia.df[:, s], n=ia.n[:, s])


def compare_matrix(
    samples: npt.ArrayLike,
    confidence: float = 0.95,
    *,
    rule: RuleName = "paper",
    estimator: Estimator = "median",
    direction: Direction = "lower_is_better",
) -> ComparisonMatrix:
    """Statistics and verdicts for every function and consecutive release pair.

    Parameters
    ----------
    samples : array_like of float64, shape (functions, releases, runs)
        Run times; NaN pads releases with fewer runs. Infinities raise.
    confidence : float, default 0.95
        Level of the per-release intervals and of the difference intervals.
    rule : {"paper", "shifts"}, default "paper"
        ``paper``: seed 003's two conditions on each adjacent pair
        (:func:`.paper.compare`; a pair needs two runs a side); ``shifts``: the bounded
        bounded-window rule of :mod:`.shifts` (one-run releases included; the newest verdicts
        provisional).
    estimator : {"median", "mean"}, default "median"
        Estimator of the per-release intervals shown, of the paper rule and of ``gap``.
    direction : {"lower_is_better", "higher_is_better"}, default "lower_is_better"
        Whether a larger value is worse (run times) or better (throughput).

    Returns
    -------
    ComparisonMatrix
    """
    check_confidence(confidence)
    _check_direction(direction)
    get_rule(rule)
    x = np.asarray(samples, dtype=np.float64)
    if x.ndim != 3:
        raise ValueError(f"samples must have shape (functions, releases, runs), got {x.shape}")
    if x.shape[1] < 2:
        raise ValueError("need at least two releases to compare")
    if np.any(np.isinf(x)):
        raise ValueError("samples hold infinite values: they must be finite or NaN")
    if estimator not in ("median", "mean"):
        raise ValueError(f"unknown estimator {estimator!r}")
    med = median_ci_array(x, confidence, method="olive" if rule == "paper" else "order")
    mean = mean_ci_array(x, confidence)
    chosen = med if estimator == "median" else mean
    a, b = _slice(chosen, slice(None, -1)), _slice(chosen, slice(1, None))
    absent = absent_releases(x)
    pairs = pair_statistics(a, b, confidence, direction=direction,
                            absent=(absent[:, :-1], absent[:, 1:]))
    gap = pairs.gap
    if rule == "paper":
        with np.errstate(invalid="ignore", divide="ignore"):
            relative = pairs.diff / np.abs(a.estimate)
        return ComparisonMatrix(
            rule=rule, estimator=estimator, confidence=confidence, median=med, mean=mean,
            n=med.n, verdict=pairs.paper_verdict, gap=gap, diff=pairs.diff,
            diff_lo=pairs.diff_lo, diff_hi=pairs.diff_hi, p_value=pairs.paper_p_value,
            relative=np.where(np.isfinite(relative), relative, np.nan),
            digression=digressions(pairs.paper_verdict, chosen.lo, chosen.hi),
            provisional=np.zeros(pairs.diff.shape, dtype=np.bool_), direction=direction,
        )
    got = shift_verdicts(x, confidence=confidence, direction=direction)
    gap = np.where(np.isnan(gap), interval_gap(a.lo, a.hi, b.lo, b.hi), gap)
    return ComparisonMatrix(
        rule=rule, estimator=estimator, confidence=confidence, median=med, mean=mean,
        n=med.n, verdict=got.verdict, gap=gap, diff=got.diff, diff_lo=got.diff_lo,
        diff_hi=got.diff_hi, p_value=got.p_value, relative=got.relative,
        digression=level_digressions(got.verdict, got.before, got.diff),
        provisional=np.broadcast_to(~got.final, got.verdict.shape).copy(),
        direction=direction,
    )
