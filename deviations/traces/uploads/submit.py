"""The shared entry for uploads (page and API): register each file, then queue its ingest."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import IO, Any

from django.db import transaction

from deviations.core import access
from deviations.core.models import Ownership
from deviations.traces.models import Run
from deviations.traces.uploads.runs import (
    Registered,
    ThreadOptions,
    get_release,
    register_run,
    waiting,
)
from deviations.traces.uploads.tasks import queue_ingest


@dataclass
class Submission:
    """What one upload registered. ``unqueued``: runs whose task could not reach the broker
    (they stay pending; ``tasks.requeue_pending`` sends them again once it is back)."""

    batch: uuid.UUID
    registered: list[Registered]
    unqueued: set[int] = field(default_factory=set)


def submit_uploads(
    series_name: str,
    version: str,
    files: Iterable[tuple[str, IO[bytes]]],
    options: ThreadOptions,
    *,
    order: int | None = None,
    user: Any = None,
    revision: str | None = None,
) -> Submission:
    """Register each (name, stream) as a run of the release and queue the pending ones.

    The task is sent once the run's row is committed, so a worker never looks for a run
    that is not there yet. A file already registered and still waiting for a worker (its
    message lost, or the process that held it killed: ``runs.waiting``) is queued again
    (the task is idempotent), so sending it again is a retry. A broker that cannot be
    reached leaves the runs pending, never an error: the data is stored. A file is stored
    before its run is committed and deleted again if the request fails
    (``runs.register_run``).
    ``revision``: the commit the release was built from (``runs.get_release``: another
    revision than the release's is ``RevisionConflictError``, 409).
    ``user`` must be allowed to write to the series (``deviations.core.access``; the first
    to write to a series without owners becomes its owner). Raises
    ``IngestError`` for a bad series or version, ``ForbiddenError`` (403) without
    permission, ``files.StorageFullError`` (507) when the trace storage is full.
    """
    access.check_write(user, Ownership.SERIES, [series_name])
    release = get_release(series_name, version, order, revision=revision)
    access.claim(user, Ownership.SERIES, [series_name])
    submission = Submission(uuid.uuid4(), [])

    def send(run_id: int) -> None:
        if not queue_ingest(run_id):
            submission.unqueued.add(run_id)

    for name, stream in files:
        entry = register_run(release, stream, name, options, batch=submission.batch,
                             user=user)
        submission.registered.append(entry)
        run = entry.run
        if run.status == Run.PENDING and (not entry.duplicate or waiting(run)):
            transaction.on_commit(lambda run_id=run.pk: send(run_id))
    return submission
