"""What the deviation-matrix page shows: the controls, and the slice of a stored analysis.

A read-only selector: it picks rows (functions) and columns (releases) of the stored
matrices of one (metric, estimator, rule), filters, sorts and pages them. Nothing is
recomputed here; the statistics were stored by ``deviations.analysis``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import urlencode

import numpy as np

from deviations.stats.releases import IMPROVEMENT, REGRESSION
from deviations.traces import selectors
from deviations.traces.models import Series

CHOICES = {
    "metric": ("self", "total"),
    "estimator": ("median", "mean"),
    "rule": ("paper", "recommended"),
    "sort": ("deviations", "gap", "name"),
}
PER_RELEASE = ("estimate", "lo", "hi", "n")
PER_PAIR = ("verdict", "gap", "diff", "diff_lo", "diff_hi", "digression", "provisional")
PER_PAGE = 100
MAX_PER_PAGE = 2000


@dataclass(frozen=True)
class MatrixQuery:
    """The page's controls; ``params()`` is the permalink's query string."""

    metric: str = "self"
    estimator: str = "median"
    rule: str = "paper"
    q: str = ""
    only: bool = False  # only functions with at least one deviation in the range
    sort: str = "deviations"
    first: str = ""  # release range, by version; empty = the series' ends
    last: str = ""
    page: int = 1
    per: int = PER_PAGE
    #: The series' default rule (not a control): what ``rule`` is when not asked for.
    default_rule: str = "paper"

    @classmethod
    def from_params(cls, params: Mapping[str, str]) -> MatrixQuery:
        """Controls from a query string; unknown values fall back to the defaults."""
        values: dict[str, Any] = {}
        for key, allowed in CHOICES.items():
            if params.get(key) in allowed:
                values[key] = params[key]
        values["q"] = params.get("q", "")[:200]
        values["only"] = params.get("only") in ("1", "on", "true")
        values["first"] = params.get("first", "")[:100]
        values["last"] = params.get("last", "")[:100]
        for key, default, top in (("page", 1, 10**6), ("per", PER_PAGE, MAX_PER_PAGE)):
            try:
                values[key] = min(max(int(params.get(key, default)), 1), top)
            except ValueError:
                values[key] = default
        return cls(**values)

    @classmethod
    def for_series(cls, params: Mapping[str, str], series: Series) -> MatrixQuery:
        """Controls from a query string, the rule defaulting to the series' setting."""
        query = replace(cls.from_params(params), default_rule=series.default_rule)
        if params.get("rule") not in CHOICES["rule"]:
            query = replace(query, rule=series.default_rule)
        return query

    def params(self, **changes: Any) -> str:
        """The query string of these controls with ``changes``; defaults are left out.

        A change that is not a control (e.g. ``format="csv"``) is appended as given.
        """
        fields = {k: v for k, v in changes.items() if k in vars(self)}
        extra = {k: v for k, v in changes.items() if k not in vars(self)}
        query = replace(self, **fields)
        defaults = MatrixQuery(default_rule=self.default_rule)
        items = {
            key: ("1" if value is True else value)
            for key, value in vars(query).items()
            # The rule is kept unless it is "paper" and the series' default, so that a
            # permalink keeps its rule when the series' default changes.
            if value != getattr(defaults, key) or (key == "rule" and value != self.default_rule)
        }
        return urlencode(items | extra)


@dataclass(frozen=True)
class MatrixSlice:
    query: MatrixQuery
    releases: list[str]  # versions of the shown columns
    function_ids: list[int]  # the shown rows (this page)
    function_names: list[str]
    matching: int  # functions matching the filters, over all pages
    pages: int
    arrays: dict[str, np.ndarray]  # per release (F, R) and per pair (F, R-1), shown part only
    regressions: np.ndarray  # per shown function, in the range
    improvements: np.ndarray
    largest_gap: np.ndarray  # per shown function, |gap| relative to the earlier estimate


def matrix_slice(series: Series, query: MatrixQuery) -> MatrixSlice | None:
    """The part of the stored matrix the controls select, or None before any analysis."""
    found = selectors.stored_analysis(
        series, query.metric, query.estimator, query.rule, keys=PER_RELEASE + PER_PAIR
    )
    if found is None:
        return None
    versions = selectors.release_versions(found["release_ids"])
    start = versions.index(query.first) if query.first in versions else 0
    stop = versions.index(query.last) + 1 if query.last in versions else len(versions)
    if stop - start < 2:
        start, stop = 0, len(versions)
    cols, pairs = slice(start, stop), slice(start, stop - 1)
    verdict = found["verdict"][:, pairs]
    deviation = (verdict == REGRESSION) | (verdict == IMPROVEMENT)
    with np.errstate(invalid="ignore", divide="ignore"):
        relative = np.abs(found["gap"][:, pairs]) / np.abs(found["estimate"][:, start : stop - 1])
    relative = np.where(deviation & np.isfinite(relative), relative, 0.0)
    names_by_id = selectors.function_names(series)
    ids = found["function_ids"]
    names = [names_by_id[int(i)] for i in ids]
    keep = np.ones(len(ids), dtype=bool)
    if query.q:
        needle = query.q.casefold()
        keep &= np.array([needle in n.casefold() for n in names], dtype=bool)
    counts = deviation.sum(axis=1)
    if query.only:
        keep &= counts > 0
    rows = np.flatnonzero(keep)
    if query.sort == "name":
        rows = rows[np.argsort([names[r].casefold() for r in rows], kind="stable")]
    elif query.sort == "gap":
        rows = rows[np.argsort(-relative.max(axis=1, initial=0.0)[rows], kind="stable")]
    else:
        rows = rows[np.lexsort((-relative.max(axis=1, initial=0.0)[rows], -counts[rows]))]
    pages = max(1, -(-len(rows) // query.per))
    page = min(query.page, pages)
    shown = rows[(page - 1) * query.per : page * query.per]
    arrays = {k: found[k][shown][:, cols] for k in PER_RELEASE}
    arrays |= {k: found[k][shown][:, pairs] for k in PER_PAIR}
    return MatrixSlice(
        query=replace(query, page=page),
        releases=versions[start:stop],
        function_ids=[int(i) for i in ids[shown]],
        function_names=[names[r] for r in shown],
        matching=len(rows),
        pages=pages,
        arrays=arrays,
        regressions=(verdict[shown] == REGRESSION).sum(axis=1),
        improvements=(verdict[shown] == IMPROVEMENT).sum(axis=1),
        largest_gap=relative[shown].max(axis=1, initial=0.0),
    )


def cell_rows(view: MatrixSlice) -> Iterator[dict[str, Any]]:
    """The shown cells with a verdict, as export rows (µs; DESIGN's deviations fields)."""
    return selectors.deviation_cells(view.function_names, view.releases, view.arrays)


def range_problem(query: MatrixQuery, versions: list[str]) -> str:
    """Why the From/to range cannot be shown as asked, or "" (``versions``: the series'
    releases in order). The matrix then shows every release, and the page says so."""
    if not query.first or not query.last:
        return ""
    if query.first not in versions or query.last not in versions:
        return ""
    i, j = versions.index(query.first), versions.index(query.last)
    if i > j:
        return (f"From {query.first} comes after to {query.last}: swap them to see that "
                "range. Showing every release.")
    if i == j:
        return (f"From and to are both {query.first}: a range needs two releases. "
                "Showing every release.")
    return ""
