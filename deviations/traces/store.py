"""Storage of a series' analysis: one summary row and per-release blocks.

``deviations.analysis`` computes; this module moves its arrays in and out of the database
(layout in ``SeriesAnalysis`` and ``AnalysisBlock``, reasons in docs/architecture.md,
"Analysis: stored matrices, incremental updates"):

- ``write`` stores a whole analysis, or only the blocks an update rewrote plus the summary
  row, in one transaction under the series row lock;
- ``read_state`` reads everything back as the base of an incremental update;
- ``read_analysis`` assembles what a page shows for one (metric, estimator, rule), reading
  only the fields it asks for.

On PostgreSQL, rows go in with binary ``COPY`` and lz4 TOAST compression and come out
with psycopg's binary protocol (Django's cursors read bytea as hex text: ~3× slower).
"""

from __future__ import annotations

import functools
import itertools
import secrets
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

import numpy as np
import psycopg
from django.core.exceptions import EmptyResultSet
from django.db import connection, models, transaction
from django.db.models import BinaryField, Count, F, Q, QuerySet, Value
from django.db.models.functions import Greatest, Least, Substr

from deviations.core.db import lz4_toast
from deviations.stats.releases import (
    IMPROVEMENT,
    REGRESSION,
    RULE_NAMES,
    digressions,
    get_rule,
    interval_gap,
    level_digressions,
)
from deviations.stats.releases import RULES as RULES_BY_NAME
from deviations.traces.models import AnalysisBlock, Series, SeriesAnalysis

METRICS = ("self", "total")
ESTIMATORS = ("median", "mean")
RULES = RULE_NAMES

# Fields of a block and their dtypes. Per release: the estimator's interval and n; per
# pair (the pair ending at the block's release): the difference of the two releases'
# estimates, the paper rule's verdict and p-value; per boundary (the same pair), the shift
# rule's comparison, which does not depend on the estimator (stored in the median blocks).
RELEASE_FIELDS = ("estimate", "lo", "hi", "order_lo", "order_hi")
#: The release interval each rule shows (and tests the paper rule's digressions with):
#: Olive's for the paper rule (seed 003), the order-statistic interval for the shift rule.
SHOWN_INTERVAL = {name: (("lo", "hi") if rule.interval == "olive" else ("order_lo", "order_hi"))
                  for name, rule in RULES_BY_NAME.items()}
PAIR_FIELDS = ("gap", "diff", "diff_lo", "diff_hi", "paper_p", "paper_verdict")
#: The shift rule's comparison at each boundary (``stats.releases.shift_verdicts``):
#: verdict before the minimum practical change, Hodges–Lehmann shift and interval,
#: p-value, median before, how far the two sides reach (releases before the boundary's
#: earlier release, after its later one), runs on each side, and flags (1: a change of
#: level, 4: early; 2 is unused).
SHIFT_FIELDS = ("shift_verdict", "shift_diff", "shift_lo", "shift_hi", "shift_p",
                "shift_before", "shift_reach_before", "shift_reach_after", "shift_n_before",
                "shift_n_after", "shift_flags")
SHIFT_CHANGE, SHIFT_EARLY = 1, 4
BLOCK_FIELDS = (*RELEASE_FIELDS, "n", *PAIR_FIELDS, *SHIFT_FIELDS)
DTYPES = {name: np.dtype("<f8") for name in BLOCK_FIELDS} | {
    "n": np.dtype("<i8"), "paper_verdict": np.dtype("i1"), "shift_verdict": np.dtype("i1"),
    "shift_reach_before": np.dtype("<i4"), "shift_reach_after": np.dtype("<i4"),
    "shift_n_before": np.dtype("<i4"), "shift_n_after": np.dtype("<i4"),
    "shift_flags": np.dtype("u1"),
}
_FILL = {"paper_verdict": -1, "shift_verdict": -1, "n": 0, "shift_reach_before": 0,
         "shift_reach_after": 0, "shift_n_before": 0, "shift_n_after": 0, "shift_flags": 0}
#: The most rows (functions) one ``AnalysisBlock`` row holds: a release's column of a large
#: series is stored as several blocks (``row_start``, ``rows``), so a page that shows a few
#: functions reads a few small blocks, and an analysis in chunks of functions writes its own.
#: Readers assemble any split (``_assemble``); writers split by it (issue 24).
BLOCK_ROWS = 1024
#: Per block, per rule, the cells of the pair ending at its release whose stored verdict is
#: a regression or an improvement (``AnalysisBlock.paper_deviations``,
#: ``shift_deviations``): the row in the block, the verdict, and the rule's ``diff`` and
#: ``before`` (what the minimum practical change and ``relative`` are computed from, exactly
#: as ``view`` does). The matrix ranks and filters a window's functions by these alone
#: (``read_deviations``): every other cell has no deviation whatever the practical change.
DEVIATION = np.dtype([("row", "<i4"), ("verdict", "i1"), ("diff", "<f8"), ("before", "<f8")])
DEVIATION_FIELDS = ("paper_deviations", "shift_deviations")
#: The block fields the matrix's default view reads (the shift rule with the median: the
#: fields ``_sources("median", "shifts", ...)`` gives for the matrix's keys), copied row-major
#: into each median block's ``AnalysisBlock.records`` (migration 0035): one packed record of
#: 82 bytes a row, so that the matrix's 100 shown rows read one ``substring`` per row and
#: block (uncompressed, ``STORAGE EXTERNAL``: one TOAST chunk) instead of every block's 13
#: column-major fields (docs/architecture.md, "Since the deviation records"). Per-pair fields
#: of a series' first column hold their fill values.
RECORD_FIELDS = ("n", "estimate", "order_lo", "order_hi", "shift_verdict", "shift_diff",
                 "shift_lo", "shift_hi", "shift_p", "shift_before", "shift_flags",
                 "shift_n_before", "shift_n_after")
RECORD = np.dtype([(name, DTYPES[name]) for name in RECORD_FIELDS])  # packed
#: Whether readers use the records (a switch for the tests and the benchmark, which compare
#: them with the column-major read).
USE_RECORDS = True
_BLOCK_COLUMNS = ("series_id", "release_id", "metric", "estimator", "row_start", "rows",
                  "stage", *BLOCK_FIELDS, *DEVIATION_FIELDS, "records")
_SUMMARY_COLUMNS = ("series_id", "generation", "release_ids", "function_ids", "run_ids",
                    "run_counts", "params", "snapshot_at")


def per_pair(field: str) -> bool:
    """Whether a block field belongs to the pair ending at the block's release."""
    return field in PAIR_FIELDS or field in SHIFT_FIELDS


def fill(field: str) -> float:
    """The value of a field where nothing was computed."""
    return float(_FILL.get(field, np.nan))


def records(values: Mapping[str, np.ndarray | None], rows: int) -> bytes:
    """The :data:`RECORD` of ``rows`` rows from each field's values (None: its fill value,
    e.g. a per-pair field of the first column): ``AnalysisBlock.records``."""
    out = np.empty(rows, dtype=RECORD)
    for name in RECORD_FIELDS:
        got = values.get(name)
        out[name] = fill(name) if got is None else got
    return out.tobytes()


@dataclass
class MetricArrays:
    """Everything stored per block for one metric, as whole (functions × columns) arrays.

    ``release[estimator]``: estimate, lo, hi, order_lo, order_hi (functions × releases);
    ``n``; ``pair[estimator]``: gap, diff, diff_lo, diff_hi, paper_p, paper_verdict
    (functions × pairs); ``shift``: the shift rule's comparison at each boundary
    (:data:`SHIFT_FIELDS`, functions × boundaries).
    """

    release: dict[str, dict[str, np.ndarray]]
    n: np.ndarray
    pair: dict[str, dict[str, np.ndarray]]
    shift: dict[str, np.ndarray]

    @classmethod
    def empty(cls, F: int, R: int, *, filled: bool = True,  # noqa: N803
              order: Literal["C", "F"] = "C") -> MetricArrays:
        """Arrays for an F × R matrix: their fill values (NaN, n 0, verdicts -1), or
        uninitialised when the caller writes every cell (``filled=False``: an update, whose
        equality with a full recompute the tests check, so an unwritten cell could not go
        unnoticed). ``order="F"`` (column-major): a chunk of an update writes a few columns,
        and the pages of the others are never touched (no memory)."""
        P = max(R - 1, 0)  # noqa: N806

        def make(field: str, cols: int) -> np.ndarray:
            dtype = DTYPES[field].newbyteorder("=")
            if filled:
                return np.full((F, cols), fill(field), dtype=dtype, order=order)
            return np.empty((F, cols), dtype=dtype, order=order)

        return cls(
            release={e: {k: make(k, R) for k in RELEASE_FIELDS} for e in ESTIMATORS},
            n=make("n", R),
            pair={e: {k: make(k, P) for k in PAIR_FIELDS} for e in ESTIMATORS},
            shift={k: make(k, P) for k in SHIFT_FIELDS},
        )

    def column(self, estimator: str, field: str) -> tuple[np.ndarray, int]:
        """The array holding ``field`` of ``estimator``, and its column offset: per-pair
        arrays hold the pair ending at column ``c`` in column ``c - 1``."""
        if field in RELEASE_FIELDS:
            return self.release[estimator][field], 0
        if field == "n":
            return self.n, 0
        if field in PAIR_FIELDS:
            return self.pair[estimator][field], 1
        return self.shift[field], 1


@dataclass
class Head:
    """The summary row of a stored analysis (what a plan compares with the database)."""

    generation: int
    release_ids: np.ndarray
    function_ids: np.ndarray
    run_ids: tuple[np.ndarray, ...]
    params: np.ndarray
    snapshot_at: datetime


@dataclass
class Stored(Head):
    """A stored analysis, as read back: the base of an incremental update (its summary row
    and every block)."""

    metrics: dict[str, MetricArrays]


@dataclass(frozen=True)
class Write:
    """What to store: the whole analysis (``columns`` None) or part of it.

    ``columns``: the columns whose blocks are rewritten whole; ``tail_from``: with a base,
    the first row not in it (new functions), written as extra blocks of the other columns.
    """

    release_ids: np.ndarray
    function_ids: np.ndarray
    run_ids: tuple[np.ndarray, ...]
    params: np.ndarray
    metrics: dict[str, MetricArrays]
    columns: Sequence[int] | None = None
    tail_from: int = 0


class BaseChangedError(Exception):
    """The stored analysis is not the one an update was computed from."""


class NewerStoredError(Exception):
    """A newer analysis is stored than the one being written."""


# --- encoding -------------------------------------------------------------------------


def _ints(data: Any) -> np.ndarray:
    return np.frombuffer(bytes(data), dtype="<i8")


# --- database helpers -----------------------------------------------------------------


def binary_values(query: QuerySet[Any], fields: Sequence[str]) -> list[tuple[Any, ...]]:
    """``query.values_list(*fields)``, read with psycopg's binary protocol on PostgreSQL."""
    values = query.values_list(*fields)
    if connection.vendor != "postgresql":
        return list(values)
    try:
        sql, params = values.query.sql_with_params()
    except EmptyResultSet:  # e.g. ``id__in=[]``: Django answers [] without a query
        return []
    connection.ensure_connection()
    with psycopg.Cursor(connection.connection) as cursor:
        cursor.execute(sql, params, binary=True)
        return cursor.fetchall()


_PG_TYPES = {"series_id": "int8", "release_id": "int8", "metric": "text", "estimator": "text",
             "row_start": "int4", "rows": "int4", "generation": "int8", "stage": "int8",
             "snapshot_at": "timestamptz"}


def _copy(model: type[Any], columns: Sequence[str], rows: Iterable[list[Any]]) -> None:
    """Insert rows: PostgreSQL's binary COPY with lz4 TOAST compression if it can.

    pglz (the default) compresses float arrays at ~15 MB/s; lz4 is ~10× faster.
    """
    if connection.vendor != "postgresql":
        model.objects.bulk_create(
            [model(**dict(zip(columns, row, strict=True))) for row in rows], batch_size=200
        )
        return
    table = connection.ops.quote_name(model._meta.db_table)
    lz4_toast()
    names = ", ".join(connection.ops.quote_name(c) for c in columns)
    with psycopg.Cursor(connection.connection) as cursor:
        with cursor.copy(f"COPY {table} ({names}) FROM STDIN (FORMAT BINARY)") as copy:
            copy.set_types([_PG_TYPES.get(c, "bytea") for c in columns])
            for row in rows:
                copy.write_row(row)


# --- writing --------------------------------------------------------------------------


def splits(rows: slice) -> list[slice]:
    """``rows`` cut at every multiple of :data:`BLOCK_ROWS`: the row ranges of its blocks."""
    out, start = [], rows.start or 0
    while start < rows.stop:
        stop = min(rows.stop, (start // BLOCK_ROWS + 1) * BLOCK_ROWS)
        out.append(slice(start, stop))
        start = stop
    return out


def _blocks(
    series_id: int, metrics: Mapping[str, MetricArrays], release_ids: np.ndarray,
    columns: Iterable[int], rows: slice, *, first: int = 0, stage: int = 0,
) -> Iterator[list[Any]]:
    """Block rows of ``columns`` for matrix rows ``rows`` (split by :func:`splits`), every
    metric and estimator; the arrays hold the matrix rows from ``first`` on."""
    columns = list(columns)
    for metric, state in metrics.items():
        for estimator in ESTIMATORS:
            for c in columns:
                for part in splits(rows):
                    start, stop = part.start, part.stop
                    row: list[Any] = [series_id, int(release_ids[c]), metric, estimator, start,
                                      stop - start, stage]
                    for field in BLOCK_FIELDS:
                        array, offset = state.column(estimator, field)
                        # The shift rule does not depend on the estimator: median blocks only.
                        if c - offset < 0 or (field in SHIFT_FIELDS
                                              and estimator != ESTIMATORS[0]):
                            row.append(b"")
                        else:
                            values = array[start - first : stop - first, c - offset]
                            row.append(np.ascontiguousarray(values, DTYPES[field]).tobytes())
                    row += _deviation_entries(state, estimator, c, slice(start - first,
                                                                         stop - first))
                    row.append(_records(state, c, slice(start - first, stop - first))
                               if estimator == ESTIMATORS[0] else None)
                    yield row


def _records(state: MetricArrays, c: int, rows: slice) -> bytes:
    """``AnalysisBlock.records`` of column ``c``'s median block of ``rows`` (of the
    arrays)."""
    values: dict[str, np.ndarray | None] = {}
    for name in RECORD_FIELDS:
        array, offset = state.column(ESTIMATORS[0], name)
        values[name] = None if c - offset < 0 else array[rows, c - offset]
    return records(values, rows.stop - rows.start)


def deviation_entries(verdict: np.ndarray, diff: np.ndarray, before: np.ndarray) -> bytes:
    """The :data:`DEVIATION` records of one block's pair: the rows (of the block) whose
    stored ``verdict`` is a regression or an improvement, with their ``diff`` and
    ``before``."""
    rows = np.flatnonzero((verdict == REGRESSION) | (verdict == IMPROVEMENT))
    out = np.empty(len(rows), dtype=DEVIATION)
    out["row"], out["verdict"] = rows, verdict[rows]
    out["diff"], out["before"] = diff[rows], before[rows]
    return out.tobytes()


def _deviation_entries(state: MetricArrays, estimator: str, c: int, rows: slice) -> list[bytes]:
    """The ``paper_deviations`` and ``shift_deviations`` of column ``c``'s block of
    ``rows`` (of the arrays): what ``view`` makes the paper rule's and the shift rule's
    verdict, diff and before of (the paper rule's ``before`` is the previous release's
    estimate; the shift rule's in the median blocks only)."""
    if c == 0:
        return [b"", b""]
    p = c - 1
    paper = deviation_entries(state.pair[estimator]["paper_verdict"][rows, p],
                              state.pair[estimator]["diff"][rows, p],
                              state.release[estimator]["estimate"][rows, p])
    if estimator != ESTIMATORS[0]:
        return [paper, b""]
    shift = deviation_entries(state.shift["shift_verdict"][rows, p],
                              state.shift["shift_diff"][rows, p],
                              state.shift["shift_before"][rows, p])
    return [paper, shift]


def _lock_and_check(series: Series, snapshot: datetime, base: int | None) -> None:
    """In a transaction: lock the series row (writes of its analysis serialise on it) and
    refuse a write older than the stored analysis (:class:`NewerStoredError`) or, when
    ``base`` is given, computed from another generation than the stored one
    (:class:`BaseChangedError`)."""
    Series.objects.select_for_update().get(pk=series.pk)
    head = SeriesAnalysis.objects.filter(series=series).values_list(
        "generation", "snapshot_at"
    ).first()
    if head is not None and head[1] > snapshot:
        raise NewerStoredError
    if base is not None and (head is None or head[0] != base):
        raise BaseChangedError


def write(series: Series, snapshot: datetime, w: Write | None, base: int | None) -> int:
    """Store ``w`` (or delete the analysis when ``w`` is None) as of ``snapshot``.

    Returns the new generation (0 when deleted). Raises :class:`NewerStoredError` when the
    stored analysis has a later snapshot, :class:`BaseChangedError` when ``base`` (the
    generation a partial write was computed from) is no longer the stored one.
    """
    with transaction.atomic():
        partial = w is not None and w.columns is not None
        _lock_and_check(series, snapshot, base if partial else None)
        blocks = AnalysisBlock.objects.filter(series=series, stage=0)
        SeriesAnalysis.objects.filter(series=series).delete()
        if w is None:
            blocks.delete()
            return 0
        F = len(w.function_ids)  # noqa: N806
        every = range(len(w.release_ids))
        if w.columns is None:
            blocks.delete()
            rows = _blocks(series.pk, w.metrics, w.release_ids, every, slice(0, F))
        else:
            whole = set(w.columns)
            if w.tail_from < F:
                # New functions: the other columns get a block of their rows, unless they
                # have too many blocks already; those are rewritten whole (compacted).
                whole |= crowded(series, w.release_ids)
            blocks.filter(release_id__in=[int(w.release_ids[c]) for c in whole]).delete()
            rows = _blocks(series.pk, w.metrics, w.release_ids, sorted(whole), slice(0, F))
            if w.tail_from < F:
                others = sorted(set(every) - whole)
                rows = itertools.chain(rows, _blocks(series.pk, w.metrics, w.release_ids,
                                                     others, slice(w.tail_from, F)))
        _copy(AnalysisBlock, _BLOCK_COLUMNS, rows)
        return _write_summary(series, snapshot, w)


def _write_summary(series: Series, snapshot: datetime, w: Write) -> int:
    generation = secrets.randbits(62)
    _copy(SeriesAnalysis, _SUMMARY_COLUMNS, [[
        series.pk, generation,
        w.release_ids.astype("<i8").tobytes(), w.function_ids.astype("<i8").tobytes(),
        np.concatenate(w.run_ids).astype("<i8").tobytes(),
        np.array([len(r) for r in w.run_ids], dtype="<i8").tobytes(),
        w.params.astype("<f8").tobytes(), snapshot,
    ]])
    return generation


# --- an analysis in chunks of rows (issue 24) -------------------------------------------

#: Seconds after which staged blocks nobody published (a chunk task that failed, a chord
#: that never finished) are deleted by the next publication of any series.
STAGED_LIFETIME = 24 * 3600
_TOKEN_BITS = 22


def new_stage() -> int:
    """A stage token for the blocks of one chunked analysis: its start (seconds) and
    random bits, so that stale stages can be found by age."""
    return (int(time.time()) << _TOKEN_BITS) | secrets.randbits(_TOKEN_BITS)


def stage_blocks(series_id: int, stage: int, metrics: Mapping[str, MetricArrays],
                 release_ids: np.ndarray, parts: Iterable[tuple[Sequence[int], slice]],
                 first: int) -> None:
    """Write, under ``stage`` (invisible to readers), the blocks of each (columns, rows)
    of ``parts``; the arrays hold the matrix rows from ``first`` on."""
    rows = itertools.chain.from_iterable(
        _blocks(series_id, metrics, release_ids, columns, part, first=first, stage=stage)
        for columns, part in parts if len(columns) and part.stop > part.start
    )
    with transaction.atomic():
        _copy(AnalysisBlock, _BLOCK_COLUMNS, rows)


def discard(series_id: int, stage: int) -> None:
    """Delete the blocks of a stage that will not be published."""
    AnalysisBlock.objects.filter(series_id=series_id, stage=stage).delete()


class IncompleteStageError(Exception):
    """A chunked analysis is missing blocks (a chunk failed or stopped)."""


def publish(series: Series, snapshot: datetime, w: Write, stage: int, expected: int,
            base: int | None) -> int:
    """Make the blocks of ``stage`` the stored analysis, with ``w``'s summary (its
    ``metrics`` are not read), in one transaction under the series row lock: readers see
    the old analysis or the new one, never a mix.

    ``w.columns`` None: the stage holds every block (a full analysis), the old blocks go;
    otherwise only the old blocks of ``w.columns`` are replaced (the stage also holds new
    functions' rows of the others). ``expected``: the blocks the stage must hold. Raises
    :class:`NewerStoredError`, :class:`BaseChangedError` (``base`` is not the stored
    generation) and :class:`IncompleteStageError`; the caller discards the stage then.
    Returns the new generation.
    """
    with transaction.atomic():
        _lock_and_check(series, snapshot, base)
        staged = AnalysisBlock.objects.filter(series=series, stage=stage)
        found = staged.count()
        if found != expected:
            raise IncompleteStageError(f"{found} of {expected} blocks were written")
        old = AnalysisBlock.objects.filter(series=series, stage=0)
        if w.columns is not None:
            old = old.filter(release_id__in=[int(w.release_ids[c]) for c in w.columns])
        old.delete()
        staged.update(stage=0)
        stale = (int(time.time()) - STAGED_LIFETIME) << _TOKEN_BITS
        AnalysisBlock.objects.filter(stage__gt=0, stage__lt=stale).delete()
        SeriesAnalysis.objects.filter(series=series).delete()
        return _write_summary(series, snapshot, w)


def read_head(series_id: int) -> Head | None:
    head = binary_values(
        SeriesAnalysis.objects.filter(series_id=series_id),
        ("generation", "release_ids", "function_ids", "run_ids", "run_counts", "params",
         "snapshot_at"),
    )
    if not head:
        return None
    gen, release_ids, function_ids, run_ids, run_counts, params, snapshot = head[0]
    counts = _ints(run_counts)
    return Head(gen, _ints(release_ids), _ints(function_ids),
                tuple(np.split(_ints(run_ids), np.cumsum(counts)[:-1])),
                np.frombuffer(bytes(params), dtype="<f8"), snapshot)


def read_rows(series_id: int, base: int, stored_release_ids: np.ndarray, rows: slice,
              columns: Iterable[int]) -> dict[str, MetricArrays]:
    """The stored numbers of matrix rows ``rows`` in the stored columns ``columns`` only
    (the other columns of the arrays are left uninitialised and, column-major, take no
    memory until written). Raises :class:`BaseChangedError` when the stored analysis is
    not generation ``base`` (with columns ``stored_release_ids``) any more."""
    F, R = rows.stop - rows.start, len(stored_release_ids)  # noqa: N806
    wanted = sorted({int(c) for c in columns})
    release_ids = [int(stored_release_ids[c]) for c in wanted]
    metrics = {}
    for metric in METRICS:
        state = MetricArrays.empty(F, R, filled=False, order="F")
        for estimator in ESTIMATORS:
            fields = BLOCK_FIELDS if estimator == ESTIMATORS[0] else (
                *RELEASE_FIELDS, *PAIR_FIELDS)
            found = binary_values(
                AnalysisBlock.objects.filter(
                    series_id=series_id, metric=metric, estimator=estimator, stage=0,
                    release_id__in=release_ids, row_start__lt=rows.stop,
                ).annotate(end=models.F("row_start") + models.F("rows")).filter(
                    end__gt=rows.start),
                ("release_id", "row_start", "rows", *fields),
            )
            column = {rid: c for c, rid in zip(wanted, release_ids, strict=True)}
            covered = dict.fromkeys(wanted, 0)
            for release_id, row_start, count, *values in found:
                c = column[int(release_id)]
                lo, hi = max(row_start, rows.start), min(row_start + count, rows.stop)
                covered[c] += hi - lo
                for field, data in zip(fields, values, strict=True):
                    target, offset = state.column(estimator, field)
                    if c - offset < 0:
                        continue
                    got = np.frombuffer(bytes(data), dtype=DTYPES[field])
                    target[lo - rows.start : hi - rows.start, c - offset] = got[
                        lo - row_start : hi - row_start]
            if any(v != F for v in covered.values()):
                raise BaseChangedError  # blocks rewritten while they were read
        metrics[metric] = state
    if generation(series_id) != base:
        raise BaseChangedError
    return metrics


#: Blocks of fewer than BLOCK_ROWS rows a column may have (per metric and estimator)
#: before new functions make it be rewritten whole: reads stay a few rows per column, and
#: compaction is rare.
MAX_BLOCKS_PER_COLUMN = 8


def crowded(series: Series, release_ids: np.ndarray) -> set[int]:
    """Columns whose next block would exceed :data:`MAX_BLOCKS_PER_COLUMN`."""
    position = {int(rid): c for c, rid in enumerate(release_ids)}
    # Blocks of fewer than BLOCK_ROWS rows: a column written whole has at most one (its
    # last); each arrival of new functions adds one.
    counts = (
        AnalysisBlock.objects.filter(series=series, metric=METRICS[0], estimator=ESTIMATORS[0],
                                     stage=0, rows__lt=BLOCK_ROWS)
        .values("release_id").annotate(blocks=Count("id"))
        .filter(blocks__gte=MAX_BLOCKS_PER_COLUMN).values_list("release_id", flat=True)
    )
    return {position[rid] for rid in counts if rid in position}


def move_snapshot(series: Series, snapshot: datetime) -> int | None:
    """The stored analysis covers every done run: only its snapshot moves on.

    Returns the stored generation (None when there is none); raises :class:`NewerStoredError`.
    """
    with transaction.atomic():
        Series.objects.select_for_update().get(pk=series.pk)
        stored = SeriesAnalysis.objects.filter(series=series)
        head = stored.values_list("generation", "snapshot_at").first()
        if head is None:
            return None
        if head[1] > snapshot:
            raise NewerStoredError
        stored.update(snapshot_at=snapshot)
        return int(head[0])


# --- reading --------------------------------------------------------------------------


def generation(series_id: int) -> int | None:
    return SeriesAnalysis.objects.filter(series_id=series_id).values_list(
        "generation", flat=True
    ).first()


def _read_consistent(series_id: int, read: Any) -> Any:
    """``read()`` retried until no write happened while it ran (a write changes the
    generation; readers take no lock)."""
    for _ in range(5):
        before = generation(series_id)
        if before is None:
            return None
        got = read()
        if got is not None and generation(series_id) == before:
            return got
    raise RuntimeError(
        f"series {series_id}: the stored analysis kept changing or is incomplete while it "
        "was read; run `manage.py analyse --full` if this persists"
    )


def _filled(rows: int, releases: int, fields: Sequence[str]) -> dict[str, np.ndarray]:
    """Arrays of ``fields`` for ``rows`` functions × ``releases`` (per-pair fields: one
    column fewer), holding each field's fill value until blocks are scattered in."""
    return {field: np.full((rows, max(releases - 1, 0)) if per_pair(field) else (rows, releases),
                           fill(field), dtype=DTYPES[field].newbyteorder("="))
            for field in fields}


def _assemble(
    F: int,  # noqa: N803
    release_ids: np.ndarray,
    found: list[tuple[Any, ...]],
    fields: Sequence[str],
) -> dict[str, np.ndarray] | None:
    """Whole arrays of ``fields`` from block rows (release_id, row_start, rows, *fields);
    None when the blocks do not cover every (row, column) exactly once."""
    R = len(release_ids)  # noqa: N806
    column = {int(rid): c for c, rid in enumerate(release_ids)}
    out = _filled(F, R, fields)
    covered = np.zeros(R, dtype=np.int64)
    for release_id, row_start, rows, *values in found:
        c = column.get(int(release_id))
        if c is None or row_start + rows > F:
            return None
        covered[c] += rows
        for field, data in zip(fields, values, strict=True):
            offset = per_pair(field)
            if offset and c == 0:
                continue
            out[field][row_start : row_start + rows, c - offset] = np.frombuffer(
                bytes(data), dtype=DTYPES[field]
            )
    if not np.all(covered == F):
        return None
    return out


def read_state(series_id: int) -> Stored | None:
    """The whole stored analysis of a series, or None when there is none."""

    def read() -> Stored | None:
        head = read_head(series_id)
        if head is None:
            return None
        release_ids, function_ids = head.release_ids, head.function_ids
        metrics = {}
        for metric in METRICS:
            per_estimator = {}
            for estimator in ESTIMATORS:
                # n and the shift rule do not depend on the estimator: read them once.
                fields = BLOCK_FIELDS if estimator == ESTIMATORS[0] else (
                    *RELEASE_FIELDS, *PAIR_FIELDS
                )
                found = binary_values(
                    AnalysisBlock.objects.filter(
                        series_id=series_id, metric=metric, estimator=estimator, stage=0
                    ),
                    ("release_id", "row_start", "rows", *fields),
                )
                got = _assemble(len(function_ids), release_ids, found, fields)
                if got is None:
                    return None
                per_estimator[estimator] = got
            median = per_estimator["median"]
            metrics[metric] = MetricArrays(
                release={e: {k: a[k] for k in RELEASE_FIELDS} for e, a in per_estimator.items()},
                n=median["n"],
                pair={e: {k: a[k] for k in PAIR_FIELDS} for e, a in per_estimator.items()},
                shift={k: median[k] for k in SHIFT_FIELDS},
            )
        return Stored(
            generation=head.generation,
            release_ids=release_ids,
            function_ids=function_ids,
            run_ids=head.run_ids,
            params=head.params,
            snapshot_at=head.snapshot_at,
            metrics=metrics,
        )

    try:
        return _read_consistent(series_id, read)  # type: ignore[no-any-return]
    except RuntimeError:
        return None  # incomplete: the caller recomputes everything


# --- views: what pages read ---------------------------------------------------------

PER_RELEASE_KEYS = ("estimate", "lo", "hi", "n")
#: Per pair, the numbers of the comparison behind the rule's verdict (the same for
#: matrix, function page, release page, alerts and exports): ``diff`` with its interval,
#: ``p_value``, ``before`` (what ``relative`` divides by), ``gap`` between the two releases'
#: shown intervals, ``provisional``/``early`` and the two sides' ``first``/``last`` release
#: (column indices) and runs.
PER_PAIR_KEYS = ("verdict", "gap", "diff", "diff_lo", "diff_hi", "p_value", "before",
                 "relative", "change", "digression", "early", "provisional", "final_within",
                 "first", "last", "n_before", "n_after")


def view_keys(rule: str) -> tuple[str, ...]:
    get_rule(rule)
    return PER_RELEASE_KEYS + PER_PAIR_KEYS


def _sources(estimator: str, rule: str, wanted: Sequence[str]) -> list[str]:
    """The block fields the keys ``wanted`` of a view are made of."""
    order = RULES_BY_NAME[rule].interval == "order"
    paper = rule == "paper"
    fields: list[str] = ["n"]  # the shape, and the paper rule's paired releases
    for key in wanted:
        if key in ("lo", "hi"):
            fields.append(f"order_{key}" if order else key)
        elif key in ("estimate", "n"):
            fields.append(key)
        elif key == "gap":
            fields += ["order_lo", "order_hi"] if order else ["gap"]
        elif paper and key in ("verdict", "digression"):
            fields += ["paper_verdict", "lo", "hi", "diff", "estimate"]
        elif paper and key in ("diff", "diff_lo", "diff_hi"):
            fields.append(key)
        elif paper and key == "p_value":
            fields.append("paper_p")
        elif paper and key in ("before", "relative"):
            fields += ["estimate", "diff"]
        elif not paper and key in _SHIFT_SOURCES:
            fields += _SHIFT_SOURCES[key]
    return list(dict.fromkeys(fields))


#: The shift rule's block fields each key of a view is made of (``_shift_key``): a page
#: that shows verdicts alone reads three of the eleven (``provisional`` and
#: ``final_within`` come from the run counts).
_SHIFT_SOURCES = {
    "verdict": ["shift_verdict"], "diff": ["shift_diff"], "diff_lo": ["shift_lo"],
    "diff_hi": ["shift_hi"], "p_value": ["shift_p"], "before": ["shift_before"],
    "relative": ["shift_diff", "shift_before"],
    "digression": ["shift_verdict", "shift_before", "shift_diff"],
    "change": ["shift_flags"], "early": ["shift_flags"],
    "n_before": ["shift_n_before"], "n_after": ["shift_n_after"],
    "first": ["shift_reach_before"], "last": ["shift_reach_after"],
}


def view(
    fields: Mapping[str, np.ndarray], estimator: str, rule: str, wanted: Sequence[str], *,
    run_counts: np.ndarray, start: int = 0,
) -> dict[str, np.ndarray]:
    """The keys ``wanted`` of one (metric, estimator, rule) from block fields (whole
    functions × columns arrays): what pages read, and what the analysis computed
    (``analysis.Computed.arrays``), by one mapping.

    ``run_counts`` (runs of each column of the whole series) say which boundaries are still
    provisional (``stats.releases.ReleaseRule.final_at``). ``fields`` may hold a window of
    the columns, from column ``start`` on (``read_analysis(columns=...)``): ``first`` and
    ``last`` stay column indices of the whole series. Verdicts are before the series' minimum
    practical change (``traces.selectors.stored_analysis`` applies it, and the paper rule's
    digressions after it).
    """
    the_rule = get_rule(rule)
    order = the_rule.interval == "order"
    n = fields["n"]
    F, R = n.shape  # noqa: N806
    pairs_shape = (F, max(R - 1, 0))
    pairs = slice(start, start + pairs_shape[1])
    final_at = (finality(rule, run_counts)[0][pairs] if R
                else np.zeros(0, dtype=np.int64))
    provisional = np.broadcast_to(final_at < 0, pairs_shape)
    out: dict[str, np.ndarray] = {}
    for key in wanted:
        if key in ("lo", "hi"):
            out[key] = fields[f"order_{key}" if order else key]
        elif key in ("estimate", "n"):
            out[key] = fields[key]
        elif key == "gap":
            out[key] = (interval_gap(fields["order_lo"][:, :-1], fields["order_hi"][:, :-1],
                                     fields["order_lo"][:, 1:], fields["order_hi"][:, 1:])
                        if order else fields["gap"])
        elif key == "provisional":
            out[key] = provisional.copy()
        elif key == "final_within":
            out[key] = np.broadcast_to(finality(rule, run_counts)[1][pairs],
                                       pairs_shape).copy()
        elif rule == "paper":
            out |= _paper_key(fields, key, pairs_shape, start)
        else:
            out |= _shift_key(fields, key, pairs_shape, start)
    return out


def finality(rule: str, run_counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``final_at`` and ``releases_to_final`` of ``rule`` for the run counts of a series'
    columns (``stats.releases.ReleaseRule``), read-only: the shift rule's take ~40 ms at
    2,000 releases, the same for every page of one analysis, so the last few are kept."""
    return _finality(rule, np.ascontiguousarray(run_counts, dtype=np.int64).tobytes())


@functools.lru_cache(maxsize=16)
def _finality(rule: str, counts: bytes) -> tuple[np.ndarray, np.ndarray]:
    run_counts = np.frombuffer(counts, dtype=np.int64)
    the_rule = get_rule(rule)
    final_at = np.asarray(the_rule.final_at(run_counts))
    to_final = np.asarray(the_rule.releases_to_final(run_counts))
    final_at.flags.writeable = to_final.flags.writeable = False
    return final_at, to_final


def _paper_key(fields: Mapping[str, np.ndarray], key: str, shape: tuple[int, int],
               start: int) -> dict[str, np.ndarray]:
    if key == "verdict":
        return {key: fields["paper_verdict"]}
    if key in ("diff", "diff_lo", "diff_hi"):
        return {key: fields[key]}
    if key == "p_value":
        return {key: fields["paper_p"]}
    if key == "before":
        return {key: fields["estimate"][:, :-1]}
    if key == "relative":
        with np.errstate(invalid="ignore", divide="ignore"):
            r = fields["diff"] / np.abs(fields["estimate"][:, :-1])
        return {key: np.where(np.isfinite(r), r, np.nan)}
    if key == "digression":  # recomputed by readers after the minimum practical change
        return {key: digressions(fields["paper_verdict"], fields["lo"], fields["hi"])}
    if key in ("change", "early"):
        return {key: np.zeros(shape, dtype=np.bool_)}
    if key in ("n_before", "n_after"):
        n = fields["n"]
        return {key: (n[:, :-1] if key == "n_before" else n[:, 1:]).astype(np.int64)}
    if key in ("first", "last"):
        cols = np.arange(shape[1], dtype=np.int64) + start + (key == "last")
        return {key: np.broadcast_to(cols, shape).copy()}
    raise KeyError(key)


def _shift_key(fields: Mapping[str, np.ndarray], key: str, shape: tuple[int, int],
               start: int) -> dict[str, np.ndarray]:
    simple = {"verdict": "shift_verdict", "diff": "shift_diff", "diff_lo": "shift_lo",
              "diff_hi": "shift_hi", "p_value": "shift_p", "before": "shift_before"}
    if key in simple:
        return {key: fields[simple[key]]}
    if key == "relative":
        with np.errstate(invalid="ignore", divide="ignore"):
            r = fields["shift_diff"] / np.abs(fields["shift_before"])
        return {key: np.where(np.isfinite(r), r, np.nan)}
    if key == "digression":  # recomputed by readers after the minimum practical change
        return {key: level_digressions(fields["shift_verdict"], fields["shift_before"],
                                       fields["shift_diff"])}
    bits = {"change": SHIFT_CHANGE, "early": SHIFT_EARLY}
    if key in bits:
        return {key: (fields["shift_flags"] & bits[key]) != 0}
    if key in ("n_before", "n_after"):
        return {key: fields[f"shift_{key}"].astype(np.int64)}
    cols = np.arange(shape[1], dtype=np.int64) + start
    if key == "first":
        return {key: cols - fields["shift_reach_before"]}
    if key == "last":
        return {key: cols + 1 + fields["shift_reach_after"]}
    raise KeyError(key)


#: Blocks and bytes the page reads fetched since the last :func:`reset_reads`, and the
#: blocks and bytes of deviation records (``read_deviations``; a test hook: tests assert
#: that a page reads only what it shows).
READS = {"blocks": 0, "bytes": 0, "records": 0, "record_bytes": 0}


def reset_reads() -> None:
    READS.update(blocks=0, bytes=0, records=0, record_bytes=0)


#: Rows read by cutting them out of each block in the database (``substring``) instead of
#: fetching whole blocks: a function page's one row of 2,000 releases is 8 bytes a field
#: and block, not 8 KiB.
SUBSTRING_ROWS = 64


def _wanted_blocks(query: QuerySet[Any], rows: np.ndarray | None) -> QuerySet[Any]:
    """``query`` limited to the blocks whose rows overlap ``rows`` (sorted row indices;
    None: every block): one range condition per cluster of rows."""
    if rows is None:
        return query
    if not len(rows):
        return query.none()
    breaks = np.flatnonzero(np.diff(rows) > BLOCK_ROWS) + 1
    overlap = Q()
    for cluster in np.split(rows, breaks):
        overlap |= Q(row_start__lte=int(cluster[-1]), block_end__gt=int(cluster[0]))
    return query.alias(block_end=F("row_start") + F("rows")).filter(overlap)


def _read_blocks(
    series_id: int, metric: str, estimator: str, names: Sequence[str],
    release_ids: np.ndarray | None, rows: np.ndarray | None,
) -> tuple[list[tuple[Any, ...]], tuple[int, int] | None]:
    """Block rows (release_id, row_start, rows, *names) of the releases ``release_ids``
    (None: every release) overlapping the matrix rows ``rows`` (None: all).

    When ``rows`` span at most :data:`SUBSTRING_ROWS` rows, each field comes cut to that
    span in the database; the span is returned (else None) and each row's values then
    start at ``max(row_start, span[0])``.
    """
    query = AnalysisBlock.objects.filter(series_id=series_id, metric=metric,
                                         estimator=estimator, stage=0)  # published only
    if release_ids is not None:
        query = query.filter(release_id__in=[int(r) for r in release_ids])
    query = _wanted_blocks(query, rows)
    span = None
    if rows is not None and len(rows) and rows[-1] + 1 - rows[0] <= SUBSTRING_ROWS:
        span = (int(rows[0]), int(rows[-1]) + 1)
        first = Greatest(F("row_start"), Value(span[0]))
        count = Least(F("row_start") + F("rows"), Value(span[1])) - first
        cut = {
            f"cut_{name}": Substr(name, (first - F("row_start")) * DTYPES[name].itemsize + 1,
                                  count * DTYPES[name].itemsize, output_field=BinaryField())
            for name in names
        }
        found = binary_values(query.annotate(**cut),
                              ("release_id", "row_start", "rows", *cut))
    else:
        found = binary_values(query, ("release_id", "row_start", "rows", *names))
    READS["blocks"] += len(found)
    READS["bytes"] += sum(len(v) for row in found for v in row[3:] if v is not None)
    return found, span


def _assemble_part(
    F: int,  # noqa: N803
    release_ids: np.ndarray,
    rows: np.ndarray | None,
    found: list[tuple[Any, ...]],
    span: tuple[int, int] | None,
    fields: Sequence[str],
) -> dict[str, np.ndarray] | None:
    """Arrays of ``fields`` for the matrix rows ``rows`` (None: all ``F``) and the columns
    ``release_ids`` (the first column's per-pair values are not read: its pair begins
    before these columns) from block rows (release_id, row_start, rows, *fields), cut to
    ``span`` when given; None when the blocks do not cover each asked cell exactly once."""
    if rows is None:
        return _assemble(F, release_ids, found, fields)
    R = len(release_ids)  # noqa: N806
    column = {int(rid): c for c, rid in enumerate(release_ids)}
    # Output row of each matrix row (-1: not asked).
    where = np.full(F, -1, dtype=np.int64)
    where[rows] = np.arange(len(rows))
    out = _filled(len(rows), R, fields)
    covered = np.zeros(R, dtype=np.int64)
    # Per block: its column, its values' length, and which of them go to which output
    # row: the same for every field, so each field is gathered from all its blocks at once
    # (a loop over blocks × fields cost ~50 ms for 100 rows of 600 blocks).
    blocks = []
    for release_id, row_start, n_rows, *_ in found:
        c = column.get(int(release_id))
        if c is None or row_start + n_rows > F:
            return None
        lo, hi = row_start, row_start + n_rows
        if span is not None:
            lo, hi = max(lo, span[0]), min(hi, span[1])
        hit = np.flatnonzero(where[lo:hi] >= 0)
        covered[c] += len(hit)
        blocks.append((c, hi - lo, hit, where[lo:hi][hit]))
    if not np.all(covered == len(rows)):
        return None
    for offset in (0, 1):
        # Per-pair fields skip the first column (its pair begins before these columns;
        # SQLite cuts its empty value to NULL).
        kept = [k for k, b in enumerate(blocks) if not (offset and b[0] == 0)]
        names = [(i, f) for i, f in enumerate(fields) if per_pair(f) == offset]
        if not kept or not names:
            continue
        lengths = np.array([blocks[k][1] for k in kept], dtype=np.int64)
        starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
        source = np.concatenate([blocks[k][2] + start for k, start in zip(kept, starts,
                                                                         strict=True)])
        target_rows = np.concatenate([blocks[k][3] for k in kept])
        target_cols = np.repeat([blocks[k][0] - offset for k in kept],
                                [len(blocks[k][2]) for k in kept])
        for i, field in names:
            dtype = DTYPES[field]
            data = [bytes(found[k][3 + i]) for k in kept]
            if any(len(d) != n * dtype.itemsize for d, n in zip(data, lengths, strict=True)):
                return None
            values = np.frombuffer(b"".join(data), dtype=dtype)
            out[field][target_rows, target_cols] = values[source]
    return out


def _read_records(
    series_id: int, metric: str, F: int, release_ids: np.ndarray,  # noqa: N803
    window: bool, rows: np.ndarray, fields: Sequence[str],
) -> dict[str, np.ndarray] | None:
    """Arrays of ``fields`` (all in :data:`RECORD_FIELDS`) for the matrix rows ``rows``
    (sorted) and the columns ``release_ids`` (``window`` False: every release) from the
    median blocks' :data:`RECORD` records: on PostgreSQL one ``substring`` per row and block
    (the rows joined from ``unnest``), elsewhere each block's whole value cut in numpy.
    None when a block has no records (stored before migration 0035) or the blocks do not
    cover each asked cell exactly once: the caller reads the fields then."""
    size = RECORD.itemsize
    query = AnalysisBlock.objects.filter(series_id=series_id, metric=metric,
                                         estimator=ESTIMATORS[0], stage=0)
    if window:
        query = query.filter(release_id__in=[int(r) for r in release_ids])
    if connection.vendor == "postgresql":
        table = connection.ops.quote_name(AnalysisBlock._meta.db_table)
        # Table name and record size are ours, not input.
        sql = (f"SELECT b.release_id, b.row_start, r.row, substring(b.records "  # noqa: S608
               f"from (r.row - b.row_start) * {size} + 1 for {size}) "
               f"FROM {table} b JOIN unnest(%s::int4[]) AS r(row) "
               "ON r.row >= b.row_start AND r.row < b.row_start + b.rows "
               "WHERE b.series_id = %s AND b.metric = %s AND b.estimator = %s AND b.stage = 0")
        params: list[Any] = [[int(r) for r in rows], series_id, metric, ESTIMATORS[0]]
        if window:
            sql += " AND b.release_id = ANY(%s::int8[])"
            params.append([int(r) for r in release_ids])
        connection.ensure_connection()
        with psycopg.Cursor(connection.connection) as cursor:
            cursor.execute(sql, params, binary=True)
            found = cursor.fetchall()
        if any(data is None for *_, data in found):
            return None
        READS["blocks"] += len({(int(rid), int(start)) for rid, start, *_ in found})
        READS["bytes"] += len(found) * size
        block_ids = np.array([rid for rid, *_ in found], dtype=np.int64)
        matrix_rows = np.array([row for _, _, row, _ in found], dtype=np.int64)
        data = b"".join(bytes(d) for *_, d in found)
        if len(data) != len(found) * size:
            return None
        got = np.frombuffer(data, dtype=RECORD)
    else:
        blocks = list(_wanted_blocks(query, rows).values_list("release_id", "row_start",
                                                               "rows", "records"))
        parts = []
        for release_id, row_start, n_rows, value in blocks:
            if value is None or len(value) != n_rows * size:
                return None
            inside = rows[(rows >= row_start) & (rows < row_start + n_rows)]
            parts.append((np.full(len(inside), release_id, dtype=np.int64), inside,
                          np.frombuffer(bytes(value), dtype=RECORD)[inside - row_start]))
        READS["blocks"] += len(blocks)
        READS["bytes"] += sum(len(value) for *_, value in blocks)  # whole values
        if not parts:
            return None
        block_ids = np.concatenate([p[0] for p in parts])
        matrix_rows = np.concatenate([p[1] for p in parts])
        got = np.concatenate([p[2] for p in parts])
    R = len(release_ids)  # noqa: N806
    position = {int(rid): c for c, rid in enumerate(release_ids)}
    columns = np.array([position.get(int(rid), -1) for rid in block_ids], dtype=np.int64)
    where = np.full(F, -1, dtype=np.int64)
    where[rows] = np.arange(len(rows))
    if np.any(columns < 0) or np.any(matrix_rows >= F):
        return None
    targets = where[matrix_rows]
    if np.any(targets < 0):
        return None
    # Each asked cell exactly once: blocks rewritten while they were read fail this.
    cells = np.bincount(targets * R + columns, minlength=len(rows) * R)
    if not np.all(cells == 1):
        return None
    out = _filled(len(rows), R, fields)
    later = columns > 0  # per-pair fields: the first column's pair is not read
    for name in fields:
        if per_pair(name):
            out[name][targets[later], columns[later] - 1] = got[name][later]
        else:
            out[name][targets, columns] = got[name]
    return out


@dataclass(frozen=True)
class Deviations:
    """The cells of a window whose stored verdict is a deviation (``read_deviations``).

    ``function_ids``: every row of the analysis, sorted; per cell: ``rows`` (into
    ``function_ids``), ``pairs`` (the window's pair: 0 ends at its second release),
    ``verdict`` (before the minimum practical change), ``diff`` and ``before`` (the rule's:
    ``view``'s ``diff`` and ``before``).
    """

    function_ids: np.ndarray
    rows: np.ndarray
    pairs: np.ndarray
    verdict: np.ndarray
    diff: np.ndarray
    before: np.ndarray


def read_deviations(series: Series, metric: str, estimator: str, rule: str,
                    columns: slice) -> Deviations | None:
    """The cells of the releases ``columns`` (a slice of the series' releases) whose stored
    verdict of one (metric, estimator, rule) is a regression or an improvement, from the
    blocks' :data:`DEVIATION` records: the window's pairs, every function, a few bytes a
    deviation. None before any analysis, or when a block of the window has no records
    (stored before migration 0033): the caller reads the window's cells then."""
    field = DEVIATION_FIELDS[0] if rule == "paper" else DEVIATION_FIELDS[1]
    source = estimator if rule == "paper" else ESTIMATORS[0]

    def read() -> Deviations | bool | None:
        head = binary_values(SeriesAnalysis.objects.filter(series_id=series.pk),
                             ("release_ids", "function_ids"))
        if not head:
            return None
        all_ids, function_ids = _ints(head[0][0]), _ints(head[0][1])
        start, stop, _ = columns.indices(len(all_ids))
        pair_ids = all_ids[start + 1 : max(start + 1, stop)]
        found = binary_values(
            AnalysisBlock.objects.filter(series_id=series.pk, metric=metric,
                                         estimator=source, stage=0,
                                         release_id__in=[int(r) for r in pair_ids]),
            ("release_id", "row_start", "rows", field))
        READS["records"] += len(found)
        READS["record_bytes"] += sum(len(row[3]) for row in found if row[3] is not None)
        pair = {int(rid): k for k, rid in enumerate(pair_ids)}
        covered = np.zeros(len(pair_ids), dtype=np.int64)
        parts, pairs = [], []
        for release_id, row_start, n_rows, data in found:
            if data is None:
                return False  # no records: stored before migration 0033
            k = pair[int(release_id)]
            covered[k] += n_rows
            got = np.frombuffer(bytes(data), dtype=DEVIATION)
            parts.append((got, row_start))
            pairs.append(np.full(len(got), k, dtype=np.int64))
        if not np.all(covered == len(function_ids)):
            return None  # blocks rewritten while they were read
        cells = (np.concatenate([g for g, _ in parts]) if parts
                 else np.empty(0, dtype=DEVIATION))
        rows = (np.concatenate([g["row"].astype(np.int64) + s for g, s in parts]) if parts
                else np.empty(0, dtype=np.int64))
        order = np.argsort(function_ids, kind="stable")
        position = np.empty(len(order), dtype=np.int64)
        position[order] = np.arange(len(order))
        return Deviations(
            function_ids=function_ids[order], rows=position[rows],
            pairs=np.concatenate(pairs) if pairs else np.empty(0, dtype=np.int64),
            verdict=cells["verdict"].astype(np.int8), diff=cells["diff"].astype(np.float64),
            before=cells["before"].astype(np.float64))

    got = _read_consistent(series.pk, read)
    return got if isinstance(got, Deviations) else None


_Read = tuple[np.ndarray, np.ndarray, np.ndarray, int, np.ndarray, dict[str, np.ndarray]]


def read_analysis(
    series: Series, metric: str, estimator: str, rule: str, keys: Iterable[str] | None = None,
    *, columns: slice | None = None, function_ids: Iterable[int] | None = None,
) -> dict[str, np.ndarray] | None:
    """The matrices of one (metric, estimator, rule), or None before any analysis.

    Keys as in :func:`view_keys` (``keys`` limits them; ``release_ids``, ``function_ids``,
    ``run_counts``, ``all_release_ids`` and ``start`` always come), rows sorted by function
    id. Only the block fields the keys need are read, of the blocks holding what is asked:

    - ``columns``: a slice of the series' releases (in order; e.g. ``slice(-30, None)``,
      the newest 30); the arrays then hold those columns (per-pair arrays: the pairs
      between them), ``release_ids`` and ``run_counts`` are theirs, ``start`` is the first
      one's column in ``all_release_ids``, and ``first``/``last`` stay whole-series columns;
    - ``function_ids``: only those rows (ids the analysis does not hold are left out).
    """
    wanted = [k for k in (view_keys(rule) if keys is None else keys) if k in view_keys(rule)]
    fields = _sources(estimator, rule, wanted)
    shift_fields = [f for f in fields if f in SHIFT_FIELDS]
    own_fields = [f for f in fields if f not in SHIFT_FIELDS]
    asked = None if function_ids is None else np.unique(np.fromiter(function_ids, np.int64))

    def read() -> _Read | None:
        head = binary_values(SeriesAnalysis.objects.filter(series_id=series.pk),
                             ("release_ids", "function_ids", "run_counts"))
        if not head:
            return None
        all_ids, function_ids = _ints(head[0][0]), _ints(head[0][1])
        run_counts = _ints(head[0][2])
        start, stop, _ = (columns or slice(None)).indices(len(all_ids))
        stop = max(start, stop)
        release_ids = all_ids[start:stop]
        rows = None
        if asked is not None:
            rows = np.flatnonzero(np.isin(function_ids, asked))
        got: dict[str, np.ndarray] = {}
        # The shift rule's fields live in the median blocks whatever the estimator (one
        # read when the estimator is the median).
        reads = ([(estimator, own_fields + shift_fields)] if estimator == ESTIMATORS[0]
                 else [(estimator, own_fields), (ESTIMATORS[0], shift_fields)])
        for est, names in reads:
            if not names:
                continue
            part = None
            if (USE_RECORDS and rows is not None and len(rows) and est == ESTIMATORS[0]
                    and set(names) <= set(RECORD_FIELDS)):
                # Rows of the default view (the matrix's shown rows): their records.
                part = _read_records(series.pk, metric, len(function_ids), release_ids,
                                     columns is not None, rows, names)
            if part is None:
                found, span = _read_blocks(
                    series.pk, metric, est, names,
                    None if columns is None else release_ids, rows)
                part = _assemble_part(len(function_ids), release_ids, rows, found, span,
                                      names)
            if part is None:
                return None
            got |= part
        ids = function_ids if rows is None else function_ids[rows]
        return all_ids, release_ids, ids, start, run_counts, got

    read_back = _read_consistent(series.pk, read)
    if read_back is None:
        return None
    all_ids, release_ids, function_ids, start, run_counts, got = read_back
    out = view(got, estimator, rule, wanted, run_counts=run_counts, start=start)
    if len(function_ids) > 1 and np.any(np.diff(function_ids) < 0):
        order = np.argsort(function_ids, kind="stable")
        function_ids = function_ids[order]
        out = {k: v[order] for k, v in out.items()}
    return out | {"release_ids": release_ids, "function_ids": function_ids,
                  "run_counts": run_counts[start : start + len(release_ids)],
                  "all_release_ids": all_ids, "start": np.asarray(start, dtype=np.int64)}


def replicates(runs: list[tuple[np.ndarray, ...]], run_ids: Any) -> list[tuple[np.ndarray, ...]]:
    """Runs as samples: in a metric series a run id is repeated once per replicate it
    holds (``analysis.Columns``) and its arrays list each metric once per replicate, in
    order; the ``j``-th repeat of a run keeps the ``j``-th entry of each metric. Runs that
    appear once (every trace series) are returned as they are."""
    ids = np.asarray(run_ids)
    if len(np.unique(ids)) == len(ids):
        return runs
    out = []
    seen: dict[int, int] = {}
    for run, rid in zip(runs, ids.tolist(), strict=True):
        j = seen.get(rid, 0)
        seen[rid] = j + 1
        fids = run[0]
        order = np.argsort(fids, kind="stable")
        sorted_ids = fids[order]
        ranked = np.empty(len(fids), dtype=np.int64)
        # Occurrence index of each entry among the entries of its metric.
        ranked[order] = np.arange(len(fids)) - np.searchsorted(sorted_ids, sorted_ids)
        keep = ranked == j
        out.append(tuple(a[keep] for a in run))
    return out
