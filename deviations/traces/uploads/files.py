"""Trace files kept whole, content-addressed, in the trace storage (``storages["traces"]``).

A file is one object named by its sha256 (``traces/ab/abcdef…``), whichever series or
release it was sent to: the run's identity already is that digest. A run refers to it
while ``Run.file_stored`` is set; an object no run refers to is deleted. The same object
holds an upload waiting for its worker and, afterwards, the kept file (no copy between
them), so web and workers share nothing but the storage: a local folder on the embedded
default, S3-compatible object storage when configured (``settings``, docs/deploy.md).

Writes and deletions of one digest take its lock (``lock``): a transaction-level advisory
lock on PostgreSQL; on SQLite every write transaction holds the database's write lock from
its start (``transaction_mode = IMMEDIATE``), which serialises them already. Under it a
writer checks that the object exists before it commits a run that refers to it, and a
deletion checks that no committed run refers to the object before it deletes it: neither
can slip between the other's check and its action.

Retention (``DEVIATIONS_KEEP_TRACE_DAYS``): ``expire`` unsets ``file_stored`` of the runs
whose file is older (sets ``file_removed``) and deletes the objects no run refers to any
more; ``collect_orphans`` deletes objects that no run refers to at all (left by a process
killed between writing an object and committing its run, or by a deletion outside the
services) once they are older than a grace period that covers an upload in progress.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path
from typing import IO, Any

from django import db
from django.conf import settings
from django.core.files.storage import storages
from django.db import transaction
from django.urls import reverse
from django.utils import timezone

from deviations.core.db import batches
from deviations.core.errors import UserError
from deviations.core.storage import NoRoomError
from deviations.traces.models import Run

log = logging.getLogger(__name__)

PREFIX = "traces/"
#: An object younger than this is never taken for an orphan: its upload may still be
#: between writing it and committing its run (an upload of 2 GiB over a slow link).
ORPHAN_GRACE = timedelta(hours=6)
#: First key of the advisory lock of a digest: "tf" in ASCII (runs' names lock is "fn").
_LOCK = 0x7466


class StorageFullError(UserError):
    """The trace storage has no room for a file: nothing was stored (HTTP 507)."""

    status = 507
    code = "storage_full"


def storage() -> Any:
    return storages["traces"]


def key(sha256: str) -> str:
    return f"{PREFIX}{sha256[:2]}/{sha256}"


def _digest_of(name: str) -> str | None:
    """The sha256 an object's name stands for (None for anything else under the prefix)."""
    last = name.rsplit("/", 1)[-1]
    if len(last) == 64 and all(c in "0123456789abcdef" for c in last):
        return last
    return None


def lock(sha256: str) -> None:
    """Hold the digest's lock until the current transaction ends (inside ``atomic``)."""
    if db.connection.vendor == "postgresql":
        with db.connection.cursor() as cursor:
            # int4 keys: the digest's first 31 bits (a collision only serialises two files).
            cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)",
                           [_LOCK, int(sha256[:8], 16) & 0x7FFFFFFF])


def put(sha256: str, content: IO[bytes] | Path, file_name: str) -> bool:
    """Store the bytes under their digest unless they are there already; True when this
    call wrote the object (the caller then ``release``s it if its run is not committed).

    Raises ``StorageFullError`` (507) naming the file when there is no room: nothing of it
    is left behind.
    """
    store = storage()
    name = key(sha256)
    if store.exists(name):
        return False
    try:
        store.put(name, content)
    except NoRoomError as exc:
        raise StorageFullError(
            f"{file_name}: the server has no room left to store this file ({exc.strerror}); "
            "nothing was stored: send it again once the server's administrator has freed "
            "space"
        ) from None
    return True


def ensure(sha256: str, content: IO[bytes] | Path, file_name: str) -> None:
    """Under the digest's lock, before committing a run that refers to it: the object is
    there (a deletion may have taken it between ``put`` and the lock)."""
    if not storage().exists(key(sha256)):
        put(sha256, content, file_name)


def _referenced(sha256: str) -> bool:
    return Run.objects.filter(sha256=sha256, file_stored=True).exists()


def release(sha256: str) -> bool:
    """Delete the object unless a run refers to it; True when it was deleted."""
    with transaction.atomic():
        lock(sha256)
        if _referenced(sha256):
            return False
        storage().delete(key(sha256))
    return True


def release_quietly(sha256: str) -> None:
    """``release`` on the way out of a failed request: its own error is logged, not raised
    (the request's error is the one to report; ``collect_orphans`` deletes the object
    later if it stays)."""
    try:
        release(sha256)
    except Exception:
        log.exception("could not release the trace file %s after a failed request", sha256)


def forget(run_id: int, sha256: str, now: datetime | None = None) -> bool:
    """The run's file is gone from now on (its times stay): unset ``file_stored``, record
    when, and delete the object unless another run refers to it. A pending run keeps its
    file (its worker needs it). True when the run's file was forgotten."""
    with transaction.atomic():
        lock(sha256)
        changed = (
            Run.objects.filter(pk=run_id, file_stored=True)
            .exclude(status=Run.PENDING)
            .update(file_stored=False, file_removed=now or timezone.now())
        )
        if changed and not _referenced(sha256):
            storage().delete(key(sha256))
    return bool(changed)


@contextmanager
def reader(sha256: str) -> Iterator[Path]:
    """The stored file to parse: its path in the local folder, or the object downloaded to
    a temporary file. ``FileNotFoundError`` when it is not stored."""
    with storage().reader(key(sha256)) as source:
        yield source


def open_for_download(sha256: str) -> IO[bytes]:
    """A stream of the stored bytes, as sent (a gzip file stays gzip); the caller closes
    it. ``FileNotFoundError`` when it is not stored."""
    return storage().stream(key(sha256))  # type: ignore[no-any-return]


def keep_days() -> int | None:
    return settings.DEVIATIONS_KEEP_TRACE_DAYS  # type: ignore[no-any-return]


def kept_until(run: Run) -> datetime | None:
    """When the run's file expires (None: kept as long as the run)."""
    days = keep_days()
    return None if days is None else run.created + timedelta(days=days)


def expire(now: datetime | None = None) -> int:
    """Forget the files older than ``DEVIATIONS_KEEP_TRACE_DAYS`` (of runs no longer
    pending); how many runs lost their file."""
    days = keep_days()
    if days is None:
        return 0
    now = now or timezone.now()
    due = (
        Run.objects.filter(file_stored=True, created__lt=now - timedelta(days=days))
        .exclude(status=Run.PENDING)
        .values_list("pk", "sha256")
    )
    return sum(forget(pk, sha, now) for pk, sha in list(due))


def collect_orphans(now: datetime | None = None, grace: timedelta = ORPHAN_GRACE) -> int:
    """Delete the objects (and partial files) older than ``grace`` that no run refers to;
    how many were deleted."""
    now = now or timezone.now()
    store = storage()
    old: dict[str, list[str]] = {}
    partial: list[str] = []
    for name, modified in store.entries(PREFIX):
        if now - modified < grace:
            continue
        sha = _digest_of(name)
        if sha is None:
            partial.append(name)
        else:
            old.setdefault(sha, []).append(name)
    deleted = 0
    for chunk in batches(list(old)):
        kept = set(Run.objects.filter(sha256__in=chunk, file_stored=True)
                   .values_list("sha256", flat=True))
        deleted += sum(release(sha) for sha in chunk if sha not in kept)
    for name in partial:
        store.delete(name)
        deleted += 1
    return deleted


def file_urls(run_ids: list[int]) -> dict[int, str]:
    """``/runs/ID/file`` of each of these runs whose file is kept (a point of a chart, a
    hover of the matrix can link to the file it was measured from)."""
    found: dict[int, str] = {}
    for chunk in batches(run_ids):
        for pk in Run.objects.filter(pk__in=chunk, file_stored=True).values_list("pk",
                                                                                 flat=True):
            found[pk] = reverse("run_file", args=[pk])
    return found
