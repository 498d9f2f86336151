"""A chunked analysis as a Celery chord on a real worker (issue 24): PostgreSQL, Redis and a
``celery worker`` process whose ``DEVIATIONS_ANALYSIS_MEMORY_MB`` is a fraction of what the
series needs. Second pass of ``make test``."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from deviations.traces import analysis, store, tasks
from deviations.traces.models import AnalysisBlock, Series
from tests.core.test_services import running_worker
from tests.traces.test_analysis import RandomSeries, assert_same_as_full
from tests.traces.test_analysis_chunks import one_piece_cost

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]


def analysed(series: Series, before: int | None, log: Path, timeout: float = 180) -> None:
    """Until a new generation is stored and the attempt ended."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        series.refresh_from_db()
        if store.generation(series.pk) not in (None, before) and series.analysis_started is None:
            assert not series.analysis_failure, series.analysis_failure
            return
        time.sleep(0.3)
    raise AssertionError(f"no analysis stored after {timeout} s:\n{log.read_text()[-4000:]}")


def test_a_chord_of_chunk_tasks_on_a_real_worker(tmp_path: Path, settings: Any) -> None:
    data = RandomSeries(41, functions=80)
    for number in range(10):
        data.add_runs(number, 3)
    memory_mb = one_piece_cost(data.series.pk) / 5 / 2**20
    log = tmp_path / "worker.log"
    with running_worker(tmp_path, tmp_path / "media",
                        {"DEVIATIONS_ANALYSIS_MEMORY_MB": repr(memory_mb)}):
        tasks.analyse_series.delay(data.series.pk)
        analysed(data.series, None, log)
        assert_same_as_full(data.series)
        text = log.read_text()
        assert text.count("deviations.analyse_chunk") >= 2 * 4  # received and succeeded
        assert "deviations.finish_analysis" in text
        # One release more: an update in chunks, published at once.
        before = store.generation(data.series.pk)
        data.add_runs(10, 3)
        tasks.analyse_series.delay(data.series.pk)
        analysed(data.series, before, log)
        assert_same_as_full(data.series)
    assert not AnalysisBlock.objects.exclude(stage=0).exists()
    assert analysis.is_up_to_date(data.series)
