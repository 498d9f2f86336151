"""The glue between stored runs and ``deviations.stats``: load, compute, store.

``analyse_series`` keeps, for each metric (self time, total time), estimator (median,
mean) and rule (paper, recommended), the matrices of a series as packed arrays
(``SeriesAnalysis``). Pages and exports only read them.

Which releases are columns: those with at least two done runs (an interval needs two), in
series order; "consecutive" means consecutive among them. A function absent from a run
was not called in it: 0 µs there, not a missing value.

Incremental updates (docs/architecture.md, "Analysis: stored matrices, incremental
updates"). Every stored row records the done runs of each column (``run_ids`` split by
``run_counts``). A new analysis compares them with the database: a column is *changed*
when it is new (a release reached two runs, possibly between two others) or gained runs.
Only what depends on changed columns is recomputed, from the samples of the releases
within ``2 WINDOW - 1`` columns of a change:

- per-release statistics of the changed columns;
- the pairs that touch a changed column (difference interval, gap, paper verdict);
- the recommended rule's window tests (z, p, shift) of the boundaries whose windows hold
  a changed column;
- for functions seen for the first time, their whole rows (their earlier runs are zeros);

then the global steps run again over the stored arrays: Benjamini–Hochberg over every
p-value, the local maximum of |z|, verdicts and digressions. Anything else (a run or a
release gone, releases reordered, other rule parameters, no stored analysis) and
``--full`` recompute everything. Both paths run the same code, and a test checks that they
store the same arrays.

Idempotence: an analysis records the instant of its snapshot. A request is skipped when a
stored analysis already saw every run that finished (``Run.finished``); two analyses
racing on one series serialise on the series row and the older snapshot never overwrites
the newer. An incremental result equals the full recompute of what it read, so which of
two racing analyses wins changes nothing but the snapshot.
"""

from __future__ import annotations

import io
import zipfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from itertools import product
from typing import Any

import numpy as np
import psycopg
from django.db import connection, transaction
from django.db.models import Max, Min, Q, QuerySet
from django.utils import timezone

from deviations.models import Run, RunTimes, Series, SeriesAnalysis
from deviations.stats.compare import (
    IMPROVEMENT,
    REGRESSION,
    digressions,
    pair_statistics,
    recommended_verdicts,
    window_tests,
)
from deviations.stats.intervals import (
    MIN_RUNS,
    IntervalArray,
    mean_ci_array,
    median_ci_array,
)

METRICS = ("self", "total")
ESTIMATORS = ("median", "mean")
RULES = ("paper", "recommended")
PER_RELEASE = ("estimate", "lo", "hi", "n")
PER_PAIR = ("verdict", "gap", "diff", "diff_lo", "diff_hi", "p_value", "q_value", "digression")
RECOMMENDED_ONLY = ("z", "shift")
BOOKKEEPING = ("run_ids", "run_counts", "params")

# The parameters of compare_matrix's defaults (docs/statistics.md says why each value).
CONFIDENCE = 0.95
WINDOW = 3
FDR = 0.05
MIN_RELATIVE_EFFECT = 0.1
PARAMS = np.array([CONFIDENCE, WINDOW, FDR, MIN_RELATIVE_EFFECT], dtype=np.float64)

_PAIR_FIELDS = ("gap", "diff", "diff_lo", "diff_hi", "paper_p", "paper_verdict")
_WINDOW_FIELDS = ("z", "p", "shift")


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


# One loaded column: per run (function ids, self µs, total µs).
Loaded = dict[int, list[tuple[np.ndarray, np.ndarray, np.ndarray]]]


def load_columns(columns: Columns, cols: Iterable[int]) -> Loaded:
    """The packed times of the runs of some columns (only those rows are read)."""
    wanted = {int(c): columns.run_ids[c] for c in cols}
    ids = [int(r) for run_ids in wanted.values() for r in run_ids]
    packed: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
    for start in range(0, len(ids), 500):
        query = RunTimes.objects.filter(run_id__in=ids[start : start + 500])
        for run_id, fids, self_us, total_us in _values(
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
    """(functions × runs) self and total times of one column; absent functions are 0."""
    shape = (len(function_ids), len(runs))
    self_us, total_us = np.zeros(shape), np.zeros(shape)
    if runs:
        fids = np.concatenate([r[0] for r in runs])
        run = np.repeat(np.arange(len(runs)), [len(r[0]) for r in runs])
        rows = np.searchsorted(function_ids, fids)
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


@dataclass(frozen=True)
class SeriesSamples:
    """Run times of the analysable releases: arrays of shape (functions, releases, runs)."""

    release_ids: np.ndarray
    function_ids: np.ndarray
    self_us: np.ndarray
    total_us: np.ndarray

    def metric(self, name: str) -> np.ndarray:
        return self.self_us if name == "self" else self.total_us


def load_samples(series: Series) -> SeriesSamples:
    """The done runs of releases with at least ``MIN_RUNS`` of them, NaN-padded."""
    columns = current_columns(series)
    loaded = load_columns(columns, range(len(columns.release_ids)))
    function_ids = _union_ids(loaded.values())
    blocks = [_scatter(function_ids, loaded[c]) for c in range(len(columns.release_ids))]
    return SeriesSamples(
        columns.release_ids,
        function_ids,
        _padded([b[0] for b in blocks]),
        _padded([b[1] for b in blocks]),
    )


def _union_ids(
    columns: Iterable[list[tuple[np.ndarray, np.ndarray, np.ndarray]]],
    also: np.ndarray | None = None,
) -> np.ndarray:
    parts = [run[0] for runs in columns for run in runs]
    if also is not None:
        parts.append(also)
    return np.unique(np.concatenate(parts)) if parts else np.empty(0, np.int64)


# --- storage ---------------------------------------------------------------------------


def _npz(arrays: dict[str, np.ndarray]) -> bytes:
    """An ``.npz`` with fixed member dates, so equal arrays give equal bytes."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED, allowZip64=True) as zf:
        for key, value in arrays.items():
            info = zipfile.ZipInfo(f"{key}.npy", date_time=(1980, 1, 1, 0, 0, 0))
            with zf.open(info, "w", force_zip64=True) as member:
                np.lib.format.write_array(member, np.ascontiguousarray(value),
                                          allow_pickle=False)
    return buffer.getvalue()


def unpack(
    analysis: SeriesAnalysis, keys: Iterable[str] | None = None
) -> dict[str, np.ndarray]:
    """The stored arrays of an analysis (or only ``keys``), plus ``release_ids`` and
    ``function_ids``."""
    with np.load(io.BytesIO(bytes(analysis.arrays)), allow_pickle=False) as npz:
        wanted = npz.files if keys is None else [k for k in keys if k in npz.files]
        arrays = {key: npz[key] for key in wanted}
    arrays["release_ids"] = np.frombuffer(bytes(analysis.release_ids), dtype="<i8")
    arrays["function_ids"] = np.frombuffer(bytes(analysis.function_ids), dtype="<i8")
    return arrays


@dataclass
class _Metric:
    """Everything stored for one metric, before the global steps.

    ``release[estimator]``: estimate, lo, hi (functions × releases); ``n``; ``pair[estimator]``:
    gap, diff, diff_lo, diff_hi, paper_p, paper_verdict (functions × pairs); ``window``: the
    recommended rule's raw z, p, shift (functions × boundaries).
    """

    release: dict[str, dict[str, np.ndarray]]
    n: np.ndarray
    pair: dict[str, dict[str, np.ndarray]]
    window: dict[str, np.ndarray]

    @classmethod
    def empty(cls, F: int, R: int) -> _Metric:  # noqa: N803 (F, R: the matrix's shape)
        P = max(R - 1, 0)  # noqa: N806

        def nan(cols: int) -> np.ndarray:
            return np.full((F, cols), np.nan)

        return cls(
            release={e: {k: nan(R) for k in ("estimate", "lo", "hi")} for e in ESTIMATORS},
            n=np.zeros((F, R), dtype=np.int64),
            pair={
                e: {k: nan(P) for k in _PAIR_FIELDS[:-1]}
                | {"paper_verdict": np.full((F, P), -1, dtype=np.int8)}
                for e in ESTIMATORS
            },
            window={k: nan(P) for k in _WINDOW_FIELDS},
        )


@dataclass
class _Stored:
    """A stored analysis, as read back: the base of an incremental update."""

    release_ids: np.ndarray
    function_ids: np.ndarray
    run_ids: tuple[np.ndarray, ...]
    params: np.ndarray
    snapshot_at: datetime
    metrics: dict[str, _Metric] = field(default_factory=dict)


_COLUMNS = ("metric", "estimator", "rule", "release_ids", "function_ids", "arrays",
            "snapshot_at")


def _values(query: QuerySet[Any], fields: tuple[str, ...]) -> list[tuple[Any, ...]]:
    """``query.values_list(*fields)``, read with psycopg's binary protocol on PostgreSQL.

    Django's psycopg cursors read bytea as hex text: for the packed arrays that is ~3×
    slower than the binary protocol.
    """
    values = query.values_list(*fields)
    if connection.vendor != "postgresql":
        return list(values)
    sql, params = values.query.sql_with_params()
    connection.ensure_connection()
    with psycopg.Cursor(connection.connection) as cursor:
        cursor.execute(sql, params, binary=True)
        return cursor.fetchall()


def _fetch(series_id: int, kinds: Q) -> list[SeriesAnalysis]:
    """Stored rows of a series (``kinds`` filters them), unsaved, as ``unpack`` takes them."""
    query = SeriesAnalysis.objects.filter(series_id=series_id).filter(kinds)
    return [SeriesAnalysis(series_id=series_id, **dict(zip(_COLUMNS, row, strict=True)))
            for row in _values(query, _COLUMNS)]


def _insert(rows: list[SeriesAnalysis]) -> None:
    """Insert analysis rows: PostgreSQL's binary COPY with lz4 TOAST compression if it can.

    pglz (the default) compresses 150 MB of float arrays at ~15 MB/s; lz4 is ~10× faster
    and still squeezes the NaN-filled arrays.
    """
    if connection.vendor != "postgresql":
        SeriesAnalysis.objects.bulk_create(rows)
        return
    table = connection.ops.quote_name(SeriesAnalysis._meta.db_table)
    with connection.cursor() as django_cursor:
        django_cursor.execute(
            "SELECT 'lz4' = ANY(enumvals) FROM pg_settings "
            "WHERE name = 'default_toast_compression'"
        )
        found = django_cursor.fetchone()
        if found and found[0]:
            django_cursor.execute("SET LOCAL default_toast_compression = 'lz4'")
    names = ", ".join(("series_id",) + _COLUMNS)
    with psycopg.Cursor(connection.connection) as cursor:
        with cursor.copy(f"COPY {table} ({names}) FROM STDIN (FORMAT BINARY)") as copy:
            copy.set_types(["int8", "text", "text", "text", "bytea", "bytea", "bytea",
                            "timestamptz"])
            for r in rows:
                copy.write_row([r.series_id] + [getattr(r, c) for c in _COLUMNS])


def read_analysis(
    series: Series, metric: str, estimator: str, rule: str, keys: Iterable[str] | None = None
) -> dict[str, np.ndarray] | None:
    """The stored matrices of one (metric, estimator, rule), or None: ``unpack`` of its row.

    The fast read for pages: binary protocol on PostgreSQL (~3× faster than the ORM for a
    row of 2,000 functions × 100 releases) and, with ``keys``, only those arrays decoded
    (``release_ids`` and ``function_ids`` always).
    """
    found = _fetch(series.pk, Q(metric=metric, estimator=estimator, rule=rule))
    if not found:
        return None
    return unpack(found[0], keys)


# The last analysis this process stored, by series, with the version of its rows: the next
# update of that series (often in the same worker) need not read ~100 MB back.
_last: dict[int, tuple[tuple[tuple[int, datetime], ...], _Stored]] = {}


def _version(series_id: int) -> tuple[tuple[int, datetime], ...]:
    """Identifies stored rows exactly: ids are never reused, the snapshot only moves on."""
    return tuple(SeriesAnalysis.objects.filter(series_id=series_id)
                 .order_by("id").values_list("id", "snapshot_at"))


def _remember(series_id: int, stored: _Stored | None) -> None:
    _last.clear()
    if stored is not None:
        _last[series_id] = (_version(series_id), stored)


def _read_stored(series: Series) -> _Stored | None:
    """The stored analysis when its rows are complete and consistent, else None."""
    cached = _last.get(series.pk)
    if cached is not None and cached[0] == _version(series.pk):
        return cached[1]
    rows = _fetch(series.pk, Q(rule="paper") | Q(rule="recommended", estimator="median"))
    if len(rows) != len(METRICS) * len(ESTIMATORS) + len(METRICS):
        return None
    first = rows[0]
    if any(
        (r.snapshot_at, bytes(r.release_ids), bytes(r.function_ids))
        != (first.snapshot_at, bytes(first.release_ids), bytes(first.function_ids))
        for r in rows
    ):
        return None
    unpacked = {(r.metric, r.estimator, r.rule): unpack(r) for r in rows}
    some = unpacked[(METRICS[0], ESTIMATORS[0], "paper")]
    if "run_ids" not in some:
        return None  # stored before incremental updates
    stored = _Stored(
        release_ids=some["release_ids"],
        function_ids=some["function_ids"],
        run_ids=tuple(np.split(some["run_ids"], np.cumsum(some["run_counts"])[:-1])),
        params=some["params"],
        snapshot_at=first.snapshot_at,
    )
    for metric in METRICS:
        paper = {e: unpacked[(metric, e, "paper")] for e in ESTIMATORS}
        rec = unpacked[(metric, "median", "recommended")]
        stored.metrics[metric] = _Metric(
            release={e: {k: paper[e][k] for k in ("estimate", "lo", "hi")} for e in ESTIMATORS},
            n=paper[ESTIMATORS[0]]["n"],
            pair={
                e: {k: paper[e][k] for k in ("gap", "diff", "diff_lo", "diff_hi")}
                | {"paper_p": paper[e]["p_value"], "paper_verdict": paper[e]["verdict"]}
                for e in ESTIMATORS
            },
            window={"z": rec["z"], "p": rec["p_value"], "shift": rec["shift"]},
        )
    return stored


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


def plan(columns: Columns, stored: _Stored | None) -> Plan:
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


def _intervals(blocks: list[np.ndarray], estimator: str) -> IntervalArray:
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
    ci = median_ci_array if estimator == "median" else mean_ci_array
    for idx in by_width.values():
        got = ci(np.stack([blocks[c] for c in idx], axis=1), CONFIDENCE)
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
    state: _Metric,
    rows: np.ndarray | slice,
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
        for estimator in ESTIMATORS:
            ia = _intervals(blocks, estimator)
            for k in ("estimate", "lo", "hi"):
                _put(state.release[estimator][k], rows, out_cols, getattr(ia, k)[:, write])
            _put(state.n, rows, out_cols, ia.n[:, write])
            if len(pair_idx):
                got = pair_statistics(_take(ia, left), _take(ia, left + 1), CONFIDENCE)
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


def _put(target: np.ndarray, rows: np.ndarray | slice, cols: np.ndarray, values: np.ndarray
         ) -> None:
    if isinstance(rows, slice):
        target[rows, cols] = values
    else:
        target[np.ix_(rows, cols)] = values


def _copy_base(new: _Metric, old: _Metric, rows: np.ndarray | slice, p: Plan) -> None:
    """Carry over the stored numbers of unchanged columns, pairs and boundaries."""
    same_cols = np.flatnonzero(~p.changed)
    same_pairs = np.flatnonzero(~p.pairs)
    same_bounds = np.flatnonzero(~p.boundaries)
    # An unchanged pair (or boundary) joins two columns that were adjacent in the base.
    for estimator in ESTIMATORS:
        for k in ("estimate", "lo", "hi"):
            _put(new.release[estimator][k], rows, same_cols,
                 old.release[estimator][k][:, p.old_col[same_cols]])
        for k in _PAIR_FIELDS:
            _put(new.pair[estimator][k], rows, same_pairs,
                 old.pair[estimator][k][:, p.old_col[same_pairs]])
    _put(new.n, rows, same_cols, old.n[:, p.old_col[same_cols]])
    for k in _WINDOW_FIELDS:
        _put(new.window[k], rows, same_bounds, old.window[k][:, p.old_col[same_bounds]])


def _fast_digressions(verdict: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """``digressions`` on the rows that can have one: a regression and an improvement."""
    out = np.zeros(verdict.shape, dtype=np.bool_)
    rows = np.flatnonzero(
        np.any(verdict == REGRESSION, axis=1) & np.any(verdict == IMPROVEMENT, axis=1)
    )
    if len(rows):
        out[rows] = digressions(verdict[rows], lo[rows], hi[rows])
    return out


@dataclass(frozen=True)
class Computed:
    """The arrays to store, per (metric, estimator, rule), with what was recomputed."""

    columns: Columns
    function_ids: np.ndarray
    arrays: dict[tuple[str, str, str], dict[str, np.ndarray]]
    plan: Plan
    loaded_releases: int
    metrics: dict[str, _Metric]


def compute(columns: Columns, stored: _Stored | None) -> Computed:
    """The matrices of ``columns``, updating ``stored`` where it allows (see the module)."""
    p = plan(columns, stored)
    R = len(columns.release_ids)  # noqa: N806
    loaded = load_columns(columns, p.loaded)
    if p.full or stored is None:
        function_ids = _union_ids(loaded.values())
        old_rows = np.empty(0, dtype=int)
    else:
        changed_runs = (loaded[c] for c in np.flatnonzero(p.changed))
        function_ids = _union_ids(changed_runs, stored.function_ids)
        old_rows = np.searchsorted(function_ids, stored.function_ids)
    # The usual case, no new function: plain slices instead of gathers and scatters.
    rows_old: np.ndarray | slice = (
        slice(None) if len(old_rows) == len(function_ids) else old_rows
    )
    F = len(function_ids)  # noqa: N806
    new_rows = np.flatnonzero(~np.isin(function_ids, function_ids[old_rows]))
    scattered = {c: _scatter(function_ids, loaded[c]) for c in p.loaded}
    counts = columns.run_counts
    metrics: dict[str, _Metric] = {}
    for m, metric in enumerate(METRICS):
        state = _Metric.empty(F, R)
        if len(old_rows) and stored is not None:
            _copy_base(state, stored.metrics[metric], rows_old, p)
            _recompute(state, rows_old, lambda c, m=m: scattered[c][m][rows_old], p.loaded,
                       p.changed, p.pairs, p.boundaries)
        if len(new_rows):
            # Rows first seen now: their whole rows; 0 µs in every run of unloaded columns.
            every = np.ones(R, dtype=np.bool_)
            rows: np.ndarray | slice = slice(None) if len(new_rows) == F else new_rows

            def block(c: int, m: int = m, rows: np.ndarray | slice = rows) -> np.ndarray:
                if c in scattered:
                    return scattered[c][m][rows]
                return np.zeros((len(new_rows), int(counts[c])))

            _recompute(state, rows, block, list(range(R)), every, every[:-1], every[:-1])
        metrics[metric] = state
    return Computed(
        columns, function_ids, _finish(metrics, columns), p, len(p.loaded), metrics
    )


def _finish(
    metrics: dict[str, _Metric], columns: Columns
) -> dict[tuple[str, str, str], dict[str, np.ndarray]]:
    """The global steps, then the arrays of each stored row."""
    bookkeeping = {
        "run_ids": np.concatenate(columns.run_ids).astype("<i8"),
        "run_counts": columns.run_counts.astype("<i8"),
        "params": PARAMS,
    }
    out: dict[tuple[str, str, str], dict[str, np.ndarray]] = {}
    for metric, state in metrics.items():
        paired = (state.n[:, :-1] >= MIN_RUNS) & (state.n[:, 1:] >= MIN_RUNS)
        p_value = np.where(paired, state.window["p"], np.nan)
        z = np.where(paired, state.window["z"], np.nan)
        shift = np.where(paired, state.window["shift"], np.nan)
        q_value, rec_verdict = recommended_verdicts(
            p_value, z, shift, paired, window=WINDOW, fdr=FDR,
            min_relative_effect=MIN_RELATIVE_EFFECT,
        )
        for estimator, rule in product(ESTIMATORS, RULES):
            rel, pair = state.release[estimator], state.pair[estimator]
            arrays = {
                "estimate": rel["estimate"], "lo": rel["lo"], "hi": rel["hi"], "n": state.n,
                "gap": pair["gap"], "diff": pair["diff"], "diff_lo": pair["diff_lo"],
                "diff_hi": pair["diff_hi"],
            }
            if rule == "paper":
                verdict = pair["paper_verdict"]
                arrays |= {"verdict": verdict, "p_value": pair["paper_p"],
                           "q_value": np.full(verdict.shape, np.nan)}
            else:
                verdict = rec_verdict
                arrays |= {"verdict": verdict, "p_value": p_value, "q_value": q_value,
                           "z": z, "shift": shift}
            arrays["digression"] = _fast_digressions(verdict, rel["lo"], rel["hi"])
            out[(metric, estimator, rule)] = arrays | bookkeeping
    return out


# --- the entry point -------------------------------------------------------------------


def is_up_to_date(series: Series) -> bool:
    latest = Run.objects.filter(series=series, status=Run.DONE).aggregate(t=Max("finished"))["t"]
    seen = SeriesAnalysis.objects.filter(series=series).aggregate(t=Min("snapshot_at"))["t"]
    if latest is None:
        return not SeriesAnalysis.objects.filter(series=series).exists()
    return seen is not None and seen >= latest


def analyse_series(series_id: int, *, force: bool = False) -> str:
    """(Re)compute and store a series' matrices. Returns what happened, in a few words.

    ``force`` recomputes everything (``analyse --full``); otherwise an analysis that saw
    every finished run is kept, and a stored one is updated where the runs changed.
    """
    series = Series.objects.get(pk=series_id)
    if not force and is_up_to_date(series):
        return "up to date"
    snapshot = timezone.now()
    columns = current_columns(series)
    stored = None if force else _read_stored(series)
    if stored is not None and stored.snapshot_at > snapshot:
        return "a newer analysis is stored"
    R = len(columns.release_ids)  # noqa: N806
    if R < 2:
        result = None
    elif stored is not None and _unchanged(columns, stored):
        return _advance(series, snapshot)
    else:
        result = compute(columns, stored)
    rows = []
    if result is not None:
        for (metric, estimator, rule), arrays in result.arrays.items():
            rows.append(SeriesAnalysis(
                series=series, metric=metric, estimator=estimator, rule=rule,
                release_ids=columns.release_ids.astype("<i8").tobytes(),
                function_ids=result.function_ids.astype("<i8").tobytes(),
                arrays=_npz(arrays), snapshot_at=snapshot,
            ))
    with transaction.atomic():
        Series.objects.select_for_update().get(pk=series.pk)
        existing = SeriesAnalysis.objects.filter(series=series)
        newest = existing.aggregate(t=Max("snapshot_at"))["t"]
        if newest is not None and newest > snapshot:
            return "a newer analysis is stored"
        existing.delete()
        _insert(rows)
        if result is None:
            _remember(series.pk, None)
        else:
            _remember(series.pk, _Stored(
                columns.release_ids, result.function_ids, columns.run_ids, PARAMS, snapshot,
                result.metrics,
            ))
    if result is None:
        return "fewer than two releases with two or more done runs: nothing to compare"
    done = f"{len(result.function_ids)} functions × {R} releases analysed"
    if result.plan.full:
        return done
    changed = int(result.plan.changed.sum())
    return (
        f"{done} (incremental: {changed} release{'s' * (changed != 1)} changed, "
        f"samples of {result.loaded_releases} loaded)"
    )


def _unchanged(columns: Columns, stored: _Stored) -> bool:
    return np.array_equal(columns.release_ids, stored.release_ids) and all(
        np.array_equal(a, b) for a, b in zip(columns.run_ids, stored.run_ids, strict=True)
    ) and np.array_equal(stored.params, PARAMS)


def _advance(series: Series, snapshot: datetime) -> str:
    """The stored analysis already covers every done run: only its snapshot moves on."""
    with transaction.atomic():
        Series.objects.select_for_update().get(pk=series.pk)
        existing = SeriesAnalysis.objects.filter(series=series)
        newest = existing.aggregate(t=Max("snapshot_at"))["t"]
        if newest is not None and newest > snapshot:
            return "a newer analysis is stored"
        cached = _last.get(series.pk)
        current = cached is not None and cached[0] == _version(series.pk)
        existing.update(snapshot_at=snapshot)
        if cached is not None and current:
            cached[1].snapshot_at = snapshot
            _remember(series.pk, cached[1])
    return "no new runs since the stored analysis"
