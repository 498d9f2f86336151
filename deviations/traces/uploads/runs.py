"""Trace runs: register a file as a Run, then parse it and store its times in one transaction.

Every way in (upload page, REST API, CLI) goes through ``register_run`` and ``process_run``.
The parser (``ingest.traces``) touches no database; this module does the writing. A run is
identified by the sha256 of its bytes within its series: the same file sent twice is one run.
A failed run keeps its one-line reason and writes no times; sending the same file again
retries it.
"""

from __future__ import annotations

import logging
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import IO, Any

import numpy as np
from django import db
from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Count, Q
from django.utils import timezone

from deviations.core.db import batches, lz4_toast
from deviations.core.errors import UserError
from deviations.core.packing import file_sha256, sha256_of
from deviations.core.text import safe_file_name
from deviations.core.versions import (
    check_order,
    check_revision,
    check_series_name,
    check_version,
)
from deviations.traces.models import Function, Release, Run, RunCalls, RunTimes, Series
from deviations.traces.uploads import files
from ingest.services import FunctionTimes, TraceError, parse_trace

log = logging.getLogger(__name__)



class IngestError(UserError):
    """A request that cannot make a run at all (bad series name, bad version)."""


class RevisionConflictError(IngestError):
    """A release named with another revision than the one it carries (HTTP 409): changing
    it is an explicit update by an owner (``traces.services.set_release_revision``)."""

    status = 409
    code = "revision_conflict"


#: Thread and process names are matched against the trace's metadata: at most this long.
MAX_THREAD_NAME = 200


@dataclass(frozen=True)
class ThreadOptions:
    """Which threads a run measures. Names with a control character (a NUL, which
    PostgreSQL cannot store) or over ``MAX_THREAD_NAME`` are refused with ``IngestError``
    before anything is stored."""

    thread_name: str = "CrRendererMain"
    process_name: str = "Renderer"
    all_threads: bool = False

    def __post_init__(self) -> None:
        for label, value in (("thread name", self.thread_name),
                             ("process name", self.process_name)):
            if len(value) > MAX_THREAD_NAME:
                raise IngestError(f"{label}: longer than {MAX_THREAD_NAME} characters")
            if not value.isprintable():
                raise IngestError(f"{label} {value!r}: control characters (such as NUL) "
                                  "are not allowed")

    def as_dict(self) -> dict[str, Any]:
        return {
            "thread_name": self.thread_name,
            "process_name": self.process_name,
            "all_threads": self.all_threads,
        }


@dataclass(frozen=True)
class Registered:
    run: Run
    duplicate: bool  # the same bytes were already a done or pending run of this series


def get_release(series_name: str, version: str, order: int | None = None,
                kind: str = Series.TRACES, revision: str | None = None) -> Release:
    """The release, created with its series (of this ``kind``) if new. Raises IngestError
    on bad names, and when the series holds the other kind of data (trace files and
    benchmark results are never mixed in one series).

    ``revision`` (a commit hash or number; None or "": not said) is stored on a new release
    or one without a revision; a release that carries another one is refused with
    ``RevisionConflictError`` (409): a CI job that names the wrong commit must not move a
    release's culprit ranges silently."""
    try:
        check_series_name(series_name)
        check_version(version)
        check_order(order)
        if revision:
            check_revision(revision)
    except UserError as exc:
        raise IngestError(exc.message) from None
    series, _ = Series.objects.get_or_create(name=series_name, defaults={"kind": kind})
    if series.kind != kind:
        raise IngestError(
            f"series {series_name!r} holds "
            f"{'benchmark results' if series.is_metrics else 'trace files'}; "
            f"{'trace files' if kind == Series.TRACES else 'benchmark results'} go into "
            "a series of their own (another name)")
    existing = Release.objects.filter(series=series, version=version).first()
    if existing is None:
        _check_same_ordering(series, version, order)
    try:
        release, created = Release.objects.get_or_create(
            series=series, version=version,
            defaults={"order": order, "revision": revision or ""},
        )
    except IntegrityError:  # created by a concurrent request in between
        release, created = Release.objects.get(series=series, version=version), False
    if not created and revision and release.revision != revision:
        if release.revision:
            raise RevisionConflictError(revision_conflict(release, revision))
        # Set only where still empty: of two requests naming it at once, one sets it and
        # the other finds it set (and then agrees or is refused).
        if not Release.objects.filter(pk=release.pk, revision="").update(revision=revision):
            release.refresh_from_db(fields=["revision"])
            if release.revision != revision:
                raise RevisionConflictError(revision_conflict(release, revision))
        release.revision = revision
    if not created and order is not None and release.order != order:
        release.order = order
        release.save(update_fields=["order", "sort_key"])
    return release


def revision_conflict(release: Release, revision: str) -> str:
    """The refusal's words: what the release carries and how to change it on purpose."""
    name, version = release.series.name, release.version
    return (f"release {version!r} of series {name!r} has revision {release.revision!r}, "
            f"not {revision!r}: send the same revision (or none), or change it explicitly "
            f"(owners: PATCH /api/series/{name}/releases/{version} with "
            f"{{\"revision\": \"{revision}\"}}, the series page, or manage.py "
            f"series_settings --series {name} --release {version} --revision {revision})")


def _check_same_ordering(series: Series, version: str, order: int | None) -> None:
    """A new release is placed as the series' others are: all by their ``order``, or all
    by their version. Mixed, a version's text would be compared with the orders' digits
    (a release without ``order`` sent to an ordered series landed anywhere, and every
    function's verdicts around it moved: thousands of spurious alerts; issue 23)."""
    counts = Release.objects.filter(series=series).aggregate(
        ordered=Count("pk", filter=Q(order__isnull=False)),
        unordered=Count("pk", filter=Q(order__isnull=True)))
    ordered, unordered = counts["ordered"], counts["unordered"]
    if order is None and ordered:
        raise IngestError(
            f"release {version!r}: series {series.name!r} places its releases by their order "
            f"({ordered} release{'s' * (ordered != 1)} sent with one); send 'order' with "
            "this release too")
    if order is not None and unordered:
        raise IngestError(
            f"release {version!r}: series {series.name!r} places its releases by version "
            f"({unordered} release{'s' * (unordered != 1)} sent without 'order'); send this "
            "one without 'order', or give every release one")


def register_run(
    release: Release,
    content: IO[bytes] | Path,
    file_name: str,
    options: ThreadOptions,
    *,
    batch: uuid.UUID | None = None,
    user: Any = None,
    digest: tuple[str, int] | None = None,
    stored: bool = False,
) -> Registered:
    """Make (or find) the Run for these bytes and keep the file; the run is pending unless
    it failed at once.

    ``content`` is the file: an uploaded stream, or a path on this machine (CLI). Its bytes
    go to the trace storage under their sha256 (``files``) before the run that refers to
    them is committed, and a request that fails after that deletes them again: a failed
    request leaves no file, a committed pending run always has one. ``digest`` (sha256,
    size), when the caller already has it, saves reading the file for it; ``stored``: the
    caller wrote it to the trace storage already (``files.put`` returned True), and this
    call deletes it again as its own if no run keeps it. An empty file, or one over
    ``DEVIATIONS_MAX_TRACE_BYTES``, becomes a failed run without being stored.
    Raises ``files.StorageFullError`` (507) when the storage is full.
    """
    name = safe_file_name(file_name)
    if digest is None:
        digest = file_sha256(content) if isinstance(content, Path) else sha256_of(content)
    sha, size = digest
    limit = settings.DEVIATIONS_MAX_TRACE_BYTES
    fields: dict[str, Any] = {
        "release": release,
        "file_name": name,
        "size_bytes": size,
        "options": options.as_dict(),
        "upload_batch": batch,
        "uploaded_by": user if getattr(user, "is_authenticated", False) else None,
        "status": Run.PENDING,
        "error": "",
        "summary": None,
        "started": None,
        "finished": None,
    }
    if size == 0:
        fields.update(status=Run.FAILED, error=f"{name}: empty file", finished=timezone.now())
    elif size > limit:
        fields.update(
            status=Run.FAILED,
            error=f"{name}: {size:,} bytes is over the limit of {limit:,} bytes",
            finished=timezone.now(),
        )
    keep = fields["status"] == Run.PENDING
    wrote = stored and keep
    try:
        # The obvious duplicate costs no write; the answer that counts is the one under the
        # lock.
        existing = Run.objects.filter(series=release.series, sha256=sha).first()
        if existing is not None and not _retryable(existing):
            entry = Registered(existing, duplicate=True)
        else:
            # The slow part, outside any transaction.
            wrote = wrote or (keep and files.put(sha, content, name))
            with transaction.atomic():
                files.lock(sha)  # one registration or deletion of these bytes at a time
                existing = (
                    Run.objects.select_for_update().filter(series=release.series, sha256=sha)
                    .first()
                )
                if existing is not None and not _retryable(existing):
                    entry = Registered(existing, duplicate=True)
                else:
                    # New, or failed, or abandoned without its file: (re)register it.
                    run = existing or Run(series=release.series, sha256=sha)
                    for field, value in fields.items():
                        setattr(run, field, value)
                    if keep:
                        files.ensure(sha, content, name)
                        run.file_stored, run.file_removed = True, None
                    run.save()
                    entry = Registered(run, duplicate=False)
    except BaseException:
        if wrote:
            files.release_quietly(sha)
        raise
    if entry.duplicate and wrote:
        files.release_quietly(sha)  # the run had them already, or without its file
    return entry


def _retryable(run: Run) -> bool:
    """Sending the same bytes again registers the run again: it failed, or it is pending
    without its file (lost, or sent before files were kept) and nobody holds it."""
    if run.status == Run.FAILED:
        return True
    return run.status == Run.PENDING and not run.file_stored and not held(run)


def held(run: Run) -> bool:
    """A worker (or a request, in-process) holds a live claim on the pending run."""
    return run.started is not None and run.started >= stale_claim_before()


def waiting(run: Run) -> bool:
    """A pending run with its file that nobody holds: a worker may take it now (its task
    message was lost, or the process that held it died). Sending its file again sends its
    task again."""
    return run.status == Run.PENDING and run.file_stored and not held(run)


def stale_claim_before() -> datetime:
    """Claims (``Run.started``) older than this were not renewed for a whole lease: their
    worker died, and the run may be taken over."""
    return timezone.now() - timedelta(seconds=settings.DEVIATIONS_CLAIM_LEASE_SECONDS)


def _claim(run_id: int) -> bool:
    """Mark the run as started unless another worker holds a live claim on it."""
    return bool(
        Run.objects.filter(pk=run_id, status=Run.PENDING)
        .filter(Q(started__isnull=True) | Q(started__lt=stale_claim_before()))
        .update(started=timezone.now())
    )


class _Lease:
    """Renews the claim on a run every quarter lease from a thread while the run is
    processed (a parse holds no database connection the claim could ride on)."""

    def __init__(self, run_id: int) -> None:
        self.run_id = run_id
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._renew, name=f"lease-run-{run_id}",
                                       daemon=True)

    def _renew(self) -> None:
        every = settings.DEVIATIONS_CLAIM_LEASE_SECONDS / 4
        try:
            while not self.stop.wait(every):
                try:
                    Run.objects.filter(pk=self.run_id, status=Run.PENDING).update(
                        started=timezone.now()
                    )
                except db.DatabaseError:  # busy or restarting: the next renewal may pass
                    log.warning("could not renew the claim on run %s", self.run_id,
                                exc_info=True)
        finally:
            db.connection.close()  # this thread's own connection

    def __enter__(self) -> None:
        self.thread.start()

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()


def parse_file(
    source: Path | IO[bytes], file_name: str, options: dict[str, Any]
) -> FunctionTimes:
    """The parsed trace (a path, or a stream of the stored object); ``TraceError`` with the
    one-line reason when it cannot be used."""
    try:
        return parse_trace(
            source,
            display_name=file_name,
            thread_name=options.get("thread_name", "CrRendererMain"),
            process_name=options.get("process_name", "Renderer"),
            all_threads=bool(options.get("all_threads", False)),
            max_bytes=settings.DEVIATIONS_MAX_TRACE_BYTES,
        )
    except OSError as exc:
        raise TraceError(f"{file_name}: cannot read the file ({exc.strerror or exc})") from None


def process_run(
    run_id: int, *, parsed: FunctionTimes | TraceError | None = None, lease: bool = False
) -> Run:
    """Parse a pending run's uploaded file and store its times; idempotent.

    ``parsed``, when the caller has already parsed the file (``ingest_local_file``), is
    stored as is, or is the error that parse raised.
    A run that is not pending, or that another worker is processing, is left alone. Parse
    errors make the run ``failed`` with a one-line reason and write no times. ``lease``:
    renew the claim while processing, so that a claim left by a killed worker (or a killed
    server, in-process) is known stale after one lease (``DEVIATIONS_CLAIM_LEASE_SECONDS``)
    and the run is taken over by the sweeper, or by sending its file again.
    """
    if not _claim(run_id):
        return Run.objects.get(pk=run_id)
    if lease:
        with _Lease(run_id):
            return _process(run_id, parsed)
    return _process(run_id, parsed)


def _process(run_id: int, parsed: FunctionTimes | TraceError | None) -> Run:
    run = Run.objects.get(pk=run_id)
    if parsed is None:
        parsed = parse_stored(run)
    if isinstance(parsed, TraceError):
        _finish_failed(run, str(parsed))
    else:
        result = parsed
        try:
            _store(run, result)
        except BaseException:
            # Nothing was written (one transaction); let the next attempt claim the run.
            Run.objects.filter(pk=run.pk, status=Run.PENDING).update(started=None)
            raise
    if files.keep_days() == 0:  # kept only until ingested
        files.forget(run.pk, run.sha256)
    run.refresh_from_db()
    return run


def parse_stored(run: Run, options: dict[str, Any] | None = None) -> FunctionTimes | TraceError:
    """The run's stored file, parsed with the run's thread selection (or ``options``)."""
    try:
        with files.reader(run.sha256) as source:
            return parse_file(source, run.file_name, run.options if options is None
                              else options)
    except TraceError as exc:
        return exc
    except FileNotFoundError:
        Run.objects.filter(pk=run.pk).update(file_stored=False)
        return TraceError(f"{run.file_name}: the stored file is missing (deleted before it "
                          "was ingested): send it again")


def ingest_local_file(
    release: Release, path: Path, options: ThreadOptions,
    prepared: tuple[tuple[str, int], FunctionTimes | TraceError] | None = None,
) -> Registered:
    """Ingest a file on this machine (CLI, demo): one run, stored whole or failed.

    The file is hashed, then copied to the trace storage (kept like an upload), in a second
    thread while it is parsed (hashlib and file I/O release the GIL). ``prepared``: its
    digest and parse (or parse error) already made (``manage.py ingest_traces`` makes them
    before Django's set-up: ``deviations.management.preparse``); the file is then only
    copied. A file whose bytes
    are already a run of the series is recognised after the parse and left alone, unless
    that run waits for a worker that will not come (a killed process left it): then it is
    ingested here, from its stored file. Raises OSError when the file cannot be opened,
    ``files.StorageFullError`` when the trace storage is full.
    """
    name = safe_file_name(path.name)
    parsed: FunctionTimes | TraceError
    if prepared is not None:
        digest, parsed = prepared
        stored = _keep(path, name, digest)
    else:
        with ThreadPoolExecutor(max_workers=1) as pool:
            keeping = pool.submit(_hash_and_keep, path, name)
            try:
                parsed = parse_file(path, name, options.as_dict())
            except TraceError as exc:
                parsed = exc
            digest, stored = keeping.result()
    entry = register_run(release, path, name, options, digest=digest, stored=stored)
    if entry.duplicate and waiting(entry.run):
        return Registered(process_run(entry.run.pk, lease=True), duplicate=False)
    if entry.duplicate or entry.run.status != Run.PENDING:
        return entry
    return Registered(process_run(entry.run.pk, parsed=parsed), duplicate=False)


def _hash_and_keep(path: Path, name: str) -> tuple[tuple[str, int], bool]:
    """The file's digest, then its copy in the trace storage (a second thread, while the
    file is parsed: copying and flushing 250 MB took 0.7-1.6 s). True when it wrote it."""
    digest = file_sha256(path)
    return digest, _keep(path, name, digest)


def _keep(path: Path, name: str, digest: tuple[str, int]) -> bool:
    """The file copied into the trace storage under its digest; True when this call wrote
    it. A file that will be a failed run (empty, over the limit) is not kept."""
    sha, size = digest
    if size == 0 or size > settings.DEVIATIONS_MAX_TRACE_BYTES:
        return False
    return files.put(sha, path, name)


def _finish_failed(run: Run, reason: str) -> None:
    Run.objects.filter(pk=run.pk, status=Run.PENDING).update(
        status=Run.FAILED, error=reason.splitlines()[0][:2000], finished=timezone.now()
    )


def _function_ids(series: Series, names: list[str]) -> np.ndarray:
    """Ids of these function names in the series, creating the missing ones.

    On SQLite, plain statements rather than model instances (a new series of 1,527 names,
    the 60 MB benchmark trace: 50 ms through ``bulk_create``, 13 ms so): the known ids by
    ``IN`` batches, the missing names in one ``executemany`` in the trace's order (so ids
    follow the trace) with ``ON CONFLICT DO NOTHING`` (a concurrent ingest of the same
    series may create the same names), then their ids read back.
    """
    digests = [Function.digest(n) for n in names]
    if db.connection.vendor == "postgresql":
        return _function_ids_copy(series, names, digests)
    table = db.connection.ops.quote_name(Function._meta.db_table)
    known: dict[str, int] = {}
    with db.connection.cursor() as cursor:

        def read(keys: list[str]) -> None:
            for chunk in batches(keys):
                cursor.execute(
                    f"SELECT name_sha1, id FROM {table} WHERE series_id = %s "  # noqa: S608
                    f"AND name_sha1 IN ({', '.join(['%s'] * len(chunk))})",
                    [series.pk, *chunk],
                )
                known.update(cursor.fetchall())

        read(digests)
        missing = [k for k, d in enumerate(digests) if d not in known]
        if missing:
            cursor.executemany(
                f"INSERT INTO {table} (series_id, name, name_sha1) VALUES (%s, %s, %s) "  # noqa: S608
                "ON CONFLICT DO NOTHING",
                [(series.pk, Function.storable(names[k]), digests[k]) for k in missing],
            )
            read([digests[k] for k in missing])
    return np.fromiter((known[d] for d in digests), dtype=np.int64, count=len(digests))


#: First key of the transaction-level advisory lock held while a series' names are created
#: (the second is the series id): ``"fn"`` in ASCII, a key no other lock of the project uses.
_NAMES_LOCK = 0x666E


def _function_ids_copy(series: Series, names: list[str], digests: list[str]) -> np.ndarray:
    """``_function_ids`` on PostgreSQL: the new names go straight into the table with one
    binary COPY, under a lock that makes this transaction, until it commits, the only one
    creating names of the series.

    Steps: take the lock (``pg_advisory_xact_lock``; a concurrent ingest of the same series
    waits here for this one's commit, then sees its names as known); if the series has
    functions, COPY the digests into a temporary table and join for the known ids; take
    one id per new name from the table's sequence, in the trace's order (so ids follow the
    trace, as ``bulk_create`` made them); COPY the new rows with those ids. No statement
    can conflict on the unique index, so no ``ON CONFLICT`` (a speculative insertion per
    row) and no read back of the ids are needed.

    A trace with a million distinct names took ~2 minutes through ``IN`` queries and
    ``bulk_create`` of 900 rows each (3,300 statements), then 16-36 s with one
    ``INSERT ... SELECT ... ON CONFLICT DO NOTHING`` from a temporary table (7.1 s of
    server CPU for that statement); the COPY takes 3.1-4.0 s and the whole ingest 10 s
    (``tests.benchmarks.names``, docs/architecture.md, "A million function names").
    """
    import psycopg  # PostgreSQL only: the embedded default (SQLite) needs no driver

    table = db.connection.ops.quote_name(Function._meta.db_table)
    ids = np.zeros(len(names), dtype=np.int64)  # 0: not known yet (ids start at 1)
    with psycopg.Cursor(db.connection.connection) as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)",
                       [_NAMES_LOCK, series.pk & 0x7FFFFFFF])
        if Function.objects.filter(series=series).exists():
            cursor.execute("CREATE TEMPORARY TABLE ingest_names "
                           '(k int8, name_sha1 text COLLATE "C") ON COMMIT DROP')
            with cursor.copy("COPY ingest_names (k, name_sha1) FROM STDIN (FORMAT BINARY)"
                             ) as copy:
                copy.set_types(["int8", "text"])
                for k, digest in enumerate(digests):
                    copy.write_row((k, digest))
            cursor.execute(
                f"SELECT n.k, f.id FROM ingest_names n JOIN {table} f "  # noqa: S608
                "ON f.series_id = %s AND f.name_sha1 = n.name_sha1",
                [series.pk], binary=True,
            )
            found = np.array(cursor.fetchall(), dtype=np.int64).reshape(-1, 2)
            cursor.execute("DROP TABLE ingest_names")
            ids[found[:, 0]] = found[:, 1]
        new = np.flatnonzero(ids == 0)
        if len(new):  # a later run of a series has few or none
            cursor.execute("SELECT pg_get_serial_sequence(%s, 'id')::regclass::oid",
                           [Function._meta.db_table])
            sequence = cursor.fetchone()[0]  # type: ignore[index]
            cursor.execute("SELECT nextval(%s::oid) FROM generate_series(1, %s)",
                           [sequence, len(new)], binary=True)
            ids[new] = np.sort(np.fromiter((row[0] for row in cursor), np.int64, len(new)))
            with cursor.copy(f"COPY {table} (id, series_id, name, name_sha1) "
                             "FROM STDIN (FORMAT BINARY)") as copy:
                copy.set_types(["int8", "int8", "text", "text"])
                for k, fid in zip(new.tolist(), ids[new].tolist(), strict=True):
                    copy.write_row((fid, series.pk, Function.storable(names[k]), digests[k]))
    return ids


def write_times(run: Run, result: FunctionTimes) -> None:
    """The run's functions, packed times and call tree, in the caller's transaction; the
    run has no times yet (a pending run, or one whose times ``reingest`` deleted)."""
    ids = _function_ids(run.series, result.names)
    # lz4, not pglz, for the run's 32 MB of times (a million functions): 1.0 s of server
    # CPU became 0.3 s (tests.benchmarks.names).
    lz4_toast()
    # The call tree beside the times, in the same transaction: a run has both or neither.
    callers = np.where(result.caller >= 0, ids[np.maximum(result.caller, 0)], RunCalls.ROOT)
    if db.connection.vendor == "sqlite":
        integer, real = RunTimes.INT, RunTimes.FLOAT
        _insert_arrays(RunTimes._meta.db_table, run.pk, [
            ("function_ids", ids, integer), ("self_us", result.self_us, real),
            ("total_us", result.total_us, real), ("calls", result.calls, integer)])
        _insert_arrays(RunCalls._meta.db_table, run.pk, [
            ("caller_ids", callers, integer), ("callee_ids", ids[result.callee], integer),
            ("time_us", result.edge_us, real)])
        return
    # force_insert: the run has no times; a plain save() would first send the arrays in
    # an UPDATE that matches nothing (32 MB for a million functions).
    RunTimes.pack(run, ids, result.self_us, result.total_us, result.calls).save(
        force_insert=True
    )
    RunCalls.pack(run, callers, ids[result.callee], result.edge_us).save(force_insert=True)


def _insert_arrays(table: str, run_id: int, arrays: list[tuple[str, np.ndarray, str]]) -> None:
    """On SQLite, the run's row of ``table`` with its binary columns (name, array, dtype),
    the bytes ``packing.pack`` gives, without holding them three more times: a ``save()``
    packs each array into bytes, sqlite3 copies every bound value and SQLite copies them
    again into the record (the 330,000 call-tree edges of a 60 MB trace: +29 MB at the
    peak, +5 MB here). The row is inserted with zero-filled blobs of the right sizes, then
    each array is written into its blob (incremental blob I/O) from the array itself."""
    values = [(column, np.ascontiguousarray(array, dtype=dtype))
              for column, array, dtype in arrays]
    names = ", ".join(column for column, _ in values)
    blanks = ", ".join(["zeroblob(%s)"] * len(values))
    with db.connection.cursor() as cursor:
        cursor.execute(f"INSERT INTO {table} (run_id, {names}) VALUES (%s, {blanks})",  # noqa: S608
                       [run_id, *(value.nbytes for _, value in values)])
        # The row's own rowid: a "bigint PRIMARY KEY" column is not an alias of it.
        rowid = cursor.lastrowid
    raw = db.connection.connection
    for column, value in values:
        if value.nbytes:
            with raw.blobopen(table, column, rowid) as blob:
                blob.write(value.data.cast("B"))


def _store(run: Run, result: FunctionTimes) -> None:
    with transaction.atomic():
        locked = Run.objects.select_for_update().get(pk=run.pk)
        if locked.status != Run.PENDING:
            return  # finished by another worker after a stale claim
        write_times(locked, result)
        locked.status = Run.DONE
        locked.summary = result.summary.to_dict()
        locked.finished = timezone.now()
        locked.save(update_fields=["status", "summary", "finished"])

