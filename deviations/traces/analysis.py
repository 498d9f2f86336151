"""The glue between stored runs and ``deviations.stats``: load, compute, store.

``analyse_series`` keeps, for each metric (self time, total time), the matrices a series'
pages read: per release and estimator (median, mean) the estimate, its intervals and the
runs; per pair of consecutive releases the paper rule's comparison (per estimator) and
the shift rule's comparison and verdict (``stats.releases.shift_verdicts``);
``traces.store`` holds them as per-release blocks. Pages and exports only read them.

Which releases are columns: every release with at least one done run, in series order
(the shift rule judges one-run releases; the paper rule gives no verdict on a pair with
a one-run side). A function absent from a run was not called in it: 0 µs there, not a
missing value.

Incremental updates (docs/architecture.md, "Analysis: stored matrices, incremental
updates"). Every verdict depends on a bounded window of releases, so a new analysis
compares the stored columns (and their runs) with the database and recomputes only:

- the per-release statistics of the *changed* columns (new, or with new runs);
- the paper rule's pairs that touch a changed column;
- the shift rule's boundaries whose window holds a changed column, whose window is not
  what it was (a provisional boundary's window grows with every release until it is
  final), or that are new;

from the samples of the columns those windows hold, and, for functions seen for the first
time, their rows (0 µs in every earlier run: no database read for those). Only the blocks
of the columns whose numbers changed are rewritten, plus, for new functions, blocks of
their rows in the other columns. Anything else (a run or a release gone, releases
reordered, another version of the parameters, no stored analysis) and ``--full``
recompute and rewrite everything. Both paths run the same code, and a test checks that
they store the same arrays.

Bounded memory (issue 24; docs/architecture.md, "Analysis in chunks of functions"): a
series whose one-piece analysis would hold more than ``DEVIATIONS_ANALYSIS_MEMORY_MB`` is
analysed in chunks of rows (``prepare``, ``run_chunk``, ``finish``), each streaming the runs
for its rows only and writing its blocks under a stage that the last step publishes at
once; in-process one after another, or as a chord of tasks on a worker pool.

Idempotence: an analysis records the instant of its snapshot. A request is skipped when a
stored analysis already saw every run that finished (``Run.finished``); writes serialise
on the series row, the older snapshot never overwrites the newer, and an update is stored
only onto the generation it was computed from (otherwise it starts again from what is
stored). An incremental result equals the full recompute of what it read, so which of two
racing analyses wins changes nothing but the snapshot. In chunks the same holds: a chunk
reads stored rows only of the generation planned, and the last step publishes only onto it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from itertools import product
from typing import Any, Literal

import numpy as np
from django.conf import settings
from django.utils import timezone

from deviations.core.db import batches
from deviations.stats import Direction
from deviations.stats.intervals import IntervalArray, mean_ci_array, median_ci_array
from deviations.stats.releases import (
    absent_releases,
    pair_statistics,
    shift_verdicts,
    shift_windows,
)
from deviations.traces import attempts, store
from deviations.traces.models import Function, Run, RunTimes, Series, SeriesAnalysis
from deviations.traces.store import (
    ESTIMATORS,
    METRICS,
    RULES,
    SHIFT_CHANGE,
    SHIFT_EARLY,
    MetricArrays,
    Stored,
    read_analysis,
)

__all__ = ["ESTIMATORS", "METRICS", "RULES", "analyse_series", "read_analysis"]

#: Level of every interval stored (per release, differences, the shift rule's shift).
CONFIDENCE = 0.95
#: Trace metrics (self and total time) are durations: a larger one is a regression.
DIRECTION: Direction = "lower_is_better"
#: Version of what the stored arrays mean: a stored analysis of another version is
#: recomputed whole (1: before appeared/vanished; 2: before the segments rule; 3: the
#: segments and window rules; 4: the shift rule, one-run releases as columns).
VERDICTS_VERSION = 4
PARAMS = np.array([CONFIDENCE, VERDICTS_VERSION], dtype=np.float64)
#: Runs a release needs to be a column of the analysis.
MIN_COLUMN_RUNS = 1


@dataclass(frozen=True)
class Columns:
    """The analysable releases of a series: ids in series order and their done runs.

    A column's samples are its ``run_ids`` in order. In a metric series a run (one results
    file) holds several replicates of each metric: its id is repeated once per replicate
    (``Run.samples``), the ``j``-th repeat standing for every metric's ``j``-th value, and
    a value a run does not hold is missing (NaN), where a trace's function absent from a
    run took 0 µs (``missing``).
    """

    release_ids: np.ndarray
    run_ids: tuple[np.ndarray, ...]
    missing: float = 0.0

    @property
    def run_counts(self) -> np.ndarray:
        return np.array([len(ids) for ids in self.run_ids], dtype=np.int64)


def current_columns(series: Series) -> Columns:
    """Releases with at least ``MIN_COLUMN_RUNS`` done runs, each with its runs in load order."""
    runs = (
        Run.objects.filter(series=series, status=Run.DONE)
        .order_by("release__sort_key", "release_id", "created", "id")
        .values_list("release_id", "id", "samples")
    )
    metrics = series.is_metrics
    by_release: dict[int, list[int]] = {}
    for release_id, run_id, samples in runs:
        by_release.setdefault(release_id, []).extend([run_id] * (samples if metrics else 1))
    kept = [(rid, ids) for rid, ids in by_release.items() if len(ids) >= MIN_COLUMN_RUNS]
    return Columns(
        np.array([rid for rid, _ in kept], dtype=np.int64),
        tuple(np.array(ids, dtype=np.int64) for _, ids in kept),
        missing=np.nan if metrics else 0.0,
    )


#: Packed runs fetched by one query at most (~48 kB each at 2,000 functions: ~25 MB a
#: query), and the bytes one query may fetch (24 bytes a function of a run): a run of
#: 20,000 functions is ~0.5 MB, and a chunk streams the series' runs 64 at a time.
_RUNS_PER_QUERY = 500
_QUERY_BYTES = 32 * 2**20

# One loaded column: per run (function ids, self µs, total µs).
Loaded = dict[int, list[tuple[np.ndarray, np.ndarray, np.ndarray]]]


def _runs_per_query(functions: int) -> int:
    return max(1, min(_RUNS_PER_QUERY, _QUERY_BYTES // max(24 * functions, 1)))


def _only(keep: np.ndarray | None, fids: np.ndarray) -> np.ndarray | None:
    """Which entries of a run's function ids are in ``keep`` (sorted); None: all."""
    if keep is None:
        return None
    at = np.minimum(np.searchsorted(keep, fids), max(len(keep) - 1, 0))
    return keep[at] == fids if len(keep) else np.zeros(len(fids), dtype=np.bool_)


def load_columns(columns: Columns, cols: Iterable[int], keep: np.ndarray | None = None,
                 functions: int = 2000) -> Loaded:
    """The packed times of the runs of some columns (only those rows are read); with
    ``keep`` (sorted function ids), only the entries of those functions are kept, the
    runs streamed ``_runs_per_query(functions)`` at a time (a chunk of rows)."""
    wanted = {int(c): columns.run_ids[c] for c in cols}
    ids = [int(r) for r in dict.fromkeys(int(r) for run_ids in wanted.values() for r in run_ids)]
    packed: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
    for chunk in batches(ids, _runs_per_query(functions)):
        query = RunTimes.objects.filter(run_id__in=chunk)
        for run_id, fids, self_us, total_us in store.binary_values(
            query, ("run_id", "function_ids", "self_us", "total_us")
        ):
            run = (np.frombuffer(fids, dtype=RunTimes.INT),
                   np.frombuffer(self_us, dtype=RunTimes.FLOAT),
                   np.frombuffer(total_us, dtype=RunTimes.FLOAT))
            mask = _only(keep, run[0])
            packed[run_id] = run if mask is None else (
                run[0][mask], run[1][mask], run[2][mask])
    return {c: store.replicates([packed[int(r)] for r in run_ids], run_ids)
            for c, run_ids in wanted.items()}


def function_union(columns: Columns, cols: Iterable[int], functions: int = 2000
                   ) -> np.ndarray:
    """The sorted function ids of the runs of some columns, streamed (their ids only)."""
    ids = [int(r) for r in dict.fromkeys(
        int(r) for c in cols for r in columns.run_ids[int(c)])]
    seen = np.empty(0, dtype=np.int64)
    for chunk in batches(ids, _runs_per_query(functions // 3 + 1)):
        parts = [np.frombuffer(fids, dtype=RunTimes.INT) for (fids,) in store.binary_values(
            RunTimes.objects.filter(run_id__in=chunk), ("function_ids",))]
        seen = np.union1d(seen, np.concatenate(parts)) if parts else seen
    return seen.astype(np.int64)


def _scatter(
    function_ids: np.ndarray, runs: list[tuple[np.ndarray, np.ndarray, np.ndarray]],
    missing: float = 0.0,
) -> tuple[np.ndarray, np.ndarray]:
    """(functions × runs) self and total times of one column; absent functions are
    ``missing`` (0 µs for traces, NaN for metrics).

    ``function_ids`` need not be sorted (an update appends new functions).
    """
    shape = (len(function_ids), len(runs))
    self_us, total_us = np.full(shape, missing), np.full(shape, missing)
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
# of that series (often in the same worker) need not read it back.
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
    """What an analysis recomputes. ``old_col[c]`` is column ``c``'s index in the base
    (-1: new); ``pairs`` the paper rule's pairs, ``boundaries`` the shift rule's."""

    full: bool
    changed: np.ndarray
    old_col: np.ndarray
    pairs: np.ndarray
    boundaries: np.ndarray
    loaded: list[int]


def _windows(run_counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    win = shift_windows(run_counts)
    return win.start, win.stop


def plan(columns: Columns, stored: store.Head | None) -> Plan:
    """Compare the stored columns (and their runs) with the database's."""
    R = len(columns.release_ids)  # noqa: N806
    B = max(R - 1, 0)  # noqa: N806
    start, stop = _windows(columns.run_counts)
    every = Plan(True, np.ones(R, dtype=np.bool_), np.full(R, -1), np.ones(B, dtype=np.bool_),
                 np.ones(B, dtype=np.bool_), list(range(R)))
    if stored is None or not np.array_equal(stored.params, PARAMS):
        return every
    position = {int(rid): i for i, rid in enumerate(stored.release_ids)}
    old_col = np.array([position.get(int(rid), -1) for rid in columns.release_ids], dtype=int)
    kept = old_col[old_col >= 0]
    if len(kept) != len(stored.release_ids) or np.any(np.diff(kept) <= 0):
        return every  # a column vanished or the order changed
    changed = old_col < 0
    for c in np.flatnonzero(~changed):
        before, now = stored.run_ids[old_col[c]], columns.run_ids[c]
        if np.array_equal(before, now):
            continue
        if not np.isin(before, now).all():
            return every  # a run vanished
        changed[c] = True
    # A pair is kept when both its columns are unchanged and were adjacent in the base.
    same_pair = ~changed[:-1] & ~changed[1:] & (old_col[1:] == old_col[:-1] + 1)
    old_start, old_stop = _windows(np.array([len(r) for r in stored.run_ids], dtype=np.int64))
    boundaries = ~same_pair.copy()
    hit = np.concatenate([[0], np.cumsum(changed)])
    for k in np.flatnonzero(same_pair):
        s, e = int(start[k]), int(stop[k])
        ko = int(old_col[k])
        same_window = (old_col[s] == old_start[ko] and old_col[e] == old_stop[ko]
                       and old_col[e] - old_col[s] == e - s and hit[e + 1] == hit[s])
        boundaries[k] = not same_window
    loaded = np.zeros(R, dtype=np.bool_)
    loaded[changed] = True
    pairs = ~same_pair
    loaded[:-1] |= pairs
    loaded[1:] |= pairs
    for k in np.flatnonzero(boundaries):
        loaded[int(start[k]) : int(stop[k]) + 1] = True
    return Plan(False, changed, old_col, pairs, boundaries,
                [int(c) for c in np.flatnonzero(loaded)])


# --- computing -------------------------------------------------------------------------


def _intervals(blocks: list[np.ndarray], estimator: str, method: str = "olive"
               ) -> IntervalArray:
    """Per-release intervals of (functions × runs) blocks, as (functions, releases).

    Blocks are grouped by run count and never padded, so a release's numbers do not
    depend on which other releases are computed with it (a padded mean would: the
    pairwise summation follows the row length). A one-run release has its run as the
    estimate and no interval.
    """
    F, R = (blocks[0].shape[0] if blocks else 0), len(blocks)  # noqa: N806
    out = {k: np.full((F, R), np.nan) for k in ("estimate", "lo", "hi", "se", "df")}
    n = np.zeros((F, R), dtype=np.int64)
    by_width: dict[int, list[int]] = {}
    for c, block in enumerate(blocks):
        by_width.setdefault(block.shape[1], []).append(c)
    for width, idx in by_width.items():
        x = np.stack([blocks[c] for c in idx], axis=1)
        if width == 1:
            out["estimate"][:, idx] = x[:, :, 0]
            n[:, idx] = 1
            continue
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


def _put(target: np.ndarray, rows: slice, cols: np.ndarray, values: np.ndarray) -> None:
    target[rows, cols] = values


def _release_and_pairs(
    state: MetricArrays, rows: slice, block: Callable[[int], np.ndarray],
    stat_cols: np.ndarray, pairs: np.ndarray,
) -> None:
    """Per-release statistics of the columns ``stat_cols`` marks and the paper rule's pairs
    ``pairs`` marks, for ``rows``; ``block(c)`` is column ``c``'s (rows × runs) samples."""
    pair_idx = np.flatnonzero(pairs)
    out_cols = np.flatnonzero(stat_cols)
    need = sorted(set(out_cols.tolist()) | set(pair_idx.tolist()) | set((pair_idx + 1).tolist()))
    if not need:
        return
    position = {c: i for i, c in enumerate(need)}
    blocks = [block(c) for c in need]
    write = np.array([position[c] for c in out_cols], dtype=int)
    left = np.array([position[int(p)] for p in pair_idx], dtype=int)
    absent = np.stack([absent_releases(b) for b in blocks], axis=1)
    for estimator in ESTIMATORS:
        ia = _intervals(blocks, estimator)
        for k in ("estimate", "lo", "hi"):
            _put(state.release[estimator][k], rows, out_cols, getattr(ia, k)[:, write])
        # The interval the shift rule shows: order statistics for the median (coverage on
        # bimodal and quantised runs), Student's for the mean.
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
            values = {"gap": got.gap, "diff": got.diff, "diff_lo": got.diff_lo,
                      "diff_hi": got.diff_hi, "paper_p": got.paper_p_value,
                      "paper_verdict": got.paper_verdict}
            for k, v in values.items():
                _put(state.pair[estimator][k], rows, pair_idx, v)


def _spans(boundaries: np.ndarray, start: np.ndarray, stop: np.ndarray
           ) -> list[tuple[int, int, list[int]]]:
    """The boundaries marked, grouped into spans of columns whose windows overlap:
    (first column, last column, boundaries)."""
    out: list[tuple[int, int, list[int]]] = []
    for k in np.flatnonzero(boundaries).tolist():
        s, e = int(start[k]), int(stop[k])
        if out and s <= out[-1][1]:
            first, last, ks = out[-1]
            out[-1] = (first, max(last, e), [*ks, k])
        else:
            out.append((s, e, [k]))
    return out


def _shift(state: MetricArrays, rows: slice, block: Callable[[int], np.ndarray],
           boundaries: np.ndarray, run_counts: np.ndarray) -> None:
    """The shift rule's comparison at the boundaries ``boundaries`` marks, for ``rows``."""
    start, stop = _windows(run_counts)
    for first, last, ks in _spans(boundaries, start, stop):
        x = _padded([block(c) for c in range(first, last + 1)])
        got = shift_verdicts(x, runs=run_counts, boundaries=ks, offset=first,
                             confidence=CONFIDENCE, direction=DIRECTION)
        cols = np.array(ks, dtype=int)
        flags = (got.change * SHIFT_CHANGE + got.early * SHIFT_EARLY).astype(np.uint8)
        values = {
            "shift_verdict": got.verdict, "shift_diff": got.diff, "shift_lo": got.diff_lo,
            "shift_hi": got.diff_hi, "shift_p": got.p_value, "shift_before": got.before,
            "shift_reach_before": cols[None, :] - got.first,
            "shift_reach_after": got.last - (cols[None, :] + 1),
            "shift_n_before": got.n_before, "shift_n_after": got.n_after, "shift_flags": flags,
        }
        for k, v in values.items():
            _put(state.shift[k], rows, cols, v)


def _empty_shift(state: MetricArrays, rows: slice, boundaries: np.ndarray,
                 run_counts: np.ndarray) -> None:
    """What :func:`shift_verdicts` gives rows without a run above 0 in the windows of the
    boundaries ``boundaries`` marks (functions first seen later): no verdict."""
    start, stop = _windows(run_counts)
    cols = np.flatnonzero(boundaries)
    for k in store.SHIFT_FIELDS:
        state.shift[k][rows, cols] = store.fill(k)
    state.shift["shift_reach_before"][rows, cols] = cols - start[cols]
    state.shift["shift_reach_after"][rows, cols] = stop[cols] - (cols + 1)


def _copy_base(new: MetricArrays, old: MetricArrays, rows: slice, p: Plan,
               only: np.ndarray | None = None) -> None:
    """Carry over the stored numbers of unchanged columns, pairs and boundaries (with
    ``only``, a mask of columns, those of the columns it marks: the pair and boundary
    ending at a column are stored in its blocks)."""
    keep = np.ones(len(p.changed), dtype=np.bool_) if only is None else only
    same_cols = np.flatnonzero(~p.changed & keep)
    same_pairs = np.flatnonzero(~p.pairs & keep[1:])
    same_bounds = np.flatnonzero(~p.boundaries & keep[1:])
    cols = _slices(same_cols, p.old_col[same_cols])
    pairs = _slices(same_pairs, p.old_col[same_pairs])
    bounds = _slices(same_bounds, p.old_col[same_bounds])
    for estimator in ESTIMATORS:
        for k in store.RELEASE_FIELDS:
            _copy(new.release[estimator][k], old.release[estimator][k], rows, cols)
        for k in store.PAIR_FIELDS:
            _copy(new.pair[estimator][k], old.pair[estimator][k], rows, pairs)
    _copy(new.n, old.n, rows, cols)
    for k in store.SHIFT_FIELDS:
        _copy(new.shift[k], old.shift[k], rows, bounds)


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
    plan: Plan
    base_rows: int

    @property
    def rewritten(self) -> list[int]:
        """Columns whose blocks change: changed ones and those whose pair or boundary
        numbers (stored with the pair's right release) were recomputed."""
        touched = self.plan.changed.copy()
        touched[1:] |= self.plan.pairs | self.plan.boundaries
        return [int(c) for c in np.flatnonzero(touched)]

    @property
    def arrays(self) -> dict[tuple[str, str, str], dict[str, np.ndarray]]:
        """Per (metric, estimator, rule), the arrays pages read (``read_analysis``'s keys),
        rows in ``function_ids`` order."""
        return {
            (metric, estimator, rule): view_arrays(self.metrics[metric], estimator, rule,
                                                   self.columns.run_counts)
            for metric, estimator, rule in product(METRICS, ESTIMATORS, RULES)
        }


def view_arrays(state: MetricArrays, estimator: str, rule: str, run_counts: np.ndarray
                ) -> dict[str, np.ndarray]:
    """One (metric, estimator, rule) as ``store.read_analysis`` assembles it."""
    fields = {k: state.column(estimator if k not in store.SHIFT_FIELDS else ESTIMATORS[0],
                              k)[0] for k in store.BLOCK_FIELDS}
    return store.view(fields, estimator, rule, store.view_keys(rule), run_counts=run_counts)


def compute(columns: Columns, stored: Stored | None) -> Computed:
    """The matrices of ``columns``, updating ``stored`` where it allows (see the module)."""
    p = plan(columns, stored)
    loaded = load_columns(columns, p.loaded)
    if p.full or stored is None:
        function_ids = _union_ids(loaded.values())
        base = 0
    else:
        seen = _union_ids(loaded[c] for c in np.flatnonzero(p.changed))
        function_ids = np.concatenate(
            [stored.function_ids, np.setdiff1d(seen, stored.function_ids)]
        )
        base = len(stored.function_ids)
    old = None if not base or stored is None else stored.metrics
    metrics = _compute_rows(columns, p, function_ids, base, old, loaded)
    return Computed(columns, function_ids, metrics, p, base)


def _compute_rows(
    columns: Columns, p: Plan, function_ids: np.ndarray, base: int,
    stored: dict[str, MetricArrays] | None, loaded: Loaded, *,
    only: np.ndarray | None = None, order: Literal["C", "F"] = "C",
) -> dict[str, MetricArrays]:
    """The arrays of the rows ``function_ids`` (the first ``base`` of them stored:
    ``stored`` holds their stored numbers, the rest are first seen now) from the runs
    ``loaded`` (only those rows). With ``only`` (a mask of columns), the stored numbers are
    carried over into those columns only: a chunk writes no other column of its old rows."""
    R = len(columns.release_ids)  # noqa: N806
    counts = columns.run_counts
    F = len(function_ids)  # noqa: N806
    rows_old, rows_new = slice(0, base), slice(base, F)
    scattered = {c: _scatter(function_ids, runs, columns.missing)
                 for c, runs in loaded.items()}
    every = np.ones(R, dtype=np.bool_)
    metrics: dict[str, MetricArrays] = {}
    for m, metric in enumerate(METRICS):
        # An update writes every cell it stores.
        state = MetricArrays.empty(F, R, filled=not base, order=order)

        def block(c: int, rows: slice, m: int = m) -> np.ndarray:
            if c in scattered:
                return scattered[c][m][rows]
            # Not loaded: only rows first seen now read it, and they were 0 µs there (a
            # trace) or not measured (a metric).
            return np.full((rows.stop - rows.start, int(counts[c])), columns.missing)

        if base and stored is not None:
            _copy_base(state, stored[metric], rows_old, p, only)
            _release_and_pairs(state, rows_old, lambda c: block(c, rows_old), p.changed,
                               p.pairs)
            _shift(state, rows_old, lambda c: block(c, rows_old), p.boundaries, counts)
        if F > base:
            # Rows first seen now: their whole rows (0 µs in the runs before they appeared;
            # no verdict where a window holds none of their runs).
            _release_and_pairs(state, rows_new, lambda c: block(c, rows_new), every,
                               every[:-1])
            _shift(state, rows_new, lambda c: block(c, rows_new), p.boundaries, counts)
            _empty_shift(state, rows_new, ~p.boundaries, counts)
        metrics[metric] = state
    return metrics


# --- chunks of rows (issue 24) ------------------------------------------------------------

#: Bytes a chunk holds per run value of one of its rows (a function in one run): self and
#: total time scattered into (rows × runs) blocks (16), the per-width stacks and sorts of
#: the interval estimators (~2 more copies of one metric), measured with
#: ``tests.benchmarks.analysis_scale`` (docs/deploy.md).
RUN_VALUE_BYTES = 48
#: Bytes a chunk holds per (function, column) cell it computes, both metrics: what a block
#: stores (~230 bytes a metric) and the temporaries of the per-release and pair statistics.
CELL_BYTES = 700
#: Bytes a chunk holds per row whatever it loads: the windows of the boundaries it judges
#: (at most ~17 releases) padded and ranked, the runs' entries copied as they are filtered
#: and scattered. Measured on an update of 20,000 functions × 201 releases × 10 runs
#: (575 MB above the process's own 88 MB, where the two terms above count 214 MB).
ROW_BYTES = 20 * 1024


def memory_budget() -> int:
    """Bytes one analysis may hold for its arrays (``DEVIATIONS_ANALYSIS_MEMORY_MB``)."""
    return int(float(settings.DEVIATIONS_ANALYSIS_MEMORY_MB) * 2**20)


def _rows_per_chunk(cost: int, budget: int) -> int:
    """Rows a chunk of rows costing ``cost`` bytes each takes: a multiple of
    ``store.BLOCK_ROWS`` when it is one or more, so chunks write whole blocks."""
    rows = max(1, budget // max(cost, 1))
    return rows - rows % store.BLOCK_ROWS if rows >= store.BLOCK_ROWS else rows


def chunks(F: int, base: int, old_cost: int, new_cost: int, budget: int  # noqa: N803
           ) -> list[tuple[int, int]]:
    """Row ranges (start, stop) covering ``F`` rows: the ``base`` stored rows costing
    ``old_cost`` bytes each, then the rows first seen now costing ``new_cost``."""
    out: list[tuple[int, int]] = []
    for lo, hi, cost in ((0, base, old_cost), (base, F, new_cost)):
        if hi <= lo:
            continue
        most = _rows_per_chunk(cost, budget)
        # As many chunks as needed, of even sizes (a worker pool finishes them together),
        # whole blocks when chunks are a block or more.
        count = -(-(hi - lo) // most)
        step = -(-(hi - lo) // count)
        if most >= store.BLOCK_ROWS:
            step = min(most, -(-step // store.BLOCK_ROWS) * store.BLOCK_ROWS)
        out += [(a, min(a + step, hi)) for a in range(lo, hi, step)]
    return out


@dataclass(frozen=True)
class Job:
    """An analysis in chunks of rows: what each chunk and the last step need.

    The rows are ``function_ids`` (the stored ones first, ``base_rows`` of them, for an
    update of generation ``base``; None: a full analysis); ``whole`` the columns whose
    blocks are rewritten for every row (the others get blocks of the rows first seen now);
    every block is written under ``stage`` and published together (``store.publish``).
    A JSON form travels in the chunk tasks' messages.
    """

    series_id: int
    stage: int
    snapshot: datetime
    columns: Columns
    plan: Plan
    function_ids: np.ndarray
    base_rows: int
    base: int | None
    stored_release_ids: np.ndarray
    whole: tuple[int, ...]
    chunks: tuple[tuple[int, int], ...]

    def parts(self, lo: int, hi: int) -> list[tuple[list[int], slice]]:
        """The (columns, rows) whose blocks the chunk of rows ``lo .. hi`` writes."""
        whole = list(self.whole)
        others = sorted(set(range(len(self.columns.release_ids))) - set(whole))
        return [(whole, slice(lo, hi)), (others, slice(max(lo, self.base_rows), hi))]

    def expected_blocks(self) -> int:
        per = len(METRICS) * len(ESTIMATORS)
        return per * sum(len(columns) * len(store.splits(rows))
                         for lo, hi in self.chunks for columns, rows in self.parts(lo, hi)
                         if rows.stop > rows.start)

    def to_json(self) -> dict[str, Any]:
        c, p = self.columns, self.plan
        return {
            "series_id": self.series_id, "stage": self.stage,
            "snapshot": self.snapshot.isoformat(),
            "release_ids": c.release_ids.tolist(),
            "run_ids": [r.tolist() for r in c.run_ids],
            "missing": None if np.isnan(c.missing) else c.missing,
            "plan": {"full": p.full, "changed": p.changed.tolist(), "old_col": p.old_col.tolist(),
                     "pairs": p.pairs.tolist(), "boundaries": p.boundaries.tolist(),
                     "loaded": p.loaded},
            "function_ids": self.function_ids.tolist(), "base_rows": self.base_rows,
            "base": self.base, "stored_release_ids": self.stored_release_ids.tolist(),
            "whole": list(self.whole), "chunks": [list(x) for x in self.chunks],
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Job:
        p = d["plan"]
        ints, bools = np.int64, np.bool_
        return cls(
            series_id=d["series_id"], stage=d["stage"],
            snapshot=datetime.fromisoformat(d["snapshot"]),
            columns=Columns(np.array(d["release_ids"], dtype=ints),
                            tuple(np.array(r, dtype=ints) for r in d["run_ids"]),
                            missing=np.nan if d["missing"] is None else float(d["missing"])),
            plan=Plan(p["full"], np.array(p["changed"], dtype=bools),
                      np.array(p["old_col"], dtype=int), np.array(p["pairs"], dtype=bools),
                      np.array(p["boundaries"], dtype=bools), list(p["loaded"])),
            function_ids=np.array(d["function_ids"], dtype=ints), base_rows=d["base_rows"],
            base=d["base"], stored_release_ids=np.array(d["stored_release_ids"], dtype=ints),
            whole=tuple(d["whole"]), chunks=tuple((a, b) for a, b in d["chunks"]),
        )


def _costs(columns: Columns, p: Plan, width: int) -> tuple[int, int]:
    """Bytes per stored row (its loaded runs, ``width`` columns computed) and per row first
    seen now (every run, every column)."""
    counts = columns.run_counts
    loaded = int(counts[p.loaded].sum()) if p.loaded else 0
    R = len(counts)  # noqa: N806
    return (ROW_BYTES + loaded * RUN_VALUE_BYTES + width * CELL_BYTES,
            ROW_BYTES + int(counts.sum()) * RUN_VALUE_BYTES + R * CELL_BYTES)


def _fits_one(series: Series, columns: Columns, head: store.Head | None, p: Plan
              ) -> bool:
    """Whether today's one-piece analysis fits the memory setting: every row at full
    width, and for an update the stored arrays read back beside the new ones. The rows
    are bounded by the series' functions (those of the stored rows and any other)."""
    functions = Function.objects.filter(series=series).count()
    base = 0 if p.full or head is None else len(head.function_ids)
    R = len(columns.release_ids)  # noqa: N806
    old, new = _costs(columns, p, 2 * R)
    return base * old + max(functions - base, 0) * new <= memory_budget()


def prepare(series: Series, columns: Columns, head: store.Head | None, p: Plan,
            snapshot: datetime) -> Job:
    """The chunks of an analysis too large for one piece: its exact rows (the function ids
    of the runs, streamed), the columns rewritten and the row ranges."""
    functions = Function.objects.filter(series=series).count()
    if p.full or head is None:
        function_ids = function_union(columns, range(len(columns.release_ids)), functions)
        base_rows, base, whole = 0, None, list(range(len(columns.release_ids)))
        stored_release_ids = np.empty(0, dtype=np.int64)
    else:
        seen = function_union(columns, np.flatnonzero(p.changed), functions)
        function_ids = np.concatenate(
            [head.function_ids, np.setdiff1d(seen, head.function_ids)])
        base_rows, base = len(head.function_ids), head.generation
        touched = p.changed.copy()
        touched[1:] |= p.pairs | p.boundaries
        whole_set = {int(c) for c in np.flatnonzero(touched)}
        if len(function_ids) > base_rows:
            whole_set |= store.crowded(series, columns.release_ids)
        whole = sorted(whole_set)
        stored_release_ids = head.release_ids
    old, new = _costs(columns, p, len(whole))
    return Job(series.pk, store.new_stage(), snapshot, columns, p, function_ids, base_rows,
               base, stored_release_ids, tuple(whole),
               tuple(chunks(len(function_ids), base_rows, old, new, memory_budget())))


@contextmanager
def _small_pages() -> Iterator[None]:
    """NumPy asks Linux for 2 MB pages for every array of 4 MB or more
    (``madvise(MADV_HUGEPAGE)``): then writing a few columns of a column-major array makes
    2 MB of each of them resident, and an update of 20,000 functions × 201 releases held
    989 MB instead of ~0.2 GB (measured; 735 MB against 99 MB for 92 arrays with 5 columns
    written). The flag is NumPy's own switch, private (``_set_madvise_hugepage``): without
    it, nothing changes but memory."""
    switch = getattr(getattr(np, "_core", None), "multiarray", None)
    toggle = getattr(switch, "_set_madvise_hugepage", None)
    if toggle is None:
        yield
        return
    before = toggle(False)
    try:
        yield
    finally:
        toggle(before)


def run_chunk(job: Job, lo: int, hi: int) -> None:
    """Compute the rows ``lo .. hi`` of ``job`` and write their blocks under its stage.

    Only those rows are held: the runs are streamed keeping their entries, and the stored
    numbers read back are those of the columns rewritten (``store.read_rows``, which raises
    ``BaseChangedError`` when another analysis stored in between)."""
    p, columns = job.plan, job.columns
    function_ids = job.function_ids[lo:hi]
    base = max(0, min(hi, job.base_rows) - lo)
    old = None
    only = np.zeros(len(columns.release_ids), dtype=np.bool_)
    only[list(job.whole)] = True
    # The column before each rewritten one too: its estimate is the paper rule's ``before``
    # of the deviations a block records (``store.deviation_entries``).
    only[[c - 1 for c in job.whole if c > 0]] = True
    with _small_pages():
        if base and job.base is not None:
            wanted = [int(p.old_col[c]) for c in np.flatnonzero(only) if p.old_col[c] >= 0]
            old = store.read_rows(job.series_id, job.base, job.stored_release_ids,
                                  slice(lo, lo + base), wanted)
        loaded = load_columns(columns, p.loaded, np.sort(function_ids), len(job.function_ids))
        metrics = _compute_rows(columns, p, function_ids, base, old, loaded, only=only,
                                order="F" if base else "C")
    del loaded, old
    store.stage_blocks(job.series_id, job.stage, metrics, columns.release_ids,
                       job.parts(lo, hi), first=lo)


def finish(job: Job) -> str:
    """Publish a job's blocks (every chunk has written them): the new analysis becomes
    visible at once. Discards them and re-raises when it may not (``store.publish``)."""
    series = Series.objects.get(pk=job.series_id)
    columns = job.columns
    w = store.Write(columns.release_ids, job.function_ids, columns.run_ids, PARAMS, {},
                    columns=None if job.base is None else list(job.whole),
                    tail_from=job.base_rows)
    try:
        store.publish(series, job.snapshot, w, job.stage, job.expected_blocks(), job.base)
    except BaseException:
        store.discard(job.series_id, job.stage)
        raise
    _remember(job.series_id, None)
    n = len(job.chunks)
    return _said(job.function_ids, columns, job.plan, job.whole) + (
        f" in {n} chunk{'s' * (n != 1)}")


def _said(function_ids: np.ndarray, columns: Columns, p: Plan, rewritten: Sequence[int]) -> str:
    R = len(columns.release_ids)  # noqa: N806
    done = f"{len(function_ids)} functions × {R} releases analysed"
    if p.full:
        return done
    changed = int(p.changed.sum())
    return (
        f"{done} (incremental: {changed} release{'s' * (changed != 1)} changed, "
        f"{int(p.boundaries.sum())} boundaries judged from "
        f"{len(p.loaded)} loaded releases, {len(rewritten)} rewritten)"
    )


# --- the entry point -------------------------------------------------------------------


def is_up_to_date(series: Series) -> bool:
    latest = attempts.runs_until(series.pk)
    seen = SeriesAnalysis.objects.filter(series=series).values_list(
        "snapshot_at", flat=True
    ).first()
    if latest is None:
        return not SeriesAnalysis.objects.filter(series=series).exists()
    return seen is not None and seen >= latest


NEWER = "a newer analysis is stored"
#: What ``analyse_series`` says when it sent the chunks to the workers (the attempt goes on
#: until their last step, ``finish``).
SENT = "sent to the workers in"


def analyse_series(series_id: int, *, force: bool = False,
                   fan_out: Callable[[Job], None] | None = None) -> str:
    """(Re)compute and store a series' matrices. Returns what happened, in a few words.

    ``force`` recomputes everything (``analyse --full``); otherwise an analysis that saw
    every finished run is kept, and a stored one is updated where the runs changed. A
    series too large for ``DEVIATIONS_ANALYSIS_MEMORY_MB`` is analysed in chunks of rows:
    here one after another, or, with ``fan_out`` (the task on a worker pool), handed to it
    (a chord whose last step calls :func:`finish`); the attempt is then still running.
    """
    series = Series.objects.get(pk=series_id)
    if not force and is_up_to_date(series):
        return "up to date"
    # The attempt is recorded on the series (traces.attempts): the sweeper neither sends a
    # second one beside it nor, if it never ends, one for the same runs again.
    attempts.begin(series.pk, attempts.runs_until(series.pk))
    try:
        for _ in range(3):
            try:
                done = _analyse(series, force, fan_out)
                break
            except store.BaseChangedError:  # another analysis stored in between: again
                _last.pop(series.pk, None)
        else:
            done = _analyse(series, True, fan_out)
    except BaseException:
        attempts.end(series.pk)  # an error: the caller says what it was (tasks: fail)
        raise
    if not done.startswith(SENT):
        attempts.finish(series.pk)
    return done


def _read_head(series: Series) -> store.Head | None:
    cached = _last.get(series.pk)
    if cached is not None and cached.generation == store.generation(series.pk):
        return cached
    return store.read_head(series.pk)


def _analyse(series: Series, force: bool, fan_out: Callable[[Job], None] | None = None) -> str:
    snapshot = timezone.now()
    columns = current_columns(series)
    head = None if force else _read_head(series)
    if head is not None and head.snapshot_at > snapshot:
        return NEWER
    R = len(columns.release_ids)  # noqa: N806
    try:
        if R < 2:
            store.write(series, snapshot, None, None)
            _remember(series.pk, None)
            return "fewer than two releases with a done run: nothing to compare"
        if head is not None and _unchanged(columns, head):
            if store.move_snapshot(series, snapshot) == head.generation:
                head.snapshot_at = snapshot
                if isinstance(head, Stored):
                    _remember(series.pk, head)
            return "no new runs since the stored analysis"
        p = plan(columns, head)
        if not _fits_one(series, columns, head, p):
            # Even one chunk: it holds its rows' numbers in the columns it rewrites only.
            return _in_chunks(prepare(series, columns, head, p, snapshot), fan_out)
        # In one piece, as before chunks: the whole stored analysis is the base (a newer
        # one stored since the head was read makes the write refuse it: BaseChangedError).
        stored = None if force or head is None else _read_stored(series)
        result = compute(columns, stored)
        partial = not result.plan.full and stored is not None
        generation = store.write(series, snapshot, store.Write(
            columns.release_ids, result.function_ids, columns.run_ids, PARAMS, result.metrics,
            columns=result.rewritten if partial else None, tail_from=result.base_rows,
        ), stored.generation if partial and stored is not None else None)
    except store.NewerStoredError:
        return NEWER
    _remember(series.pk, Stored(generation, columns.release_ids, result.function_ids,
                                columns.run_ids, PARAMS, snapshot, result.metrics))
    return _said(result.function_ids, columns, result.plan, result.rewritten)


def _in_chunks(job: Job, fan_out: Callable[[Job], None] | None) -> str:
    """Hand the chunks to the workers, or run them here one after another."""
    if fan_out is not None and len(job.chunks) > 1:
        fan_out(job)
        return f"{SENT} {len(job.chunks)} chunks"
    try:
        for lo, hi in job.chunks:
            run_chunk(job, lo, hi)
    except BaseException:
        store.discard(job.series_id, job.stage)
        raise
    return finish(job)


def _unchanged(columns: Columns, stored: store.Head) -> bool:
    return np.array_equal(columns.release_ids, stored.release_ids) and all(
        np.array_equal(a, b) for a, b in zip(columns.run_ids, stored.run_ids, strict=True)
    ) and np.array_equal(stored.params, PARAMS)
