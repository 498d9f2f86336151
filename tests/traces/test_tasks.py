"""Analyses and alert passes sent once per burst (``traces.tasks.send_once``) with a worker."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.cache import cache

from deviations.traces import tasks
from tests.traces.test_matrix_pages import series  # noqa: F401 (fixture)

pytestmark = pytest.mark.django_db


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int]]:
    """Tasks sent to a (pretend) worker, with the marks of a shared cache."""
    messages: list[tuple[str, int]] = []
    monkeypatch.setattr(tasks, "_coalesces", lambda: True)
    monkeypatch.setattr(tasks, "enqueue",
                        lambda task, series_id: messages.append((task.name, series_id)) or True)
    cache.clear()
    yield messages
    cache.clear()


def test_runs_finished_while_an_analysis_is_queued_send_no_other(
    sent: list[tuple[str, int]], series: str  # noqa: F811
) -> None:
    from deviations.traces.models import Series
    from deviations.traces.receivers import queue_analysis

    s = Series.objects.get(name=series)
    other = Series.objects.create(name="other")
    for _ in range(3):  # three runs of s finish before its analysis starts
        queue_analysis(sender=None, series_id=s.pk)
    queue_analysis(sender=None, series_id=other.pk)
    analyse = tasks.analyse_series.name
    assert sent == [(analyse, s.pk), (analyse, other.pk)]
    # The analysis starts (and drops its mark before it reads the runs): a run finishing
    # from now on sends another.
    tasks.analyse_series.run(s.pk)
    queue_analysis(sender=None, series_id=s.pk)
    assert sent[2:] == [(analyse, s.pk)]


def test_alert_passes_are_sent_once_per_burst(
    sent: list[tuple[str, int]], series: str  # noqa: F811
) -> None:
    for _ in range(3):
        tasks.send_once(tasks.series_alerts, 7)
    assert sent == [(tasks.series_alerts.name, 7)]
    tasks.series_alerts.run(7)  # no such series: records nothing, drops the mark
    tasks.send_once(tasks.series_alerts, 7)
    assert len(sent) == 2


def test_a_message_that_could_not_be_sent_leaves_no_mark(
    sent: list[tuple[str, int]], monkeypatch: pytest.MonkeyPatch
) -> None:
    down: list[Any] = []
    monkeypatch.setattr(tasks, "enqueue", lambda task, series_id: down.append(series_id) and False)
    assert tasks.send_once(tasks.analyse_series, 5) is False
    assert tasks.send_once(tasks.analyse_series, 5) is False
    assert down == [5, 5]  # each run tried again (the beat's sweeper catches the series)


def test_in_process_tasks_are_never_coalesced(series: str) -> None:  # noqa: F811
    # The embedded default (and the suite) run tasks in-process: nothing to coalesce.
    assert tasks._coalesces() is False
