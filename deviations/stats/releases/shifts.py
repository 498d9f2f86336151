r"""The shift rule (``shifts``): each boundary judged from a bounded window, final after it.

For the boundary between releases ``b`` and ``b+1`` the rule reads only a window of
releases around it (:func:`shift_windows`): the releases after it until they hold
:data:`RUNS_AFTER` runs (at least :data:`MIN_AFTER`, at most :data:`MAX_AFTER` releases)
and the releases before it until they hold :data:`RUNS_BEFORE` runs (at most
:data:`MAX_BEFORE`). Once the releases after it exist, nothing later can change its
verdict: it is *final*. Before that it is judged on the releases there are
(*provisional*), and a provisional deviation with overwhelming evidence is marked
*early*.

Within the window (:func:`shift_verdicts`):

1. **Levels.** The window's runs are segmented into levels by the penalised
   empirical-distribution segmentation of :func:`.segmentation.optimal_segments` (Zou et
   al. 2014; Haynes, Fearnhead & Eckley 2017), which places each change of level on the
   boundary that explains the runs best: one step gives one change point, a 2-release
   digression two. The penalty is multiplied by the window's design effect
   (:func:`_design_effect`: runs of one release share its build and machine, so they
   are fewer independent observations than runs), and each change point may then move
   by one release to where the L1 cost of the two levels is least (:func:`_refine`).
2. **One comparison.** The runs of the level before the boundary (from the window's
   previous change point, or its start) are compared with the runs of the level after it
   (to the next change point, or the window's end), by three tests that must all reject:
   Mann–Whitney's (exact where :mod:`..ranks` says so) and Brunner–Munzel's on the runs,
   their variance scaled by the design effect (:func:`_deflated`), and Student's t on
   the releases' mean ranks, each release one observation, with the releases' spread
   about the window's levels as its variance (:func:`_release_t`). ``p_value`` is the
   largest of the three.
3. **The shift.** ``diff`` is the Hodges–Lehmann shift between the *releases' medians*
   of the two levels (the median of the pairwise differences later − earlier, µs), with
   its distribution-free confidence interval (Moses 1965; Hollander & Wolfe 1999 §4.3),
   the inversion of the rank test of the same medians. ``before`` is the median of the
   releases' medians before; ``relative`` is ``diff / |before|``.
4. **Verdict.** A change point whose ``p <= alpha`` and whose interval excludes 0 is a
   deviation: a regression or an improvement by the sign of ``diff`` and the metric's
   direction (so a regression always has ``diff > 0`` for lower-is-better metrics, and
   its interval excludes 0). Significant but not a change point (or an interval
   touching 0): ``significant_overlap``; otherwise ``nonsignificant_overlap``. The
   minimum practical change is applied by readers with :func:`.codes.practical_verdicts`
   on the same ``diff`` and ``before``.

Every number shown beside a verdict comes from that one comparison. Runs of 0 µs (the
function was not called in that run) are left out; a function with no run above 0 in the
whole part of the window before the boundary, and one in the release after it, has
``appeared``; one measured in the release before and in no run after it (to the window's
end) has ``vanished``.

The rule judges one-run releases too: a boundary's sides are levels of several releases.
Its false flags are bounded per boundary by the fixed test level and the penalty (no
whole-matrix step whose threshold moves when releases arrive), so a final verdict never
changes.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt
from scipy import special  # type: ignore[import-untyped]  # no scipy-stubs in the venv

from .._checks import check_confidence
from .._typing import BoolArray, Direction, FloatArray, Int8Array, IntArray
from ..ranks import (
    EXACT_MAX_PAIRS,
    _brunner_munzel_rows,
    _mann_whitney_rows,
    _midranks,
    _u_null_cdf,
)
from .codes import (
    APPEARED,
    NO_VERDICT,
    NONSIGNIFICANT_OVERLAP,
    SIGNIFICANT_OVERLAP,
    VANISHED,
    _check_direction,
    _deviation_codes,
)
from .defaults import (
    ALPHA,
    EARLY_ALPHA,
    MAX_AFTER,
    MAX_BEFORE,
    MIN_AFTER,
    MIN_BEFORE,
    RUNS_AFTER,
    RUNS_BEFORE,
)
from .segmentation import SEGMENT_PENALTY, _change_points, _log_times, _segment_penalty

__all__ = [
    "Shifts",
    "Windows",
    "shift_verdicts",
    "shift_windows",
]

_PAIRWISE_CHUNK: Final = 1 << 22
"""Pairwise differences held at once by :func:`_shift_intervals` (32 MB of float64)."""


@dataclass(frozen=True)
class Windows:
    """Per boundary of a series (between releases ``b`` and ``b+1``), its window.

    ``start`` and ``stop`` are the first and last release (inclusive) the verdict reads;
    ``final`` says the window is complete; ``final_at`` is the release whose arrival
    completed it (-1 while provisional); ``after`` the releases after the boundary that
    the window needs (``MAX_AFTER`` while the releases there hold too few runs).
    Provisional boundaries share one window ending at the newest release.
    """

    start: IntArray
    stop: IntArray
    final: BoolArray
    final_at: IntArray
    after: IntArray


def shift_windows(
    runs: npt.ArrayLike,
    *,
    runs_after: int = RUNS_AFTER,
    min_after: int = MIN_AFTER,
    max_after: int = MAX_AFTER,
    runs_before: int = RUNS_BEFORE,
    min_before: int = MIN_BEFORE,
    max_before: int = MAX_BEFORE,
) -> Windows:
    """The window of every boundary of a series whose releases have ``runs`` runs each.

    Boundary ``b``'s verdict needs ``f`` releases after it: the fewest ``f >=
    min_after`` whose runs add up to ``runs_after`` or more, at most ``max_after``; it is
    final once release ``b + f`` exists. It reads ``l`` releases before it: the fewest
    ``l >= min_before`` whose runs add up to ``runs_before``, at most ``max_before`` (and
    the series' start).
    A provisional boundary (``b + f`` beyond the newest release, or ``f`` not known yet)
    reads up to the newest release, from the earliest start of the windows that reach it
    (the provisional ones and one just made final by the newest release), so that one
    segmentation serves them all.
    """
    counts = np.asarray(runs, dtype=np.int64)
    if counts.ndim != 1 or np.any(counts < 0):
        raise ValueError("runs must be a 1-D array of counts >= 0")
    if (not 1 <= min_after <= max_after or runs_after < 0 or runs_before < 0
            or not 1 <= min_before <= max_before):
        raise ValueError("window sizes must be positive and min_after <= max_after")
    R = len(counts)
    B = max(R - 1, 0)
    cum = np.concatenate([[0], np.cumsum(counts)])
    b = np.arange(B)
    # after: the fewest f in [min_after, max_after] with runs(b+1 .. b+f) >= runs_after.
    after = np.full(B, max_after)
    known = np.zeros(B, dtype=np.bool_)
    for f in range(min_after, max_after + 1):
        exists = b + f <= R - 1
        enough = exists & (cum[np.minimum(b + 1 + f, R)] - cum[b + 1] >= runs_after)
        take = enough & ~known
        after[take] = f
        known |= take
    final = (b + after <= R - 1)
    before = np.ones(B, dtype=np.int64)
    reached = np.zeros(B, dtype=np.bool_)
    for l_ in range(min_before, max_before + 1):
        at_start = b - l_ + 1 <= 0
        enough = cum[b + 1] - cum[np.maximum(b + 1 - l_, 0)] >= runs_before
        take = (enough | at_start) & ~reached
        before[take] = l_
        reached |= take
    before[~reached] = max_before
    start = np.maximum(b - before + 1, 0)
    stop = np.where(final, b + after, R - 1)
    if np.any(~final):
        # Every window reaching the newest release starts where the earliest of them does:
        # the provisional ones, and the one the newest release has just made final, so
        # that one segmentation serves them all (an incremental analysis judges those).
        newest = stop == R - 1
        start[~final] = start[newest].min()
    return Windows(start=start, stop=stop, final=final,
                   final_at=np.where(final, b + after, -1), after=after)


@dataclass(frozen=True)
class Shifts:
    """Verdicts of :func:`shift_verdicts`: one row per function, one column per boundary.

    Attributes
    ----------
    verdict : ndarray of int8
        Verdict codes (:data:`.codes.VERDICTS`), before any minimum practical change.
    change : ndarray of bool
        The window's segmentation puts a change of level at the boundary.
    p_value : ndarray of float64
        Two-sided p-value of the level after against the level before: the largest of
        Mann–Whitney's and Brunner–Munzel's on the runs (variance scaled by the design
        effect) and Student's t on the releases' mean ranks; where the last is above
        ``alpha`` at a boundary that is no change point, that p-value alone (the run
        tests cannot change the verdict, and are not computed).
    diff, diff_lo, diff_hi : ndarray of float64
        Hodges–Lehmann shift (later − earlier) between the releases' medians of the two
        levels and its Moses confidence interval, in the samples' unit.
    before : ndarray of float64
        Median of the releases' medians before (``relative = diff / |before|``).
    first, last : ndarray of int64
        First release of the runs before and last release of the runs after.
    n_before, n_after : ndarray of int64
        Runs compared on each side (runs of 0 left out).
    early : ndarray of bool
        A provisional deviation with ``p <= early_alpha``.
    final : ndarray of bool, one per boundary
        The boundary's window is complete: its verdict never changes.
    """

    verdict: Int8Array
    change: BoolArray
    p_value: FloatArray
    diff: FloatArray
    diff_lo: FloatArray
    diff_hi: FloatArray
    before: FloatArray
    first: IntArray
    last: IntArray
    n_before: IntArray
    n_after: IntArray
    early: BoolArray
    final: BoolArray

    @property
    def relative(self) -> FloatArray:
        """``diff / |before|`` (0.25 = +25%), NaN where undefined."""
        with np.errstate(invalid="ignore", divide="ignore"):
            r = self.diff / np.abs(self.before)
        out: FloatArray = np.where(np.isfinite(r), r, np.nan)
        return out


@functools.lru_cache(maxsize=4096)
def _moses_rank(m: int, n: int, confidence: float, effect: float = 1.0) -> int:
    """Rank ``k`` (1-based) of the Moses interval ``[D_(k), D_(mn-k+1)]`` of the ``m n``
    sorted pairwise differences: the largest ``k`` with ``P(U <= k - 1) <= (1 -
    confidence) / 2`` under the null (exact distribution of U up to
    :data:`..ranks.EXACT_MAX_PAIRS` pairs, its normal approximation above; Hollander &
    Wolfe 1999, §4.3), at least 1. ``effect`` > 1 (:func:`_design_effect`) widens it: the
    normal approximation with U's variance times ``effect``, never narrower than the
    exact interval."""
    alpha2 = (1.0 - confidence) / 2.0
    z = float(special.ndtri(1.0 - alpha2))
    normal = max(1, int(np.floor(m * n / 2.0 - z * np.sqrt(effect * m * n * (m + n + 1) / 12.0))))
    if m * n <= EXACT_MAX_PAIRS:
        cdf = _u_null_cdf(m, n)  # P(U <= u), u = 0 .. m n
        exact = max(1, int(np.sum(cdf <= alpha2)))
        return exact if effect <= 1.0 else min(exact, normal)
    return normal


def _shift_intervals(
    left: FloatArray, right: FloatArray, confidence: float, *, presorted: bool = False,
    effect: FloatArray | None = None,
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Row-wise Hodges–Lehmann shift of ``right`` against ``left`` (NaN: missing) and its
    Moses interval: the median and the ``k``-th smallest and largest of the pairwise
    differences ``right_j - left_i`` (:func:`_moses_rank`). Rows with an empty side get NaN.

    Rows are grouped by their two run counts, so each group partitions a dense
    (rows, m n) block once for the three order statistics.
    """
    F = left.shape[0]
    est, lo, hi = np.full(F, np.nan), np.full(F, np.nan), np.full(F, np.nan)
    # Each row sorted, NaN last (``presorted``: the caller did it).
    ls, rs = (left, right) if presorted else (np.sort(left, axis=1), np.sort(right, axis=1))
    m_all = np.sum(~np.isnan(left), axis=1)
    n_all = np.sum(~np.isnan(right), axis=1)
    ok = (m_all > 0) & (n_all > 0)
    if not np.any(ok):
        return est, lo, hi
    ks = np.array([_moses_rank(int(m), int(n), confidence,
                                1.0 if effect is None else float(e))
                   for m, n, e in zip(m_all[ok], n_all[ok],
                                      np.ones(len(m_all))[ok] if effect is None else effect[ok],
                                      strict=True)], dtype=np.int64)
    sizes = np.stack([m_all[ok], n_all[ok], ks], axis=1)
    groups, inverse = np.unique(sizes, axis=0, return_inverse=True)
    rows_ok = np.flatnonzero(ok)
    for g, (m, n, k) in enumerate(groups.tolist()):
        rows = rows_ok[inverse.ravel() == g]
        N = m * n
        half = N // 2
        step = max(1, _PAIRWISE_CHUNK // N)
        for c in range(0, len(rows), step):
            r = rows[c : c + step]
            d = (rs[r, :n][:, None, :] - ls[r, :m][:, :, None]).reshape(len(r), N)
            if N < 4:
                d.sort(axis=1)
                est[r] = 0.5 * (d[:, (N - 1) // 2] + d[:, half])
                lo[r], hi[r] = d[:, k - 1], d[:, N - k]
                continue
            # One partition at the middle, then each half once: three single-rank
            # selections cost a fraction of one partition at four ranks.
            d.partition(half, axis=1)
            upper = d[:, half]
            est[r] = 0.5 * (upper + (d[:, :half].max(axis=1) if N % 2 == 0 else upper))
            below, above = d[:, :half], d[:, half:]
            lo[r] = (np.partition(below, k - 1, axis=1)[:, k - 1] if k - 1 < half
                     else upper)
            j = N - k - half
            hi[r] = np.partition(above, j, axis=1)[:, j] if j > 0 else upper
    return est, lo, hi


def _median_rows(a: FloatArray, *, presorted: bool = False) -> FloatArray:
    s = a if presorted else np.sort(a, axis=1)
    n = np.sum(~np.isnan(a), axis=1)
    lo = np.take_along_axis(s, np.maximum((n - 1) // 2, 0)[:, None], axis=1)[:, 0]
    hi = np.take_along_axis(s, np.maximum(n // 2, 0)[:, None], axis=1)[:, 0]
    out: FloatArray = np.where(n > 0, 0.5 * (lo + hi), np.nan)
    return out


def _l1(v: FloatArray) -> float:
    """Sum of absolute deviations of ``v`` (no NaN, not empty) from its median."""
    v = np.sort(v)
    n = len(v)
    med = 0.5 * (v[(n - 1) // 2] + v[n // 2])
    return float(np.abs(v - med).sum())


def _refine(y: FloatArray, cuts: BoolArray) -> BoolArray:
    """Each change point moved by at most one release to where the releases beside it sit
    with the level their runs are closer to.

    The segmentation's cost sees ranks only: the run of a one-run release just before a
    step, the largest of its level, ranks next to the runs after the step however far
    below them it lies, and the cut can land one release early. Among the cut, one release
    before and one after (each side keeping a release), the one with the least sum of
    absolute deviations of the log times from their side's median is kept: the location
    of a change of level under Laplace noise (the L1 cost of a location shift), ties to
    the segmentation's own.
    """
    F, W, _ = y.shape
    out = cuts.copy()
    fs, cs = np.nonzero(cuts)
    for f, c in zip(fs.tolist(), cs.tolist(), strict=True):
        row = np.flatnonzero(out[f])
        prev = row[row < c]
        nxt = row[row > c]
        a = int(prev[-1]) + 1 if len(prev) else 0
        e = int(nxt[0]) if len(nxt) else W - 1
        best, best_cost = c, np.inf
        for cand in (c, c - 1, c + 1):
            if cand < a or cand >= e:
                continue
            lo = y[f, a : cand + 1].ravel()
            hi = y[f, cand + 1 : e + 1].ravel()
            lo, hi = lo[~np.isnan(lo)], hi[~np.isnan(hi)]
            if not len(lo) or not len(hi):
                continue
            cost = _l1(lo) + _l1(hi)
            if cost < best_cost - 1e-12:
                best, best_cost = cand, cost
        if best != c:
            out[f, c], out[f, best] = False, True
    return out


def _release_medians(a: FloatArray, m: int) -> FloatArray:
    """The median of each release's runs, from rows of runs laid out release by release
    (``m`` a release), NaN for a release without a run."""
    F = a.shape[0]
    r = np.sort(a.reshape(F, -1, m), axis=2)
    n = np.sum(~np.isnan(r), axis=2)
    lo = np.take_along_axis(r, np.maximum((n - 1) // 2, 0)[:, :, None], axis=2)[:, :, 0]
    hi = np.take_along_axis(r, np.maximum(n // 2, 0)[:, :, None], axis=2)[:, :, 0]
    out: FloatArray = np.where(n > 0, 0.5 * (lo + hi), np.nan)
    return out


def _sides(
    x: FloatArray, first: IntArray, b: int, last: IntArray
) -> tuple[FloatArray, FloatArray]:
    """Runs of releases ``first .. b`` and ``b+1 .. last`` of each row (window-relative
    indices), as rows of NaN-padded runs (values <= 0 left out)."""
    F, W, m = x.shape
    rel = np.arange(W)
    keep_l = rel[None, : b + 1] >= first[:, None]
    keep_r = rel[None, b + 1 :] <= last[:, None]
    positive = np.where(x > 0, x, np.nan)
    left = np.where(keep_l[:, :, None], positive[:, : b + 1], np.nan).reshape(F, -1)
    right = np.where(keep_r[:, :, None], positive[:, b + 1 :], np.nan).reshape(F, -1)
    return left, right


_CHI2_1_MEDIAN: Final = 0.454936423119572
"""Median of the chi-squared distribution with one degree of freedom."""


def _window_ranks(x: FloatArray) -> FloatArray:
    """Mid-ranks of the runs of a window ``x`` (functions, releases, runs) among the
    function's runs of the window, NaN for missing runs and values <= 0."""
    F, W, m = x.shape
    out: FloatArray = _midranks(np.where(x > 0, x, np.nan).reshape(F, W * m)).reshape(F, W, m)
    return out


def _design_effect(x: FloatArray, ranks: FloatArray | None = None) -> FloatArray:
    r"""How much the runs' sharing of their release inflates a test's variance, per row
    of a window ``x`` (functions, releases, runs; NaN and values <= 0 left out).

    Runs of one release share its build, machine and session: they sit together above or
    below the level, so a window holds fewer independent observations than runs, and a
    rank test of runs, or a segmentation whose cost adds up runs, sees release-to-release
    jitter as a change. On the mid-ranks of the window's runs (scale-free, robust to
    heavy tails): the within-release variance :math:`\hat\sigma_w^2` (pooled), and the
    between-release variance from the successive differences of the releases' mean ranks,
    :math:`\hat\sigma_b^2 = \max\big(0, \operatorname{med}_j d_j^2 / (2 \cdot 0.455) -
    \hat\sigma_w^2 / \bar n\big)` (the median of :math:`\chi^2_1` is 0.455: a step or a
    digression moves one or two differences, not their median; von Neumann's mean square
    successive difference, made robust). The design effect is :math:`1 + (\bar n - 1)
    \hat\rho`, :math:`\hat\rho = \hat\sigma_b^2 / (\hat\sigma_b^2 + \hat\sigma_w^2)` the
    intraclass correlation, :math:`\bar n` the runs a release (Kish 1965; Rosner & Grove
    1999 for the rank sum of clustered data); 1 with one run a release.

    References
    ----------
    L. Kish, Survey Sampling, Wiley, 1965. B. Rosner, D. Grove, "Use of the Mann–Whitney
    U-test for clustered data", Statistics in Medicine 18(11), 1387-1400, 1999. J. von
    Neumann et al., "The mean square successive difference", Ann. Math. Statist. 12(2),
    153-162, 1941.
    """
    if ranks is None:
        ranks = _window_ranks(x)
    n_j = np.sum(~np.isnan(ranks), axis=2).astype(np.float64)
    # Mid-ranks are half-integers: their sums and sums of squares are exact, so the
    # within-release sums of squares do not depend on how the runs are padded (an
    # incremental analysis pads them otherwise than a full one).
    total = np.nansum(ranks, axis=2)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_j = total / n_j
        ss_j = np.where(n_j > 0, np.nansum(ranks * ranks, axis=2) - total * total / n_j, 0.0)
        within = np.sum(ss_j, axis=1) / np.sum(np.maximum(n_j - 1, 0), axis=1)
        d2 = np.diff(mean_j, axis=1) ** 2  # NaN where a release has no run
        n_bar = np.nansum(n_j, axis=1) / np.sum(n_j > 0, axis=1)
        have = np.sum(np.isfinite(d2), axis=1) >= 2
        med = np.nanmedian(np.where(have[:, None], d2, 0.0), axis=1)
        between = np.maximum(0.0, med / (2.0 * _CHI2_1_MEDIAN) - within / n_bar)
        effect = 1.0 + (n_bar - 1.0) * between / (between + within)
    out: FloatArray = np.where(have & np.isfinite(effect), np.maximum(effect, 1.0), 1.0)
    return out


def _release_means(x: FloatArray, ranks: FloatArray | None = None) -> FloatArray:
    """Each release's mean mid-rank among the runs of the window ``x`` (functions,
    releases, runs; values <= 0 and NaN left out), NaN for a release without a run."""
    if ranks is None:
        ranks = _window_ranks(x)
    n_j = np.sum(~np.isnan(ranks), axis=2)
    with np.errstate(invalid="ignore", divide="ignore"):
        out: FloatArray = np.where(n_j > 0, np.nansum(ranks, axis=2) / n_j, np.nan)
    return out


def _release_spread(means: FloatArray, cuts: BoolArray) -> tuple[FloatArray, FloatArray]:
    """The variance of the releases' mean ranks about their level, pooled over the levels
    of the window's segmentation, and its degrees of freedom (releases - levels)."""
    F, W = means.shape
    level = np.concatenate([np.zeros((F, 1), dtype=np.int64),
                            np.cumsum(cuts, axis=1)], axis=1)  # (F, W): segment of release
    present = ~np.isnan(means)
    levels = int(level.max(initial=0)) + 1
    ss = np.zeros(F)
    used = np.zeros(F)
    for g in range(levels):
        inside = present & (level == g)
        n = inside.sum(axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            mean = np.where(n > 0, np.where(inside, means, 0.0).sum(axis=1) / n, 0.0)
        ss += np.where(inside, (means - mean[:, None]) ** 2, 0.0).sum(axis=1)
        used += n > 0
    df = present.sum(axis=1) - used
    with np.errstate(invalid="ignore", divide="ignore"):
        variance = ss / df
    return variance, df.astype(np.float64)


def _release_t(means: FloatArray, first: IntArray, k: int, last: IntArray,
               variance: FloatArray, df: FloatArray) -> FloatArray:
    r"""Two-sided p-value of Student's t between the releases before boundary ``k``
    (``first .. k``) and after it (``k + 1 .. last``), each release one observation, its
    runs' mean rank in the window (:func:`_release_means`): jitter of whole releases is in
    the variance, which is the releases' spread about the levels of the window's
    segmentation (:func:`_release_spread`: the function's, borrowed from every level, so
    that a short level is not judged on its own few releases), on its degrees of
    freedom. NaN where a side has no release or no degree of freedom is left."""
    W = means.shape[1]
    rel = np.arange(W)
    in_l = (rel[None, :] >= first[:, None]) & (rel[None, :] <= k) & ~np.isnan(means)
    in_r = (rel[None, :] > k) & (rel[None, :] <= last[:, None]) & ~np.isnan(means)
    r_l, r_r = in_l.sum(axis=1), in_r.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        m_l = np.where(in_l, means, 0.0).sum(axis=1) / r_l
        m_r = np.where(in_r, means, 0.0).sum(axis=1) / r_r
        t = (m_r - m_l) / np.sqrt(variance * (1.0 / r_l + 1.0 / r_r))
        p = 2.0 * special.stdtr(df, -np.abs(t))
    p = np.where(variance > 0, p, np.where(m_l == m_r, 1.0, 0.0))
    out: FloatArray = np.where((r_l > 0) & (r_r > 0) & (df > 0), p, np.nan)
    return out


def _deflated(p: FloatArray, effect: FloatArray) -> FloatArray:
    """A two-sided p-value whose test statistic's variance is ``effect`` times what the
    test assumed: its normal quantile shrunk by the root of ``effect`` (an exact p-value
    stays exact where ``effect`` is 1)."""
    z = special.ndtri(1.0 - np.clip(p, 1e-300, 1.0) / 2.0)
    out: FloatArray = np.where(effect > 1.0, 2.0 * special.ndtr(-z / np.sqrt(effect)), p)
    return np.where(np.isnan(p), np.nan, out)


def shift_verdicts(
    samples: npt.ArrayLike,
    *,
    runs: npt.ArrayLike | None = None,
    boundaries: Sequence[int] | npt.ArrayLike | None = None,
    offset: int = 0,
    alpha: float = ALPHA,
    early_alpha: float = EARLY_ALPHA,
    penalty: float = SEGMENT_PENALTY,
    confidence: float = 0.95,
    direction: Direction = "lower_is_better",
    min_after: int = MIN_AFTER,
    runs_after: int = RUNS_AFTER,
) -> Shifts:
    """Verdicts of the shift rule (module docstring) for some boundaries of a series.

    Parameters
    ----------
    samples : array_like of float64, shape (functions, releases, runs)
        Run times of releases ``offset .. offset + releases - 1`` of the series,
        NaN-padded; 0 where a run did not call the function.
    runs : array_like of int, shape (series releases,), optional
        Runs of every release of the series (what the windows are cut from); default:
        the most runs any function has in each release of ``samples`` (then ``offset``
        must be 0).
    boundaries : sequence of int, optional
        Boundaries to judge (``b``: between releases ``b`` and ``b+1`` of the series);
        default every boundary. Their windows must lie within ``samples``.
    offset : int, default 0
        Series index of the first release of ``samples``.
    alpha : float, default :data:`ALPHA`
        Level of the test of a change point.
    early_alpha : float, default :data:`EARLY_ALPHA`
        Level that marks a provisional deviation early.
    penalty : float, default :data:`.segmentation.SEGMENT_PENALTY`
        Penalty of the segmentation per change point (scaled as in
        :func:`.segmentation.optimal_segments`' callers: by the runs per release, and
        down for a window of few runs).
    confidence : float, default 0.95
        Level of the interval of ``diff``.
    direction : {"lower_is_better", "higher_is_better"}, default "lower_is_better"
    min_after, runs_after : int, default :data:`MIN_AFTER`, :data:`RUNS_AFTER`
        The window after a boundary (:func:`shift_windows`): its verdict is final once at
        least ``min_after`` releases holding ``runs_after`` runs follow it. Other values
        trace the trade-off between finality and steps found (docs/statistics.md §10b);
        the dashboard uses the defaults.

    Returns
    -------
    Shifts
        Columns in the order of ``boundaries``.

    References
    ----------
    .. [1] C. Zou, G. Yin, L. Feng, Z. Wang, Ann. Statist. 42(3), 970-1002, 2014.
    .. [2] K. Haynes, P. Fearnhead, I. A. Eckley, Stat. Comput. 27(5), 1293-1305, 2017.
    .. [3] H. B. Mann, D. R. Whitney, Ann. Math. Statist. 18(1), 50-60, 1947.
    .. [4] J. L. Hodges, E. L. Lehmann, Ann. Math. Statist. 34(2), 598-611, 1963.
    .. [5] L. E. Moses, "Query: confidence limits from rank tests", Technometrics 7,
       257-260, 1965; M. Hollander, D. A. Wolfe, Nonparametric Statistical Methods,
       2nd ed., §4.3, 1999.
    """
    check_confidence(confidence)
    _check_direction(direction)
    if not 0.0 < alpha < 1.0 or not 0.0 < early_alpha <= alpha:
        raise ValueError("need 0 < early_alpha <= alpha < 1")
    if penalty < 0:
        raise ValueError("penalty must be >= 0")
    x = np.asarray(samples, dtype=np.float64)
    if x.ndim != 3:
        raise ValueError(f"samples must have shape (functions, releases, runs), got {x.shape}")
    if np.any(np.isinf(x)):
        raise ValueError("samples must be finite or NaN")
    F, n_rel, _ = x.shape
    if runs is None:
        if offset:
            raise ValueError("give runs when samples do not start at the series' first release")
        counts = np.max(np.sum(~np.isnan(x), axis=2), axis=0, initial=0)
    else:
        counts = np.asarray(runs, dtype=np.int64)
    win = shift_windows(counts, min_after=min_after, runs_after=runs_after,
                        max_after=max(MAX_AFTER, min_after))
    B_all = len(win.start)
    wanted = (np.arange(B_all) if boundaries is None
              else np.asarray(boundaries, dtype=np.int64).reshape(-1))
    if np.any((wanted < 0) | (wanted >= B_all)):
        raise ValueError("a boundary is outside the series")
    if len(wanted) and (win.start[wanted].min() < offset
                        or win.stop[wanted].max() > offset + n_rel - 1):
        raise ValueError("samples do not cover the windows of the boundaries asked for")
    B = len(wanted)
    shape = (F, B)
    verdict = np.full(shape, NO_VERDICT, dtype=np.int8)
    change = np.zeros(shape, dtype=np.bool_)
    p_value, diff, diff_lo, diff_hi, before = (np.full(shape, np.nan) for _ in range(5))
    first, last = np.zeros(shape, dtype=np.int64), np.zeros(shape, dtype=np.int64)
    n_before, n_after = np.zeros(shape, dtype=np.int64), np.zeros(shape, dtype=np.int64)
    # Boundaries sharing a window share its segmentation.
    by_window: dict[tuple[int, int], list[int]] = {}
    for col, b in enumerate(wanted.tolist()):
        by_window.setdefault((int(win.start[b]), int(win.stop[b])), []).append(col)
    y_all = _log_times(x)
    for (start, stop), cols in by_window.items():
        lo_, hi_ = start - offset, stop - offset + 1
        xw, yw = x[:, lo_:hi_], y_all[:, lo_:hi_]
        W = hi_ - lo_
        # The segmentation's cost adds up runs: where a release's runs move together its
        # penalty grows with the design effect, as the tests' variance below.
        ranks = _window_ranks(xw)  # shared by the design effect and the release test
        effect = _design_effect(xw, ranks)
        base = _segment_penalty(yw, penalty)

        def penalty_of(rows: slice, whole: FloatArray, base: Callable[..., FloatArray] = base,
                       effect: FloatArray = effect) -> FloatArray:
            out: FloatArray = base(rows, whole) * effect[rows]
            return out

        cuts = _refine(yw, _change_points(yw, penalty_of, None))
        means = _release_means(xw, ranks)
        variance, dof = _release_spread(means, cuts)
        edges = np.arange(W - 1)
        measured = np.any(xw > 0, axis=2)  # (F, W): a run above 0
        for col in cols:
            k = int(wanted[col]) - start  # the boundary, window-relative
            prev = np.where(cuts[:, :k], edges[:k], -1).max(axis=1, initial=-1)
            nxt = np.where(cuts[:, k + 1 :], edges[k + 1 :], W - 1).min(axis=1, initial=W - 1)
            seg_first, seg_last = prev + 1, nxt
            left, right = _sides(xw, seg_first, k, seg_last)
            p_rel = _release_t(means, seg_first, k, seg_last, variance, dof)
            # The shift and its interval between the releases' medians: a release counts
            # once, whatever its runs (its runs share its jitter).
            left_rel = _release_medians(left, xw.shape[2])
            right_rel = _release_medians(right, xw.shape[2])
            # Sorted once (NaN last) for every statistic below; none depends on the order.
            left.sort(axis=1)
            right.sort(axis=1)
            cut = cuts[:, k]
            # The three tests must all reject: where the release test alone is above the
            # level (most rows of a window without a change), the boundary is not
            # significant whatever the run tests say, and its p-value is the release
            # test's; the run tests are computed for the other rows only (they cost half of
            # an incremental analysis: docs/architecture.md).
            need = cut | ~(p_rel > alpha)
            rows = np.flatnonzero(need)
            p = p_rel.copy()
            if len(rows):
                sub_l, sub_r = left[rows], right[rows]
                # Only a change point can become a deviation: the exact p-value given ties
                # (a dynamic programme per row) is computed where it decides one.
                pooled = np.empty((len(rows), left.shape[1] + right.shape[1]))
                _, p_mw, _ = _mann_whitney_rows(sub_l, sub_r, exact_rows=cut[rows],
                                                pooled_ranks=pooled)
                # Both Mann–Whitney (exact for small samples) and Brunner–Munzel (valid
                # when the spread changes too) must reject: the larger p-value counts.
                p_bm = _brunner_munzel_rows(sub_l, sub_r, pooled=pooled, presorted=True)
                p_runs = np.where(np.isnan(p_bm), p_mw, np.fmax(p_mw, p_bm))
                # Runs of a release are not independent: the variance grows by the design
                # effect, and the interval widens with it (the same inversion of the test).
                p_runs = _deflated(p_runs, effect[rows])
                # ...and the releases, each one observation, must differ too (Student's t
                # of their mean ranks: jitter of whole releases is in its variance).
                p[rows] = np.where(np.isnan(p_rel[rows]), p_runs, np.fmax(p_runs, p_rel[rows]))
            est, d_lo, d_hi = _shift_intervals(left_rel, right_rel, confidence)
            med_left = _median_rows(left_rel)
            nl, nr = np.sum(~np.isnan(left), axis=1), np.sum(~np.isnan(right), axis=1)
            significant = p <= alpha
            excludes = (d_lo > 0) | (d_hi < 0)
            deviation = cut & significant & excludes
            code = np.where(
                deviation, _deviation_codes(est > 0, direction),
                np.where(significant, SIGNIFICANT_OVERLAP, NONSIGNIFICANT_OVERLAP),
            )
            none_before = ~np.any(measured[:, : k + 1], axis=1)
            none_after = ~np.any(measured[:, k + 1 :], axis=1)
            code = np.where((nl == 0) | (nr == 0), NO_VERDICT, code)
            code = np.where(none_before & measured[:, k + 1], APPEARED, code)
            code = np.where(measured[:, k] & none_after, VANISHED, code)
            verdict[:, col] = code
            change[:, col] = cut
            p_value[:, col] = p
            diff[:, col], diff_lo[:, col], diff_hi[:, col] = est, d_lo, d_hi
            before[:, col] = med_left
            first[:, col], last[:, col] = seg_first + start, seg_last + start
            n_before[:, col], n_after[:, col] = nl, nr
    final = win.final[wanted]
    early = ((verdict == 2) | (verdict == 3)) & ~final[None, :] & (p_value <= early_alpha)
    return Shifts(
        verdict=verdict, change=change, p_value=p_value, diff=diff, diff_lo=diff_lo,
        diff_hi=diff_hi, before=before, first=first, last=last, n_before=n_before,
        n_after=n_after, early=early, final=final,
    )
