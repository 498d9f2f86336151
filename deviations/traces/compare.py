"""Any two releases of a series compared function by function (a read: no writes here).

The matrix judges consecutive releases from the stored analysis; a user whose culprit hides
in a range compares two arbitrary releases, ``base`` and ``new``. That pair is not stored
(there are R² of them): its runs are read (two releases, one row of packed times per run)
and compared on demand by ``deviations.stats.twosample.compare_two`` — milliseconds for
2,000 functions × 50 runs. Differences are new − base.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Final, overload
from urllib.parse import urlencode

import numpy as np

from deviations.core import memo
from deviations.core.db import IN_BATCH
from deviations.core.errors import UserError
from deviations.stats.intervals import MIN_RUNS
from deviations.stats.releases import oriented
from deviations.stats.twosample import TWO_SAMPLE_VERDICTS, compare_two
from deviations.traces import selectors
from deviations.traces.models import Release, Run, Series

PER_PAGE: Final = 100
"""Rows of the compare page's table (20,000 functions rendered took 20 s and 12 MB of
HTML; issue 24): the rest by the pager, or the exports."""

FDR: Final = 0.05
"""False-discovery rate of the Benjamini–Hochberg step over the comparison's functions."""

FIELDS = ["function", "base", "new", "verdict", "base_median", "base_lo", "base_hi",
          "new_median", "new_lo", "new_hi", "diff", "diff_lo", "diff_hi", "change_pct",
          "p_value", "q_value"]
"""Export columns (µs; ``change_pct`` = 100 (new − base) / base)."""

VERDICT_ORDER: Final = ("regression", "improvement", "appeared", "vanished",
                        "below_threshold", "unchanged")
SORTS: Final = ("verdict", "change", "diff", "name", "p")
SHOW: Final = ("all", "changed", *VERDICT_ORDER)
"""``changed``: regressions, improvements, appeared and vanished functions."""
TESTS: Final = ("auto", "rank", "welch", "median")


class CompareError(UserError):
    """A comparison that cannot be made: the message says why (HTTP 400, 404 unknown)."""

    code = "compare"


@dataclass(frozen=True)
class CompareQuery:
    """The compare page's controls; ``params()`` is its permalink's query string."""

    base: str = ""
    new: str = ""
    metric: str = "self"
    q: str = ""
    show: str = "all"
    sort: str = "verdict"
    test: str = "auto"
    page: int = 1  # of PER_PAGE rows (the page's table; exports give every row)

    @classmethod
    def from_params(cls, params: Mapping[str, str]) -> CompareQuery:
        """Controls from a query string; unknown choices fall back to the defaults."""
        values: dict[str, Any] = {
            "base": params.get("base", "").strip()[:100],
            "new": params.get("new", "").strip()[:100],
            "q": params.get("q", "")[:200],
        }
        for key, allowed in (("metric", ("self", "total")), ("show", SHOW),
                             ("sort", SORTS), ("test", TESTS)):
            if params.get(key) in allowed:
                values[key] = params[key]
        try:
            values["page"] = min(max(int(params.get("page", 1)), 1), 10**6)
        except ValueError:
            values["page"] = 1
        return cls(**values)

    def params(self, **changes: Any) -> str:
        """The non-default controls (with ``changes``) as a query string."""
        current = replace(self, **{k: v for k, v in changes.items() if k != "format"})
        default = CompareQuery()
        pairs = [(k, getattr(current, k)) for k in ("base", "new", "metric", "q", "show",
                                                    "sort", "test", "page")
                 if getattr(current, k) != getattr(default, k)]
        if changes.get("format"):
            pairs.append(("format", changes["format"]))
        return urlencode(pairs)


class ComparisonTable:
    """Every function of a comparison as columns; its rows (dicts in ``FIELDS``, with
    ``function_id``) are made for the rows asked only, and a row's name is read when it is
    made, or when an order or a search needs it. A page shows 100 rows of 20,000: making
    every row's dict and reading every name was ~130 ms of its ~220 ms (issue 24)."""

    def __init__(self, series: Series, base: str, new: str, function_ids: np.ndarray,
                 verdicts: np.ndarray, columns: dict[str, np.ndarray]) -> None:
        self.series, self.base, self.new = series, base, new
        self.function_ids = function_ids  # sorted
        self.verdicts = verdicts  # codes: TWO_SAMPLE_VERDICTS[code]
        self.columns = columns  # float64; NaN and infinities are None in rows
        self.names: dict[int, str] = {}  # read as needed (a read-through of the names)
        #: Rows by verdict (regressions first, then by |change|, then by name).
        self.by_verdict = self.order("verdict", np.arange(len(function_ids)))

    def __len__(self) -> int:
        return len(self.function_ids)

    def names_of(self, ids: list[int]) -> list[str]:
        """Names of the functions ``ids``, those not read yet read now (every name of the
        series when most are missing and more than one query of ids would be needed)."""
        missing = [i for i in ids if i not in self.names]
        if missing:
            whole = len(missing) > max(IN_BATCH, len(self.function_ids) // 2)
            self.names.update(selectors.function_names(self.series,
                                                        None if whole else missing))
        return [self.names[i] for i in ids]

    def rows(self, index: np.ndarray) -> list[dict[str, Any]]:
        """The rows ``index`` (into ``function_ids``), in that order."""
        ids = self.function_ids[index].tolist()
        values = [_numbers(column[index]) for column in self.columns.values()]
        verdicts = [TWO_SAMPLE_VERDICTS[v] for v in self.verdicts[index].tolist()]
        # Rows built from the columns zipped (dict(zip()) per row: ~4x faster than a dict
        # display with a comprehension inside).
        keys = ("function", "function_id", "base", "new", "verdict", *self.columns)
        return [dict(zip(keys, cells, strict=True)) for cells in zip(
            self.names_of(ids), ids, itertools.repeat(self.base), itertools.repeat(self.new),
            verdicts, *values, strict=False)]

    def keys(self, sort: str) -> list[np.ndarray]:
        """Per row, the keys of ``sort`` before the name (most significant first): the
        verdict's rank, −|change %| (0 without one: ``_magnitude``), −|diff| (0 without
        one), the p-value (2 without one); none for the sort by name."""
        def finite_or(values: np.ndarray, key: np.ndarray, other: float) -> np.ndarray:
            return np.where(np.isfinite(values), key, other)

        change, diff, p = (self.columns[k] for k in ("change_pct", "diff", "p_value"))
        with np.errstate(invalid="ignore"):
            magnitude = finite_or(change, -np.abs(change), 0.0)
        if sort == "verdict":
            rank = np.array([VERDICT_ORDER.index(v) for v in TWO_SAMPLE_VERDICTS])
            return [rank[self.verdicts], magnitude]
        if sort == "change":
            return [magnitude]
        if sort == "diff":
            with np.errstate(invalid="ignore"):
                return [finite_or(diff, -np.abs(diff), 0.0)]
        if sort == "p":
            return [finite_or(p, p, 2.0)]
        return []

    def order(self, sort: str, rows: np.ndarray) -> np.ndarray:
        """``rows`` (indices) in the page's order for ``sort``: as ``sort_rows`` orders
        row dicts (``tests/traces/test_compare.py`` holds that reference and checks
        both agree), with names read only for the rows tied on every other key.
        Rows tied on every key, name included (two stored names alike: NUL became
        U+FFFD), keep their order by verdict, as the stable sort of the rows by verdict
        kept them; by verdict, their order by function id."""
        primary = [k[rows] for k in self.keys(sort)]
        first = np.lexsort(primary[::-1]) if primary else np.arange(len(rows))
        ordered = rows[first]
        primary = [k[first] for k in primary]
        tied = np.ones(len(ordered), dtype=bool)
        if primary and len(ordered) > 1:
            same = np.ones(len(ordered) - 1, dtype=bool)
            for k in primary:
                same &= k[1:] == k[:-1]
            tied[:] = False
            tied[:-1] |= same
            tied[1:] |= same
        if not tied.any():
            return ordered
        at = ordered[tied]
        names = self.names_of(self.function_ids[at].tolist())
        if sort == "verdict":
            after = at  # by function id
        else:
            position = np.empty(len(self.by_verdict), dtype=np.int64)
            position[self.by_verdict] = np.arange(len(self.by_verdict))
            after = position[at]
        by_name = sorted(range(len(at)), key=lambda k: (names[k], int(after[k])))
        rank = np.zeros(len(ordered), dtype=np.int64)
        rank[np.flatnonzero(tied)[by_name]] = np.arange(len(at))
        return ordered[np.lexsort([rank, *primary[::-1]])]

    def select(self, q: str = "", show: str = "all", sort: str = "verdict") -> Rows:
        """The rows whose function name contains ``q`` (case-insensitive) and whose
        verdict ``show`` selects (``changed``: regressions, improvements, appeared and
        vanished), in the order of ``sort``."""
        if not q and show == "all" and sort == "verdict":
            return Rows(self, self.by_verdict)
        keep = np.ones(len(self), dtype=bool)
        if show != "all":
            wanted = {"regression", "improvement", "appeared", "vanished"} if (
                show == "changed") else {show}
            codes = [c for c, v in enumerate(TWO_SAMPLE_VERDICTS) if v in wanted]
            keep &= np.isin(self.verdicts, codes)
        if q:
            needle = q.lower()
            names = self.names_of(self.function_ids.tolist())
            keep &= np.array([needle in n.lower() for n in names], dtype=bool)
        rows = np.flatnonzero(keep)
        if sort == "verdict":  # by_verdict, filtered
            return Rows(self, self.by_verdict[keep[self.by_verdict]])
        return Rows(self, self.order(sort, rows))


class Rows(Sequence[dict[str, Any]]):
    """Some rows of a :class:`ComparisonTable` in an order, made as they are asked for (a
    slice: its names in one query); iterating makes them in chunks."""

    CHUNK: Final = 2000

    def __init__(self, table: ComparisonTable, index: np.ndarray) -> None:
        self.table, self.at = table, index  # rows of the table, in order

    def __len__(self) -> int:
        return len(self.at)

    @overload
    def __getitem__(self, k: int) -> dict[str, Any]: ...

    @overload
    def __getitem__(self, k: slice) -> list[dict[str, Any]]: ...

    def __getitem__(self, k: int | slice) -> dict[str, Any] | list[dict[str, Any]]:
        if isinstance(k, slice):
            return self.table.rows(self.at[k])
        at = range(len(self.at))[k]  # negative indices; IndexError past the end
        return self.table.rows(self.at[at : at + 1])[0]

    def __iter__(self) -> Iterator[dict[str, Any]]:
        if len(self.at) > self.CHUNK:  # every name at once (one query for most of them)
            self.table.names_of(self.table.function_ids[self.at].tolist())
        for start in range(0, len(self.at), self.CHUNK):
            yield from self.table.rows(self.at[start : start + self.CHUNK])


@dataclass(frozen=True)
class ReleaseComparison:
    """The comparison of ``base`` and ``new`` of a series, one row per function."""

    series: Series
    base: Release
    new: Release
    metric: str
    runs_base: int
    runs_new: int
    test: str
    table: ComparisonTable
    counts: dict[str, int]

    @property
    def rows(self) -> Rows:
        """Every function, in FIELDS (+ function_id), sorted by verdict."""
        return self.table.select()

    @property
    def base_is_later(self) -> bool:
        return (self.base.sort_key, self.base.pk) > (self.new.sort_key, self.new.pk)


def _release(series: Series, version: str, side: str) -> Release:
    if not version:
        raise CompareError(f"choose the {side} release (?{side}=VERSION)")
    try:
        return series.releases.get(version=version)
    except Release.DoesNotExist:
        raise CompareError(f"series {series.name!r} has no release {version!r} ({side})",
                           status=404) from None


def _numbers(values: np.ndarray) -> list[float | None]:
    """Floats of a column, NaN and infinities as None."""
    return [v if finite else None
            for v, finite in zip(values.tolist(), np.isfinite(values).tolist(), strict=True)]


def compare_releases(
    series: Series, base: str, new: str, metric: str = "self", *, test: str = "auto",
    min_change: float | None = None, min_change_us: float | None = None, fdr: float = FDR,
) -> ReleaseComparison:
    """Every function of two releases: medians, difference, test, verdict (µs).

    ``min_change`` (relative) and ``min_change_us`` default to the series' minimum
    practical change, the one the matrix, alerts and exports apply.

    Raises
    ------
    CompareError
        A release that does not exist (404), the same release twice, a release with fewer
        than two done runs (400).
    """
    if metric not in ("self", "total"):
        raise CompareError(f"unknown metric {metric!r}: self or total")
    if test not in TESTS:
        raise CompareError(f"unknown test {test!r}: auto, rank, welch or median")
    b_rel = _release(series, base, "base")
    n_rel = _release(series, new, "new")
    if b_rel.pk == n_rel.pk:
        raise CompareError(f"base and new are the same release {base!r}: choose two releases")
    sides = []
    for release, side in ((b_rel, "base"), (n_rel, "new")):
        # The function ids and the metric's times only (not the other time, nor calls).
        ids, values, runs = selectors.release_metric_times(release, metric)
        if len(runs) < MIN_RUNS:
            raise CompareError(
                f"release {release.version!r} ({side}) has {len(runs)} done run"
                f"{'' if len(runs) == 1 else 's'}: a comparison needs at least {MIN_RUNS} "
                "on each side"
            )
        sides.append((ids, values, len(runs)))
    function_ids = np.union1d(sides[0][0], sides[1][0]).astype(np.int64)
    matrices = []
    for ids, values, n_runs in sides:
        m = np.full((len(function_ids), n_runs), np.nan)
        m[np.searchsorted(function_ids, ids)] = values
        matrices.append(m)
    if min_change is None:
        min_change = series.min_relative_change
    if min_change_us is None:
        min_change_us = series.min_absolute_change_us
    if series.is_metrics:
        min_change_us = 0.0  # rows in different units: the relative floor only
    result = compare_two(matrices[0], matrices[1], fdr=fdr, min_relative_change=min_change,
                         min_absolute_change=min_change_us, test=test)  # type: ignore[arg-type]
    verdicts = result.verdict
    if series.is_metrics:  # each metric's direction (decided as lower is better above)
        higher, _ = selectors.metric_settings(function_ids)
        verdicts = oriented(verdicts, higher)
    # Times are durations: a median's interval stops at 0 (Olive's interval is the median
    # ± t·se, which reaches below 0 for a spread-out function of few runs; issue 23).
    lows = [m.lo if series.is_metrics else np.maximum(m.lo, 0.0)
            for m in (result.median_a, result.median_b)]
    columns = {
        "base_median": result.median_a.estimate, "base_lo": lows[0],
        "base_hi": result.median_a.hi, "new_median": result.median_b.estimate,
        "new_lo": lows[1], "new_hi": result.median_b.hi, "diff": result.diff.estimate,
        "diff_lo": result.diff.lo, "diff_hi": result.diff.hi,
        "change_pct": 100.0 * result.relative, "p_value": result.p_value,
        "q_value": result.q_value,
    }
    codes = np.asarray(verdicts, dtype=np.int64)
    table = ComparisonTable(series, b_rel.version, n_rel.version, function_ids, codes,
                            {k: np.asarray(v, dtype=np.float64) for k, v in columns.items()})
    found = np.bincount(codes, minlength=len(TWO_SAMPLE_VERDICTS))
    counts = {v: int(found[TWO_SAMPLE_VERDICTS.index(v)]) for v in VERDICT_ORDER}
    return ReleaseComparison(series=series, base=b_rel, new=n_rel, metric=metric,
                             runs_base=sides[0][2], runs_new=sides[1][2], test=result.test,
                             table=table, counts=counts)


def remembered_rows(series: Series, query: CompareQuery) -> tuple[ReleaseComparison, Rows]:
    """``remembered_comparison`` and its rows as the controls filter and sort them, kept
    likewise (sorting 20,000 rows was ~80 ms a request); the rows are made when asked for
    (a page makes its 100)."""
    key = _comparison_key(series, query)
    result = remembered_comparison(series, query, key)

    def make() -> tuple[Rows, int]:
        rows = result.table.select(query.q, query.show, query.sort)
        return rows, 8 * len(rows)  # the rows' indices

    kept = memo.remembered((*key, "rows", query.q, query.show, query.sort), make)
    assert kept is not None  # make() never returns None
    return result, kept


def _comparison_key(series: Series, query: CompareQuery) -> tuple[Any, ...]:
    """What a comparison depends on: its controls, both releases' done runs, and the
    settings its verdicts read."""
    runs = tuple(Run.objects.filter(
        release__series=series, release__version__in=[query.base, query.new],
        status=Run.DONE).order_by("id").values_list("release__version", "id", "finished"))
    return ("compare", series.pk, query.base, query.new, query.metric, query.test, runs,
            series.min_relative_change, series.min_absolute_change_us,
            selectors.metric_settings_key(series))


def remembered_comparison(series: Series, query: CompareQuery,
                          key: tuple[Any, ...] | None = None) -> ReleaseComparison:
    """``compare_releases`` of the page's controls, kept in the process (``core.memo``)
    until a run of either release or a setting the verdicts read changes: the next page,
    sort or filter of the same comparison reads nothing but the runs' ids (20,000
    functions: ~1 s to compare, every time, before)."""
    key = key or _comparison_key(series, query)

    def make() -> tuple[ReleaseComparison, int]:
        result = compare_releases(series, query.base, query.new, query.metric,
                                  test=query.test)
        # The columns, and the names read (~100 bytes each; all after a search).
        return result, (8 * (len(result.table.columns) + 3) + 100) * len(result.table)

    kept = memo.remembered(key, make)
    assert kept is not None  # make() never returns None
    return kept
