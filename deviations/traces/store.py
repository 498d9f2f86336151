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

import io
import itertools
import secrets
import zipfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np
import psycopg
from django.core.exceptions import EmptyResultSet
from django.db import connection, transaction
from django.db.models import Count, QuerySet

from deviations.core.db import lz4_toast
from deviations.stats.intervals import MIN_RUNS
from deviations.stats.multiple import benjamini_hochberg
from deviations.stats.releases import interval_gap, provisional_pairs
from deviations.traces.models import AnalysisBlock, Series, SeriesAnalysis

METRICS = ("self", "total")
ESTIMATORS = ("median", "mean")
RULES = ("paper", "recommended", "segments")

# Fields of a block and their dtypes. Per release: the estimator's interval and n; per
# pair (the pair ending at the block's release): the difference, the paper rule's verdict
# and p-value, and the recommended rule's raw window tests.
RELEASE_FIELDS = ("estimate", "lo", "hi", "order_lo", "order_hi")
#: The interval limits each rule shows (and tests digressions with): Olive's for the
#: paper rule (seed 003), the order-statistic interval for the recommended and the
#: segments rules.
SHOWN_INTERVAL = {"paper": ("lo", "hi"), "recommended": ("order_lo", "order_hi"),
                  "segments": ("order_lo", "order_hi")}
PAIR_FIELDS = ("gap", "diff", "diff_lo", "diff_hi", "paper_p", "paper_verdict")
WINDOW_FIELDS = ("z", "p", "shift")
BLOCK_FIELDS = (*RELEASE_FIELDS, "n", *PAIR_FIELDS, *WINDOW_FIELDS)
DTYPES = {name: np.dtype("<f8") for name in BLOCK_FIELDS} | {
    "n": np.dtype("<i8"), "paper_verdict": np.dtype("i1"),
}
_BLOCK_COLUMNS = ("series_id", "release_id", "metric", "estimator", "row_start", "rows",
                  *BLOCK_FIELDS)
_SUMMARY_COLUMNS = ("series_id", "generation", "release_ids", "function_ids", "run_ids",
                    "run_counts", "params", "global_arrays", "snapshot_at")


@dataclass
class MetricArrays:
    """Everything stored per block for one metric, as whole (functions × columns) arrays.

    ``release[estimator]``: estimate, lo, hi (functions × releases); ``n``; ``pair[estimator]``:
    gap, diff, diff_lo, diff_hi, paper_p, paper_verdict (functions × pairs); ``window``: the
    recommended rule's raw z, p, shift (functions × boundaries).
    """

    release: dict[str, dict[str, np.ndarray]]
    n: np.ndarray
    pair: dict[str, dict[str, np.ndarray]]
    window: dict[str, np.ndarray]

    @classmethod
    def empty(cls, F: int, R: int, *, filled: bool = True) -> MetricArrays:  # noqa: N803
        """Arrays for an F × R matrix: NaN (n 0, verdicts -1), or uninitialised when the
        caller writes every cell (``filled=False``: an update, whose equality with a full
        recompute the tests check, so an unwritten cell could not go unnoticed)."""
        P = max(R - 1, 0)  # noqa: N806

        def make(cols: int, fill: float, dtype: type = np.float64) -> np.ndarray:
            if filled:
                return np.full((F, cols), fill, dtype=dtype)
            return np.empty((F, cols), dtype=dtype)

        return cls(
            release={e: {k: make(R, np.nan) for k in RELEASE_FIELDS} for e in ESTIMATORS},
            n=make(R, 0, np.int64),
            pair={
                e: {k: make(P, np.nan) for k in PAIR_FIELDS[:-1]}
                | {"paper_verdict": make(P, -1, np.int8)}
                for e in ESTIMATORS
            },
            window={k: make(P, np.nan) for k in WINDOW_FIELDS},
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
        return self.window[field], 1


@dataclass
class Stored:
    """A stored analysis, as read back: the base of an incremental update."""

    generation: int
    release_ids: np.ndarray
    function_ids: np.ndarray
    run_ids: tuple[np.ndarray, ...]
    params: np.ndarray
    snapshot_at: datetime
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
    global_arrays: dict[str, np.ndarray]
    columns: Sequence[int] | None = None
    tail_from: int = 0


class BaseChangedError(Exception):
    """The stored analysis is not the one an update was computed from."""


class NewerStoredError(Exception):
    """A newer analysis is stored than the one being written."""


# --- encoding -------------------------------------------------------------------------


def npz(arrays: dict[str, np.ndarray]) -> bytes:
    """An ``.npz`` with fixed member dates, so equal arrays give equal bytes."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED, allowZip64=True) as zf:
        for key, value in arrays.items():
            info = zipfile.ZipInfo(f"{key}.npy", date_time=(1980, 1, 1, 0, 0, 0))
            with zf.open(info, "w", force_zip64=True) as member:
                np.lib.format.write_array(member, np.ascontiguousarray(value),
                                          allow_pickle=False)
    return buffer.getvalue()


def _unnpz(data: bytes, keys: Iterable[str] | None = None) -> dict[str, np.ndarray]:
    with np.load(io.BytesIO(data), allow_pickle=False) as found:
        wanted = found.files if keys is None else [k for k in keys if k in found.files]
        return {key: found[key] for key in wanted}


def _ints(data: Any) -> np.ndarray:
    return np.frombuffer(bytes(data), dtype="<i8")


def global_key(metric: str, what: str) -> str:
    """Member names of ``SeriesAnalysis.global_arrays``."""
    return f"{metric}.{what}"


_SPARSE = ".digression"


def _sparse(arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Boolean arrays (digressions: rare) stored as the flat indices of their True cells."""
    return {k: np.flatnonzero(v).astype("<i8") if k.endswith(_SPARSE) else v
            for k, v in arrays.items()}


def _dense(arrays: dict[str, np.ndarray], shape: tuple[int, int]) -> dict[str, np.ndarray]:
    out = {}
    for key, value in arrays.items():
        if key.endswith(_SPARSE):
            flags = np.zeros(shape[0] * shape[1], dtype=np.bool_)
            flags[value] = True
            value = flags.reshape(shape)
        out[key] = value
    return out


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
             "row_start": "int4", "rows": "int4", "generation": "int8",
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


def _blocks(
    series_id: int, w: Write, columns: Iterable[int], rows: slice
) -> Iterator[list[Any]]:
    """Block rows of ``columns`` for matrix rows ``rows``, every metric and estimator."""
    start, stop = rows.start or 0, rows.stop
    for metric, state in w.metrics.items():
        for estimator in ESTIMATORS:
            for c in columns:
                row: list[Any] = [series_id, int(w.release_ids[c]), metric, estimator, start,
                                  stop - start]
                for field in BLOCK_FIELDS:
                    array, offset = state.column(estimator, field)
                    if c - offset < 0:
                        row.append(b"")
                    else:
                        values = array[start:stop, c - offset]
                        row.append(np.ascontiguousarray(values, DTYPES[field]).tobytes())
                yield row


def write(series: Series, snapshot: datetime, w: Write | None, base: int | None) -> int:
    """Store ``w`` (or delete the analysis when ``w`` is None) as of ``snapshot``.

    Returns the new generation (0 when deleted). Raises :class:`NewerStoredError` when the
    stored analysis has a later snapshot, :class:`BaseChangedError` when ``base`` (the
    generation a partial write was computed from) is no longer the stored one.
    """
    with transaction.atomic():
        Series.objects.select_for_update().get(pk=series.pk)
        head = SeriesAnalysis.objects.filter(series=series).values_list(
            "generation", "snapshot_at"
        ).first()
        if head is not None and head[1] > snapshot:
            raise NewerStoredError
        partial = w is not None and w.columns is not None
        if partial and (head is None or head[0] != base):
            raise BaseChangedError
        blocks = AnalysisBlock.objects.filter(series=series)
        SeriesAnalysis.objects.filter(series=series).delete()
        if w is None:
            blocks.delete()
            return 0
        F = len(w.function_ids)  # noqa: N806
        every = range(len(w.release_ids))
        if w.columns is None:
            blocks.delete()
            rows = _blocks(series.pk, w, every, slice(0, F))
        else:
            whole = set(w.columns)
            if w.tail_from < F:
                # New functions: the other columns get a block of their rows, unless they
                # have too many blocks already; those are rewritten whole (compacted).
                whole |= _crowded(series, w.release_ids)
            blocks.filter(release_id__in=[int(w.release_ids[c]) for c in whole]).delete()
            rows = _blocks(series.pk, w, sorted(whole), slice(0, F))
            if w.tail_from < F:
                others = sorted(set(every) - whole)
                rows = itertools.chain(rows, _blocks(series.pk, w, others, slice(w.tail_from, F)))
        _copy(AnalysisBlock, _BLOCK_COLUMNS, rows)
        generation = secrets.randbits(62)
        _copy(SeriesAnalysis, _SUMMARY_COLUMNS, [[
            series.pk, generation,
            w.release_ids.astype("<i8").tobytes(), w.function_ids.astype("<i8").tobytes(),
            np.concatenate(w.run_ids).astype("<i8").tobytes(),
            np.array([len(r) for r in w.run_ids], dtype="<i8").tobytes(),
            w.params.astype("<f8").tobytes(), npz(_sparse(w.global_arrays)), snapshot,
        ]])
    return generation


#: Blocks a column may have (per metric and estimator) before new functions make it be
#: rewritten whole: reads stay a few rows per column, and compaction is rare.
MAX_BLOCKS_PER_COLUMN = 8


def _crowded(series: Series, release_ids: np.ndarray) -> set[int]:
    """Columns whose next block would exceed :data:`MAX_BLOCKS_PER_COLUMN`."""
    position = {int(rid): c for c, rid in enumerate(release_ids)}
    counts = (
        AnalysisBlock.objects.filter(series=series, metric=METRICS[0], estimator=ESTIMATORS[0])
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
    out: dict[str, np.ndarray] = {}
    for field in fields:
        per_pair = field in PAIR_FIELDS or field in WINDOW_FIELDS
        shape = (F, max(R - 1, 0)) if per_pair else (F, R)
        fill = -1 if field == "paper_verdict" else (0 if field == "n" else np.nan)
        out[field] = np.full(shape, fill, dtype=DTYPES[field].newbyteorder("="))
    covered = np.zeros(R, dtype=np.int64)
    for release_id, row_start, rows, *values in found:
        c = column.get(int(release_id))
        if c is None or row_start + rows > F:
            return None
        covered[c] += rows
        for field, data in zip(fields, values, strict=True):
            per_pair = field in PAIR_FIELDS or field in WINDOW_FIELDS
            if per_pair and c == 0:
                continue
            out[field][row_start : row_start + rows, c - per_pair] = np.frombuffer(
                bytes(data), dtype=DTYPES[field]
            )
    if not np.all(covered == F):
        return None
    return out


def read_state(series_id: int) -> Stored | None:
    """The whole stored analysis of a series, or None when there is none."""

    def read() -> Stored | None:
        head = binary_values(
            SeriesAnalysis.objects.filter(series_id=series_id),
            ("generation", "release_ids", "function_ids", "run_ids", "run_counts", "params",
             "snapshot_at"),
        )
        if not head:
            return None
        gen, release_ids, function_ids, run_ids, run_counts, params, snapshot = head[0]
        release_ids, function_ids = _ints(release_ids), _ints(function_ids)
        counts = _ints(run_counts)
        metrics = {}
        for metric in METRICS:
            per_estimator = {}
            for estimator in ESTIMATORS:
                # n and the window tests do not depend on the estimator: read them once.
                fields = BLOCK_FIELDS if estimator == ESTIMATORS[0] else (
                    *RELEASE_FIELDS, *PAIR_FIELDS
                )
                found = binary_values(
                    AnalysisBlock.objects.filter(
                        series_id=series_id, metric=metric, estimator=estimator
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
                window={k: median[k] for k in WINDOW_FIELDS},
            )
        return Stored(
            generation=gen,
            release_ids=release_ids,
            function_ids=function_ids,
            run_ids=tuple(np.split(_ints(run_ids), np.cumsum(counts)[:-1])),
            params=np.frombuffer(bytes(params), dtype="<f8"),
            snapshot_at=snapshot,
            metrics=metrics,
        )

    try:
        return _read_consistent(series_id, read)  # type: ignore[no-any-return]
    except RuntimeError:
        return None  # incomplete: the caller recomputes everything


# What each key of a (metric, estimator, rule) view reads: a block field, or a member of
# the global arrays; the recommended rule's window statistics are masked by ``paired``.
PER_RELEASE_KEYS = ("estimate", "lo", "hi", "n")
PER_PAIR_KEYS = ("verdict", "gap", "diff", "diff_lo", "diff_hi", "p_value", "q_value",
                 "digression", "provisional")
RECOMMENDED_KEYS = ("z", "shift")
#: The segments rule's own statistic: the relative shift between the two segments a
#: change point separates (NaN at boundaries without one).
SEGMENT_KEYS = ("shift",)
RULE_KEYS = {"paper": (), "recommended": RECOMMENDED_KEYS, "segments": SEGMENT_KEYS}

#: Global members of the segments rule, per metric (``global_key(metric, ...)``): the
#: verdict codes (functions × pairs, int8), and at the change points only (``at``: flat
#: indices into functions × pairs, rare) the Mann–Whitney p-value of the two segments and
#: their shift. The whole rule is recomputed with every analysis.
SEGMENT_MEMBERS = ("segments.verdict", "segments.at", "segments.p", "segments.shift")


def view_keys(rule: str) -> tuple[str, ...]:
    return PER_RELEASE_KEYS + PER_PAIR_KEYS + RULE_KEYS[rule]


def _sources(metric: str, estimator: str, rule: str, wanted: Sequence[str]
             ) -> tuple[list[str], list[str]]:
    """The block fields and the global members that the keys ``wanted`` are made of."""
    recommended, segments = rule == "recommended", rule == "segments"
    ordered = rule != "paper"  # the order-statistic interval
    fields: list[str] = []
    members: list[str] = []
    for key in wanted:
        if ordered and key in ("lo", "hi"):
            fields.append(f"order_{key}")
        elif ordered and key == "gap":
            fields += ["order_lo", "order_hi", "n"]
        elif key in PER_RELEASE_KEYS or key in ("gap", "diff", "diff_lo", "diff_hi"):
            fields.append(key)
        elif key == "verdict" and rule == "paper":
            fields.append("paper_verdict")
        elif key == "verdict":
            members.append(global_key(metric, "verdict" if recommended else "segments.verdict"))
        elif key in ("p_value", "q_value") and rule == "paper":
            fields.append("paper_p")
        elif key in ("p_value", "q_value") and recommended:
            fields += ["p", "n"]
        elif key in ("p_value", "q_value", "shift") and segments:
            fields.append("n")  # for the shape
            members += [global_key(metric, "segments.at"), global_key(metric, "segments.p"
                        if key != "shift" else "segments.shift")]
        elif key in RECOMMENDED_KEYS and recommended:
            fields += [key, "n"]
    if "digression" in wanted:
        members.append(global_key(metric, f"{estimator}.{rule}.digression"))
    if "provisional" in wanted:
        fields.append("n")  # for the shape, when nothing else is asked
    return list(dict.fromkeys(fields)), list(dict.fromkeys(members))


def _at_change_points(global_arrays: Mapping[str, np.ndarray], metric: str, what: str,
                      shape: tuple[int, int]) -> np.ndarray:
    """The segments rule's ``what`` (``p`` or ``shift``) as functions × pairs: its value at
    the change points, NaN elsewhere."""
    out = np.full(shape[0] * shape[1], np.nan)
    out[global_arrays[global_key(metric, "segments.at")]] = global_arrays[
        global_key(metric, f"segments.{what}")]
    return out.reshape(shape)


def view(
    fields: Mapping[str, np.ndarray], global_arrays: Mapping[str, np.ndarray], metric: str,
    estimator: str, rule: str, wanted: Sequence[str], *, window: int,
) -> dict[str, np.ndarray]:
    """The keys ``wanted`` of one (metric, estimator, rule) from block fields (whole
    functions × columns arrays) and global arrays: what pages read, and what the analysis
    computed (``analysis.Computed.arrays``), by one mapping.

    The recommended rule's window statistics are masked where a pair has fewer than
    ``MIN_RUNS`` runs on a side; its q-values are Benjamini–Hochberg over the stored
    p-values, as the analysis did (not stored: one sort here saves rewriting 1.6 MB per
    metric with every new release); the paper rule has none (NaN). The segments rule's
    p-values and shifts are those of its change points (NaN elsewhere); its q-values are
    Benjamini–Hochberg over every boundary, those without a change point counting as
    ``p = 1`` (``stats.releases.segment_verdicts``), shown at the change points.
    ``provisional`` marks the cells whose verdict later releases may still change
    (``stats.releases.provisional_pairs`` with the analysis's ``window``).
    """
    recommended, segments = rule == "recommended", rule == "segments"
    ordered = rule != "paper"
    if "n" in fields:
        n = fields["n"]
        paired = (n[:, :-1] >= MIN_RUNS) & (n[:, 1:] >= MIN_RUNS)
        pairs_shape = (n.shape[0], max(n.shape[1] - 1, 0))
    out: dict[str, np.ndarray] = {}
    for key in wanted:
        if ordered and key in ("lo", "hi"):
            out[key] = fields[f"order_{key}"]
        elif ordered and key == "gap":
            lo, hi = fields["order_lo"], fields["order_hi"]
            out[key] = np.where(paired, interval_gap(lo[:, :-1], hi[:, :-1], lo[:, 1:],
                                                     hi[:, 1:]), np.nan)
        elif key in PER_RELEASE_KEYS or key in ("gap", "diff", "diff_lo", "diff_hi"):
            out[key] = fields[key]
        elif key == "verdict":
            out[key] = (fields["paper_verdict"] if rule == "paper" else global_arrays[
                global_key(metric, "verdict" if recommended else "segments.verdict")])
        elif key in ("p_value", "q_value", "shift") and segments:
            at = _at_change_points(global_arrays, metric,
                                   "shift" if key == "shift" else "p", pairs_shape)
            if key == "q_value":
                at = np.where(np.isnan(at), np.nan,
                              benjamini_hochberg(np.where(np.isnan(at), 1.0, at)))
            out[key] = at
        elif key == "p_value":
            out[key] = np.where(paired, fields["p"], np.nan) if recommended else fields["paper_p"]
        elif key == "q_value":
            out[key] = (benjamini_hochberg(np.where(paired, fields["p"], np.nan)) if recommended
                        else np.full(fields["paper_p"].shape, np.nan))
        elif key == "digression":
            out[key] = global_arrays[global_key(metric, f"{estimator}.{rule}.digression")]
        elif key in RECOMMENDED_KEYS and recommended:
            out[key] = np.where(paired, fields[key], np.nan)
        elif key == "provisional":
            F, R = fields["n"].shape  # noqa: N806
            late = provisional_pairs(max(R - 1, 0), rule, window)  # type: ignore[arg-type]
            out[key] = np.broadcast_to(late, (F, len(late))).copy()
    return out


def read_analysis(
    series: Series, metric: str, estimator: str, rule: str, keys: Iterable[str] | None = None
) -> dict[str, np.ndarray] | None:
    """The matrices of one (metric, estimator, rule), or None before any analysis.

    Keys as in :func:`view_keys` (``keys`` limits them; ``release_ids`` and
    ``function_ids`` always come), rows sorted by function id. Only the block fields the
    keys need are read.
    """
    if rule not in RULES:
        raise ValueError(f"unknown rule {rule!r}")
    wanted = [k for k in (view_keys(rule) if keys is None else keys) if k in view_keys(rule)]
    fields, members = _sources(metric, estimator, rule, wanted)

    def read() -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray],
                        dict[str, np.ndarray]] | None:
        head = binary_values(SeriesAnalysis.objects.filter(series_id=series.pk),
                             ("release_ids", "function_ids", "global_arrays", "params"))
        if not head:
            return None
        release_ids, function_ids = _ints(head[0][0]), _ints(head[0][1])
        window = int(np.frombuffer(bytes(head[0][3]), dtype="<f8")[1])
        found = binary_values(
            AnalysisBlock.objects.filter(series_id=series.pk, metric=metric,
                                         estimator=estimator),
            ("release_id", "row_start", "rows", *fields),
        )
        got = _assemble(len(function_ids), release_ids, found, fields)
        if got is None:
            return None
        shape = (len(function_ids), max(len(release_ids) - 1, 0))
        return (release_ids, function_ids, got,
                _dense(_unnpz(bytes(head[0][2]), members), shape), window)

    read_back = _read_consistent(series.pk, read)
    if read_back is None:
        return None
    release_ids, function_ids, got, global_arrays, window = read_back
    out = view(got, global_arrays, metric, estimator, rule, wanted, window=window)
    if len(function_ids) > 1 and np.any(np.diff(function_ids) < 0):
        order = np.argsort(function_ids, kind="stable")
        function_ids = function_ids[order]
        out = {k: v[order] for k, v in out.items()}
    return out | {"release_ids": release_ids, "function_ids": function_ids}
