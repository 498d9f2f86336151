"""Fixtures of the upload and CLI ingest tests."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from deviations.traces.models import RunCalls, RunTimes
from deviations.traces.uploads import runs


@pytest.fixture
def fail_times_write(monkeypatch: pytest.MonkeyPatch) -> Callable[[], None]:
    """Makes the write of a run's times fail with RuntimeError("disk full") once called:
    on SQLite after the times' row is inserted, at the call tree's row (the arrays are
    written as blobs, ``runs._insert_arrays``); elsewhere in ``RunTimes.save``. Undone by
    ``monkeypatch.undo()``."""

    def explode(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("disk full")

    def arm() -> None:
        real = runs._insert_arrays

        def insert(table: str, *args: Any) -> None:
            if table == RunCalls._meta.db_table:
                explode()
            real(table, *args)

        monkeypatch.setattr(runs, "_insert_arrays", insert)
        monkeypatch.setattr(RunTimes, "save", explode)

    return arm
