"""Replaying a series one release at a time: when do a rule's verdicts become final?

Issue 19, item 1: once ``F`` releases follow a boundary, its verdict (every class, not
only flags) must never change again. :func:`replay` feeds a rule the prefixes of a series
(releases ``0 .. r-1`` for ``r = 2 .. R``) and records every boundary's code after each;
:func:`finality` measures, on those records:

* every *change*: a boundary whose code differs from its code one release earlier, at
  its *age* (releases after the boundary's later release once the new one is added: 1 for
  the release right after it; a boundary first appears at age 0 and that is no change),
  for every class (``all``) and for the flag alone (regression, improvement or none:
  ``flags``, the measure of ``compare_rules --provisional``);
* per boundary, the age of its last change: the 95% quantile and the largest;
* flags *shown* at an age of at least ``k`` (``k`` = 6, 12) that the final matrix does not
  hold with the same direction (lost or flipped), counted once per (function, boundary,
  direction), against the flags of the final matrix.

A rule is any callable of the harness (``tests/simulations/dashboard_rules.py``); it is
applied to every prefix (a cost of ``R`` analyses). A rule object with a ``replay(samples)``
method returning the codes after each release (shape ``(R - 1, F, R - 1)``, boundaries
not there yet :data:`~tests.simulations.baselines.NOT_YET`) is asked that instead: an
incremental rule answers in one pass (``baselines.Perfherder`` does).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from deviations.stats.releases import IMPROVEMENT, REGRESSION
from tests.simulations.baselines import NOT_YET

AGES = (6, 12)


def replay(rule: Callable[[np.ndarray], np.ndarray], samples: np.ndarray) -> np.ndarray:
    """Codes after each release: ``out[r - 2, f, k]`` is boundary ``k``'s code once
    releases ``0 .. r-1`` exist (:data:`NOT_YET` for ``k >= r - 1``)."""
    incremental = getattr(rule, "replay", None)
    if incremental is not None:
        out: np.ndarray = np.asarray(incremental(samples), dtype=np.int8)
        return out
    F, R = samples.shape[:2]  # noqa: N806
    codes = np.full((max(R - 1, 0), F, max(R - 1, 0)), NOT_YET, dtype=np.int8)
    for r in range(2, R + 1):
        got = np.asarray(rule(samples[:, :r]))
        if got.shape != (F, r - 1):
            raise ValueError(f"the rule returned shape {got.shape} for {F} functions × {r} "
                             f"releases, expected {(F, r - 1)}")
        codes[r - 2, :, : r - 1] = got
    return codes


def _flag(codes: np.ndarray) -> np.ndarray:
    return np.where(codes == REGRESSION, 1, np.where(codes == IMPROVEMENT, -1, 0))


@dataclass(frozen=True)
class Finality:
    """What :func:`finality` measured on one or more replays (summed by :meth:`merge`)."""

    change_ages: np.ndarray  # every class
    flag_change_ages: np.ndarray
    last_change_ages: np.ndarray  # per boundary that changed at least once (every class)
    lost: dict[int, int]  # k -> flags shown at age >= k later lost or flipped
    final_flags: int
    boundaries: int

    def merge(self, other: Finality) -> Finality:
        return Finality(
            np.concatenate([self.change_ages, other.change_ages]),
            np.concatenate([self.flag_change_ages, other.flag_change_ages]),
            np.concatenate([self.last_change_ages, other.last_change_ages]),
            {k: self.lost.get(k, 0) + other.lost.get(k, 0) for k in self.lost | other.lost},
            self.final_flags + other.final_flags,
            self.boundaries + other.boundaries,
        )

    @staticmethod
    def quantile(ages: np.ndarray, share: float = 0.95) -> int | None:
        """Smallest age with at least ``share`` of ``ages`` at or below it."""
        if not len(ages):
            return None
        return int(np.quantile(ages, share, method="inverted_cdf"))


def finality(codes: np.ndarray, ages: tuple[int, ...] = AGES) -> Finality:
    """Late changes of the replay ``codes`` (:func:`replay`; module docstring)."""
    P, F, B = codes.shape  # noqa: N806  (prefixes, functions, boundaries)
    if P == 0:
        return Finality(np.zeros(0, int), np.zeros(0, int), np.zeros(0, int),
                        {k: 0 for k in ages}, 0, 0)
    # Age of boundary k after prefix row p (releases 0 .. p+1): p - k (p+1 is the newest
    # release, k+1 the boundary's later one).
    age = np.arange(P)[:, None] - np.arange(B)[None, :]  # (P, B)
    exists = age >= 0
    before, after = codes[:-1], codes[1:]
    seen_before = exists[:-1][:, None, :]
    changed = (before != after) & seen_before
    flag_changed = (_flag(before) != _flag(after)) & seen_before
    change_age = np.broadcast_to(age[1:][:, None, :], changed.shape)
    last = np.where(changed, change_age, -1).max(axis=0, initial=-1)  # (F, B)
    final = codes[-1]
    final_flag = _flag(final)
    lost = {}
    flag = _flag(codes)
    for k in ages:
        old = (flag != 0) & (age[:, None, :] >= k)
        # a flag shown with a direction the final matrix does not hold at that boundary
        gone = old & (flag != final_flag[None])
        up = (gone & (flag > 0)).any(axis=0)
        down = (gone & (flag < 0)).any(axis=0)
        lost[k] = int(up.sum() + down.sum())
    return Finality(
        change_ages=change_age[changed].astype(np.int64),
        flag_change_ages=change_age[flag_changed].astype(np.int64),
        last_change_ages=last[last >= 0].astype(np.int64),
        lost=lost,
        final_flags=int((final_flag != 0).sum()),
        boundaries=F * B,
    )
