"""The glue between stored runs and ``deviations.stats``: load, compute, store.

``analyse_series`` keeps, for each metric (self time, total time), estimator (median,
mean) and rule (paper, recommended, segments), the matrices of a series;
``analysis_store`` holds them as one summary row and per-release blocks. Pages and exports
only read them (``analysis_store.read_analysis``).

Which releases are columns: those with at least two done runs (an interval needs two), in
series order; "consecutive" means consecutive among them. A function absent from a run
was not called in it: 0 µs there, not a missing value. A function absent from *every* run
of a release was not measured there: the pairs on either side are ``appeared`` /
``vanished``, never a change from or to 0 µs (``stats.releases.absent_releases``).

Incremental updates (docs/architecture.md, "Analysis: stored matrices, incremental
updates"). The stored analysis records the done runs of each column (``run_ids`` split by
``run_counts``). A new analysis compares them with the database: a column is *changed*
when it is new (a release reached two runs, possibly between two others) or gained runs.
Only what depends on changed columns is recomputed, from the samples of the releases
within ``2 WINDOW - 1`` columns of a change (the samples of every column are loaded, for
the segments rule below):

- per-release statistics of the changed columns;
- the pairs that touch a changed column (difference interval, gap, paper verdict);
- the recommended rule's window tests (z, p, shift) of the boundaries whose windows hold
  a changed column;
- for functions seen for the first time, their whole rows (their earlier runs are zeros);

then the global steps run again over the whole arrays: Benjamini–Hochberg over every
p-value, the local maximum of |z|, verdicts and digressions. The segments rule
(``stats.releases.segment_verdicts``) is global by nature (a change point's segments reach
back to the previous change): every analysis, incremental or not, loads the samples of
every column and recomputes it whole. Only the blocks of the columns whose numbers changed
are rewritten (plus, for new functions, blocks of their rows in the other columns), and
the summary row with the global arrays. Anything else (a run or
a release gone, releases reordered, other rule parameters, no stored analysis) and
``--full`` recompute and rewrite everything. Both paths run the same code, and a test
checks that they store the same arrays.

Idempotence: an analysis records the instant of its snapshot. A request is skipped when a
stored analysis already saw every run that finished (``Run.finished``); writes serialise
on the series row, the older snapshot never overwrites the newer, and an update is stored
only onto the generation it was computed from (otherwise it starts again from what is
stored). An incremental result equals the full recompute of what it read, so which of two
racing analyses wins changes nothing but the snapshot.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from itertools import product

import numpy as np
from django.db.models import Max
from django.utils import timezone

from deviations.core.db import batches
from deviations.stats import Direction
from deviations.stats.intervals import (
    MIN_RUNS,
    IntervalArray,
    mean_ci_array,
    median_ci_array,
)
from deviations.stats.multiple import benjamini_hochberg_rejections
from deviations.stats.releases import (
    NO_VERDICT,
    absent_releases,
    adjacent_change,
    digressions,
    pair_statistics,
    recommended_verdict_codes,
    segment_verdicts,
    window_tests,
)
from deviations.traces import store
from deviations.traces.models import Run, RunTimes, Series, SeriesAnalysis
from deviations.traces.store import (
    ESTIMATORS,
    METRICS,
    RULES,
    MetricArrays,
    Stored,
    read_analysis,
)

__all__ = ["ESTIMATORS", "METRICS", "RULES", "analyse_series", "read_analysis"]

# The parameters of compare_matrix's defaults (docs/statistics.md says why each value).
CONFIDENCE = 0.95
#: Trace metrics (self and total time) are durations: a larger one is a regression.
DIRECTION: Direction = "lower_is_better"
WINDOW = 3
FDR = 0.05
MIN_RELATIVE_EFFECT = 0.1
#: Version of what the stored arrays mean: a stored analysis of another version (other
#: parameters, verdicts before appeared/vanished: version 1, before the segments rule:
#: version 2) is recomputed whole.
VERDICTS_VERSION = 3
PARAMS = np.array([CONFIDENCE, WINDOW, FDR, MIN_RELATIVE_EFFECT, VERDICTS_VERSION],
                  dtype=np.float64)

@dataclass(frozen=True)
class Columns:
    """The analysable releases of a series: ids in series order and their done runs."""

    release_ids: np.ndarray
    run_ids: tuple[np.ndarray, ...]

    @property
    def run_counts(self) -> np.ndarray:
        return np.array([len(ids) for ids in self.run_ids], dtype=np.int64)


def current_columns(series: Series) -> Columns:
    """Releases with at least ``MIN_RUNS`` done runs, each with its runs in load order."""
    runs = (
        Run.objects.filter(series=series, status=Run.DONE)
        .order_by("release__sort_key", "release_id", "created", "id")
        .values_list("release_id", "id")
    )
    by_release: dict[int, list[int]] = {}
    for release_id, run_id in runs:
        by_release.setdefault(release_id, []).append(run_id)
    kept = [(rid, ids) for rid, ids in by_release.items() if len(ids) >= MIN_RUNS]
    return Columns(
        np.array([rid for rid, _ in kept], dtype=np.int64),
        tuple(np.array(ids, dtype=np.int64) for _, ids in kept),
    )


#: Packed runs fetched by one query (~48 kB each at 2,000 functions: ~25 MB a query).
_RUNS_PER_QUERY = 500

# One loaded column: per run (function ids, self µs, total µs).
Loaded = dict[int, list[tuple[np.ndarray, np.ndarray, np.ndarray]]]


def load_columns(columns: Columns, cols: Iterable[int]) -> Loaded:
    """The packed times of the runs of some columns (only those rows are read)."""
    wanted = {int(c): columns.run_ids[c] for c in cols}
    ids = [int(r) for run_ids in wanted.values() for r in run_ids]
    packed: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
    for chunk in batches(ids, _RUNS_PER_QUERY):
        query = RunTimes.objects.filter(run_id__in=chunk)
        for run_id, fids, self_us, total_us in store.binary_values(
            query, ("run_id", "function_ids", "self_us", "total_us")
        ):
            packed[run_id] = (
                np.frombuffer(fids, dtype=RunTimes.INT),
                np.frombuffer(self_us, dtype=RunTimes.FLOAT),
                np.frombuffer(total_us, dtype=RunTimes.FLOAT),
            )
    return {c: [packed[int(r)] for r in run_ids] for c, run_ids in wanted.items()}


def _scatter(
    function_ids: np.ndarray, runs: list[tuple[np.ndarray, np.ndarray, np.ndarray]]
) -> tuple[np.ndarray, np.ndarray]:
    """(functions × runs) self and total times of one column; absent functions are 0.

    ``function_ids`` need not be sorted (an update appends new functions).
    """
    shape = (len(function_ids), len(runs))
    self_us, total_us = np.zeros(shape), np.zeros(shape)
    if runs:
        fids = np.concatenate([r[0] for r in runs])
        run = np.repeat(np.arange(len(runs)), [len(r[0]) for r in runs])
        order = np.argsort(function_ids, kind="stable")
        rows = order[np.searchsorted(function_ids, fids, sorter=order)]
        self_us[rows, run] = np.concatenate([r[1] for r in runs])
        total_us[rows, run] = np.concatenate([r[2] for r in runs])
    return self_us, total_us


def _padded(blocks: list[np.ndarray]) -> np.ndarray:
    """Stack (functions × runs) blocks into (functions, releases, runs), NaN-padded."""
    width = max((b.shape[1] for b in blocks), default=0)
    rows = blocks[0].shape[0] if blocks else 0
    out = np.full((rows, len(blocks), width), np.nan)
    for c, block in enumerate(blocks):
        out[:, c, : block.shape[1]] = block
    return out


def _union_ids(
    columns: Iterable[list[tuple[np.ndarray, np.ndarray, np.ndarray]]],
    also: np.ndarray | None = None,
) -> np.ndarray:
    parts = [run[0] for runs in columns for run in runs]
    if also is not None:
        parts.append(also)
    return np.unique(np.concatenate(parts)) if parts else np.empty(0, np.int64)


# --- the stored base --------------------------------------------------------------------

# The last analysis this process stored, by series, with its generation: the next update
# of that series (often in the same worker) need not read ~60 MB back.
_last: dict[int, Stored] = {}


def _remember(series_id: int, stored: Stored | None) -> None:
    _last.clear()
    if stored is not None:
        _last[series_id] = stored


def _read_stored(series: Series) -> Stored | None:
    """The stored analysis (what this process remembers while it is still what is stored)."""
    cached = _last.get(series.pk)
    if cached is not None and cached.generation == store.generation(series.pk):
        return cached
    return store.read_state(series.pk)

# --- what to recompute -----------------------------------------------------------------


@dataclass(frozen=True)
class Plan:
    """What an analysis recomputes. ``old_col[c]`` is column ``c``'s index in the base."""

    full: bool
    changed: np.ndarray
    old_col: np.ndarray
    loaded: list[int]

    @property
    def pairs(self) -> np.ndarray:
        """Pairs touching a changed column."""
        return self.changed[:-1] | self.changed[1:]

    @property
    def boundaries(self) -> np.ndarray:
        """Boundaries whose recommended-rule windows hold a changed column."""
        return _boundaries_near(self.changed, WINDOW)


def _boundaries_near(changed: np.ndarray, window: int) -> np.ndarray:
    # Boundary k pools columns k+1-window .. k+window (compare.window_tests).
    R = len(changed)  # noqa: N806
    hit = np.zeros(max(R - 1, 0), dtype=np.bool_)
    for c in np.flatnonzero(changed):
        hit[max(0, c - window) : min(R - 1, c + window)] = True
    return hit


def plan(columns: Columns, stored: Stored | None) -> Plan:
    """Compare the stored columns (and their runs) with the database's."""
    R = len(columns.release_ids)  # noqa: N806
    everything = Plan(True, np.ones(R, dtype=np.bool_), np.full(R, -1), list(range(R)))
    if stored is None or not np.array_equal(stored.params, PARAMS):
        return everything
    position = {int(rid): i for i, rid in enumerate(stored.release_ids)}
    old_col = np.array([position.get(int(rid), -1) for rid in columns.release_ids], dtype=int)
    kept = old_col[old_col >= 0]
    if len(kept) != len(stored.release_ids) or np.any(np.diff(kept) <= 0):
        return everything  # a column vanished or the order changed
    changed = old_col < 0
    for c in np.flatnonzero(~changed):
        before, now = stored.run_ids[old_col[c]], columns.run_ids[c]
        if np.array_equal(before, now):
            continue
        if not np.isin(before, now).all():
            return everything  # a run vanished
        changed[c] = True
    loaded = np.zeros(R, dtype=np.bool_)
    reach = 2 * WINDOW - 1
    for c in np.flatnonzero(changed):
        loaded[max(0, c - reach) : c + reach + 1] = True
    return Plan(False, changed, old_col, [int(c) for c in np.flatnonzero(loaded)])


# --- computing -------------------------------------------------------------------------


def _intervals(blocks: list[np.ndarray], estimator: str, method: str = "olive"
               ) -> IntervalArray:
    """Per-release intervals of (functions × runs) blocks, as (functions, releases).

    Blocks are grouped by run count and never padded, so a release's numbers do not
    depend on which other releases are computed with it (a padded mean would: the
    pairwise summation follows the row length).
    """
    F, R = (blocks[0].shape[0] if blocks else 0), len(blocks)  # noqa: N806
    out = {k: np.full((F, R), np.nan) for k in ("estimate", "lo", "hi", "se", "df")}
    n = np.zeros((F, R), dtype=np.int64)
    by_width: dict[int, list[int]] = {}
    for c, block in enumerate(blocks):
        by_width.setdefault(block.shape[1], []).append(c)
    for idx in by_width.values():
        x = np.stack([blocks[c] for c in idx], axis=1)
        got = (median_ci_array(x, CONFIDENCE, method=method) if estimator == "median"  # type: ignore[arg-type]
               else mean_ci_array(x, CONFIDENCE))
        for k in out:
            out[k][:, idx] = getattr(got, k)
        n[:, idx] = got.n
    return IntervalArray(n=n, **out)


def _take(ia: IntervalArray, cols: np.ndarray) -> IntervalArray:
    return IntervalArray(
        estimate=ia.estimate[:, cols], lo=ia.lo[:, cols], hi=ia.hi[:, cols],
        se=ia.se[:, cols], df=ia.df[:, cols], n=ia.n[:, cols],
    )


def _segments(cols: list[int]) -> list[list[int]]:
    """Split sorted column indices into runs of consecutive ones."""
    out: list[list[int]] = []
    for c in cols:
        if out and out[-1][-1] == c - 1:
            out[-1].append(c)
        else:
            out.append([c])
    return out


def _recompute(
    state: MetricArrays,
    rows: slice,
    block: Callable[[int], np.ndarray],
    cols: list[int],
    stat_cols: np.ndarray,
    pairs: np.ndarray,
    boundaries: np.ndarray,
) -> None:
    """Recompute, for ``rows``, what ``stat_cols``/``pairs``/``boundaries`` mark True.

    ``block(c)`` gives column ``c``'s (rows × runs) samples for every ``c`` in ``cols``
    (which hold the columns of every marked pair and every marked boundary's windows).
    """
    pair_idx = np.flatnonzero(pairs)
    need = sorted(set(np.flatnonzero(stat_cols).tolist()) | set(pair_idx.tolist())
                  | set((pair_idx + 1).tolist()))
    if need:
        position = {c: i for i, c in enumerate(need)}
        blocks = [block(c) for c in need]
        write = np.array([position[c] for c in np.flatnonzero(stat_cols)], dtype=int)
        out_cols = np.flatnonzero(stat_cols)
        left = np.array([position[int(p)] for p in pair_idx], dtype=int)
        absent = np.stack([absent_releases(b) for b in blocks], axis=1)
        for estimator in ESTIMATORS:
            ia = _intervals(blocks, estimator)
            for k in ("estimate", "lo", "hi"):
                _put(state.release[estimator][k], rows, out_cols, getattr(ia, k)[:, write])
            # The interval the recommended rule shows: order statistics for the median
            # (coverage on bimodal and quantised runs), Student's for the mean.
            shown = (_intervals([blocks[i] for i in write], estimator, "order")
                     if estimator == "median" else _take(ia, write))
            _put(state.release[estimator]["order_lo"], rows, out_cols, shown.lo)
            _put(state.release[estimator]["order_hi"], rows, out_cols, shown.hi)
            _put(state.n, rows, out_cols, ia.n[:, write])
            if len(pair_idx):
                got = pair_statistics(
                    _take(ia, left), _take(ia, left + 1), CONFIDENCE, direction=DIRECTION,
                    absent=(absent[:, left], absent[:, left + 1]),
                )
                values = {
                    "gap": got.gap, "diff": got.diff, "diff_lo": got.diff_lo,
                    "diff_hi": got.diff_hi, "paper_p": got.paper_p_value,
                    "paper_verdict": got.paper_verdict,
                }
                for k, v in values.items():
                    _put(state.pair[estimator][k], rows, pair_idx, v)
    wanted = np.flatnonzero(boundaries)
    for segment in _segments(cols):
        lo, hi = segment[0], segment[-1]
        ks = wanted[(wanted >= lo) & (wanted < hi)]
        if not len(ks):
            continue
        x = _padded([block(c) for c in segment])
        got_w = window_tests(x, WINDOW, range(int(ks[0]) - lo, int(ks[-1]) - lo + 1))
        span = np.arange(int(ks[0]), int(ks[-1]) + 1)
        pick = np.isin(span, ks)
        _put(state.window["z"], rows, ks, got_w.z[:, pick])
        _put(state.window["p"], rows, ks, got_w.p_value[:, pick])
        _put(state.window["shift"], rows, ks, got_w.shift[:, pick])


def _put(target: np.ndarray, rows: slice, cols: np.ndarray, values: np.ndarray) -> None:
    target[rows, cols] = values


def _copy_base(new: MetricArrays, old: MetricArrays, rows: slice, p: Plan) -> None:
    """Carry over the stored numbers of unchanged columns, pairs and boundaries."""
    same_cols = np.flatnonzero(~p.changed)
    same_pairs = np.flatnonzero(~p.pairs)
    same_bounds = np.flatnonzero(~p.boundaries)
    # An unchanged pair (or boundary) joins two columns that were adjacent in the base.
    cols = _slices(same_cols, p.old_col[same_cols])
    pairs = _slices(same_pairs, p.old_col[same_pairs])
    bounds = _slices(same_bounds, p.old_col[same_bounds])
    for estimator in ESTIMATORS:
        for k in store.RELEASE_FIELDS:
            _copy(new.release[estimator][k], old.release[estimator][k], rows, cols)
        for k in store.PAIR_FIELDS:
            _copy(new.pair[estimator][k], old.pair[estimator][k], rows, pairs)
    _copy(new.n, old.n, rows, cols)
    for k in store.WINDOW_FIELDS:
        _copy(new.window[k], old.window[k], rows, bounds)


def _slices(new_cols: np.ndarray, old_cols: np.ndarray) -> list[tuple[slice, slice]]:
    """Pairs of column slices (new, old) covering ``new_cols`` ← ``old_cols`` (both
    increasing): whole blocks of columns copy far faster than gathers."""
    if not len(new_cols):
        return []
    breaks = np.flatnonzero((np.diff(new_cols) != 1) | (np.diff(old_cols) != 1)) + 1
    starts = np.concatenate([[0], breaks])
    stops = np.concatenate([breaks, [len(new_cols)]])
    return [
        (slice(int(new_cols[a]), int(new_cols[b - 1]) + 1),
         slice(int(old_cols[a]), int(old_cols[b - 1]) + 1))
        for a, b in zip(starts, stops, strict=True)
    ]


def _copy(target: np.ndarray, source: np.ndarray, rows: slice,
          slices: list[tuple[slice, slice]]) -> None:
    for new, old in slices:
        target[rows, new] = source[:, old]


@dataclass(frozen=True)
class Computed:
    """What an analysis stores, with what was recomputed.

    ``function_ids``: the rows, the stored base's first (``base_rows`` of them), then
    functions seen for the first time; a full recompute sorts them.
    """

    columns: Columns
    function_ids: np.ndarray
    metrics: dict[str, MetricArrays]
    global_arrays: dict[str, np.ndarray]
    plan: Plan
    loaded_releases: int
    base_rows: int

    @property
    def rewritten(self) -> list[int]:
        """Columns whose blocks change: changed ones and those whose pair or window
        statistics (stored with the pair's right release) were recomputed."""
        touched = self.plan.changed.copy()
        touched[1:] |= self.plan.pairs | self.plan.boundaries
        return [int(c) for c in np.flatnonzero(touched)]

    @property
    def arrays(self) -> dict[tuple[str, str, str], dict[str, np.ndarray]]:
        """Per (metric, estimator, rule), the arrays pages read (``read_analysis``'s keys),
        rows in ``function_ids`` order."""
        return {
            (metric, estimator, rule): view_arrays(
                self.metrics[metric], self.global_arrays, metric, estimator, rule
            )
            for metric, estimator, rule in product(METRICS, ESTIMATORS, RULES)
        }


def view_arrays(
    state: MetricArrays, global_arrays: dict[str, np.ndarray], metric: str, estimator: str,
    rule: str,
) -> dict[str, np.ndarray]:
    """One (metric, estimator, rule) as ``analysis_store.read_analysis`` assembles it."""
    fields = {k: state.column(estimator, k)[0] for k in store.BLOCK_FIELDS}
    return store.view(fields, global_arrays, metric, estimator, rule, store.view_keys(rule),
                      window=WINDOW)


def _paired(n: np.ndarray) -> np.ndarray:
    return (n[:, :-1] >= MIN_RUNS) & (n[:, 1:] >= MIN_RUNS)


def compute(columns: Columns, stored: Stored | None) -> Computed:
    """The matrices of ``columns``, updating ``stored`` where it allows (see the module)."""
    p = plan(columns, stored)
    R = len(columns.release_ids)  # noqa: N806
    # The segments rule needs every run of the series, on every update.
    loaded = load_columns(columns, range(R))
    if p.full or stored is None:
        function_ids = _union_ids(loaded.values())
        base = 0
    else:
        seen = _union_ids(loaded[c] for c in np.flatnonzero(p.changed))
        function_ids = np.concatenate(
            [stored.function_ids, np.setdiff1d(seen, stored.function_ids)]
        )
        base = len(stored.function_ids)
    F = len(function_ids)  # noqa: N806
    rows_old, rows_new = slice(0, base), slice(base, F)
    scattered = {c: _scatter(function_ids, loaded[c]) for c in range(R)}
    metrics: dict[str, MetricArrays] = {}
    samples: dict[str, np.ndarray] = {}
    for m, metric in enumerate(METRICS):
        state = MetricArrays.empty(F, R, filled=not base)  # an update writes every cell
        if base and stored is not None:
            _copy_base(state, stored.metrics[metric], rows_old, p)
            _recompute(state, rows_old, lambda c, m=m: scattered[c][m][rows_old], p.loaded,
                       p.changed, p.pairs, p.boundaries)
        if F > base:
            # Rows first seen now: their whole rows (0 µs in the runs before they appeared).
            every = np.ones(R, dtype=np.bool_)
            _recompute(state, rows_new, lambda c, m=m: scattered[c][m][rows_new],
                       list(range(R)), every, every[:-1], every[:-1])
        metrics[metric] = state
        samples[metric] = _padded([scattered[c][m] for c in range(R)])
    return Computed(columns, function_ids, metrics, _globals(metrics, samples), p, R, base)


def segment_arrays(state: MetricArrays, samples: np.ndarray) -> dict[str, np.ndarray]:
    """The segments rule of one metric, as stored (``store.SEGMENT_MEMBERS``).

    ``stats.releases.segment_verdicts`` of every run of the series (functions × releases ×
    runs, NaN-padded), then as the other rules: ``appeared`` / ``vanished`` where a
    function is absent from every run of a side (its absent releases, all 0 µs, are left
    out of the segmentation and its tests), no verdict where a side has fewer than
    ``MIN_RUNS`` runs. The minimum practical change is applied by readers, as for every
    rule (``traces.selectors.stored_analysis``).
    """
    got = segment_verdicts(samples, fdr=FDR, min_relative_effect=MIN_RELATIVE_EFFECT,
                           direction=DIRECTION)
    # The paper verdict is appeared / vanished (or no change, absent on both sides) where
    # a side is absent: the same for every rule.
    absent = absent_releases(samples)
    touching = absent[:, :-1] | absent[:, 1:]
    code = np.where(touching, state.pair[ESTIMATORS[0]]["paper_verdict"], got.verdict)
    verdict = np.where(_paired(state.n), code, NO_VERDICT).astype(np.int8)
    at = np.flatnonzero(got.change)
    return {
        "segments.verdict": verdict,
        "segments.at": at.astype(np.int64),
        "segments.p": got.p_value.ravel()[at],
        "segments.shift": got.shift.ravel()[at],
    }


def _globals(metrics: dict[str, MetricArrays], samples: dict[str, np.ndarray]
             ) -> dict[str, np.ndarray]:
    """The global steps: the recommended and segments rules' verdicts, every digression.

    The q-values are not stored: readers compute them from the stored p-values
    (``analysis_store.read_analysis``), the same function of the same numbers.
    """
    out: dict[str, np.ndarray] = {}
    for metric, state in metrics.items():
        paired = _paired(state.n)
        # Only which q-values are <= FDR matters here (readers compute q-values).
        rec_verdict = recommended_verdict_codes(
            benjamini_hochberg_rejections(np.where(paired, state.window["p"], np.nan), FDR),
            np.where(paired, state.window["z"], np.nan),
            np.where(paired, state.window["shift"], np.nan),
            paired, window=WINDOW, min_relative_effect=MIN_RELATIVE_EFFECT,
            direction=DIRECTION,
            # appeared / vanished: the same for every rule and both estimators
            appearance=state.pair[ESTIMATORS[0]]["paper_verdict"],
            adjacent=adjacent_change(state.release["median"]["estimate"]),
        )
        out[store.global_key(metric, "verdict")] = rec_verdict
        segments = segment_arrays(state, samples[metric])
        out |= {store.global_key(metric, k): v for k, v in segments.items()}
        verdicts = {"paper": None, "recommended": rec_verdict,
                    "segments": segments["segments.verdict"]}
        for estimator, rule in product(ESTIMATORS, RULES):
            rel = state.release[estimator]
            verdict = verdicts[rule]
            if verdict is None:
                verdict = state.pair[estimator]["paper_verdict"]
            lo, hi = store.SHOWN_INTERVAL[rule]
            out[store.global_key(metric, f"{estimator}.{rule}.digression")] = (
                digressions(verdict, rel[lo], rel[hi])
            )
    return out


# --- the entry point -------------------------------------------------------------------


def is_up_to_date(series: Series) -> bool:
    latest = Run.objects.filter(series=series, status=Run.DONE).aggregate(t=Max("finished"))["t"]
    seen = SeriesAnalysis.objects.filter(series=series).values_list(
        "snapshot_at", flat=True
    ).first()
    if latest is None:
        return not SeriesAnalysis.objects.filter(series=series).exists()
    return seen is not None and seen >= latest


NEWER = "a newer analysis is stored"


def analyse_series(series_id: int, *, force: bool = False) -> str:
    """(Re)compute and store a series' matrices. Returns what happened, in a few words.

    ``force`` recomputes everything (``analyse --full``); otherwise an analysis that saw
    every finished run is kept, and a stored one is updated where the runs changed.
    """
    series = Series.objects.get(pk=series_id)
    if not force and is_up_to_date(series):
        return "up to date"
    for _ in range(3):
        try:
            return _analyse(series, force)
        except store.BaseChangedError:  # another analysis stored in between: start from it
            _last.pop(series.pk, None)
    return _analyse(series, True)


def _analyse(series: Series, force: bool) -> str:
    snapshot = timezone.now()
    columns = current_columns(series)
    stored = None if force else _read_stored(series)
    if stored is not None and stored.snapshot_at > snapshot:
        return NEWER
    R = len(columns.release_ids)  # noqa: N806
    try:
        if R < 2:
            store.write(series, snapshot, None, None)
            _remember(series.pk, None)
            return "fewer than two releases with two or more done runs: nothing to compare"
        if stored is not None and _unchanged(columns, stored):
            if store.move_snapshot(series, snapshot) == stored.generation:
                stored.snapshot_at = snapshot
                _remember(series.pk, stored)
            return "no new runs since the stored analysis"
        result = compute(columns, stored)
        partial = not result.plan.full and stored is not None
        generation = store.write(series, snapshot, store.Write(
            columns.release_ids, result.function_ids, columns.run_ids, PARAMS, result.metrics,
            result.global_arrays, columns=result.rewritten if partial else None,
            tail_from=result.base_rows,
        ), stored.generation if partial and stored is not None else None)
    except store.NewerStoredError:
        return NEWER
    _remember(series.pk, Stored(generation, columns.release_ids, result.function_ids,
                                columns.run_ids, PARAMS, snapshot, result.metrics))
    done = f"{len(result.function_ids)} functions × {R} releases analysed"
    if result.plan.full:
        return done
    changed = int(result.plan.changed.sum())
    return (
        f"{done} (incremental: {changed} release{'s' * (changed != 1)} changed, "
        f"window tests from {len(result.plan.loaded)}, segments from all "
        f"{result.loaded_releases} loaded, {len(result.rewritten)} rewritten)"
    )


def _unchanged(columns: Columns, stored: Stored) -> bool:
    return np.array_equal(columns.release_ids, stored.release_ids) and all(
        np.array_equal(a, b) for a, b in zip(columns.run_ids, stored.run_ids, strict=True)
    ) and np.array_equal(stored.params, PARAMS)
