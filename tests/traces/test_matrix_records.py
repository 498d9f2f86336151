"""The matrix ranks a window's functions from the blocks' deviation records (issue 24): the
same pages (order, rows, cells) as ranking every cell of the window, after full,
incremental and chunked analyses, new functions, and with a minimum practical change."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

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


def assert_same_pages(series: Series) -> int:
    """Every query's page equals the one ranked from the window's cells; returns how many
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
            got = matrix_slice(series, query)
            expected = matrix_slice(series, query, records=False)
            assert got is not None
            assert expected is not None
            assert_same_slice(got, expected, params | {"rule": rule})
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
