"""Verdict codes shared by every release rule, absent releases, the minimum practical change.

Verdict codes (``int8``), stored and exported as strings by :data:`VERDICTS`; they never
change meaning:

====  =========================  ==============================================
code  string                     meaning
====  =========================  ==============================================
 -1   (none)                     no verdict: a side has too few runs for the rule
  0   ``nonsignificant_overlap`` no significant difference
  1   ``significant_overlap``    significant, but not a deviation
  2   ``regression``             deviation for the worse
  3   ``improvement``            deviation for the better
  4   ``appeared``               absent from every run of the earlier side,
                                 measured in the later one
  5   ``vanished``               measured in the earlier side, absent from
                                 every run of the later one
====  =========================  ==============================================

*Absent* (:func:`absent_releases`): every run of the release has exactly 0 for the
function (the trace did not record it: a headed/headless switch, a renamed or new
function). An absent release is not a measurement of 0 µs: a pair with one absent side
is ``appeared`` or ``vanished`` (never a regression or improvement).

Which sign is worse is the metric's ``direction``: with ``"lower_is_better"`` (the
default: run times) a significant increase is a regression, with ``"higher_is_better"``
(throughput, frames per second, scores) it is an improvement; a difference is always
later − earlier.
"""

from __future__ import annotations

from typing import Final, Literal

import numpy as np
import numpy.typing as npt

from .._typing import DIRECTIONS, BoolArray, Direction, Int8Array, IntArray
from ..intervals import MIN_RUNS

__all__ = [
    "APPEARED",
    "IMPROVEMENT",
    "NONSIGNIFICANT_OVERLAP",
    "NO_VERDICT",
    "REGRESSION",
    "SIGNIFICANT_OVERLAP",
    "VANISHED",
    "VERDICTS",
    "Estimator",
    "Verdict",
    "absent_releases",
    "oriented",
    "practical_verdicts",
    "verdict_name",
]

Estimator = Literal["median", "mean"]
Verdict = Literal[
    "nonsignificant_overlap", "significant_overlap", "regression", "improvement", "appeared",
    "vanished",
]

NO_VERDICT: Final = -1
NONSIGNIFICANT_OVERLAP: Final = 0
SIGNIFICANT_OVERLAP: Final = 1
REGRESSION: Final = 2
IMPROVEMENT: Final = 3
APPEARED: Final = 4
VANISHED: Final = 5
VERDICTS: Final[tuple[Verdict, ...]] = (
    "nonsignificant_overlap",
    "significant_overlap",
    "regression",
    "improvement",
    "appeared",
    "vanished",
)
"""``VERDICTS[code]`` is the exported string of a verdict code ``>= 0``."""


def verdict_name(code: int) -> Verdict | None:
    """Exported string of a verdict code, ``None`` for :data:`NO_VERDICT`.

    Raises
    ------
    ValueError
        An unknown code.
    """
    if code == NO_VERDICT:
        return None
    if 0 <= code < len(VERDICTS):
        return VERDICTS[code]
    raise ValueError(f"unknown verdict code {code!r}")


def _check_direction(direction: Direction) -> None:
    if direction not in DIRECTIONS:
        raise ValueError(f"unknown direction {direction!r}, expected one of {DIRECTIONS}")


def _deviation_codes(increase: BoolArray, direction: Direction) -> IntArray:
    """Verdict code of a retained deviation: which of regression / improvement an increase
    (later − earlier > 0) is, given the metric's direction."""
    if direction == "lower_is_better":
        up, down = REGRESSION, IMPROVEMENT
    else:
        up, down = IMPROVEMENT, REGRESSION
    codes: IntArray = np.where(increase, up, down)
    return codes


def oriented(verdict: npt.ArrayLike, higher_is_better: npt.ArrayLike) -> Int8Array:
    """Verdicts decided as ``"lower_is_better"``, for rows whose metric is
    ``"higher_is_better"``: their regressions and improvements swapped.

    Every rule decides a deviation from ``diff = later − earlier`` and its interval, and
    only then names it by the direction (:func:`_deviation_codes`); nothing else depends
    on the direction, so swapping the two codes afterwards gives exactly the verdicts of
    the rule run with ``direction="higher_is_better"`` on those rows (tested). A metric
    series stores one analysis and applies each metric's direction when it is read, so a
    user who changes a metric's direction needs no recomputation.

    Parameters
    ----------
    verdict : array_like of int8, shape (rows, ...)
    higher_is_better : array_like of bool, shape (rows,)

    Returns
    -------
    ndarray of int8, the shape of ``verdict``
    """
    v = np.asarray(verdict, dtype=np.int8)
    flip = np.asarray(higher_is_better, dtype=np.bool_).reshape((-1,) + (1,) * (v.ndim - 1))
    out: Int8Array = np.where(flip & (v == REGRESSION), IMPROVEMENT,
                              np.where(flip & (v == IMPROVEMENT), REGRESSION, v)
                              ).astype(np.int8)
    return out


def absent_releases(samples: npt.ArrayLike) -> BoolArray:
    """Which (function, release) cells are *absent*: every run exactly 0.

    Parameters
    ----------
    samples : array_like of float64, shape (..., runs)
        Run times, NaN-padded.

    Returns
    -------
    ndarray of bool, shape ``samples.shape[:-1]``
        ``True`` where at least :data:`~deviations.stats.intervals.MIN_RUNS` runs are
        given and each is 0. Trace times are 0 where a run did not record the function
        at all, so such a release says nothing about how long the function takes.
    """
    x = np.asarray(samples, dtype=np.float64)
    given = ~np.isnan(x)
    out: BoolArray = (np.sum(given, axis=-1) >= MIN_RUNS) & ~np.any(given & (x != 0), axis=-1)
    return out


def _appearance(
    code: npt.ArrayLike, absent_a: BoolArray, absent_b: BoolArray
) -> Int8Array:
    """Verdict codes with absent releases taken into account (module docstring)."""
    c = np.asarray(code)
    out: Int8Array = np.where(
        c == NO_VERDICT, NO_VERDICT,
        np.where(absent_a & ~absent_b, APPEARED,
                 np.where(~absent_a & absent_b, VANISHED,
                          np.where(absent_a & absent_b, NONSIGNIFICANT_OVERLAP, c))),
    ).astype(np.int8)
    return out

def practical_verdicts(
    verdict: npt.ArrayLike,
    diff: npt.ArrayLike,
    before: npt.ArrayLike,
    *,
    min_relative: float | npt.ArrayLike,
    min_absolute: float,
) -> Int8Array:
    """Deviations smaller than a minimum practical change become ``significant_overlap``.

    Parameters
    ----------
    verdict : array_like of int8
        Verdict codes of either rule.
    diff : array_like of float, same shape
        Later − earlier of the pair's estimates.
    before : array_like of float, same shape
        The earlier release's estimate.
    min_relative, min_absolute : float
        A regression or improvement is kept when ``|diff| >= min_absolute`` **and**
        ``|diff| >= min_relative * |before|``; otherwise it is "significant, not a
        deviation" (statistically real, too small to act on: seed 003 §VI.A on
        practical significance). ``0, 0`` keeps every deviation. ``min_relative`` may
        be an array broadcast against ``verdict`` (one floor per row: a metric's own
        alert threshold, shape ``(rows, 1)``).

    Returns
    -------
    ndarray of int8
    """
    rel = np.asarray(min_relative, dtype=np.float64)
    if np.any(rel < 0) or np.any(np.isnan(rel)) or min_absolute < 0:
        raise ValueError("minimum practical changes must be >= 0")
    v = np.asarray(verdict)
    d = np.abs(np.asarray(diff, dtype=np.float64))
    b = np.abs(np.asarray(before, dtype=np.float64))
    deviation = (v == REGRESSION) | (v == IMPROVEMENT)
    with np.errstate(invalid="ignore"):
        small = ~((d >= min_absolute) & (d >= rel * b))
    out: Int8Array = np.where(deviation & small, SIGNIFICANT_OVERLAP, v).astype(np.int8)
    return out

