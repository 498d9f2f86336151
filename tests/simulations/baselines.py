"""Two outside detectors as rules of the harness: Perfherder's and Apache Otava's.

Both are rules in the harness's sense (``tests/simulations/dashboard_rules.py``): a
callable from ``samples`` (functions, releases, runs; µs, NaN-padded) to int8 verdict
codes (functions, releases - 1) of ``deviations.stats.releases`` (2 regression,
3 improvement, 0 judged without a flag, -1 not judged).

**Perfherder** (Mozilla Treeherder's ``perfalert.detect_changes`` and
``perf/alerts.py`` ``generate_new_alerts_in_series``, read and re-implemented here,
vectorised over functions; :class:`Perfherder`):

* the t statistic at data point ``i`` compares the revisions before it (the back window:
  going back from ``i - 1`` while fewer than ``max_back_window`` = 24 values are held and
  at most ``min(max(L, min_back_window), max_back_window)`` revisions are taken, ``L``
  the points since the last ``t > t_threshold``) with the revisions from ``i`` on (the
  fore window: until at least ``fore_window`` = 12 values are held). Each side's mean is
  weighted per revision by ``(n - j) / n`` (``j`` the revision's distance from the
  boundary, ``n`` the side's revisions: nearer revisions weigh more), its variance is the
  plain sample variance of its values about that mean, and
  ``t = |mean_fore - mean_back| / sqrt(var_back / n_back + var_fore / n_fore)`` (0 when
  the means are equal, infinite when both variances are 0);
* a point is a change when its back window holds at least ``min_back_window`` = 12 values
  and its fore window ``fore_window`` = 12, ``t > t_threshold`` = 7, and neither
  neighbour's t is larger (the next point's t is computed from the data there is);
* an alert needs ``|mean_fore - mean_back| >= 2%`` of ``mean_back`` (uniform means of the
  two windows; Perfherder's default ``alert_threshold``, ``PERFHERDER_REGRESSION_THRESHOLD``)
  and is a regression when the fore mean is larger (times are lower-is-better);
* **as Mozilla runs it**: the detector runs again whenever a new data point arrives, on
  the points *after* the series' latest alert only (``push_timestamp >`` the alert's
  push); an alert, once made, stays. :class:`Perfherder` replays this one release at a
  time, so a change is judged once 12 values follow it, never later; the series' age
  limit (``PERFHERDER_ALERTS_MAX_AGE``) is left out (releases have no dates).

*How the runs become data points.* Perfherder stores one value per job and signature:
the summary a test harness computes from its replicates (``etl/perf.py`` keeps the
replicates apart, for the try branch only; alerting never reads them). A trace run is one
load of the page, as a replicate is, so a release is one job: ``points="median"`` (the
default, rule ``perfherder``) gives each release one data point, the median of its runs
(the summary Raptor/Browsertime report for page-load replicates). ``points="runs"`` (rule
``perfherder_runs``) gives each run its own data point of its release, as retriggered
jobs of one push would: 12 values are then 12 runs, fewer releases. A boundary ``k``
(between releases ``k`` and ``k+1``) is the change Perfherder reports at data point
``k + 1`` (the alert names that push and the previous one).

**Apache Otava** (``apache-otava`` 0.8.0 from PyPI: E-divisive with Student t
significance, Fleming et al. 2023; :class:`Otava`) runs in its own virtual environment
(it pins numpy 2.2 and scipy < 1.17, which the project's does not hold)::

    python3 -m venv .venv-otava && .venv-otava/bin/pip install apache-otava==0.8.0

A small driver (``tests/simulations/otava_driver.py``) reads the series from an ``.npz``
file and calls ``otava.analysis.compute_change_points`` with Otava's defaults as a user
gets them: ``window_len=50``, ``max_pvalue=0.001``, ``min_magnitude=0.0`` (the CLI's
``--magnitude`` default: no minimum change). Each run is a point, in release order
(what a user feeding Otava a results table does). A change point is the index of the
first point of the new segment; it maps to the boundary before its release when it is
the release's first run, otherwise to the nearer end of its release (the earlier one on
a tie), so a change placed inside a release counts on a boundary next to it. Its
direction is the sign of ``mean_after - mean_before``; two change points on one boundary
keep the smaller p-value's. Without ``.venv-otava`` the rule raises
:class:`OtavaMissingError` (the harness skips it and says why).
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np

from deviations.stats.releases import IMPROVEMENT, NO_VERDICT, NONSIGNIFICANT_OVERLAP, REGRESSION

ROOT = Path(__file__).resolve().parents[2]
OTAVA_PYTHON = ROOT / ".venv-otava" / "bin" / "python"
OTAVA_DRIVER = Path(__file__).with_name("otava_driver.py")
NOT_YET = -2
"""Code of a boundary that does not exist yet in a prefix of the series (replays)."""


# --- Perfherder ---------------------------------------------------------------------------


@dataclass(frozen=True)
class _Sweep:
    """``detect_changes``' per-point numbers of each function, for the data points from
    its start ``s`` on, with fore windows as far as the data given reaches."""

    t: np.ndarray  # (F, R)
    lsr: np.ndarray  # (F, R): points since the last t > threshold, before the point
    prev_n: np.ndarray  # (F, R): values in the back window
    back_mean: np.ndarray  # (F, R): uniform means (the alert's prev_value / new_value)
    fore_mean: np.ndarray


def _weighted(x: np.ndarray, take: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray,
                                                        np.ndarray]:
    """``perfalert.analyze`` of windows of revisions, vectorised: ``x`` (F, J, W) holds the
    values of up to ``J`` revisions (nearest first, NaN pads), ``take`` (F, J) which ones
    are in the window. Returns the linearly weighted mean, the variance about it, the
    number of values and the uniform mean."""
    n_rev = take.sum(axis=1)
    j = np.arange(take.shape[1])[None, :]
    with np.errstate(invalid="ignore", divide="ignore"):
        w = np.where(take, (n_rev[:, None] - j) / n_rev[:, None], 0.0)
        given = ~np.isnan(x) & take[:, :, None]
        s = np.where(given, x, 0.0)
        count = given.sum(axis=2)
        n = count.sum(axis=1)
        wmean = (w * s.sum(axis=2)).sum(axis=1) / (w * count).sum(axis=1)
        dev = np.where(given, (x - wmean[:, None, None]) ** 2, 0.0).sum(axis=(1, 2))
        var = np.where(n > 1, dev / (n - 1), 0.0)
        hi = np.where(given, x, -np.inf).max(axis=(1, 2), initial=-np.inf)
        lo = np.where(given, x, np.inf).min(axis=(1, 2), initial=np.inf)
        var = np.where(hi == lo, 0.0, var)  # every value equal: exactly 0, as in exact arithmetic
        mean = s.sum(axis=(1, 2)) / n
    return wmean, var, n, mean


def _calc_t(back: tuple[np.ndarray, ...], fore: tuple[np.ndarray, ...]) -> np.ndarray:
    """``|perfalert.calc_t|``: 0 without data on a side or with equal means, infinite when
    both variances are 0."""
    m1, v1, n1, _ = back
    m2, v2, n2, _ = fore
    with np.errstate(invalid="ignore", divide="ignore"):
        delta = m2 - m1
        t = np.abs(delta) / np.sqrt(v1 / n1 + v2 / n2)
    t = np.where((v1 == 0) & (v2 == 0), np.inf, t)
    t = np.where(delta == 0, 0.0, t)
    out: np.ndarray = np.where((n1 == 0) | (n2 == 0), 0.0, t)
    return out


class Perfherder:
    """Perfherder's alerts on each function's series, as Mozilla runs them (module
    docstring). ``points``: ``"median"`` (one data point a release) or ``"runs"``."""

    def __init__(
        self,
        points: Literal["median", "runs"] = "median",
        *,
        min_back_window: int = 12,
        max_back_window: int = 24,
        fore_window: int = 12,
        t_threshold: float = 7.0,
        alert_threshold_pct: float = 2.0,
    ) -> None:
        if points not in ("median", "runs"):
            raise ValueError(f"unknown points {points!r}")
        self.points = points
        self.min_back_window = min_back_window
        self.max_back_window = max_back_window
        self.fore_window = fore_window
        self.t_threshold = t_threshold
        self.alert_threshold_pct = alert_threshold_pct

    def data_points(self, samples: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The values of each release's data points (F, R, W) and their number (R,)."""
        x = np.asarray(samples, dtype=np.float64)
        if self.points == "median":
            with np.errstate(all="ignore"):
                v = np.sort(x, axis=2)  # NaN last
                n = np.sum(~np.isnan(x), axis=2)
                lo = np.take_along_axis(v, np.maximum((n - 1) // 2, 0)[..., None], axis=2)
                hi = np.take_along_axis(v, np.maximum(n // 2, 0)[..., None], axis=2)
                med = np.where(n[..., None] > 0, (lo + hi) / 2.0, np.nan)
            counts = (n.max(axis=0, initial=0) > 0).astype(np.int64)
            return med, counts
        return x, np.sum(~np.isnan(x), axis=2).max(axis=0, initial=0)

    def _fore_span(self, counts: np.ndarray, i: int, stop: int) -> int:
        """Revisions of the fore window of point ``i`` when the data ends before ``stop``."""
        total, k = 0, i
        while total < self.fore_window and k < stop:
            total += int(counts[k])
            k += 1
        return k - i

    def _back_cap(self, counts: np.ndarray, i: int) -> int:
        """Most revisions the back window of ``i`` takes before it holds
        ``max_back_window`` values."""
        total, j = 0, 0
        while total < self.max_back_window and i - j - 1 >= 0:
            j += 1
            total += int(counts[i - j])
        return j

    def _t_at(self, v: np.ndarray, counts: np.ndarray, i: int, start: np.ndarray,
              lsr: np.ndarray, stop: int) -> tuple[np.ndarray, ...]:
        """t, back-window values and both uniform means at point ``i`` of each function
        whose data start at ``start`` (F,), with the data ending before ``stop``."""
        limit = np.minimum(np.maximum(lsr, self.min_back_window), self.max_back_window)
        n_back = np.minimum(np.minimum(self._back_cap(counts, i), limit), i - start)
        J = int(n_back.max(initial=0))  # noqa: N806
        back_x = v[:, i - J : i][:, ::-1] if J else v[:, :0]
        take = np.arange(J)[None, :] < n_back[:, None]
        back = _weighted(back_x, take)
        k = self._fore_span(counts, i, stop)
        fore = _weighted(v[:, i : i + k], np.ones((v.shape[0], k), dtype=np.bool_))
        return _calc_t(back, fore), back[2], back[3], fore[3]

    def sweep(self, v: np.ndarray, counts: np.ndarray, start: np.ndarray) -> _Sweep:
        """``detect_changes``' first loop over every point, each function from its
        ``start``, fore windows to the end of ``v``."""
        F, R = v.shape[:2]  # noqa: N806
        t = np.zeros((F, R))
        lsr = np.zeros((F, R), dtype=np.int64)
        prev_n = np.zeros((F, R), dtype=np.int64)
        back_mean = np.full((F, R), np.nan)
        fore_mean = np.full((F, R), np.nan)
        seen = np.zeros(F, dtype=np.int64)
        for i in range(1, R):
            active = i > start  # point 0 of a function's data gets no t
            lsr[:, i] = seen
            got_t, n, bm, fm = self._t_at(v, counts, i, start, seen, R)
            t[:, i] = np.where(active, got_t, 0.0)
            prev_n[:, i] = np.where(active, n, 0)
            back_mean[:, i], fore_mean[:, i] = bm, fm
            seen = np.where(active, np.where(got_t > self.t_threshold, 0, seen + 1), seen)
        return _Sweep(t, lsr, prev_n, back_mean, fore_mean)

    def replay(self, samples: np.ndarray) -> np.ndarray:
        """Verdict codes after each release: shape (R - 1, F, R - 1), row ``r - 2`` the
        codes once releases ``0 .. r-1`` exist (boundaries not there yet: :data:`NOT_YET`)."""
        v, counts = self.data_points(samples)
        F, R = v.shape[:2]  # noqa: N806
        if R < 2:
            return np.zeros((0, F, 0), dtype=np.int8)
        # The prefix length from which each point's fore window is full (never: R + 1).
        full_at = np.full(R, R + 1)
        for i in range(R):
            k = self._fore_span(counts, i, R)
            if counts[i : i + k].sum() >= self.fore_window:
                full_at[i] = i + k
        start = np.zeros(F, dtype=np.int64)
        sweep = self.sweep(v, counts, start)
        code = np.full((F, R - 1), NO_VERDICT, dtype=np.int8)
        out = np.full((R - 1, F, R - 1), NOT_YET, dtype=np.int8)
        pos = np.arange(R)[None, :]
        for r in range(2, R + 1):
            full = full_at <= r
            first_partial = int(np.argmin(full)) if not full.all() else R
            t_next = np.zeros((F, R))
            t_next[:, :-1] = sweep.t[:, 1:]
            if 0 < first_partial < r:
                # The next point's t from the data there is (its fore window not full yet).
                got = self._t_at(v, counts, first_partial, start,
                                 sweep.lsr[:, first_partial], r)[0]
                t_next[:, first_partial - 1] = np.where(first_partial > start, got, 0.0)
            has_next = pos + 1 < r
            t_prev = np.zeros((F, R))
            t_prev[:, 1:] = np.where(pos[:, 1:] - 1 == start[:, None], 0.0, sweep.t[:, :-1])
            judged = (pos > start[:, None]) & (pos < r) & full[None, :] & (
                sweep.prev_n >= self.min_back_window)
            t = sweep.t
            change = judged & (t > self.t_threshold) & (t_prev <= t) & (
                ~has_next | (t_next <= t))
            with np.errstate(invalid="ignore", divide="ignore"):
                pct = np.where(sweep.back_mean != 0, 100.0 * np.abs(
                    sweep.fore_mean - sweep.back_mean) / sweep.back_mean, 0.0)
            alert = change & (pct >= self.alert_threshold_pct)
            b_judged = judged[:, 1:]
            code[:, : R - 1] = np.where(b_judged & (code == NO_VERDICT), NONSIGNIFICANT_OVERLAP,
                                        code)
            f, i = np.nonzero(alert)
            code[f, i - 1] = np.where(sweep.fore_mean[f, i] > sweep.back_mean[f, i],
                                      REGRESSION, IMPROVEMENT)
            if len(f):
                moved = np.unique(f)
                new_start = start.copy()
                np.maximum.at(new_start, f, i + 1)
                start = new_start
                again = self.sweep(v[moved], counts, start[moved])
                for name in ("t", "lsr", "prev_n", "back_mean", "fore_mean"):
                    getattr(sweep, name)[moved] = getattr(again, name)
            out[r - 2, :, : r - 1] = code[:, : r - 1]
        return out

    def __call__(self, samples: np.ndarray) -> np.ndarray:
        x = np.asarray(samples, dtype=np.float64)
        if x.shape[1] < 2:
            return np.zeros((x.shape[0], 0), dtype=np.int8)
        out: np.ndarray = self.replay(x)[-1]
        return out


# --- Apache Otava --------------------------------------------------------------------------


class OtavaMissingError(RuntimeError):
    """``.venv-otava`` is absent: Otava cannot run (module docstring says how to make it)."""


@dataclass(frozen=True)
class Otava:
    """Apache Otava's change points on each function's runs, as a rule (module docstring)."""

    window_len: int = 50
    max_pvalue: float = 0.001
    min_magnitude: float = 0.0
    python: Path = OTAVA_PYTHON

    def change_points(self, samples: np.ndarray) -> list[list[tuple[int, float, float, float]]]:
        """Per function, Otava's change points of its runs in release order:
        ``(index, mean_before, mean_after, p-value)``."""
        if not self.python.is_file():
            raise OtavaMissingError(
                f"{self.python} is absent: python3 -m venv .venv-otava && "
                ".venv-otava/bin/pip install apache-otava==0.8.0"
            )
        x = np.asarray(samples, dtype=np.float64)
        flat = x.reshape(x.shape[0], -1)
        lengths = np.sum(~np.isnan(flat), axis=1)
        # NaN pads sort last within each row: the runs stay in release order.
        order = np.argsort(np.isnan(flat), axis=1, kind="stable")
        values = np.take_along_axis(flat, order, axis=1)
        with tempfile.TemporaryDirectory() as tmp:
            src, dst = Path(tmp) / "series.npz", Path(tmp) / "change_points.json"
            np.savez(src, values=values, lengths=lengths)
            subprocess.run(
                [str(self.python), str(OTAVA_DRIVER), str(src), str(dst),
                 "--window-len", str(self.window_len), "--max-pvalue", str(self.max_pvalue),
                 "--min-magnitude", str(self.min_magnitude)],
                check=True, capture_output=True, text=True,
            )
            found = json.loads(dst.read_text())
        return [[(int(c[0]), float(c[1]), float(c[2]), float(c[3])) for c in row]
                for row in found]

    def __call__(self, samples: np.ndarray) -> np.ndarray:
        x = np.asarray(samples, dtype=np.float64)
        F, R = x.shape[:2]  # noqa: N806
        runs = np.sum(~np.isnan(x), axis=2)
        code = np.zeros((F, max(R - 1, 0)), dtype=np.int8)
        p_at = np.full(code.shape, np.inf)
        for f, cps in enumerate(self.change_points(x)):
            first = np.concatenate([[0], np.cumsum(runs[f])])  # first point of each release
            for index, before, after, p in cps:
                k = boundary_of_point(index, first)
                if k is None or p >= p_at[f, k]:
                    continue
                p_at[f, k] = p
                code[f, k] = REGRESSION if after > before else IMPROVEMENT
        return code


def boundary_of_point(index: int, first: np.ndarray) -> int | None:
    """The boundary a change point at point ``index`` (the first of the new segment) maps
    to, given the first point of each release (``first``, with the total at the end):
    the boundary before its release at its first run, else the nearer end of the release
    (the earlier on a tie); ``None`` outside the series' boundaries."""
    releases = len(first) - 1
    r = int(np.searchsorted(first, index, side="right")) - 1
    if r < 0 or r >= releases:
        return None
    offset = index - int(first[r])
    n = int(first[r + 1] - first[r])
    k = r - 1 if offset * 2 <= n else r
    if k < 0 or k > releases - 2:
        return None
    return k


RULES = {
    "perfherder": Perfherder("median"),
    "perfherder_runs": Perfherder("runs"),
    "otava": Otava(),
    # Stricter p-value thresholds than Otava's default, to compare steps found at the
    # false-flag rate of the dashboard's rule (docs/statistics.md §10b).
    "otava_p1e-5": Otava(max_pvalue=1e-5),
    "otava_p1e-7": Otava(max_pvalue=1e-7),
    "otava_p1e-9": Otava(max_pvalue=1e-9),
}
