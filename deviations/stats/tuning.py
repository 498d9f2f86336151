"""Choosing the adaptive histogram rule's parameters from past known changes (seed 001).

Seed 001 says Mozilla's thresholds were "determined empirically from past known
regressions". This module makes that step explicit and repeatable: score a rule's
detections against labelled change starts, and search a grid of the adaptive rule's
parameters for the best recall with no false alert. It is an offline tool (the
simulation in ``tests/simulations/histogram_rule.py`` chose the defaults of
:func:`~deviations.stats.histograms.detect_changes_adaptive` with it), kept apart from the
rule the dashboard runs.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from .histograms import detect_changes_adaptive

__all__ = ["TuneResult", "TuneRow", "score_detections", "tune"]


@dataclass(frozen=True)
class TuneRow:
    """One grid point of :func:`tune` and how it scored."""

    k: float
    floor: float
    stability_ratio: float
    found: int
    labelled: int
    false_alerts: int

    @property
    def recall(self) -> float:
        """Fraction of labelled changes found within the tolerance."""
        return self.found / self.labelled if self.labelled else float("nan")


@dataclass(frozen=True)
class TuneResult:
    """Best grid point (max recall among those with zero false alerts) and the full grid."""

    k: float
    floor: float
    stability_ratio: float
    recall: float
    rows: tuple[TuneRow, ...]


def score_detections(
    changed: npt.ArrayLike, change_starts: npt.ArrayLike, *, tolerance: int = 1
) -> tuple[int, int, int]:
    """Score detections against labelled change starts.

    A labelled change starting at build ``c`` is found when a change is reported at some
    build in ``[c, c + tolerance]``; a report no labelled window covers is a false alert.

    Parameters
    ----------
    changed, change_starts : array_like of bool, shape (..., builds)
    tolerance : int, default 1
        "Within one build of where it starts".

    Returns
    -------
    (found, labelled, false_alerts)
    """
    ch = np.asarray(changed, dtype=np.bool_)
    lab = np.asarray(change_starts, dtype=np.bool_)
    if ch.shape != lab.shape:
        raise ValueError("changed and change_starts must have the same shape")
    T = ch.shape[-1]
    covered = np.zeros_like(lab)
    hit_later = np.zeros_like(lab)  # hit_later[c] = any report in [c, c + tolerance]
    for lag in range(tolerance + 1):
        covered[..., lag:] |= lab[..., : T - lag]
        hit_later[..., : T - lag] |= ch[..., lag:]
    found = int(np.sum(lab & hit_later))
    return found, int(lab.sum()), int(np.sum(ch & ~covered))


def tune(
    counts: npt.ArrayLike,
    change_starts: npt.ArrayLike,
    *,
    k_grid: Sequence[float] = (3.0, 4.0, 5.0, 6.0, 8.0),
    floor_grid: Sequence[float] = (0.03, 0.05, 0.08, 0.12),
    stability_grid: Sequence[float] = (0.5, 1.0, 2.0),
    tolerance: int = 1,
    recall_slack: float = 0.02,
    **rule_params: int | float,
) -> TuneResult:
    """Choose the adaptive rule's ``k``, ``floor`` and ``stability_ratio`` from past changes.

    Seed 001 says the parameters were "determined empirically from past known
    regressions"; this makes that step explicit. Every grid point runs
    :func:`detect_changes_adaptive` on all labelled series at once and is scored with
    :func:`score_detections`. Among the points with **zero false alerts**, those whose
    recall is within ``recall_slack`` of the best are kept, and of these the most
    conservative wins (larger ``k``, then larger ``floor``, then smaller
    ``stability_ratio``): the point with the very best recall usually sits at the edge of
    the false-alert region of the labelled set, and probes outside it need margin.

    Parameters
    ----------
    counts : array_like, shape (series, builds, buckets)
        Past series with known changes, and quiet series (spikes, low-data, stable): without
        quiet series the false-alert constraint has nothing to bite on.
    change_starts : array_like of bool, shape (series, builds)
        True at the first build of each known lasting change.
    k_grid, floor_grid, stability_grid : sequences of float
        Grid values.
    tolerance : int, default 1
        See :func:`score_detections`.
    recall_slack : float, default 0.02
        Recall given up for margin (see above). On the simulation, the best-recall point
        (k = 3) raised a false alert on the independent test set; one step more
        conservative did not.
    **rule_params
        Other keyword parameters of :func:`detect_changes_adaptive`, held fixed.

    Returns
    -------
    TuneResult

    Raises
    ------
    ValueError
        If no grid point is free of false alerts: the labels or the grid need a look;
        returning the least bad point would hide that.
    """
    rows = []
    for k, floor, ratio in itertools.product(k_grid, floor_grid, stability_grid):
        scan = detect_changes_adaptive(
            counts,
            k=float(k),
            floor=float(floor),
            stability_ratio=float(ratio),
            **rule_params,  # type: ignore[arg-type]
        )
        found, labelled, fa = score_detections(scan.changed, change_starts, tolerance=tolerance)
        rows.append(TuneRow(float(k), float(floor), float(ratio), found, labelled, fa))
    clean = [r for r in rows if r.false_alerts == 0]
    if not clean:
        least = min(r.false_alerts for r in rows)
        raise ValueError(
            f"every grid point raises false alerts (at least {least}); widen the grid "
            "or check the labels"
        )
    top = max(r.recall for r in clean)
    near = [r for r in clean if r.recall >= top - recall_slack]
    best = max(near, key=lambda r: (r.k, r.floor, -r.stability_ratio, r.found))
    return TuneResult(best.k, best.floor, best.stability_ratio, best.recall, tuple(rows))
