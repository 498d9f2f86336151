"""Changes in the counts of boolean and enumerated histograms between builds.

The shape rule of :mod:`~deviations.stats.histograms` compares normalised histograms with
the Hellinger distance. On a boolean probe a share moving from 19 % to 21 % of hundreds of
thousands of clients is a distance of about 0.02, under any cutoff, while the clients'
counts show it at once. This module judges such probes on their counts:

* **proportion changes**: per bucket, the share of the build and of its confirming later
  builds (pooled, the most-moved one left out so a one-build spike cannot carry it)
  against the trimmed mean share of the past builds of the current level, a t test whose
  variance holds the sampling variance *and* the between-build variance estimated from
  the probe's own history, with Satterthwaite's degrees of freedom for that estimate
  (overdispersion: builds differ for reasons beyond sampling, so a multinomial test on
  300,000 clients flags every build);
* **volume changes**: the number of clients (or samples) reporting moves lastingly while
  the shares stay: the same test and looks on the log-clients per build (a level without
  sampling variance), reported as their own kind.

Both follow the persistence rule of seed 001: a change must hold on the build and on the
``future_builds`` later builds; an isolated one-build spike stays quiet. Everything is
vectorised over leading axes: a histogram is the last axis, a build series the one before.

References
----------
DerSimonian, R., Laird, N. (1986). Meta-analysis in clinical trials. Controlled Clinical
    Trials 7(3), 177-188 (between-study variance by moments: total minus sampling variance).
McCullagh, P., Nelder, J. A. (1989). Generalized Linear Models, 2nd ed., ch. 4.5
    (overdispersed binomial data: Var = pi(1 - pi)/n + tau^2 for clustered counts,
    equivalently a beta-binomial / Dirichlet-multinomial with intra-class correlation).
Satterthwaite, F. E. (1946). An approximate distribution of estimates of variance
    components. Biometrics Bulletin 2(6), 110-114 (degrees of freedom of a sum of
    variance estimates).
Hampel, F. R. (1974). The influence curve and its role in robust estimation. JASA 69
    (median absolute deviation, 1.4826 for a normal sd).
Vitillo, R. (2014). Regression detection for Telemetry histograms (seed 001): the
    persistence rule.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

import numpy as np
import numpy.typing as npt
from scipy import special  # type: ignore[import-untyped]  # no scipy-stubs in the venv

from ._typing import BoolArray, FloatArray, IntArray

StrArray = npt.NDArray[np.str_]

CountKind = Literal["proportion", "volume"]

#: Reasons a build is not reported, in the order the rule checks them.
REASON_CHANGE = "change"
REASON_TOO_LITTLE_DATA = "too little data"
REASON_TOO_FEW_PAST = "too few past builds"
REASON_NO_CHANGE = "no significant change"
REASON_TOO_SMALL = "smaller than the minimum change"
REASON_AWAITING = "awaiting later builds"
REASON_LATER_LOW_DATA = "later build has too little data"
REASON_NOT_PERSISTENT = "not persistent"
REASON_REPORTED = "change reported at an earlier build"
REASON_LATER_START = "change starts at a later build"

_REASONS = (
    REASON_CHANGE,
    REASON_TOO_LITTLE_DATA,
    REASON_TOO_FEW_PAST,
    REASON_NO_CHANGE,
    REASON_TOO_SMALL,
    REASON_AWAITING,
    REASON_LATER_LOW_DATA,
    REASON_NOT_PERSISTENT,
    REASON_REPORTED,
    REASON_LATER_START,
)

#: Normal quantile of the reported two-sided 95 % interval.
_Z95 = 1.959963984540054
#: Scale of the MAD to a normal standard deviation (Hampel 1974).
_MAD_SD = 1.482602218505602


@dataclass(frozen=True)
class CountChange:
    """One reported change of a probe's counts.

    ``bucket`` is the bucket whose share moved most significantly (-1 for a volume change);
    ``before``/``after`` its share (the trimmed mean over the baseline builds, the mean over
    the build and its confirming builds without the most-moved one) with
    ``diff_lo``/``diff_hi`` the 95 % interval of ``after - before``;
    ``clients_before``/``clients_after`` the geometric trimmed mean of the clients of the
    past builds of the current volume level and the geometric mean over the build and its
    confirming builds (the most-moved ones left out), as the volume test saw them.
    """

    index: tuple[int, ...]
    build: int
    kind: CountKind
    bucket: int
    before: float
    after: float
    diff_lo: float
    diff_hi: float
    z: float
    clients_before: float
    clients_after: float
    #: Later builds it took to confirm the change (the window was builds ``build`` to
    #: ``build + delay``): ``future_builds`` at the first look (``volume_future_builds`` for a
    #: volume change), up to ``max_future_builds``, and up to 8 more where the located start
    #: precedes the first build whose looks passed.
    delay: int = -1


@dataclass(frozen=True, eq=False)
class CountScan:
    """Per-build decisions of :func:`detect_count_changes`, arrays of shape (..., builds).

    Attributes
    ----------
    changed : True where a change (either kind) is reported.
    kind : ``"proportion"``, ``"volume"`` or ``""``.
    reason : ``"change"`` or why the build's shares were not reported (``_REASONS``); a
        volume change has reason ``"change"`` too.
    bucket : the deciding bucket (largest :math:`|z|` among the buckets that pass every
        condition, else among all), -1 where undefined.
    z : its z statistic (the build and its confirming builds, the most-moved one left out).
    z_crit : the critical value its bucket was held to (Student's t with Satterthwaite's
        degrees of freedom, Bonferroni over the buckets).
    before, after, diff_lo, diff_hi : its shares and the 95 % interval of the difference.
    clients_before, clients_after : the volume test's level before (geometric trimmed mean
        of the past clients) and after (geometric mean over its window, the most-moved
        builds left out).
    volume_z : the volume test's z (log-ratio of after to before over its standard error).
    delay : later builds the reported change took to confirm (its window was builds ``i``
        to ``i + delay``), -1 where nothing is reported.
    """

    changed: BoolArray
    kind: StrArray
    reason: StrArray
    bucket: IntArray
    z: FloatArray
    z_crit: FloatArray
    before: FloatArray
    after: FloatArray
    diff_lo: FloatArray
    diff_hi: FloatArray
    clients_before: FloatArray
    clients_after: FloatArray
    volume_z: FloatArray
    delay: IntArray

    def changes(self) -> list[CountChange]:
        """All reported changes, in index order."""
        out = []
        for pos in zip(*np.nonzero(self.changed), strict=True):
            idx = tuple(int(i) for i in pos)
            kind: CountKind = "volume" if self.kind[idx] == "volume" else "proportion"
            out.append(
                CountChange(
                    index=idx[:-1],
                    build=idx[-1],
                    kind=kind,
                    bucket=int(self.bucket[idx]) if kind == "proportion" else -1,
                    before=float(self.before[idx]),
                    after=float(self.after[idx]),
                    diff_lo=float(self.diff_lo[idx]),
                    diff_hi=float(self.diff_hi[idx]),
                    z=float(self.z[idx]) if kind == "proportion" else float(self.volume_z[idx]),
                    clients_before=float(self.clients_before[idx]),
                    clients_after=float(self.clients_after[idx]),
                    delay=int(self.delay[idx]),
                )
            )
        return out


def _nanmedian(x: FloatArray, axis: int) -> FloatArray:
    """Median ignoring NaN along ``axis``, NaN where all are NaN (no warning)."""
    x = np.moveaxis(x, axis, -1)
    n = (~np.isnan(x)).sum(axis=-1)
    s = np.sort(x, axis=-1)  # NaN sort last
    lo = np.clip((n - 1) // 2, 0, x.shape[-1] - 1)[..., None]
    hi = np.clip(n // 2, 0, x.shape[-1] - 1)[..., None]
    med = 0.5 * (np.take_along_axis(s, lo, -1) + np.take_along_axis(s, hi, -1))[..., 0]
    return np.asarray(np.where(n > 0, med, np.nan), dtype=np.float64)


def _nanmean(x: FloatArray, axis: int) -> FloatArray:
    """Mean ignoring NaN along ``axis``, NaN where all are NaN (no warning)."""
    ok = ~np.isnan(x)
    n = ok.sum(axis=axis)
    total = np.where(ok, x, 0.0).sum(axis=axis)
    return np.asarray(np.where(n > 0, total / np.maximum(n, 1), np.nan), dtype=np.float64)


def _windows(x: FloatArray, offsets: range) -> FloatArray:
    """``W[..., i, j, ...] = x[..., i + offsets[j], ...]`` along the build axis (axis
    ``-2`` of ``x`` with buckets, given as axis 0 after moving), NaN outside the series."""
    T = x.shape[0]
    out = np.full((T, len(offsets)) + x.shape[1:], np.nan)
    for j, o in enumerate(offsets):
        lo, hi = max(0, -o), min(T, T - o)
        if lo < hi:
            out[lo:hi, j] = x[lo + o : hi + o]
    return out


def between_build_variance(
    shares: npt.ArrayLike,
    clients: npt.ArrayLike,
    *,
    noise_window: int = 14,
) -> tuple[FloatArray, IntArray]:
    """Between-build variance of each bucket's share, from the builds before each build.

    With :math:`\\hat p_{t}` a bucket's share in build :math:`t` of :math:`n_t` clients,
    the model is :math:`\\hat p_t = \\pi + u_t + e_t` with sampling variance
    :math:`v_t = \\pi(1-\\pi)/n_t` and a build effect :math:`u_t` of variance
    :math:`\\tau^2` (a beta-binomial / Dirichlet-multinomial with intra-class correlation
    :math:`\\rho = \\tau^2 / \\pi(1-\\pi)` gives the same variance for large :math:`n`).
    Over the ``noise_window`` builds before build :math:`i` (so a candidate jump is never
    part of its own noise), robustly (1.4826 MAD about the median, Hampel 1974, so one-build
    spikes in the past do not inflate it) and by moments (DerSimonian & Laird 1986):

    .. math:: \\hat\\tau^2_i = \\max\\Big(0,\\;
              \\big(1.4826\\,\\mathrm{MAD}(\\hat p)\\big)^2 -
              \\operatorname{median}(v_t)\\Big).

    Levels, not consecutive differences: GLAM's build effects come in runs of similar
    builds, which consecutive differences do not see (on its enumerated probe they gave a
    :math:`\\hat\\tau` too small for its real two-point regimes).

    Parameters
    ----------
    shares : array_like, shape (..., builds, buckets)
        Shares per build (NaN for a build without data).
    clients : array_like, shape (..., builds)
        Clients (or samples) per build.
    noise_window : int, default 14
        Past builds used.

    Returns
    -------
    (tau2, n) : ndarray (..., builds, buckets), ndarray (..., builds)
        The estimate for build ``i`` and the number of builds it used.
    """
    p = np.asarray(shares, dtype=np.float64)
    n = np.asarray(clients, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        v = p * (1.0 - p) / n[..., None]
    # Windows along the build axis (axis -2 moved to the front): (..., builds, buckets, w).
    back = range(-noise_window, 0)
    pW = np.moveaxis(_windows(np.moveaxis(p, -2, 0), back), (0, 1), (-3, -1))
    vW = np.moveaxis(_windows(np.moveaxis(v, -2, 0), back), (0, 1), (-3, -1))
    med = _nanmedian(pW, -1)
    mad = _nanmedian(np.abs(pW - med[..., None]), -1)
    tau2 = np.maximum(0.0, (_MAD_SD * mad) ** 2 - _nanmedian(vW, -1))
    count = (~np.isnan(pW[..., 0, :])).sum(axis=-1)
    return np.asarray(tau2, dtype=np.float64), np.asarray(count, dtype=np.int64)


def _run_factor(k: int, rho: float) -> float:
    """:math:`\\mathrm{Var}(\\bar u)/\\tau^2` for the mean of ``k`` consecutive build effects
    of an AR(1) process with lag-1 correlation ``rho``:
    :math:`(k + 2\\sum_{d=1}^{k-1}(k-d)\\rho^d)/k^2`."""
    d = np.arange(1, k)
    return float((k + 2.0 * np.sum((k - d) * rho**d)) / k**2)


def _trimmed(
    p: FloatArray, inv_n: FloatArray, mask: BoolArray, trim: float
) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray, BoolArray]:
    """Trimmed mean of the shares ``p`` (S, W, B) over the builds in ``mask`` (S, W): the
    builds within ``trim`` x 1.4826 MAD of their median. Returns (mean, sum of squares about
    it, count, mean 1/n of the kept builds, kept (S, W, B))."""
    x = np.where(mask[..., None], p, np.nan)
    if x.shape[1] == 0:
        nan = np.full((x.shape[0], x.shape[2]), np.nan)
        zero = np.zeros_like(nan)
        return nan, zero, zero, zero, np.zeros(x.shape, dtype=np.bool_)
    med = _nanmedian(x, 1)
    mad = _MAD_SD * _nanmedian(np.abs(x - med[:, None]), 1)
    with np.errstate(invalid="ignore"):
        keep = (np.abs(x - med[:, None]) <= trim * mad[:, None]) | (
            (mad[:, None] == 0) & ~np.isnan(x)
        )
    keep &= ~np.isnan(x)
    cnt = keep.sum(axis=1).astype(np.float64)
    mean = np.where(keep, x, 0.0).sum(axis=1) / np.maximum(cnt, 1)
    ss = np.where(keep, (x - mean[:, None]) ** 2, 0.0).sum(axis=1)
    inv = np.where(keep, inv_n[..., None], 0.0).sum(axis=1) / np.maximum(cnt, 1)
    mean = np.where(cnt > 0, mean, np.nan)
    return mean, ss, cnt, inv, keep


@dataclass(frozen=True)
class _LookTable:
    """Constants of one look of ``k`` builds after the build (a window of ``k + 1``)."""

    k: int
    K: int  # the first look's later builds
    corr: FloatArray  # rho^|a - b| between the window's builds
    drop: int  # most-moved builds left out of the window's mean
    short: int  # builds that may move less than half of min_effect
    q_crit: float  # chi-square critical value of the window's homogeneity test

    @classmethod
    def make(cls, k: int, K: int, rho: float, consistency_alpha: float) -> _LookTable:
        lags = np.abs(np.subtract.outer(np.arange(k + 1), np.arange(k + 1)))
        drop = 0 if k == 0 else 1 + (k >= _LONG_LOOK)
        short = 0 if k <= K else 1
        # Degrees of freedom of the homogeneity test: the window's builds (the builds kept
        # in a longer look) less one for their mean.
        df = k if k <= K else k - drop
        q = float(special.chdtri(df, consistency_alpha)) if df > 0 else np.inf
        return cls(k, K, np.asarray(rho**lags, dtype=np.float64), drop, short, q)


#: From this many later builds on, a look leaves out its two most-moved builds (two
#: one-build spikes in a long window are not rare: 3 % of builds, 19 % of 7-build windows
#: hold one) and one build of the window may move less than half of ``min_effect``.
_LONG_LOOK = 4
#: Builds before the first build whose looks confirm a change that :func:`locate_start` may
#: name as its start (a longer look can confirm a change one to a few builds late).
_LOCATE_BACK = 8
#: Share of ``alpha`` spent on the first look (``future_builds``); the rest is shared
#: equally by the longer looks (measured: 0.5 keeps 43 % of the 2-point moves at 5,000
#: clients confirmed within 3 builds against 31 % for an equal split, same power within 8).
_FIRST_LOOK_ALPHA = 0.5
#: Share of ``alpha`` spent on the longest look (``max_future_builds``), when there are more
#: than three: the looks in between are nested in it and strongly correlated with it, so an
#: equal Bonferroni share buys them little (measured: 1.5 points more 2-point moves at 5,000
#: clients found on seeds 101, 202 and 303, same stable flags and median delay, against the
#: equal split of the other half).
_LONGEST_LOOK_ALPHA = 0.25


def _split_alpha(alpha: float, looks: range) -> dict[int, float]:
    """Bonferroni over the looks: half of ``alpha`` for the first, a quarter for the
    longest, the rest shared by the looks in between (with two or three looks: the other
    half shared; one look: all of it)."""
    if len(looks) == 1:
        return {k: alpha for k in looks}
    if len(looks) <= 3:
        rest = (1 - _FIRST_LOOK_ALPHA) / (len(looks) - 1)
        return {k: alpha * (_FIRST_LOOK_ALPHA if k == looks[0] else rest) for k in looks}
    middle = (1 - _FIRST_LOOK_ALPHA - _LONGEST_LOOK_ALPHA) / (len(looks) - 2)
    return {k: alpha * (_FIRST_LOOK_ALPHA if k == looks[0] else _LONGEST_LOOK_ALPHA
                        if k == looks[-1] else middle) for k in looks}


def _look(
    p: FloatArray, inv_n: FloatArray, i: int, k: int, m: FloatArray, mm: FloatArray,
    tau2: FloatArray, inv_r: FloatArray, R: FloatArray, g_R: FloatArray, tot: FloatArray,
    table: _LookTable, nu_factor: float, alpha: float, min_effect: float,
    consistency_alpha: float,
) -> dict[str, npt.NDArray[Any]]:
    """One look of :func:`detect_count_changes` at build ``i``: the window of the build and
    its ``k`` later builds, its most-moved build left out, tested against the baseline
    (``m``, ``tau2``, ... of shape (S, B)). Returns arrays (S, B): ``z``, ``crit``,
    ``diff``, ``pbar``, ``se`` and the booleans ``significant``, ``large``, ``passes``."""
    S, T, B = p.shape
    hi = min(T, i + k + 1)
    Wp = np.full((S, k + 1, B), np.nan)
    Wi = np.full((S, k + 1), np.nan)
    Wp[:, : hi - i] = p[:, i:hi]
    Wi[:, : hi - i] = inv_n[:, i:hi]
    with np.errstate(invalid="ignore", divide="ignore"):
        full = _nanmean(Wp, 1)
        sgn = np.sign(full - m)
        moved = sgn[:, None] * (Wp - m[:, None])  # (S, k+1, B)
        if k > 0:
            # The table.drop most-moved builds left out (their rank along the window).
            order = np.argsort(np.where(np.isnan(moved), np.inf, -moved), axis=1, kind="stable")
            keep = np.ones_like(moved, dtype=np.bool_)
            np.put_along_axis(keep, order[:, : table.drop], False, axis=1)
            kept = keep.sum(axis=1)
            pbar = np.where(keep, Wp, 0.0).sum(axis=1) / kept
            inv_a = np.where(keep, Wi[..., None], 0.0).sum(axis=1) / kept
            kf = keep.astype(np.float64)
            g_A = np.einsum("sjb,jl,slb->sb", kf, table.corr, kf) / kept**2
        else:
            kept = np.ones((S, B))
            pbar = Wp[:, 0]
            inv_a = np.broadcast_to(Wi[:, :1], (S, B))
            g_A = np.ones((S, B))
        diff = pbar - m
        var = tau2 * (g_A + g_R) + mm * (inv_a / kept + inv_r / R)
        se = np.sqrt(var)
        z = np.where(se > 0, diff / np.where(se > 0, se, 1.0),
                     np.where(diff == 0, 0.0, np.inf))
        z = np.where(np.isnan(diff), 0.0, z)
        t_part = tau2 * (g_A + g_R)
        nu_tau = np.maximum(tot - 1, 1) * nu_factor
        nu = np.where(t_part > 0, var**2 / np.where(t_part > 0, t_part, 1.0) ** 2 * nu_tau,
                      1e9)
        nu = np.clip(np.nan_to_num(nu, nan=1e9), 1.0, 1e9)
    mass = (np.nan_to_num(m) > 0) | (np.nan_to_num(pbar) > 0)
    M = mass.sum(axis=-1)
    M = np.where(M <= 2, 1, M)
    crit = np.asarray(special.stdtrit(nu, 1.0 - alpha / (2.0 * M[:, None])), dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        significant = np.abs(z) > crit
        large = np.abs(diff) >= min_effect
        short = (moved < 0.5 * min_effect) | np.isnan(moved)
        same_side = short.sum(axis=1) <= table.short
        w_var = tau2[:, None] + mm[:, None] * Wi[..., None]
        Q_b = np.where(w_var > 0, (Wp - pbar[:, None]) ** 2 / w_var, 0.0)
        if table.k > table.K:  # a longer look: homogeneity of the builds kept
            Q_b = np.where(keep, Q_b, 0.0)
        Q = Q_b.sum(axis=1)
        rest = _nanmean(moved[:, 1:], 1) if k > 0 else np.zeros((S, B))
        starts = ~(moved[:, 0] < 0.5 * rest) if k > 0 else np.ones((S, B), np.bool_)
        if k > table.K:  # every prefix i..i+j-1 nearer the new level than the old one
            csum = np.cumsum(moved, axis=1)
            j = np.arange(1, k + 1)[None, :, None]
            head = csum[:, :-1] / j
            tail = (csum[:, -1:] - csum[:, :-1]) / (k + 1 - j)
            starts &= ~np.any(head < 0.5 * tail, axis=1)
    persistent = same_side & ~(Q > table.q_crit) & starts
    return {"z": z, "crit": crit, "diff": diff, "pbar": pbar, "se": se,
            "significant": significant, "large": large,
            "passes": significant & large & persistent}

def _looks(
    p: FloatArray, inv_n: FloatArray, i: int, base: _Baseline, looks: range, K: int,
    tables: dict[int, _LookTable], nu_factor: float, alpha_looks: dict[int, float],
    min_effect: float, consistency_alpha: float,
) -> tuple[dict[str, npt.NDArray[Any]], IntArray]:
    """Looks ``k = K, ..., K_max`` at build ``i`` (:func:`_look` each): the window
    ``{i, ..., i + k}`` without its most-moved builds; the first look that passes confirms
    the change at build ``i``. Returns the figures shown (the first look's, replaced by the
    confirming look's where a later one confirms) and the confirming look's ``k`` (S,),
    -1 where none passed."""
    S, T = p.shape[0], p.shape[1]
    sel: dict[str, npt.NDArray[Any]] = {}
    done = np.zeros(S, dtype=np.bool_)
    delay = np.full(S, -1, dtype=np.int64)
    for k in looks:
        if k > K and (i + k >= T or done.all()):
            break  # longer looks await later builds, or every series is confirmed
        lk = _look(p, inv_n, i, k, base.m, base.mm, base.tau2, base.inv_r, base.past_count,
                   base.past_factor, base.tot, tables[k], nu_factor, alpha_looks[k],
                   min_effect, consistency_alpha)
        if not sel:
            sel = dict(lk)
        passed = np.any(lk["passes"], axis=-1) & ~done
        if k > K:  # a later look replaces the shown figures where it confirms
            for name, val in lk.items():
                sel[name] = np.where(passed.reshape((S,) + (1,) * (val.ndim - 1)),
                                     val, sel[name])
        delay = np.where(passed, k, delay)
        done |= passed
    return sel, delay


#: Variance of a normal truncated at +-3 sd over the untruncated (consistency of the
#: trimmed variance).
_TRIM3_VAR = 0.9733


class _Baseline(NamedTuple):
    """The level before build ``i`` of :func:`detect_count_changes`, arrays (S, B) (``present``
    (S, W): the usable builds of the noise window)."""

    m: FloatArray
    mm: FloatArray
    tau2: FloatArray
    inv_r: FloatArray
    past_count: FloatArray  # R: builds of the current level kept (at least 1)
    past_factor: FloatArray  # g_R: the AR(1) variance factor of their mean
    tot: FloatArray
    cnt: FloatArray
    present: BoolArray


def _baseline(
    p: FloatArray, inv_n: FloatArray, i: int, L: int, seg_start: IntArray,
    run_table: FloatArray, *, sampling: bool = True,
) -> _Baseline:
    """Trimmed mean share and between-build variance of the ``L`` builds before ``i``
    (current level since ``seg_start``, pooled with the older one): see
    :func:`detect_count_changes`, "Level before". With ``sampling`` False, ``p`` is a
    level without a binomial sampling variance (the log-clients of the volume test): the
    between-build variance is the whole trimmed variance and ``mm`` is 0."""
    lo = max(0, i - L)
    idx = np.arange(lo, i)
    Pw, Iw = p[:, lo:i], inv_n[:, lo:i]  # (S, W, B), (S, W)
    present = ~np.isnan(Iw)
    current = present & (idx[None, :] >= seg_start[:, None])
    older = present & ~current
    m, ss, cnt, inv_r, _ = _trimmed(Pw, Iw, current, 3.0)
    if older.any():  # a change reported inside the noise window: the older level
        m_o, ss_o, cnt_o, inv_o, _ = _trimmed(Pw, Iw, older, 3.0)
    else:
        m_o, ss_o, cnt_o, inv_o = np.full_like(m, np.nan), 0 * ss, 0 * cnt, 0 * inv_r
    with np.errstate(invalid="ignore", divide="ignore"):
        levels = (cnt > 0).astype(np.float64) + (cnt_o > 0)
        tot = cnt + cnt_o
        s2 = (ss + ss_o) / np.maximum(tot - levels, 1) / _TRIM3_VAR
        mm = m * (1.0 - m) if sampling else np.zeros_like(m)
        mm_o = np.where(cnt_o > 0, m_o * (1.0 - m_o), 0.0) if sampling else 0.0 * mm
        v_noise = (mm * inv_r * cnt + mm_o * inv_o * cnt_o) / np.maximum(tot, 1)
        tau2 = np.maximum(0.0, s2 - v_noise)
        tau2 = np.where(np.isnan(tau2), 0.0, tau2)
    R = np.maximum(cnt, 1)
    g_R = run_table[R.astype(np.int64)]
    return _Baseline(m, mm, tau2, inv_r, R, g_R, tot, cnt, present)


#: Residuals beyond this many standard deviations count linearly in :func:`locate_start`:
#: Huber's 1.345, 95 % efficiency at the normal (a one-build spike of 2-4 points, 3-6 sd
#: at 5,000 clients, then weighs like a 2-sd build; measured: 2 and 1.345 alike, plain least
#: squares 2 points fewer 2-point moves found at their start).
_HUBER = 1.345


def locate_start(
    shares: npt.ArrayLike,
    variances: npt.ArrayLike,
    before: float,
    *,
    first: int,
    last: int,
    huber: float = _HUBER,
) -> int:
    """Build where a lasting move of one share starts: a single change point by (robust)
    maximum likelihood, the level before known.

    ``shares`` :math:`x_0, \\dots, x_e` are a bucket's shares from the first build that may
    start the change to the last build seen, ``variances`` :math:`\\sigma_t^2` their
    variances (between-build plus sampling: :math:`\\hat\\tau^2 + m(1-m)/n_t`), ``before``
    the level :math:`m` before the change. For each candidate start :math:`c` in
    ``first..last``, the model is :math:`x_t = m` before :math:`c` and :math:`x_t = \\mu_c`
    from :math:`c` on, :math:`\\hat\\mu_c` the median of :math:`x_c, \\dots, x_e`; the cost

    .. math:: C(c) = \\sum_{t<c} \\rho_H\\Big(\\frac{x_t - m}{\\sigma_t}\\Big) +
              \\sum_{t \\geq c} \\rho_H\\Big(\\frac{x_t - \\hat\\mu_c}{\\sigma_t}\\Big)

    with Huber's :math:`\\rho_H(r) = r^2/2` for :math:`|r| \\leq h`, :math:`h|r| - h^2/2`
    beyond (``huber``), is minimised: with :math:`\\rho_H` quadratic this is the maximum
    likelihood estimate of a change point in the mean of independent normal observations
    (Hinkley 1970), a least-squares fit of one step; the Huber loss keeps a one-build spike
    a few builds before the change from pulling the start back onto it (Huber 1964; a build
    just before the change that moved towards the new level is, to any fit, the change's
    first build). A candidate must pass the start check of :func:`detect_count_changes`:
    :math:`x_c` moved (from :math:`m`, in the direction of the move) at least half as much
    as the mean of the later builds.

    Parameters
    ----------
    shares, variances : array_like, shape (builds,)
        NaN for a build without data (it adds nothing to the cost, and cannot be the start).
    before : float
        Level before the change.
    first, last : int
        Candidate starts (indices into ``shares``), ``0 <= first <= last < len(shares)``.
    huber : float, default 1.345
        Huber's threshold, in standard deviations.

    Returns
    -------
    int
        The start, or -1 when no candidate passes the start check.

    References
    ----------
    Hinkley, D. V. (1970). Inference about the change-point in a sequence of random
        variables. Biometrika 57(1), 1-17.
    Huber, P. J. (1964). Robust estimation of a location parameter. Ann. Math. Statist.
        35(1), 73-101.
    """
    x = np.asarray(shares, dtype=np.float64)
    sd = np.sqrt(np.asarray(variances, dtype=np.float64))
    if x.ndim != 1 or sd.shape != x.shape or not 0 <= first <= last < x.size:
        raise ValueError("need 1-D shares and variances and 0 <= first <= last < len")
    ok = ~np.isnan(x) & (sd > 0)

    def rho(r: FloatArray) -> FloatArray:
        a = np.abs(r)
        return np.asarray(np.where(a <= huber, 0.5 * r * r, huber * a - 0.5 * huber**2),
                          dtype=np.float64)

    safe_sd = np.where(ok, sd, 1.0)
    pre = np.concatenate(([0.0], np.cumsum(np.where(ok, rho((x - before) / safe_sd), 0.0))))
    best, best_cost = -1, np.inf
    for c in range(first, last + 1):
        after = x[c:][ok[c:]]
        if not ok[c] or after.size == 0:
            continue
        mu = float(np.median(after))
        move = np.sign(mu - before) * (after - before)
        if move.size > 1 and move[0] < 0.5 * float(np.mean(move[1:])):
            continue  # the start check
        r = np.where(ok[c:], (x[c:] - mu) / safe_sd[c:], 0.0)
        cost = pre[c] + float(np.sum(np.where(ok[c:], rho(r), 0.0)))
        if cost < best_cost:
            best, best_cost = c, cost
    return best


def _move_report(flags: npt.NDArray[np.bool_], changed: npt.NDArray[np.bool_],
                 delay: IntArray, code: npt.NDArray[Any], r: int, i: int, start: int,
                 k: int) -> None:
    """Series ``r``'s report confirmed at build ``i`` moved to its located ``start`` (its
    window ``start..start + k``): the flags, the delay and the builds' reasons."""
    flags[i, r] = changed[i, r] = False
    flags[start, r] = changed[start, r] = True
    delay[start, r] = k
    if start > i:
        code[i:start, r] = _REASONS.index(REASON_LATER_START)
    else:
        code[start + 1 : i + 1, r] = _REASONS.index(REASON_REPORTED)
    code[start, r] = _REASONS.index(REASON_CHANGE)


def detect_count_changes(
    counts: npt.ArrayLike,
    *,
    alpha: float = 5e-4,
    min_effect: float = 0.01,
    past_builds: int = 7,
    min_past: int = 4,
    future_builds: int = 2,
    noise_window: int = 40,
    min_noise: int = 20,
    min_count: float = 1000,
    volume_ratio: float = 1.5,
    volume_correlation: float = 0.0,
    volume_alpha: float = 2e-3,
    volume_future_builds: int = 4,
    consistency_alpha: float = 0.01,
    build_correlation: float = 0.5,
    max_future_builds: int | None = 8,
    locate: bool = True,
) -> CountScan:
    """Proportion and client-volume changes of a build series, with the persistence rule.

    **Level before.** For build :math:`i`, the baseline :math:`R_i` is the usable builds
    among the ``noise_window`` before it that are not older than the last change reported
    for the series (a reported change starts a new level). Per bucket :math:`b`,
    :math:`m_b` is their trimmed mean share (builds beyond 3 x 1.4826 MAD of the median
    dropped: one-build spikes of the past do not move it), and the between-build variance
    is the trimmed variance (consistency 0.9733) minus the mean sampling variance,

    .. math:: \\hat\\tau^2_b = \\max\\Big(0,\\; \\frac{SS_b}{0.9733\\,(c_b - g)} -
              \\overline{m_b(1-m_b)/n}\\Big)

    pooled over the current level and, when a change was reported inside the noise window,
    the older one (each about its own trimmed mean; :math:`g` the number of levels), so the
    probe's noise is measured on ``noise_window`` builds even just after a change
    (DerSimonian & Laird 1986, random effects by moments).

    **Window after, pooled and robust to one spike.** The window :math:`A_i = \\{i, \\dots,
    i+K\\}` (:math:`K` = ``future_builds``) without its most-moved build (in the direction
    of the window's mean move): :math:`\\bar p_b` is the mean of the other :math:`K`
    builds. A one-build spike is therefore never what makes a window significant; a lasting
    move is seen on every build, so leaving one out costs one build of :math:`K+1`.

    **Test.** With :math:`\\rho` = ``build_correlation`` (build effects come in runs:
    lag-1 correlation 0.43-0.67 measured on GLAM's series, AR(1) assumed),
    :math:`g_k = (k + 2\\sum_{d<k}(k-d)\\rho^d)/k^2` the variance factor of the mean of
    :math:`k` consecutive build effects (:func:`_run_factor`) and
    :math:`v_{t,b} = m_b(1-m_b)/n_t`,

    .. math::
        z_b = \\frac{\\bar p_b - m_b}{\\mathrm{se}_b},\\qquad
        \\mathrm{se}_b^2 = \\hat\\tau^2_b\\, g_{K} + \\frac{\\overline{v}_{A,b}}{K} +
              \\hat\\tau^2_b\\, g_{|R|} + \\frac{\\overline{v}_{R,b}}{|R|},

    judged against Student's t with Satterthwaite's degrees of freedom (Satterthwaite
    1946), since :math:`\\hat\\tau^2` is estimated from a few correlated builds:
    :math:`\\nu_b = \\mathrm{se}_b^4 / \\big((\\hat\\tau^2_b (g_K + g_{|R|}))^2/\\nu_\\tau\\big)`,
    :math:`\\nu_\\tau = (c_b - 1)(1-\\rho^2)/(1+\\rho^2)` (the effective degrees of freedom of a
    variance from an AR(1) series). Where sampling dominates (:math:`\\hat\\tau^2` small)
    :math:`\\nu` is large and the critical value is the normal one; where the build effects
    dominate (hundreds of thousands of clients) it is wider, which is where the normal
    critical value gave most false flags.

    A **proportion change** is reported at build :math:`i` when some bucket has

    1. every build of :math:`A_i` usable (clients :math:`\\geq` ``min_count``);
    2. at least ``min_past`` builds of the current level kept by the trim (for some
       bucket) and at least ``min_noise`` usable builds in the
       noise window;
    3. :math:`|z_b| > t_{\\nu_b,\\,1-\\alpha/(2M)}`, :math:`M` the buckets with mass (1 for
       a boolean probe, whose two buckets are one test): Bonferroni over the buckets;
    4. :math:`|\\bar p_b - m_b| \\geq` ``min_effect`` (a change worth acting on);
    5. persistence: every build of :math:`A_i` moved the same way by at least half of
       ``min_effect``; the window agrees on one level (:math:`\\chi^2` of homogeneity about
       :math:`\\bar p_b` with variance :math:`\\hat\\tau^2_b + v_{t,b}` per build, :math:`K`
       degrees of freedom, rejected at ``consistency_alpha``); and the change starts at
       :math:`i`: build :math:`i` moved at least half as much as the mean of the later
       builds of the window (else the window straddles a change that starts later, which
       the next build's window reports at its own build).

    **Evidence accumulated over later builds (looks).** A lasting move need not be found in its
    first window: build :math:`i` is looked at with windows :math:`A_i^{(k)} = \\{i, \\dots,
    i+k\\}` for :math:`k = K, K+1, \\dots, K_{max}` (``max_future_builds``), each judged as
    above, and the change is confirmed **at build** :math:`i` by the smallest :math:`k` that
    passes (then reported at its located start, below, with the builds from there to
    :math:`i + k` as its ``delay``). The family of looks is held to ``alpha`` by Bonferroni:
    half of it on the first look (``_FIRST_LOOK_ALPHA``), a quarter on the longest
    (``_LONGEST_LOOK_ALPHA``; with at most three looks, the other half shared equally), the
    rest shared equally by the looks in between. The longer looks (:math:`k > K`) differ in
    three ways, all for one-build spikes and for a window that starts before the change: from
    :math:`k \\geq 4` the **two** most-moved builds are left out (a 9-build window holds a
    spike in 24 % of cases at 3 % of builds; with one left out the stable enumerated series'
    false flags doubled); one build may move by less than half of ``min_effect`` (a dip inside
    a lasting move), the homogeneity test is over the builds kept (:math:`k` minus the
    left-out degrees of freedom); and **every prefix** :math:`i, \\dots, i+j-1` moved at least
    half as much as the rest of the window (else a long window that begins one to four builds
    before the change reports it early: 9 % of the 2-point moves at 5,000 clients before this
    condition, 7 % after).

    **Where the change starts (``locate``).** The looks decide *that* a lasting change
    happened; the first build :math:`i` whose looks pass need not be where it started (a
    long window that begins at a build that happened to move passes one to a few builds
    early; a change whose first builds fail the persistence conditions passes late). Once
    build :math:`i` is confirmed by the window :math:`i, \\dots, e` (:math:`e = i + k`), the
    start is located on the deciding bucket by :func:`locate_start`: a robust maximum-
    likelihood single change point (Hinkley 1970, with Huber's loss) over the builds
    :math:`c \\in [\\max(i - 8, r + N + 1),\\; e - K]` (:math:`r` the last report, so the
    located change is still a fresh one; at least ``future_builds`` later builds confirm
    it), the level before the baseline's :math:`m_b`, every build weighted by
    :math:`1/(\\hat\\tau^2_b + m_b(1-m_b)/n_t)`, subject to the start check of condition 5.
    The change is reported at the located build :math:`c` with the figures of the window
    :math:`c, \\dots, e` against the baseline before :math:`c` (its ``delay`` is
    :math:`e - c`: up to 16 later builds); the builds between :math:`i` and :math:`c` give
    ``"change starts at a later build"`` or ``"change reported at an earlier build"``. The
    decision is the looks' (same false flags); only where it is named moves.

    The reported interval is :math:`(\\bar p_b - m_b) \\pm 1.96\\,\\mathrm{se}_b`: it holds
    the between-build variance, so it is a statement about the probe's level, not about one
    build's clients. A change is reported once: the ``past_builds`` builds after it are not
    reported again.

    A **volume change** (only where no proportion change is reported at the build) is the
    same test on :math:`y_t = \\ln n_t` (builds with clients) as a series of one bucket
    without sampling variance: the level before is the trimmed mean of :math:`y` over the
    builds of the current volume level (a reported volume change starts a new one), the
    between-build variance :math:`\\hat\\tau^2_y` their whole trimmed variance (Student's t
    with :math:`c - 1` degrees of freedom, scaled as above), lag-1 correlation
    ``volume_correlation`` (0: GLAM's log-clients have -0.04 and 0.04), the looks
    :math:`k = K_v, \\dots, K_{max}` with :math:`K_v` = ``volume_future_builds`` (4: GLAM's
    real three-build dip to x0.5 clients of 2019-10-03 looks like a lasting halving to a
    three-build window), their level ``volume_alpha`` split as above, the persistence
    conditions with half of :math:`\\ln(\\text{volume\\_ratio})` for half of ``min_effect``,
    :math:`|\\bar y_A - m_y| \\geq \\ln(\\text{volume\\_ratio})`, and the located start.
    A lasting halving or doubling of the clients with GLAM's spread (log-sd 0.3) is found at
    its start about three times in four, against 3-4 % for the rule before (a robust z of 4
    and a factor of at least 2 on a three-build window); docs/statistics.md, 2.6d.

    Parameters
    ----------
    counts : array_like, shape (..., builds, buckets)
        Counts per build: clients per bucket (GLAM's shares times ``total_users``) or
        samples. Leading axes are independent series.
    alpha : float, default 5e-4
        Level of one build's family of tests, over its buckets and its looks (two-sided,
        Bonferroni; 1e-3 before the longer looks). On the simulation in
        ``tests/simulations/histogram_counts.py`` 0.5-1 % of stable series at 5,000 clients
        raise a flag over 60 judged builds; the real GLAM series raise none
        (docs/statistics.md, 2.6c, with other levels and longest looks beside).
    min_effect : float, default 0.01
        Smallest change of a share worth an alert: one percentage point.
    past_builds : int, default 7
        Builds after a report that are not reported again.
    min_past : int, default 4
        Fewest builds of the current level in the baseline.
    future_builds, min_count : int
        As in :func:`~deviations.stats.histograms.detect_changes` (Mozilla's values);
        ``min_count`` applies to the build's total (its clients).
    noise_window, min_noise : int, default 40, 20
        Builds of the baseline and of the between-build variance, and the fewest usable
        ones (20 days of twice-daily Nightly builds; with 14 the variance of the first
        judged builds was too uncertain and gave a third of the false flags).
    volume_ratio : float, default 1.5
        Smallest lasting factor of the clients reporting worth an alert (x1.5 or x2/3):
        beyond what GLAM's series do as they are over 7-9 builds (x0.72-x1.35 against their
        past level) and 1.2-1.8 times one build's log-spread there (1.4826 MAD 0.23-0.33).
    volume_correlation : float, default 0.0
        Lag-1 correlation of the log-clients between builds.
    volume_alpha : float, default 2e-3
        Level of one build's family of volume looks (its own family: the log-clients are
        near normal and uncorrelated between builds). Tuned on seed 101: no volume flag on
        1,600 stable simulated series (5e-3: one, and 4 points more power) and none on
        GLAM's series up to 2e-2.
    volume_future_builds : int, default 4
        Later builds of the volume test's first look.
    consistency_alpha : float, default 0.01
        Level of the window's homogeneity test.
    build_correlation : float, default 0.5
        Lag-1 correlation of the build effects (GLAM: 0.45 boolean, 0.43 and 0.67 for the
        enumerated probe's two largest buckets).

    max_future_builds : int or None, default 8
        Longest look: later builds over which a lasting move may accumulate evidence
        (``None``, or not above ``future_builds``: the single window of ``future_builds``
        later builds, the rule before issue 22 part 5). With 8 (and ``alpha`` 5e-4), a
        2-point move of a boolean share at 5,000 clients a build is found at its start 84-85 %
        of the time (66 % with the single window at 1e-3; 82 % before the located start and
        ``_LONGEST_LOOK_ALPHA``), median delay 3 builds, with fewer false flags
        (docs/statistics.md, 2.6c).
    locate : bool, default True
        Name the located start of a confirmed change (:func:`locate_start`) rather than the
        first build whose looks passed.

    Returns
    -------
    CountScan

    Raises
    ------
    ValueError
        Invalid counts or parameters.
    """
    if past_builds < 1 or future_builds < 0 or not 1 <= min_past <= past_builds:
        raise ValueError("need past_builds >= 1, future_builds >= 0, 1 <= min_past <= past")
    if noise_window < 2 or not 1 <= min_noise <= noise_window:
        raise ValueError("need noise_window >= 2 and 1 <= min_noise <= noise_window")
    if not 0 < alpha < 1 or min_effect < 0 or volume_ratio <= 1:
        raise ValueError("need 0 < alpha < 1, min_effect >= 0, volume_ratio > 1")
    if not 0 <= build_correlation < 1 or not 0 < consistency_alpha < 1:
        raise ValueError("need 0 <= build_correlation < 1 and 0 < consistency_alpha < 1")
    if not 0 <= volume_correlation < 1 or not 0 < volume_alpha < 1 or volume_future_builds < 0:
        raise ValueError("need 0 <= volume_correlation < 1, 0 < volume_alpha < 1 and "
                         "volume_future_builds >= 0")
    c = np.asarray(counts, dtype=np.float64)
    if c.ndim < 2 or c.shape[-1] == 0:
        raise ValueError("counts must have shape (..., builds, buckets)")
    if not np.all(np.isfinite(c)) or np.any(c < 0):
        raise ValueError("counts must be finite and non-negative")
    lead, T, B = c.shape[:-2], c.shape[-2], c.shape[-1]
    c = c.reshape((-1, T, B))  # (S, T, B)
    S = c.shape[0]
    n = c.sum(axis=-1)
    usable = n >= max(min_count, np.finfo(np.float64).tiny)
    with np.errstate(divide="ignore", invalid="ignore"):
        p = np.where(usable[..., None], c / n[..., None], np.nan)
        inv_n = np.where(usable, 1.0 / n, np.nan)

    N, K, L, rho = past_builds, future_builds, noise_window, build_correlation
    if max_future_builds is not None and max_future_builds < 0:
        raise ValueError("need max_future_builds >= 0 (or None)")
    # A probe's own future_builds above it: one look, as before.
    K_max = K if max_future_builds is None else max(K, max_future_builds)
    looks = range(K, K_max + 1)
    alpha_looks = _split_alpha(alpha, looks)
    K_v = volume_future_builds
    looks_v = range(K_v, max(K_v, K_max) + 1)
    alpha_looks_v = _split_alpha(volume_alpha, looks_v)
    look_tables = {k: _LookTable.make(k, K, rho, consistency_alpha) for k in looks}
    nu_factor = (1 - rho**2) / (1 + rho**2)
    run_table = np.array([1.0] + [_run_factor(k, rho) for k in range(1, L + 1)])
    delay = np.full((T, S), -1, dtype=np.int64)

    fields = {
        name: np.full((T, S), np.nan)
        for name in ("z", "z_crit", "before", "after", "se", "diff")
    }
    code = np.full((T, S), _REASONS.index(REASON_NOT_PERSISTENT), dtype=np.int64)
    best_all = np.zeros((T, S), dtype=np.int64)
    proportion = np.zeros((T, S), dtype=np.bool_)
    volume = np.zeros((T, S), dtype=np.bool_)
    changed = np.zeros((T, S), dtype=np.bool_)
    seg_start = np.zeros(S, dtype=np.int64)
    last_report = np.full(S, -(10**9), dtype=np.int64)
    # The volume test: the log-clients of every build with clients (a series of one
    # bucket without sampling variance), its own level (seg_v), correlation and tables.
    with np.errstate(divide="ignore"):
        y = np.where(n > 0, np.log(np.where(n > 0, n, 1.0)), np.nan)[..., None]  # (S, T, 1)
    inv_y = np.where(np.isnan(y[..., 0]), np.nan, 0.0)
    rho_v, min_volume = volume_correlation, float(np.log(volume_ratio))
    vol_tables = {k: _LookTable.make(k, K_v, rho_v, consistency_alpha) for k in looks_v}
    nu_factor_v = (1 - rho_v**2) / (1 + rho_v**2)
    run_table_v = np.array([1.0] + [_run_factor(k, rho_v) for k in range(1, L + 1)])
    seg_v = np.zeros(S, dtype=np.int64)
    delay_v = np.full((T, S), -1, dtype=np.int64)
    vol_fields = {name: np.full((T, S), np.nan) for name in ("z", "before", "after")}
    rows = np.arange(S)
    moved_to: list[tuple[int, int, int, int, int, int]] = []
    moved_to_v: list[tuple[int, int, int, int, int]] = []

    for i in range(T):
        base = _baseline(p, inv_n, i, L, seg_start, run_table)
        m, mm, tau2, inv_r, R, g_R, tot, cnt, present = base

        # Looks k = K, ..., K_max: the window {i, ..., i + k} without its most-moved
        # build; the first look that passes confirms the change at build i.
        sel, delay[i] = _looks(p, inv_n, i, base, looks, K, look_tables, nu_factor,
                               alpha_looks, min_effect, consistency_alpha)
        # The same looks on the log-clients (one "bucket", no sampling variance).
        bv = _baseline(y, inv_y, i, L, seg_v, run_table_v, sampling=False)
        sel_v, delay_v[i] = _looks(y, inv_y, i, bv, looks_v, K_v, vol_tables, nu_factor_v,
                                   alpha_looks_v, min_volume, consistency_alpha)
        passes, significant, large = sel["passes"], sel["significant"], sel["large"]
        z, crit, diff, pbar, se = sel["z"], sel["crit"], sel["diff"], sel["pbar"], sel["se"]

        score = np.where(passes, np.abs(z) + 1e6, np.abs(z))
        score = np.where(np.isnan(score), -1.0, score) + 1e-9 * np.arange(B)
        best = np.argmax(score, axis=-1)

        code_i = np.full(S, _REASONS.index(REASON_NOT_PERSISTENT))
        code_i = np.where(np.any(passes, axis=-1), 0, code_i)
        if i + K < T:
            code_i = np.where(np.isnan(inv_n[:, i : i + K + 1]).any(axis=1), 6, code_i)
            if i + K_max >= T:  # not every look yet: a later build may confirm it
                code_i = np.where(code_i == 7, 5, code_i)
        else:
            code_i[:] = 5
        code_i = np.where(~np.any(significant & large, axis=-1), 4, code_i)
        code_i = np.where(~np.any(significant, axis=-1), 3, code_i)
        code_i = np.where((cnt.max(axis=-1) < min_past) | (present.sum(axis=1) < min_noise),
                          2, code_i)
        code_i = np.where(~usable[:, i], 1, code_i)
        prop_i = code_i == 0
        vol_ok = ((bv.cnt[:, 0] >= min_past) & (bv.present.sum(axis=1) >= min_noise)
                  & (i + K_v < T) & ~np.isnan(inv_y[:, i : i + K_v + 1]).any(axis=1))
        vol_i = sel_v["passes"][:, 0] & vol_ok & ~prop_i
        fresh = i - last_report > N
        report = (prop_i | vol_i) & fresh
        code_i = np.where((prop_i | vol_i) & ~fresh, 8, np.where(vol_i, 0, code_i))
        proportion[i] = prop_i & fresh
        volume[i] = vol_i & fresh
        changed[i] = report
        seg_before, last_before = seg_start.copy(), last_report.copy()
        seg_v_before = seg_v.copy()
        last_report = np.where(report, i, last_report)
        seg_start = np.where(proportion[i], i, seg_start)
        seg_v = np.where(volume[i], i, seg_v)
        code[i] = code_i
        vol_fields["z"][i] = sel_v["z"][:, 0]
        vol_fields["before"][i] = bv.m[:, 0]
        vol_fields["after"][i] = sel_v["pbar"][:, 0]

        def at(x: FloatArray, b: IntArray = best) -> FloatArray:
            return np.asarray(x[rows, b], dtype=np.float64)

        best_all[i] = np.where(np.isnan(at(diff)), -1, best)
        fields["z"][i] = at(z)
        fields["z_crit"][i] = at(crit)
        fields["before"][i] = at(m)
        fields["after"][i] = at(pbar)
        fields["se"][i] = at(se)
        fields["diff"][i] = at(diff)

        if locate:
            for r in map(int, np.nonzero(proportion[i])[0]):
                e = min(T - 1, i + int(delay[i, r]))
                first = max(0, i - _LOCATE_BACK, int(last_before[r]) + N + 1)
                b = int(best[r])
                with np.errstate(invalid="ignore"):
                    var = tau2[r, b] + mm[r, b] * inv_n[r, first : e + 1]
                at_c = locate_start(p[r, first : e + 1, b], var, float(m[r, b]),
                                    first=0, last=e - K - first)
                if at_c < 0 or first + at_c == i:
                    continue
                start = first + at_c
                moved_to.append((r, i, start, e, b, int(seg_before[r])))
                last_report[r] = seg_start[r] = start
            for r in map(int, np.nonzero(volume[i])[0]):
                e = min(T - 1, i + int(delay_v[i, r]))
                first = max(0, i - _LOCATE_BACK, int(last_before[r]) + N + 1)
                var = np.full(e + 1 - first, bv.tau2[r, 0])
                at_c = locate_start(y[r, first : e + 1, 0], var, float(bv.m[r, 0]),
                                    first=0, last=e - K_v - first)
                if at_c < 0 or first + at_c == i:
                    continue
                start = first + at_c
                moved_to_v.append((r, i, start, e, int(seg_v_before[r])))
                last_report[r] = seg_v[r] = start

    # The located starts of volume changes, likewise on the log-clients.
    for r, i, start, e, seg in moved_to_v:
        k = e - start
        if k not in vol_tables:
            vol_tables[k] = _LookTable.make(k, K_v, rho_v, consistency_alpha)
        one = slice(r, r + 1)
        bl = _baseline(y[one], inv_y[one], start, L, np.array([seg]), run_table_v,
                       sampling=False)
        lk = _look(y[one], inv_y[one], start, k, bl.m, bl.mm, bl.tau2, bl.inv_r,
                   bl.past_count, bl.past_factor, bl.tot, vol_tables[k], nu_factor_v,
                   alpha_looks_v[int(delay_v[i, r])], min_volume, consistency_alpha)
        vol_fields["z"][start, r] = lk["z"][0, 0]
        vol_fields["before"][start, r] = bl.m[0, 0]
        vol_fields["after"][start, r] = lk["pbar"][0, 0]
        _move_report(volume, changed, delay_v, code, r, i, start, k)

    # The located starts, with the figures of their own window start..e (baseline before it).
    for r, i, start, e, b, seg in moved_to:
        k = e - start
        if k not in look_tables:
            look_tables[k] = _LookTable.make(k, K, rho, consistency_alpha)
        one = slice(r, r + 1)
        bl = _baseline(p[one], inv_n[one], start, L, np.array([seg]), run_table)
        lk = _look(p[one], inv_n[one], start, k, bl.m, bl.mm, bl.tau2, bl.inv_r,
                   bl.past_count, bl.past_factor, bl.tot, look_tables[k], nu_factor,
                   alpha_looks[int(delay[i, r])], min_effect, consistency_alpha)
        for name, val in (("z", lk["z"]), ("z_crit", lk["crit"]), ("before", bl.m),
                          ("after", lk["pbar"]), ("se", lk["se"]), ("diff", lk["diff"])):
            fields[name][start, r] = val[0, b]
        best_all[start, r] = b
        _move_report(proportion, changed, delay, code, r, i, start, k)

    kind = np.where(proportion, "proportion", np.where(volume, "volume", ""))
    d_b, se_b = fields["diff"], fields["se"]
    clients_before, clients_after = np.exp(vol_fields["before"]), np.exp(vol_fields["after"])
    volume_z = vol_fields["z"]

    def out(x: npt.NDArray[np.generic]) -> npt.NDArray[np.generic]:
        return np.moveaxis(x, 0, -1).reshape(lead + (T,))

    return CountScan(
        changed=np.asarray(out(changed), dtype=np.bool_),
        kind=np.asarray(out(kind), dtype=np.str_),
        reason=np.asarray(out(np.array(_REASONS)[code]), dtype=np.str_),
        bucket=np.asarray(out(best_all), dtype=np.int64),
        z=np.asarray(out(fields["z"]), dtype=np.float64),
        z_crit=np.asarray(out(fields["z_crit"]), dtype=np.float64),
        before=np.asarray(out(fields["before"]), dtype=np.float64),
        after=np.asarray(out(fields["after"]), dtype=np.float64),
        diff_lo=np.asarray(out(d_b - _Z95 * se_b), dtype=np.float64),
        diff_hi=np.asarray(out(d_b + _Z95 * se_b), dtype=np.float64),
        clients_before=np.asarray(out(clients_before), dtype=np.float64),
        clients_after=np.asarray(out(clients_after), dtype=np.float64),
        volume_z=np.asarray(out(volume_z), dtype=np.float64),
        delay=np.asarray(out(np.where(proportion, delay, np.where(volume, delay_v, -1))),
                         dtype=np.int64),
    )

