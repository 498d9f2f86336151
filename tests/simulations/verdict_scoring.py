"""Scoring a verdict matrix against a simulated series' truth (issue 19, item 6).

A rule's verdicts (int8, functions × boundaries, the codes of
``deviations.stats.releases``) flag a boundary when they are 2 (regression) or 3
(improvement); trace times are lower-is-better, so a planted step up is found when its
boundary is a regression, a step down when it is an improvement, **on the planted
boundary only** (a flag one boundary away is misplaced, not found). What is counted
(:func:`score`, every figure with its denominator):

``found <role> ×<size>``
    planted boundaries found, by role (step, digression end, machine change) and size;
``both ends``
    digressions with both ends found;
``wrong direction``
    planted boundaries flagged the other way;
``false flags``
    flags on the boundaries of stable functions (but the machine change's);
``misplaced``
    flags on the boundaries of step and digression functions where nothing was planted;
``spread``
    flags on any boundary of a spread-only function (all false; ``spread at its release``:
    on the boundary where the spread widens);
``burst``
    flags on the boundaries touching an outlier burst (all false; ``burst elsewhere``: the
    other boundaries of those functions);
``drift``
    flags on the boundaries inside a drift (reported apart: neither hits nor false
    flags), ``drifts flagged`` the drifts with at least one, and for each flag the
    releases into the drift and the level's cumulative change there (``where``);
    ``drift elsewhere``: flags outside the drift on those functions;
``one-run side``
    planted boundaries touching a one-run release (rules that need two runs a side
    cannot find them: counted as not found).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

from deviations.stats.releases import IMPROVEMENT, REGRESSION
from tests.simulations.release_series import (
    DIGRESSION,
    MACHINE,
    NONE,
    ROLE_NAMES,
    STEP,
    Truth,
)


@dataclass
class Tally:
    """Counts ``key -> [hits, out of]`` and value lists ``key -> [...]``, summed over
    matrices by :meth:`merge`."""

    counts: dict[str, list[int]] = field(default_factory=lambda: defaultdict(lambda: [0, 0]))
    values: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))

    def add(self, key: str, hits: int, total: int) -> None:
        c = self.counts[key]
        c[0] += int(hits)
        c[1] += int(total)

    def merge(self, other: Tally) -> None:
        for key, (hits, total) in other.counts.items():
            self.add(key, hits, total)
        for key, values in other.values.items():
            self.values[key].extend(values)

    def rate(self, key: str) -> float | None:
        hits, total = self.counts.get(key, (0, 0))
        return hits / total if total else None

    def cell(self, key: str, digits: int = 1) -> str:
        """``"95.2% (200/210)"``; ``"–"`` when nothing was counted."""
        hits, total = self.counts.get(key, (0, 0))
        if not total:
            return "–"
        return f"{100 * hits / total:.{digits}f}% ({hits}/{total})"


def size_label(size: float) -> str:
    return f"×{size:g}"


def flags(verdict: np.ndarray) -> np.ndarray:
    out: np.ndarray = (verdict == REGRESSION) | (verdict == IMPROVEMENT)
    return out


def score(truth: Truth, verdict: np.ndarray) -> Tally:
    """Count what ``verdict`` (functions × boundaries) found and flagged (module docstring)."""
    v = np.asarray(verdict)
    if v.shape != truth.change.shape:
        raise ValueError(f"verdicts of shape {v.shape}, the series has {truth.change.shape}")
    t = Tally()
    flagged = flags(v)
    correct = ((truth.change > 0) & (v == REGRESSION)) | ((truth.change < 0) & (v == IMPROVEMENT))
    planted = truth.change != 0
    for role in (STEP, DIGRESSION, MACHINE):
        at = truth.role == role
        for s in np.unique(truth.size[at]):
            here = at & (truth.size == s)
            t.add(f"found {ROLE_NAMES[role]} {size_label(s)}", correct[here].sum(), here.sum())
        t.add(f"found {ROLE_NAMES[role]}", correct[at].sum(), at.sum())
    t.add("wrong direction", (flagged & planted & ~correct).sum(), planted.sum())
    one_run = truth.runs < 2
    touching = one_run[:-1] | one_run[1:]
    t.add("one-run side", (planted & touching[None, :]).sum(), planted.sum())

    digress = truth.role == DIGRESSION
    for f in np.flatnonzero(digress.any(axis=1)):
        ends = np.flatnonzero(digress[f])
        for a, b in zip(ends[0::2], ends[1::2], strict=True):
            t.add("both ends", int(correct[f, a] and correct[f, b]), 1)

    stable = truth.stable
    t.add("false flags", (flagged & stable).sum(), stable.sum())
    changed = np.isin(truth.kind, ("step", "digression"))
    off = changed[:, None] & (truth.role == NONE)
    t.add("misplaced", (flagged & off).sum(), off.sum())

    spread = truth.kind == "spread"
    t.add("spread", flagged[spread].sum(), flagged[spread].size)
    rows = np.flatnonzero(spread)
    at_change = truth.spread_from[rows] - 1
    t.add("spread at its release", flagged[rows, at_change].sum(), len(rows))

    burst = truth.kind == "burst"
    near = truth.burst[:, :-1] | truth.burst[:, 1:]
    t.add("burst", (flagged & near & burst[:, None]).sum(), (near & burst[:, None]).sum())
    elsewhere = burst[:, None] & ~near
    t.add("burst elsewhere", (flagged & elsewhere).sum(), elsewhere.sum())

    drift = truth.kind == "drift"
    inside = truth.drift & drift[:, None]
    t.add("drift", (flagged & inside).sum(), inside.sum())
    outside = drift[:, None] & ~truth.drift
    t.add("drift elsewhere", (flagged & outside).sum(), outside.sum())
    for f in np.flatnonzero(drift):
        hit = np.flatnonzero(flagged[f] & truth.drift[f])
        t.add("drifts flagged", int(len(hit) > 0), 1)
        into = hit - truth.drift_start[f] + 1  # releases into the drift at the later release
        t.values["drift releases in"].extend(into.tolist())
        t.values["drift cumulative %"].extend((100 * np.expm1(into * np.log1p(
            truth.drift_rate[f]))).tolist())
        if len(hit):
            t.values["drift first flag %"].append(
                float(100 * np.expm1(into[0] * np.log1p(truth.drift_rate[f]))))
    return t
