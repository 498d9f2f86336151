"""What the deviation-matrix page shows: the controls, and the slice of a stored analysis.

A read-only selector: it picks rows (functions) and columns (releases) of the stored
matrices of one (metric, estimator, rule), filters, sorts and pages them. Nothing is
recomputed here; the statistics were stored by ``deviations.analysis``. What a page
assembles from the stored analysis (its arrays, function names, and the ranking of each
release range) is kept per (series, generation, view) in ``deviations.core.memo``: the
next page, filter or sort of the same analysis reads nothing but the generation.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import urlencode

import numpy as np

from deviations.core import memo
from deviations.stats.releases import IMPROVEMENT, REGRESSION
from deviations.stats.releases.rules import (
    DEFAULT_RULE,
    RULE_NAMES,
    RULES,
    ReleaseRule,
    get_rule,
)
from deviations.traces import selectors
from deviations.traces.models import Release, Series
from deviations.traces.store import Deviations

CHOICES = {
    "metric": ("self", "total"),
    "estimator": ("median", "mean"),
    "rule": RULE_NAMES,
    "sort": ("deviations", "gap", "name"),
}
PER_RELEASE = ("estimate", "lo", "hi", "n")
PER_PAIR = ("verdict", "gap", "diff", "diff_lo", "diff_hi", "p_value", "relative",
            "digression", "early", "provisional", "final_within", "n_before", "n_after")
PER_PAGE = 100
MAX_PER_PAGE = 2000
#: Releases the matrix shows by default (the newest ones), and the zoom's choices: a page
#: of 100 functions' JSON is ~470 bytes a cell, so 30 releases (29 pairs) keep it under
#: 2 MB whatever the history (issue 24: 56 MB at 2,000 releases without a window).
WINDOW = 30
WINDOWS = (10, 30, 100, 300)
#: Past this many releases, pages list only the releases they show (the matrix's window;
#: the pickers take any version typed): 2,000 releases in four selects and a table were
#: two thirds of a 1.4 MB matrix page.
MANY_RELEASES = 200


@dataclass(frozen=True)
class MatrixQuery:
    """The page's controls; ``params()`` is the permalink's query string."""

    metric: str = "self"
    estimator: str = "median"
    rule: str = DEFAULT_RULE
    q: str = ""
    only: bool = False  # only functions with at least one deviation in the range
    sort: str = "deviations"
    first: str = ""  # release range, by version; empty = the window's end
    last: str = ""
    #: Releases shown when the range does not give both ends (0: all of them).
    window: int = WINDOW
    page: int = 1
    per: int = PER_PAGE
    #: The series' default rule (not a control): what ``rule`` is when not asked for.
    default_rule: str = DEFAULT_RULE

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
        window = params.get("window", "")
        values["window"] = 0 if window == "all" else WINDOW
        if window.isdigit():
            values["window"] = min(max(int(window), 2), 10**6)
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

    @property
    def rule_options(self) -> list[tuple[str, str, bool]]:
        """The rule selector: (value, label, selected), the series' default first."""
        order = sorted(RULE_NAMES, key=lambda r: (r != self.default_rule,
                                                  RULE_NAMES.index(r)))
        return [(r, RULES[r].label + (" (default)" if r == self.default_rule else ""),
                 r == self.rule) for r in order]

    @property
    def the_rule(self) -> ReleaseRule:
        return get_rule(self.rule)

    @property
    def rule_label(self) -> str:
        return self.the_rule.label

    def params(self, **changes: Any) -> str:
        """The query string of these controls with ``changes``; defaults are left out.

        A change that is not a control (e.g. ``format="csv"``) is appended as given.
        """
        fields = {k: v for k, v in changes.items() if k in vars(self)}
        extra = {k: v for k, v in changes.items() if k not in vars(self)}
        query = replace(self, **fields)
        defaults = MatrixQuery(default_rule=self.default_rule)
        items = {
            key: ("1" if value is True else "all" if key == "window" and value == 0 else value)
            for key, value in vars(query).items()
            # The rule is kept unless it is the series' default... and the package's, so
            # that a permalink keeps its rule when the series' default changes.
            if value != getattr(defaults, key) or (key == "rule" and value != self.default_rule)
        }
        return urlencode(items | extra)


@dataclass(frozen=True)
class Window:
    """The analysed releases a page shows: columns ``start:stop`` of ``total``, with the
    links that move or widen it (query strings; None where there is nowhere to go)."""

    start: int
    stop: int
    total: int
    release_ids: np.ndarray  # of the shown columns
    versions: list[str]
    older: str | None
    newer: str | None
    newest: str | None
    zoom: list[tuple[int, str, bool]]  # (releases, query string, current)
    everything: str | None  # every release (an explicit ask: its JSON grows with history)

    @property
    def columns(self) -> tuple[int, int]:
        return self.start, self.stop

    @property
    def partial(self) -> bool:
        return self.stop - self.start < self.total


def _bounds(query: MatrixQuery, positions: dict[str, int], total: int) -> tuple[int, int]:
    """Columns of the shown releases: the From/to range when both ends are given (and in
    order), else ``window`` releases ending at to (or starting at From, or the newest)."""
    first, last = positions.get(query.first), positions.get(query.last)
    if first is not None and last is not None and last - first >= 1:
        return first, last + 1
    size = total if query.window == 0 else query.window
    if first is not None and last is None:
        return first, min(total, first + size)
    stop = last + 1 if last is not None and first is None else total
    return max(0, stop - size), stop


def release_window(series: Series, query: MatrixQuery) -> Window | None:
    """The releases the controls select, read without the analysis' blocks (its list of
    columns, and the versions of the shown and asked ones); None before any analysis."""
    ids = selectors.analysed_release_ids(series)
    if ids is None:
        return None
    total = len(ids)
    column = {int(r): c for c, r in enumerate(ids.tolist())}
    asked = [v for v in (query.first, query.last) if v]
    positions = {
        version: column[rid] for version, rid in Release.objects.filter(
            series=series, version__in=asked).values_list("version", "id") if rid in column
    }
    start, stop = _bounds(query, positions, total)
    shown = ids[start:stop]
    versions = selectors.release_versions(shown)
    size = stop - start
    keep = {"page": 1} if query.page != 1 else {}

    def moved(**changes: Any) -> str:
        return query.params(**(keep | changes))

    older = newer = newest = None
    if start > 0:  # the window before, sharing this one's first release (its first pair)
        older = moved(first="", last=versions[0], window=size)
    if stop < total:
        newer = (moved(first=versions[-1], last="", window=size) if stop - 1 + size < total
                 else moved(first="", last="", window=size))
        newest = moved(first="", last="", window=size)
    zoom = [(w, moved(first="", last=versions[-1] if stop < total else "", window=w),
             w == size and query.window != 0) for w in WINDOWS if w < total]
    everything = moved(first="", last="", window=0) if size < total else None
    return Window(start, stop, total, shown, versions, older, newer, newest, zoom, everything)


@dataclass(frozen=True)
class MatrixSlice:
    query: MatrixQuery
    window: Window
    releases: list[str]  # versions of the shown columns
    function_ids: list[int]  # the shown rows (this page)
    function_names: list[str]
    matching: int  # functions matching the filters, over all pages
    pages: int
    arrays: dict[str, np.ndarray]  # per release (F, R) and per pair (F, R-1), shown part only
    regressions: np.ndarray  # per shown function, in the range
    improvements: np.ndarray
    largest_gap: np.ndarray  # per shown function, its largest deviation's |relative| change


@dataclass(frozen=True)
class _Assembled:
    """One (metric, estimator, rule) of one generation of a series' analysis, as pages
    read it; ``ranks`` fills per release range (first, last column) as they are asked."""

    found: dict[str, np.ndarray]  # read-only
    names: list[str]
    folded: list[str]  # casefolded names: search and sort by name
    ranks: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]]


def _view_key(series: Series, query: MatrixQuery) -> tuple[Any, ...]:
    """What a kept entry of the matrix depends on besides the generation and the window:
    the view, and the series' minimum practical change (the verdicts are read through it:
    ``selectors.stored_analysis``; a change of it is a new key, like a new analysis)."""
    return (query.metric, query.estimator, query.rule, series.min_relative_change,
            series.min_absolute_change_us, selectors.metric_settings_key(series))


def _assembled(series: Series, query: MatrixQuery, window: Window) -> _Assembled | None:
    generation = selectors.analysis_generation(series)
    if generation is None:
        return None
    view = (query.metric, query.estimator, query.rule)

    def make() -> tuple[_Assembled, int] | None:
        # Every function (the ranking needs them all), the window's releases only.
        found = selectors.stored_analysis(series, *view, keys=PER_RELEASE + PER_PAIR,
                                          columns=window.columns)
        if found is None:
            return None
        found, size = memo.frozen(found)
        names_by_id = selectors.function_names(series)
        names = [names_by_id[i] for i in found["function_ids"].tolist()]
        size += 2 * sum(len(n) + 60 for n in names)
        assembled = _Assembled(found, names, [n.casefold() for n in names], {})
        return assembled, size

    return memo.remembered(("matrix", series.pk, generation, *_view_key(series, query),
                            window.columns), make)


def _ranks(found: dict[str, np.ndarray], start: int, stop: int) -> tuple[np.ndarray, np.ndarray]:
    """Per function, in the columns ``start:stop``: the number of deviations and the
    largest |relative| change of a deviation (the rule's own comparison; 0 without one)."""
    pairs = slice(start, stop - 1)
    verdict = found["verdict"][:, pairs]
    deviation = (verdict == REGRESSION) | (verdict == IMPROVEMENT)
    relative = np.abs(found["relative"][:, pairs])
    relative = np.where(deviation & np.isfinite(relative), relative, 0.0)
    return deviation.sum(axis=1), relative.max(axis=1, initial=0.0)


@dataclass(frozen=True)
class _Ranked:
    """A window's ranking from the deviation records alone (``_ranks`` without reading
    the window's cells): per function (ids sorted), its deviations in the window and the
    largest |relative| change of one."""

    function_ids: np.ndarray
    counts: np.ndarray
    largest: np.ndarray


def _record_ranks(found: Deviations) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_ranks` from the window's deviations (``selectors.window_deviations``): the
    other cells count 0 and add nothing to the largest change. ``relative`` is
    ``diff / |before|`` (``store.view``), the same floating-point value."""
    F = len(found.function_ids)  # noqa: N806
    with np.errstate(invalid="ignore", divide="ignore"):
        relative = np.abs(found.diff / np.abs(found.before))
    relative = np.where(np.isfinite(relative), relative, 0.0)
    counts = np.bincount(found.rows, minlength=F)
    largest = np.zeros(F)
    np.maximum.at(largest, found.rows, relative)
    return counts, largest


def _ranked(series: Series, query: MatrixQuery, window: Window, generation: int
            ) -> _Ranked | None:
    """The window's ranking from the deviation records, kept per (generation, view,
    window); None before any analysis or without records (blocks stored before migration
    0033)."""

    def make() -> tuple[_Ranked, int] | None:
        found = selectors.window_deviations(series, query.metric, query.estimator,
                                            query.rule, window.columns)
        if found is None:
            return None
        counts, largest = _record_ranks(found)
        arrays, size = memo.frozen({"function_ids": found.function_ids.copy(),
                                    "counts": counts, "largest": largest})
        return _Ranked(**arrays), size

    return memo.remembered(("matrix-ranks", series.pk, generation, *_view_key(series, query),
                            window.columns), make)


def _folded_names(series: Series, generation: int, function_ids: np.ndarray) -> list[str]:
    """Casefolded names of ``function_ids`` (every row of analysis ``generation``), kept
    per generation: only a search or the sort by name reads every name."""

    def make() -> tuple[list[str], int]:
        names = selectors.function_names(series)
        folded = [names[i].casefold() for i in function_ids.tolist()]
        return folded, sum(len(n) + 60 for n in folded)

    return memo.remembered(("matrix-names", series.pk, generation), make) or []


def _order(query: MatrixQuery, counts: np.ndarray, largest: np.ndarray,
           folded: list[str] | None) -> np.ndarray:
    """The rows the filters keep, in the order of the sort (``folded``: every row's
    casefolded name, needed by a search and the sort by name)."""
    keep = np.ones(len(counts), dtype=bool)
    if query.q and folded is not None:
        needle = query.q.casefold()
        keep &= np.array([needle in n for n in folded], dtype=bool)
    if query.only:
        keep &= counts > 0
    rows = np.flatnonzero(keep)
    if query.sort == "name" and folded is not None:
        return rows[np.argsort([folded[r] for r in rows], kind="stable")]
    if query.sort == "gap":
        return rows[np.argsort(-largest[rows], kind="stable")]
    return rows[np.lexsort((-largest[rows], -counts[rows]))]


def matrix_slice(series: Series, query: MatrixQuery, *, records: bool = True,
                 window: Window | None = None) -> MatrixSlice | None:
    """The part of the stored matrix the controls select, or None before any analysis.

    Functions are ranked over the window's pairs from the blocks' deviation records
    (``store.read_deviations``: a few bytes a deviation), then only the shown rows' cells
    are read. Without records (``records=False``, or blocks stored before migration 0033)
    every function's cells of the window are read and ranked, as before: the same page.
    ``window``: ``release_window(series, query)`` when the caller has it already.
    """
    if window is None:
        window = release_window(series, query)
    if window is None:
        return None
    generation = selectors.analysis_generation(series)
    if generation is None:
        return None
    ranked = _ranked(series, query, window, generation) if records else None
    if ranked is None:
        return _slice_of_window(series, query, window)
    ids = ranked.function_ids
    folded = (_folded_names(series, generation, ids) if query.q or query.sort == "name"
              else None)
    rows = _order(query, ranked.counts, ranked.largest, folded)
    pages = max(1, -(-len(rows) // query.per))
    page = min(query.page, pages)
    shown = rows[(page - 1) * query.per : page * query.per]
    shown_ids = ids[shown]
    kept = _shown_rows(series, query, window, generation, shown_ids)
    if kept is None:
        return _slice_of_window(series, query, window)  # a new analysis in between
    found, names = kept
    at = np.searchsorted(found["function_ids"], shown_ids)
    return _sliced(query, window, found, at, shown_ids, names, len(rows), pages, page,
                   ranked.largest[shown])


def _shown_rows(series: Series, query: MatrixQuery, window: Window, generation: int,
                shown_ids: np.ndarray) -> tuple[dict[str, np.ndarray], list[str]] | None:
    """The window's cells and names of the rows ``shown_ids`` (in that order; the arrays'
    rows sorted by id), kept per (generation, view, window, rows); None when the stored
    analysis is not generation ``generation`` any more."""
    ids = shown_ids.tolist()

    def make() -> tuple[tuple[dict[str, np.ndarray], list[str]], int] | None:
        found = selectors.stored_analysis(series, query.metric, query.estimator, query.rule,
                                          keys=PER_RELEASE + PER_PAIR,
                                          columns=window.columns, function_ids=ids)
        if found is None or not np.array_equal(np.sort(shown_ids), found["function_ids"]):
            return None
        names_by_id = selectors.function_names(series, ids)
        names = [names_by_id[i] for i in ids]
        found, size = memo.frozen(found)
        return (found, names), size + sum(len(n) + 60 for n in names)

    return memo.remembered(("matrix-rows", series.pk, generation, *_view_key(series, query),
                            window.columns, tuple(ids)), make)


def _slice_of_window(series: Series, query: MatrixQuery, window: Window) -> MatrixSlice | None:
    """``matrix_slice`` from every function's cells of the window (read once, kept)."""
    assembled = _assembled(series, query, window)
    if assembled is None:
        return None
    found = assembled.found
    span = (0, len(found["release_ids"]))
    if span not in assembled.ranks:
        assembled.ranks[span] = _ranks(found, *span)
    counts, largest = assembled.ranks[span]
    ids = found["function_ids"]
    rows = _order(query, counts, largest, assembled.folded)
    pages = max(1, -(-len(rows) // query.per))
    page = min(query.page, pages)
    shown = rows[(page - 1) * query.per : page * query.per]
    return _sliced(query, window, found, shown, ids[shown],
                   [assembled.names[r] for r in shown], len(rows), pages, page,
                   largest[shown])


def _sliced(query: MatrixQuery, window: Window, found: dict[str, np.ndarray], at: np.ndarray,
            shown_ids: np.ndarray, names: list[str], matching: int, pages: int, page: int,
            largest: np.ndarray) -> MatrixSlice:
    """The page of rows ``at`` of ``found`` (a window's arrays; ``shown_ids`` are theirs)."""
    # Versions are read each time (one small query): a release renamed in the admin shows
    # at once. A function renamed there shows with the next analysis.
    stop = len(found["release_ids"])
    arrays = {k: found[k][at][:, :stop] for k in PER_RELEASE}
    arrays |= {k: found[k][at][:, : stop - 1] for k in PER_PAIR}
    return MatrixSlice(
        query=replace(query, page=page),
        window=window,
        releases=window.versions[:stop],
        function_ids=shown_ids.tolist(),
        function_names=names,
        matching=matching,
        pages=pages,
        arrays=arrays,
        regressions=(arrays["verdict"] == REGRESSION).sum(axis=1),
        improvements=(arrays["verdict"] == IMPROVEMENT).sum(axis=1),
        largest_gap=largest,
    )


def cell_rows(view: MatrixSlice, series: Series) -> Iterator[dict[str, Any]]:
    """The shown cells with a verdict, as export rows (µs; DESIGN's deviations fields, and
    each pair's culprit range)."""
    return selectors.deviation_cells(view.function_names, view.releases, view.arrays,
                                     selectors.pair_ranges(series, view.releases))


def range_problem(query: MatrixQuery, versions: list[str]) -> str:
    """Why the From/to range cannot be shown as asked, or "" (``versions``: the series'
    releases in order). The matrix then shows its window of releases, and the page says
    so."""
    if not query.first or not query.last:
        return ""
    if query.first not in versions or query.last not in versions:
        return ""
    i, j = versions.index(query.first), versions.index(query.last)
    if i > j:
        return (f"From {query.first} comes after to {query.last}: swap them to see that "
                "range. Showing the window of releases below instead.")
    if i == j:
        return (f"From and to are both {query.first}: a range needs two releases. "
                "Showing the window of releases below instead.")
    return ""


def cells_json(view: MatrixSlice | None, series: Series) -> bytes:
    """``cell_rows`` as a JSON array (``[]`` before any analysis)."""
    if view is None:
        return b"[]"
    return selectors.deviation_cells_json(view.function_names, view.releases, view.arrays,
                                          selectors.pair_ranges(series, view.releases))
