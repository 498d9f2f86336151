"""Changes in the counts of boolean and enumerated histograms between builds.

The shape rule of :mod:`~deviations.stats.histograms` compares normalised histograms with
the Hellinger distance. On a boolean probe a share moving from 19 % to 21 % of hundreds of
thousands of clients is a distance of about 0.02, under any cutoff, while the clients'
counts show it at once. This module judges such probes on their counts:

* **proportion changes**: per bucket, the share of the build and of its confirming later
  builds against the median share of the past builds, a z test whose variance holds the
  sampling variance *and* the between-build variance estimated from the probe's own
  history (overdispersion: builds differ for reasons beyond sampling, so a multinomial
  test on 300,000 clients flags every build);
* **volume changes**: the number of clients (or samples) reporting jumps while the shares
  stay: reported as their own kind.

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
Hampel, F. R. (1974). The influence curve and its role in robust estimation. JASA 69
    (median absolute deviation, 1.4826 for a normal sd).
Vitillo, R. (2014). Regression detection for Telemetry histograms (seed 001): the
    persistence rule.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

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
)

#: Normal quantile of the reported two-sided 95 % interval.
_Z95 = 1.959963984540054
#: Scale of the MAD to a normal standard deviation (Hampel 1974).
_MAD_SD = 1.482602218505602


@dataclass(frozen=True)
class CountChange:
    """One reported change of a probe's counts.

    ``bucket`` is the bucket whose share moved most significantly (-1 for a volume change);
    ``before``/``after`` its share (the median over the past builds, the mean over the
    build and its confirming builds) with ``diff_lo``/``diff_hi`` the 95 % interval of
    ``after - before``; ``clients_before``/``clients_after`` the median clients of the past
    builds and the geometric mean over the build and its confirming builds.
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
    z : its z statistic (pooled over the build and its confirming builds).
    z_crit : the critical value the build was held to (Bonferroni over the buckets).
    before, after, diff_lo, diff_hi : its shares and the 95 % interval of the difference.
    clients_before, clients_after : median past clients; geometric mean over the window.
    volume_z : log-ratio of the clients to the past median over the probe's noise.
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


def detect_count_changes(
    counts: npt.ArrayLike,
    *,
    alpha: float = 1e-4,
    min_effect: float = 0.01,
    past_builds: int = 7,
    min_past: int = 4,
    future_builds: int = 2,
    noise_window: int = 28,
    min_noise: int = 14,
    min_count: float = 1000,
    volume_ratio: float = 2.0,
    volume_k: float = 4.0,
    consistency_alpha: float = 0.01,
) -> CountScan:
    """Proportion and client-volume changes of a build series, with the persistence rule.

    For build :math:`i` with the usable past builds :math:`R_i` (among the
    ``past_builds`` before it) and the window :math:`A_i = \\{i, \\dots, i+K\\}`
    (:math:`K` = ``future_builds``), per bucket :math:`b`, with :math:`m_b` the median
    share over :math:`R_i`, :math:`\\bar p_b` the mean share over :math:`A_i`,
    :math:`\\hat\\tau^2_b` from :func:`between_build_variance` and
    :math:`v_{t,b} = m_b(1-m_b)/n_t`:

    .. math::
        z_b = \\frac{\\bar p_b - m_b}{\\sqrt{
              \\dfrac{\\hat\\tau^2_b + \\overline{v}_{A,b}}{|A_i|} +
              \\dfrac{\\pi}{2}\\,\\dfrac{\\hat\\tau^2_b + \\overline{v}_{R,b}}{|R_i|}}}

    (:math:`\\pi/2`: the asymptotic variance of a median over a mean's). A
    **proportion change** is reported at build :math:`i` when some bucket has

    1. every build of :math:`A_i` usable (clients :math:`\\geq` ``min_count``);
    2. :math:`|R_i| \\geq` ``min_past`` and at least ``min_noise`` differences in the
       noise window;
    3. :math:`|z_b| > z_{1-\\alpha/(2M)}`, :math:`M` the buckets with mass (1 for a
       boolean probe, whose two buckets are one test): Bonferroni over the buckets;
    4. :math:`|\\bar p_b - m_b| \\geq` ``min_effect`` (a change worth acting on);
    5. persistence: **every** build of :math:`A_i` moved the same way by at least
       ``min_effect`` (:math:`\\operatorname{sign}(\\hat p_{t,b} - m_b)
       (\\hat p_{t,b} - m_b) \\geq` ``min_effect``), so a one-build spike, whose later
       builds return to the past level, is never reported.

    The reported interval is :math:`(\\bar p_b - m_b) \\pm 1.96\\,\\mathrm{se}`, with the
    denominator above as se: it holds the between-build variance, so it is a statement
    about the probe's level, not about one build's clients.

    A **volume change** (only where no proportion change is reported) uses
    :math:`y_t = \\ln n_t`: with :math:`y_R` the median over the past builds with data
    and :math:`s` the 1.4826 MAD of :math:`y` over the noise window, the window's mean
    :math:`\\bar y_A - y_R` exceeds
    :math:`\\max(\\ln(\\text{volume\\_ratio}), \\text{volume\\_k}\\, s \\sqrt{1 + \\pi/2|R|})`
    and every build of :math:`A_i` lies beyond half of :math:`\\ln(\\text{volume\\_ratio})`
    on the same side.

    Parameters
    ----------
    counts : array_like, shape (..., builds, buckets)
        Counts per build: clients per bucket (GLAM's shares times ``total_users``) or
        samples. Leading axes are independent series.
    alpha : float, default 1e-4
        Family-wise level over the buckets of one build (two-sided). Small because a probe
        is tested at every build. The real GLAM series raise no alert; on the simulation in
        ``tests/simulations/histogram_counts.py`` 0-4.4 % of stable 60-build series do
        (docs/statistics.md, 2.6).
    min_effect : float, default 0.01
        Smallest change of a share worth an alert: one percentage point.
    past_builds, min_past, future_builds, min_count : int
        As in :func:`~deviations.stats.histograms.detect_changes` (Mozilla's values);
        ``min_count`` applies to the build's total (its clients).
    noise_window, min_noise : int, default 28, 14
        Past builds for the between-build variance and the fewest usable ones (two weeks of
        twice-daily Nightly builds; 14 let the enumerated GLAM probe's regimes through).
    volume_ratio : float, default 2.0
        Smallest lasting factor of the clients reporting (a doubling or a halving).
    volume_k : float, default 4.0
        Robust z of the log-ratio over the probe's build-to-build spread; 3 raised an alert
        on GLAM's boolean probe (a real three-build dip to x0.43 clients).

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
    if not 0 < alpha < 1 or min_effect < 0 or volume_ratio <= 1 or volume_k < 0:
        raise ValueError("need 0 < alpha < 1, min_effect >= 0, volume_ratio > 1, volume_k >= 0")
    c = np.asarray(counts, dtype=np.float64)
    if c.ndim < 2 or c.shape[-1] == 0:
        raise ValueError("counts must have shape (..., builds, buckets)")
    if not np.all(np.isfinite(c)) or np.any(c < 0):
        raise ValueError("counts must be finite and non-negative")
    lead, T, B = c.shape[:-2], c.shape[-2], c.shape[-1]
    c = c.reshape((-1, T, B))  # (S, T, B)
    n = c.sum(axis=-1)
    usable = n >= max(min_count, np.finfo(np.float64).tiny)
    with np.errstate(divide="ignore", invalid="ignore"):
        p = np.where(usable[..., None], c / n[..., None], np.nan)
    tau2, n_noise = between_build_variance(
        p, np.where(usable, n, np.nan), noise_window=noise_window
    )

    N, K = past_builds, future_builds
    # Builds on axis 0 for the window helper: (T, S, B) -> windows (T, w, S, B).
    pT = np.moveaxis(p, 1, 0)
    nT = np.moveaxis(np.where(usable, n, np.nan), 1, 0)
    past_p = _windows(pT, range(-N, 0))
    past_n = _windows(nT, range(-N, 0))
    win_p = _windows(pT, range(0, K + 1))
    win_n = _windows(nT, range(0, K + 1))
    n_past = (~np.isnan(past_n)).sum(axis=1)  # (T, S)
    m = _nanmedian(past_p, 1)  # (T, S, B)
    with np.errstate(invalid="ignore", divide="ignore"):
        pbar = _nanmean(win_p, 1)
        tau2T = np.moveaxis(tau2, 1, 0)
        mm = m * (1.0 - m)
        v_past = mm * _nanmean(1.0 / past_n, 1)[..., None]
        v_win = mm * _nanmean(1.0 / win_n, 1)[..., None]
        R = np.maximum(n_past, 1)[..., None]
        var = tau2T + v_win / (K + 1) + (np.pi / 2) * (tau2T + v_past) / R
        se = np.sqrt(var)
        diff = pbar - m
        z = np.where(se > 0, diff / np.where(se > 0, se, 1.0), np.where(diff == 0, 0.0, np.inf))
    z = np.where(np.isnan(diff), 0.0, z)
    # Buckets with mass in the past or the window; two buckets are one test.
    mass = (np.nan_to_num(m) > 0) | (np.nan_to_num(pbar) > 0)
    M = mass.sum(axis=-1)
    M = np.where(M <= 2, 1, M)
    z_crit = np.asarray(special.ndtri(1.0 - alpha / (2.0 * M)), dtype=np.float64)  # (T, S)

    significant = np.abs(z) > z_crit[..., None]
    large = np.abs(diff) >= min_effect
    moved = np.sign(diff)[:, None] * (win_p - m[:, None])  # (T, K+1, S, B)
    with np.errstate(invalid="ignore", divide="ignore"):
        same_side = np.all(moved >= min_effect, axis=1)
        # The window's builds must agree on one new level: homogeneity chi-square.
        w_var = tau2T[:, None] + mm[:, None] * (1.0 / win_n)[..., None]
        Q = np.where(w_var > 0, (win_p - pbar[:, None]) ** 2 / w_var, 0.0).sum(axis=1)
    q_crit = special.chdtri(K, consistency_alpha) if K > 0 else np.inf
    persistent = same_side & ~(Q > q_crit)
    window_usable = np.all(~np.isnan(win_n), axis=1)  # (T, S): False past the end too
    exists = (np.arange(T) + K < T)[:, None]
    noise_ok = np.moveaxis(n_noise, 1, 0) >= min_noise

    passes = significant & large & persistent
    # Deciding bucket: the largest |z| among those passing, else among all.
    score = np.where(passes, np.abs(z) + 1e6, np.abs(z))
    score = np.where(np.isnan(score), -1.0, score)
    # Ties (the two buckets of a boolean probe) go to the later bucket: `true`.
    score = score + 1e-9 * np.arange(B)
    best = np.argmax(score, axis=-1)  # (T, S)
    pick = best[..., None]

    def at(x: FloatArray) -> FloatArray:
        return np.asarray(np.take_along_axis(x, pick, -1)[..., 0], dtype=np.float64)

    usableT = usable.T
    code = np.full((T, c.shape[0]), _REASONS.index(REASON_NOT_PERSISTENT), dtype=np.int64)
    code = np.where(np.any(passes, axis=-1), 0, code)
    code = np.where(~window_usable & exists, 6, code)
    code = np.where(~exists, 5, code)
    code = np.where(~np.any(significant & large, axis=-1), 4, code)
    code = np.where(~np.any(significant, axis=-1), 3, code)
    code = np.where((n_past < min_past) | ~noise_ok, 2, code)
    code = np.where(~usableT, 1, code)
    proportion = code == 0

    # Volume: log clients against the past median, over the spread of past log clients.
    with np.errstate(divide="ignore", invalid="ignore"):
        y = np.where(n > 0, np.log(n), np.nan)  # (S, T)
    yT = y.T
    past_y = _windows(yT, range(-N, 0))
    win_y = _windows(yT, range(0, K + 1))
    yW = _windows(yT, range(-noise_window, 0))
    y_mid = _nanmedian(yW, 1)
    s_y = _MAD_SD * _nanmedian(np.abs(yW - y_mid[:, None]), 1)
    y_past = _nanmedian(past_y, 1)
    # Window effects are not averaged (runs of similar builds), the past median's are.
    R_y = np.maximum((~np.isnan(past_y)).sum(axis=1), 1)
    vol_cut = np.maximum(np.log(volume_ratio), volume_k * s_y * np.sqrt(1 + np.pi / (2 * R_y)))
    rel = win_y - y_past[:, None]
    mean_rel = _nanmean(rel, 1)
    half = 0.5 * np.log(volume_ratio)
    with np.errstate(invalid="ignore"):
        vol_up = (mean_rel > vol_cut) & np.all(rel > half, axis=1)
        vol_down = (mean_rel < -vol_cut) & np.all(rel < -half, axis=1)
    enough_y = (R_y >= min_past) & ((~np.isnan(yW)).sum(axis=1) >= min_noise)
    volume = (vol_up | vol_down) & enough_y & exists & ~proportion
    with np.errstate(invalid="ignore", divide="ignore"):
        volume_z = np.where(s_y > 0, (_nanmean(win_y, 1) - y_past) / s_y, np.nan)
        clients_after = np.exp(_nanmean(win_y, 1))
    clients_before = np.exp(y_past)

    # A change is reported once: the builds whose past still holds the old level (the
    # next ``past_builds``) are not reported again.
    changed = proportion | volume
    for t in range(1, T):
        changed[t] &= ~changed[max(0, t - N) : t].any(axis=0)
    code = np.where((proportion | volume) & ~changed, 8, code)
    proportion &= changed
    volume &= changed
    kind = np.where(proportion, "proportion", np.where(volume, "volume", ""))
    best = np.where(np.isnan(at(diff)), -1, best)
    se_b = at(se)
    d_b = at(diff)

    def out(x: npt.NDArray[np.generic]) -> npt.NDArray[np.generic]:
        return np.moveaxis(x, 0, -1).reshape(lead + (T,))

    return CountScan(
        changed=np.asarray(out(changed), dtype=np.bool_),
        kind=np.asarray(out(kind), dtype=np.str_),
        reason=np.asarray(out(np.array(_REASONS)[code]), dtype=np.str_),
        bucket=np.asarray(out(best), dtype=np.int64),
        z=np.asarray(out(at(z)), dtype=np.float64),
        z_crit=np.asarray(out(z_crit), dtype=np.float64),
        before=np.asarray(out(at(m)), dtype=np.float64),
        after=np.asarray(out(at(pbar)), dtype=np.float64),
        diff_lo=np.asarray(out(d_b - _Z95 * se_b), dtype=np.float64),
        diff_hi=np.asarray(out(d_b + _Z95 * se_b), dtype=np.float64),
        clients_before=np.asarray(out(clients_before), dtype=np.float64),
        clients_after=np.asarray(out(clients_after), dtype=np.float64),
        volume_z=np.asarray(out(volume_z), dtype=np.float64),
    )
