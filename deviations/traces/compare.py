"""Any two releases of a series compared function by function (a read: no writes here).

The matrix judges consecutive releases from the stored analysis; a user whose culprit hides
in a range compares two arbitrary releases, ``base`` and ``new``. That pair is not stored
(there are R² of them): its runs are read (two releases, one row of packed times per run)
and compared on demand by ``deviations.stats.twosample.compare_two`` — milliseconds for
2,000 functions × 50 runs. Differences are new − base.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Final
from urllib.parse import urlencode

import numpy as np

from deviations.core import memo
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
    rows: list[dict[str, Any]]  # every function, in FIELDS (+ function_id), sorted by verdict
    counts: dict[str, int]

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
        ids, self_us, total_us, _, runs = selectors.release_times(release)
        if len(runs) < MIN_RUNS:
            raise CompareError(
                f"release {release.version!r} ({side}) has {len(runs)} done run"
                f"{'' if len(runs) == 1 else 's'}: a comparison needs at least {MIN_RUNS} "
                "on each side"
            )
        sides.append((ids, self_us if metric == "self" else total_us, len(runs)))
    function_ids = sorted(set(sides[0][0]) | set(sides[1][0]))
    row = {fid: k for k, fid in enumerate(function_ids)}
    matrices = []
    for ids, values, n_runs in sides:
        m = np.full((len(function_ids), n_runs), np.nan)
        m[[row[i] for i in ids]] = values
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
        higher, _ = selectors.metric_settings(np.asarray(function_ids, dtype=np.int64))
        verdicts = oriented(verdicts, higher)
    names = selectors.function_names(series)
    # Times are durations: a median's interval stops at 0 (Olive's interval is the median
    # ± t·se, which reaches below 0 for a spread-out function of few runs; issue 23).
    lows = [m.lo if series.is_metrics else np.maximum(m.lo, 0.0)
            for m in (result.median_a, result.median_b)]
    # One conversion per column, not one numpy scalar per cell (20,000 functions: ~0.3 s).
    columns = {
        "base_median": result.median_a.estimate, "base_lo": lows[0],
        "base_hi": result.median_a.hi, "new_median": result.median_b.estimate,
        "new_lo": lows[1], "new_hi": result.median_b.hi, "diff": result.diff.estimate,
        "diff_lo": result.diff.lo, "diff_hi": result.diff.hi,
        "change_pct": 100.0 * result.relative, "p_value": result.p_value,
        "q_value": result.q_value,
    }
    values = [_numbers(np.asarray(column, dtype=np.float64)) for column in columns.values()]
    verdict_names = [TWO_SAMPLE_VERDICTS[v] for v in np.asarray(verdicts).tolist()]
    # Rows built from the columns zipped (dict(zip()) per row: ~4x faster than a dict
    # display with a comprehension inside, 20,000 functions).
    keys = ("function", "function_id", "base", "new", "verdict", *columns)
    rows = [dict(zip(keys, cells, strict=True)) for cells in zip(
        [names[fid] for fid in function_ids], function_ids,
        itertools.repeat(b_rel.version), itertools.repeat(n_rel.version), verdict_names,
        *values, strict=False)]
    rows = sort_rows(rows, "verdict")
    counts = {v: 0 for v in VERDICT_ORDER}
    for r in rows:
        counts[r["verdict"]] += 1
    return ReleaseComparison(series=series, base=b_rel, new=n_rel, metric=metric,
                             runs_base=sides[0][2], runs_new=sides[1][2], test=result.test,
                             rows=rows, counts=counts)


def _magnitude(row: dict[str, Any]) -> float:
    change = row["change_pct"]
    return -abs(change) if change is not None else 0.0


def sort_rows(rows: list[dict[str, Any]], sort: str) -> list[dict[str, Any]]:
    """Rows in the page's order: by verdict (regressions first, then by |change|), by
    |change %|, by |diff|, by name or by p-value."""
    rank = {v: k for k, v in enumerate(VERDICT_ORDER)}
    keys: dict[str, Any] = {
        "verdict": lambda r: (rank[r["verdict"]], _magnitude(r), r["function"]),
        "change": lambda r: (_magnitude(r), r["function"]),
        "diff": lambda r: (-abs(r["diff"] or 0.0), r["function"]),
        "name": lambda r: r["function"],
        "p": lambda r: (r["p_value"] if r["p_value"] is not None else 2.0, r["function"]),
    }
    return sorted(rows, key=keys[sort])


def filter_rows(rows: list[dict[str, Any]], q: str = "", show: str = "all") -> list[dict[str, Any]]:
    """Rows whose function name contains ``q`` (case-insensitive) and whose verdict ``show``
    selects (``changed``: regressions, improvements, appeared and vanished)."""
    if not q and show == "all":
        return list(rows)
    needle = q.lower()
    changed = {"regression", "improvement", "appeared", "vanished"}
    return [
        r for r in rows
        if needle in r["function"].lower()
        and (show == "all" or r["verdict"] == show or (show == "changed"
                                                       and r["verdict"] in changed))
    ]


def remembered_rows(series: Series, query: CompareQuery
                    ) -> tuple[ReleaseComparison, list[dict[str, Any]]]:
    """``remembered_comparison`` and its rows as the controls filter and sort them, kept
    likewise (sorting 20,000 rows was ~80 ms a request)."""
    key = _comparison_key(series, query)
    result = remembered_comparison(series, query, key)

    def make() -> tuple[list[dict[str, Any]], int]:
        rows = filter_rows(result.rows, query.q, query.show)  # keeps their order
        if query.sort != "verdict":  # compare_releases leaves them by verdict
            rows = sort_rows(rows, query.sort)
        return rows, 8 * len(rows)  # references to the comparison's rows

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
        return result, 600 * len(result.rows)  # ~ bytes of a row's dict

    kept = memo.remembered(key, make)
    assert kept is not None  # make() never returns None
    return kept
