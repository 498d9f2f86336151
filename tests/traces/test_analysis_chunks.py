"""An analysis in chunks of rows (issue 24): bounded memory, the same arrays, published at
once. The chord on a real worker is ``test_a_chord_of_chunk_tasks_on_a_real_worker``
(second pass of ``make test``)."""

from __future__ import annotations

import tracemalloc
from typing import Any

import numpy as np
import pytest

from deviations.traces import analysis, store
from deviations.traces.models import AnalysisBlock, Function
from tests.traces.test_analysis import (
    RandomSeries,
    add_flat_runs,
    assert_same_as_full,
    stored_arrays,
)

pytestmark = pytest.mark.django_db


def one_piece_cost(series_id: int) -> int:
    """Bytes the one-piece analysis of a series holds by the cost model."""
    columns = analysis.current_columns(analysis.Series.objects.get(pk=series_id))
    p = analysis.plan(columns, None)
    functions = Function.objects.filter(series_id=series_id).count()
    return functions * analysis._costs(columns, p, len(columns.release_ids))[1]


def chunk_calls(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int, int]]:
    """Record each chunk run: its rows and the peak bytes NumPy and Python allocated."""
    calls: list[tuple[int, int, int]] = []
    real = analysis.run_chunk

    def traced(job: analysis.Job, lo: int, hi: int) -> None:
        tracemalloc.start()
        try:
            real(job, lo, hi)
            calls.append((lo, hi, tracemalloc.get_traced_memory()[1]))
        finally:
            tracemalloc.stop()

    monkeypatch.setattr(analysis, "run_chunk", traced)
    return calls


def analysed_in_one_piece(data: RandomSeries, **kw: Any) -> int:
    """Analyse in one piece; the peak traced bytes."""
    tracemalloc.start()
    try:
        message = analysis.analyse_series(data.series.pk, **kw)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert "chunks" not in message
    return peak


def test_a_series_larger_than_the_memory_setting_completes_in_bounded_chunks(
    monkeypatch: pytest.MonkeyPatch, settings: Any,
) -> None:
    data = RandomSeries(31, functions=240)
    for number in range(12):
        data.add_runs(number, 4)
    whole = analysed_in_one_piece(data)
    one_piece = stored_arrays(data.series)
    cost = one_piece_cost(data.series.pk)
    settings.DEVIATIONS_ANALYSIS_MEMORY_MB = cost / 6 / 2**20  # a sixth of what it needs
    calls = chunk_calls(monkeypatch)
    message = analysis.analyse_series(data.series.pk, force=True)
    assert message.endswith(f"in {len(calls)} chunks"), message
    assert len(calls) >= 6
    # The chunks cover the rows once, in order, each within the setting by the cost model.
    starts, stops = [c[0] for c in calls], [c[1] for c in calls]
    assert (starts[0], stops[-1]) == (0, 240)
    assert starts[1:] == stops[:-1]
    budget = analysis.memory_budget()
    columns = analysis.current_columns(data.series)
    per_row = analysis._costs(columns, analysis.plan(columns, None), 12)[1]
    assert max(hi - lo for lo, hi, _ in calls) * per_row <= budget
    # Measured: each chunk allocates a fraction of the one-piece analysis.
    assert max(peak for *_, peak in calls) < whole / 2, (calls, whole)
    # The same arrays as in one piece, published together, nothing left staged.
    got = stored_arrays(data.series)
    for kind, arrays in one_piece.items():
        for key, value in arrays.items():
            np.testing.assert_array_equal(got[kind][key], value, err_msg=f"{kind} {key}")
    assert not AnalysisBlock.objects.exclude(stage=0).exists()
    assert_same_as_full(data.series)


@pytest.mark.parametrize("seed", [32, 33])
def test_chunked_updates_match_a_full_recompute_and_rewrite_only_what_changed(
    seed: int, monkeypatch: pytest.MonkeyPatch, settings: Any,
) -> None:
    monkeypatch.setattr(store, "BLOCK_ROWS", 16)
    data = RandomSeries(seed, functions=70)
    numbers = [int(n) for n in data.rng.permutation(16)]
    for number in numbers[:8]:
        data.add_runs(number, 3)
    settings.DEVIATIONS_ANALYSIS_MEMORY_MB = one_piece_cost(data.series.pk) / 4 / 2**20
    calls = chunk_calls(monkeypatch)
    assert "chunks" in analysis.analyse_series(data.series.pk)
    late = [Function.objects.create(series=data.series, name=f"late{k}").pk for k in range(20)]
    for k, number in enumerate(numbers[8:]):
        # Runs of a new release, runs added to a stored one, and (twice) new functions.
        if k % 3 == 2:
            add_flat_runs(data, number, 3, [*data.fids, *late[: 10 * (k // 3 + 1)]])
        else:
            data.add_runs(number, 3)
        if k == 4:
            data.add_runs(numbers[0], 2)
        before = {(b.release_id, b.metric, b.estimator, b.row_start): b.pk
                  for b in AnalysisBlock.objects.all()}
        columns = analysis.current_columns(data.series)
        p = analysis.plan(columns, store.read_head(data.series.pk))
        crowded = store.crowded(data.series, columns.release_ids) if k % 3 == 2 else set()
        calls.clear()
        message = analysis.analyse_series(data.series.pk)
        assert "incremental" in message, message
        assert "chunks" in message, message
        assert len(calls) > 1
        assert_same_as_full(data.series)
        # Blocks of columns nobody recomputed were kept (the same rows in the table),
        # unless new functions crowded them.
        touched = p.changed.copy()
        touched[1:] |= p.pairs | p.boundaries
        touched[list(crowded)] = True
        kept_columns = set(columns.release_ids[~touched].tolist())
        after = {(b.release_id, b.metric, b.estimator, b.row_start): b.pk
                 for b in AnalysisBlock.objects.all()}
        kept = [key for key in before if key[0] in kept_columns]
        assert kept
        assert all(after.get(key) == before[key] for key in kept), message
    # Every block within BLOCK_ROWS rows, cut at its multiples.
    for row_start, rows in AnalysisBlock.objects.values_list("row_start", "rows"):
        assert rows <= 16
        assert (row_start + rows) % 16 == 0 or row_start // 16 == (row_start + rows - 1) // 16


def test_readers_see_the_old_analysis_until_the_last_chunk_publishes(
    monkeypatch: pytest.MonkeyPatch, settings: Any,
) -> None:
    data = RandomSeries(34, functions=60)
    for number in range(6):
        data.add_runs(number, 3)
    analysis.analyse_series(data.series.pk)
    old = stored_arrays(data.series)
    settings.DEVIATIONS_ANALYSIS_MEMORY_MB = one_piece_cost(data.series.pk) / 4 / 2**20
    seen: list[bool] = []
    real = analysis.run_chunk

    def chunk_then_read(job: analysis.Job, lo: int, hi: int) -> None:
        real(job, lo, hi)
        now = stored_arrays(data.series)
        seen.append(all(np.array_equal(now[k][key], v[key], equal_nan=v[key].dtype.kind == "f")
                        for k, v in old.items() for key in v))
        if len(seen) == 3:
            raise MemoryError  # a chunk that fails: nothing of the stage is published

    monkeypatch.setattr(analysis, "run_chunk", chunk_then_read)
    with pytest.raises(MemoryError):
        analysis.analyse_series(data.series.pk, force=True)
    assert seen == [True, True, True]
    assert not AnalysisBlock.objects.exclude(stage=0).exists()
    monkeypatch.setattr(analysis, "run_chunk", real)
    assert "chunks" in analysis.analyse_series(data.series.pk, force=True)
    assert_same_as_full(data.series)


def test_a_stage_missing_blocks_is_not_published(settings: Any) -> None:
    data = RandomSeries(35, functions=40)
    for number in range(5):
        data.add_runs(number, 3)
    analysis.analyse_series(data.series.pk)
    settings.DEVIATIONS_ANALYSIS_MEMORY_MB = one_piece_cost(data.series.pk) / 3 / 2**20
    columns = analysis.current_columns(data.series)
    p = analysis.plan(columns, None)
    job = analysis.prepare(data.series, columns, None, p, analysis.timezone.now())
    assert len(job.chunks) > 1
    for lo, hi in job.chunks[1:]:  # the first chunk never ran (its task was lost)
        analysis.run_chunk(job, lo, hi)
    generation = store.generation(data.series.pk)
    with pytest.raises(store.IncompleteStageError):
        analysis.finish(job)
    assert store.generation(data.series.pk) == generation
    assert not AnalysisBlock.objects.exclude(stage=0).exists()
    assert_same_as_full(data.series)


def test_a_job_travels_as_json() -> None:
    data = RandomSeries(36, functions=10)
    for number in range(4):
        data.add_runs(number, 2)
    columns = analysis.current_columns(data.series)
    p = analysis.plan(columns, None)
    job = analysis.prepare(data.series, columns, None, p, analysis.timezone.now())
    again = analysis.Job.from_json(job.to_json())
    assert again.to_json() == job.to_json()
    assert again.snapshot == job.snapshot
    np.testing.assert_array_equal(again.function_ids, job.function_ids)


def test_a_chunk_task_at_the_time_limit_is_recorded_and_nothing_is_published(
    monkeypatch: pytest.MonkeyPatch, settings: Any,
) -> None:
    from celery.exceptions import SoftTimeLimitExceeded

    from deviations.traces import attempts, tasks

    data = RandomSeries(37, functions=40)
    for number in range(5):
        data.add_runs(number, 3)
    analysis.analyse_series(data.series.pk)
    generation = store.generation(data.series.pk)
    data.add_runs(5, 3)
    settings.DEVIATIONS_ANALYSIS_MEMORY_MB = one_piece_cost(data.series.pk) / 3 / 2**20
    sent: list[analysis.Job] = []
    attempts.begin(data.series.pk, attempts.runs_until(data.series.pk))
    message = analysis._analyse(data.series, True, sent.append)  # as on a worker pool
    assert message.startswith(analysis.SENT)
    payload = sent[0].to_json()
    real = analysis.run_chunk

    def too_long(job: analysis.Job, lo: int, hi: int) -> None:
        if lo:
            raise SoftTimeLimitExceeded
        real(job, lo, hi)

    monkeypatch.setattr(analysis, "run_chunk", too_long)
    results = [tasks.analyse_chunk.run(payload, lo, hi) for lo, hi in sent[0].chunks]
    assert "stopped at the time limit" in results
    assert "not published" in tasks.finish_analysis.run(results, payload)
    data.series.refresh_from_db()
    assert data.series.analysis_failure == attempts.limit_reason()
    assert data.series.analysis_started is None
    assert store.generation(data.series.pk) == generation
    assert not AnalysisBlock.objects.exclude(stage=0).exists()
    # The sweeper sends nothing for the same runs (no loop); a new run tries again.
    assert tasks.analyse_stale_series() == []
    monkeypatch.setattr(analysis, "run_chunk", real)
    results = [tasks.analyse_chunk.run(payload, lo, hi) for lo, hi in sent[0].chunks]
    assert "chunks" in tasks.finish_analysis.run(results, payload)
    data.series.refresh_from_db()
    assert data.series.analysis_failure == ""
    assert_same_as_full(data.series)
