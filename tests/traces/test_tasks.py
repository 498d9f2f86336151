"""Analyses and alert passes sent once per burst (``traces.tasks.send_once``) with a worker."""

from __future__ import annotations

import threading
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
    monkeypatch.setattr(tasks, "_in_process", lambda: False)
    monkeypatch.setattr(tasks, "enqueue",
                        lambda task, series_id: messages.append((task.name, series_id)) or True)
    cache.clear()
    yield messages
    cache.clear()


def test_runs_finished_while_an_analysis_is_queued_send_no_other(
    sent: list[tuple[str, int]], series: str  # noqa: F811
) -> None:
    from deviations.traces.models import Series
    from deviations.traces.uploads.tasks import queue_analysis

    s = Series.objects.get(name=series)
    other = Series.objects.create(name="other")
    for _ in range(3):  # three runs of s finish before its analysis starts
        queue_analysis(s.pk)
    queue_analysis(other.pk)
    analyse = tasks.analyse_series.name
    assert sent == [(analyse, s.pk), (analyse, other.pk)]
    # The analysis starts (and drops its mark before it reads the runs): a run finishing
    # from now on sends another.
    tasks.analyse_series.run(s.pk)
    queue_analysis(s.pk)
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


@pytest.fixture
def in_process(settings: Any, tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Tasks run in-process (the embedded default), with lock files of this test's own
    site (``core.locks.site_lock_folder`` keys them by the media folder)."""
    settings.MEDIA_ROOT = tmp_path
    monkeypatch.setattr(tasks, "_in_process", lambda: True)


class _Slow:
    """A task run in-process that takes its time (a stand-in for an analysis)."""

    name = "test.slow"

    def __init__(self) -> None:
        self.started = threading.Event()
        self.release = threading.Event()
        self.runs = 0

    def delay(self, series_id: int) -> None:
        self.runs += 1
        self.started.set()
        assert self.release.wait(10)


def test_in_process_a_request_that_finds_the_task_running_leaves_it_to_the_holder(
    in_process: None,
) -> None:
    """The embedded default: ten concurrent uploads to one series made ten analyses at
    once; now a second caller returns at once and the running one runs again for it."""
    task = _Slow()
    first = threading.Thread(target=tasks.send_once, args=(task, 3))
    first.start()
    assert task.started.wait(10)
    # While the first run goes on, two more callers (other requests) come and go.
    for _ in range(2):
        caller = threading.Thread(target=tasks.send_once, args=(task, 3))
        caller.start()
        caller.join(5)
        assert not caller.is_alive()  # it did not wait for the running one
    assert task.runs == 1
    task.release.set()
    first.join(10)
    assert not first.is_alive()
    assert task.runs == 2  # one more run covers both callers
    # Nothing left behind: the next caller runs it itself, once.
    tasks.send_once(task, 3)
    assert task.runs == 3


def test_in_process_a_steady_stream_does_not_hold_a_request_for_ever(in_process: None) -> None:
    """Issue 23: under a steady stream of uploads the request holding the in-process
    analysis ran it again and again (one request took 365 s). It starts no run after
    IN_PROCESS_SECONDS, then returns, the dirty mark left for the next caller or the beat's
    sweep."""

    class Streaming:
        name = "deviations.streaming"

        def __init__(self) -> None:
            self.runs = 0

        def delay(self, series_id: int) -> None:
            self.runs += 1
            # Every run sees another upload arrive (a caller that finds the lock taken).
            caller = threading.Thread(target=tasks.send_once, args=(self, series_id))
            caller.start()
            caller.join(5)

    task = Streaming()
    tasks.IN_PROCESS_SECONDS, saved = 0.2, tasks.IN_PROCESS_SECONDS
    try:
        request = threading.Thread(target=tasks.send_once, args=(task, 9), daemon=True)
        request.start()
        request.join(10)
        stuck = request.is_alive()
        tasks.IN_PROCESS_SECONDS = 0.0  # let a stuck request stop before the test ends
        request.join(10)
    finally:
        tasks.IN_PROCESS_SECONDS = saved
    assert not stuck  # it answered while uploads kept coming
    assert task.runs >= 1
    folder = tasks.site_lock_folder()
    assert (folder / f"{task.name}-9.dirty").exists()  # left for the next caller or sweep
    (folder / f"{task.name}-9.dirty").unlink()


def test_in_process_other_series_do_not_wait(in_process: None) -> None:
    task = _Slow()
    first = threading.Thread(target=tasks.send_once, args=(task, 3))
    first.start()
    assert task.started.wait(10)
    task.started.clear()
    other = threading.Thread(target=tasks.send_once, args=(task, 4))
    other.start()
    assert task.started.wait(10)  # series 4 ran while series 3's run was going on
    task.release.set()
    first.join(10)
    other.join(10)
    assert task.runs == 2


def test_in_process_an_error_reaches_the_caller_and_frees_the_lock(in_process: None) -> None:

    class Failing:
        name = "test.failing"
        calls = 0

        def delay(self, series_id: int) -> None:
            Failing.calls += 1
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        tasks.send_once(Failing(), 5)
    with pytest.raises(RuntimeError, match="boom"):  # not "someone else holds it"
        tasks.send_once(Failing(), 5)
    assert Failing.calls == 2
