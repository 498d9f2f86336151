"""The shared entry for uploads (page and API): register each file, then queue its ingest."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import IO, Any

from django.db import transaction

from deviations.traces.models import Run
from ingest.runs import Registered, ThreadOptions, get_release, register_run
from ingest.tasks import ingest_run


def submit_uploads(
    series_name: str,
    version: str,
    files: Iterable[tuple[str, IO[bytes]]],
    options: ThreadOptions,
    *,
    order: int | None = None,
    user: Any = None,
) -> tuple[uuid.UUID, list[Registered]]:
    """Register each (name, stream) as a run of the release and queue the pending ones.

    The task is sent once the run's row is committed, so a worker never looks for a run
    that is not there yet. Raises ``ingest.runs.IngestError`` for a bad series or version.
    """
    batch = uuid.uuid4()
    release = get_release(series_name, version, order)
    registered = []
    for name, stream in files:
        entry = register_run(
            release, stream, name, options, keep_upload=True, batch=batch, user=user
        )
        registered.append(entry)
        if entry.run.status == Run.PENDING and not entry.duplicate:
            run_id = entry.run.pk
            transaction.on_commit(lambda run_id=run_id: ingest_run.delay(run_id))
    return batch, registered
