"""The matrix ranks a window's functions from the blocks' deviation records and reads the
shown rows' cells from the median blocks' row records (issue 24): the same pages (order,
rows, cells; HTML and JSON) as ranking every cell of the window and reading the shown rows'
column-major fields, after full, incremental and chunked analyses, new functions, with a
minimum practical change, and with blocks stored before migrations 0033 and 0035."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlencode

import numpy as np
import pytest
from django.test import Client

from deviations.core import memo
from deviations.stats.releases import RULE_NAMES
from deviations.traces import analysis, matrix, store
from deviations.traces.matrix import MatrixQuery, MatrixSlice, matrix_slice, release_window
from deviations.traces.models import AnalysisBlock, Function, Series
from tests.traces.test_analysis import RandomSeries, add_flat_runs
from tests.traces.test_analysis_chunks import one_piece_cost

pytestmark = pytest.mark.django_db

#: Controls of the pages compared (each with every rule): sorts, a search, the filter of
#: functions with a deviation, paging, windows (the newest, an older one, all), the other
#: estimator and metric.
QUERIES: list[dict[str, str]] = [
    {}, {"sort": "gap"}, {"sort": "name"}, {"q": "f1"}, {"only": "1"},
    {"only": "1", "sort": "gap", "per": "4", "page": "2"}, {"per": "5", "page": "3"},
    {"window": "4"}, {"window": "3", "last": "5"}, {"first": "2", "last": "6"},
    {"window": "all"}, {"estimator": "mean"}, {"metric": "total", "only": "1"},
]


@contextmanager
def row_records_read() -> Iterator[list[bool]]:
    """Per call of ``store._read_records`` while inside: whether it answered (False: it
    fell back to the column-major fields)."""
    calls: list[bool] = []
    original = store._read_records

    def spy(*args: Any, **kwargs: Any) -> dict[str, np.ndarray] | None:
        got = original(*args, **kwargs)
        calls.append(got is not None)
        return got

    store._read_records = spy
    try:
        yield calls
    finally:
        store._read_records = original


@contextmanager
def column_major_rows() -> Iterator[None]:
    """Shown rows read from the blocks' column-major fields (not their row records)."""
    before = store.USE_RECORDS
    store.USE_RECORDS = False
    try:
        yield
    finally:
        store.USE_RECORDS = before


def default_view(query: MatrixQuery) -> bool:
    """Whether the row records hold fields of ``query``'s view: the shift rule's (with the
    mean, its comparison's fields, which live in the median blocks)."""
    return query.rule == "shifts"


def assert_same_pages(series: Series, *, row_records: bool = True) -> int:
    """Every query's page equals the one ranked from the window's cells, and the one whose
    shown rows are read from the column-major fields; ``row_records``: the default view's
    shown rows came from the row records (else: every read fell back). Returns how many
    shown rows had a deviation (the comparison is not of empty pages)."""
    memo.forget()
    deviating = 0
    for params in QUERIES:
        for rule in RULE_NAMES:
            query = MatrixQuery.for_series({**params, "rule": rule}, series)
            window = release_window(series, query)
            assert window is not None
            generation = store.generation(series.pk)
            assert generation is not None
            # The records were read (no fallback to the window's cells).
            assert matrix._ranked(series, query, window, generation) is not None
            with row_records_read() as calls:
                got = matrix_slice(series, query)
            assert got is not None
            shown = bool(got.function_ids)
            assert calls == ([row_records] if default_view(query) and shown else []), params
            with column_major_rows(), row_records_read() as calls:
                memo.forget()
                by_fields = matrix_slice(series, query)
            assert calls == []
            expected = matrix_slice(series, query, records=False)
            assert by_fields is not None
            assert expected is not None
            assert_same_slice(got, expected, params | {"rule": rule})
            assert_same_slice(by_fields, expected, params | {"rule": rule, "fields": "1"})
            deviating += int(np.count_nonzero(got.regressions + got.improvements))
    return deviating


def assert_same_slice(got: MatrixSlice, expected: MatrixSlice, params: dict[str, Any]) -> None:
    for key in ("query", "releases", "function_ids", "function_names", "matching", "pages"):
        assert getattr(got, key) == getattr(expected, key), (params, key)
    assert got.window.columns == expected.window.columns
    assert set(got.arrays) == set(expected.arrays)
    for key, value in expected.arrays.items():
        assert got.arrays[key].dtype == value.dtype, (params, key)
        np.testing.assert_array_equal(got.arrays[key], value, err_msg=f"{params} {key}")
    for key in ("regressions", "improvements", "largest_gap"):
        np.testing.assert_array_equal(getattr(got, key), getattr(expected, key),
                                      err_msg=f"{params} {key}")


@pytest.fixture
def small_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(store, "BLOCK_ROWS", 16)  # several blocks per column


@pytest.mark.usefixtures("small_blocks")
def test_pages_ranked_from_records_after_full_and_incremental_analyses(settings: Any) -> None:
    settings.DEVIATIONS_PAGE_CACHE_MB = 0
    data = RandomSeries(51, functions=50)
    for number in range(8):
        data.add_runs(number, 3)
    analysis.analyse_series(data.series.pk)
    assert assert_same_pages(data.series) > 0
    # A minimum practical change demotes some of the recorded deviations when read.
    Series.objects.filter(pk=data.series.pk).update(min_relative_change=0.6)
    data.series.refresh_from_db()
    assert assert_same_pages(data.series) > 0
    # A new release, runs added to a stored one, new functions: incremental updates.
    data.add_runs(8, 3)
    assert "incremental" in analysis.analyse_series(data.series.pk)
    assert_same_pages(data.series)
    data.add_runs(3, 2)
    late = [Function.objects.create(series=data.series, name=f"late{k}").pk for k in range(5)]
    add_flat_runs(data, 9, 3, [*data.fids, *late])
    assert "incremental" in analysis.analyse_series(data.series.pk)
    assert assert_same_pages(data.series) > 0


@pytest.mark.usefixtures("small_blocks")
def test_pages_ranked_from_records_after_chunked_analyses(settings: Any) -> None:
    settings.DEVIATIONS_PAGE_CACHE_MB = 0
    data = RandomSeries(52, functions=60)
    for number in range(7):
        data.add_runs(number, 3)
    settings.DEVIATIONS_ANALYSIS_MEMORY_MB = one_piece_cost(data.series.pk) / 4 / 2**20
    assert "chunks" in analysis.analyse_series(data.series.pk)
    assert assert_same_pages(data.series) > 0
    data.add_runs(7, 3)  # an update in chunks: a few columns rewritten
    message = analysis.analyse_series(data.series.pk)
    assert "incremental" in message, message
    assert "chunks" in message, message
    assert assert_same_pages(data.series) > 0


@pytest.mark.usefixtures("small_blocks")
def test_matrix_html_and_json_are_the_same_through_the_row_records(
    settings: Any, client: Client,
) -> None:
    """The matrix page and ``matrix.json`` of every control, the shown rows read from the
    row records and from the column-major fields: the same bytes."""
    settings.DEVIATIONS_PAGE_CACHE_MB = 0
    data = RandomSeries(54, functions=50)
    for number in range(8):
        data.add_runs(number, 3)
    analysis.analyse_series(data.series.pk)
    name = data.series.name
    compared = 0
    for params in QUERIES:
        for rule in RULE_NAMES:
            query = urlencode({**params, "rule": rule})
            for url in (f"/series/{name}/?{query}", f"/series/{name}/matrix.json?{query}"):
                memo.forget()
                with row_records_read() as calls:
                    got = client.get(url)
                with column_major_rows():
                    memo.forget()
                    expected = client.get(url)
                assert got.status_code == expected.status_code == 200, url
                assert got.content == expected.content, url
                compared += any(calls)
    assert compared >= 2 * 10  # the default view's pages did read the row records


@pytest.mark.usefixtures("small_blocks")
def test_blocks_without_row_records_are_read_from_their_fields(settings: Any) -> None:
    """Blocks stored before migration 0035 have no row records: the shown rows are read
    from the blocks' fields, as before, until an analysis rewrites them."""
    settings.DEVIATIONS_PAGE_CACHE_MB = 0
    data = RandomSeries(55, functions=40)
    for number in range(7):
        data.add_runs(number, 3)
    analysis.analyse_series(data.series.pk)
    assert AnalysisBlock.objects.filter(estimator="median", records__isnull=True).count() == 0
    assert AnalysisBlock.objects.filter(estimator="mean", records__isnull=False).count() == 0
    head = store.read_head(data.series.pk)
    assert head is not None
    # One column's blocks as stored before the migration.
    AnalysisBlock.objects.filter(release_id=int(head.release_ids[-2])).update(records=None)
    assert assert_same_pages(data.series, row_records=False) > 0
    analysis.analyse_series(data.series.pk, force=True)
    assert assert_same_pages(data.series) > 0


def test_row_records_hold_the_default_views_fields() -> None:
    """The records hold exactly the fields the matrix's default view is made of, packed."""
    fields = store._sources(store.ESTIMATORS[0], "shifts",
                            list(matrix.PER_RELEASE + matrix.PER_PAIR))
    assert set(fields) == set(store.RECORD_FIELDS)
    assert store.RECORD.itemsize == sum(store.DTYPES[f].itemsize for f in fields) == 82


@pytest.mark.usefixtures("small_blocks")
def test_blocks_without_records_are_ranked_from_their_cells(settings: Any) -> None:
    """Blocks stored before migration 0033 have no records: the window is ranked from
    every cell, as before, until an analysis rewrites them."""
    settings.DEVIATIONS_PAGE_CACHE_MB = 0
    data = RandomSeries(53, functions=30)
    for number in range(6):
        data.add_runs(number, 3)
    analysis.analyse_series(data.series.pk)
    query = MatrixQuery.for_series({}, data.series)
    expected = matrix_slice(data.series, query, records=False)
    head = store.read_head(data.series.pk)
    assert head is not None
    newest = head.release_ids[-1]
    AnalysisBlock.objects.filter(release_id=int(newest)).update(paper_deviations=None,
                                                                shift_deviations=None)
    window = release_window(data.series, query)
    assert window is not None
    generation = store.generation(data.series.pk)
    assert generation is not None
    assert matrix._ranked(data.series, query, window, generation) is None
    got = matrix_slice(data.series, query)
    assert got is not None
    assert expected is not None
    assert_same_slice(got, expected, {})
    analysis.analyse_series(data.series.pk, force=True)
    generation = store.generation(data.series.pk)
    assert generation is not None
    assert matrix._ranked(data.series, query, window, generation) is not None
