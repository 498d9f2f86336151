"""Store a parsed histogram file: every record or none, in one transaction.

Every way in (CLI, REST API, upload page) calls ``store_histogram_file``; the parser
(``ingest.histograms``, a pure reader) touches no database.

Re-ingest policy: **replace**. A histogram for a (probe, build id) already stored replaces
the stored one (aggregates such as GLAM's grow as more clients report for a build, so the
later file is the better one); an identical one is counted ``unchanged`` and not written.
Changes already detected are kept as they were stored (docs/histograms.md). A probe's
owner emails are the union of every file's ``alert_emails`` (removing one is an admin
edit).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, BinaryIO

from django.db import IntegrityError, transaction
from django.utils import timezone

from deviations.core import access
from deviations.core.db import INSERT_BATCH, batches
from deviations.core.models import Ownership
from deviations.core.packing import name_digest, pack
from deviations.core.queue import enqueue
from deviations.core.versions import sort_key
from deviations.histograms.models import HistogramSnapshot, Probe
from ingest.services import HistogramError, HistogramRecord, parse_histogram_file
from ingest.services import display_name as source_name


@dataclass(frozen=True)
class StoredFile:
    """What one file did: counts of new, replaced and identical histograms, and the probes."""

    name: str
    created: int
    replaced: int
    unchanged: int
    probe_ids: list[int] = field(default_factory=list)

    @property
    def histograms(self) -> int:
        return self.created + self.replaced + self.unchanged

    def line(self) -> str:
        return (
            f"ok {self.name}: {self.histograms} histogram(s) of {len(self.probe_ids)} "
            f"probe(s): {self.created} new, {self.replaced} replaced, "
            f"{self.unchanged} unchanged"
        )


def store_histogram_file(
    source: str | os.PathLike[str] | bytes | BinaryIO,
    *,
    display_name: str | None = None,
    build_id: str | None = None,
    probe: str | None = None,
    user: Any = None,
) -> StoredFile:
    """Parse a histogram file and store all of it, or raise ``HistogramError`` (one line
    naming the file and the record) having stored nothing.

    ``user``: who sent it from the web or the API; they must be allowed to write to every
    probe of the file (``deviations.core.access``: ``ForbiddenError``, 403) and become the
    owner of new ones. None for the CLI (shell access), which is not checked.
    """
    records = parse_histogram_file(
        source, display_name=display_name, build_id=build_id, probe=probe
    )
    name = display_name or source_name(source)
    for rec in records:
        try:
            sort_key(rec.build_id)
        except ValueError as exc:
            raise HistogramError(f"{name}: {rec.source}: build id {rec.build_id!r}: {exc}") from exc
    author = user if getattr(user, "is_authenticated", False) else None
    probe_names = [rec.probe for rec in records]
    if user is not None:
        access.check_write(user, Ownership.PROBE, probe_names)
    try:
        stored = _store(records, name, author)
    except IntegrityError:
        # A concurrent ingest created the same probe or build meanwhile: now they exist.
        stored = _store(records, name, author)
    if user is not None:
        access.claim(user, Ownership.PROBE, probe_names)
    return stored


def queue_detection(probe_ids: list[int]) -> None:
    """Detect changes on these probes once the histograms are committed (by a worker, or
    in-process in the embedded default)."""
    # Imported when histograms are stored, not with this module: detection brings SciPy,
    # which a command or a page that stores nothing never needs.
    from deviations.histograms.tasks import detect_histogram_changes

    ids = list(probe_ids)
    transaction.on_commit(lambda: enqueue(detect_histogram_changes, ids))


def _content_digest(rec: HistogramRecord) -> str:
    h = hashlib.sha1(usedforsecurity=False)
    for part in (pack(rec.edges), pack(rec.counts), repr((rec.normalised, rec.total, rec.sum))):
        h.update(part if isinstance(part, bytes) else part.encode())
    return h.hexdigest()


def _store(records: list[HistogramRecord], name: str, user: Any) -> StoredFile:
    created = replaced = unchanged = 0
    now = timezone.now()
    with transaction.atomic():
        probes = _probes(records)
        existing = _existing(records, probes)
        new, changed = [], []
        for rec in records:
            probe_id = probes[rec.probe].pk
            digest = _content_digest(rec)
            snapshot = HistogramSnapshot(
                probe_id=probe_id,
                build_id=rec.build_id,
                sort_key=sort_key(rec.build_id),
                edges=pack(rec.edges),
                counts=pack(rec.counts),
                normalised=rec.normalised,
                total=rec.total,
                sum=rec.sum,
                source=f"{name}: {rec.source}"[:300],
                content_sha1=digest,
                uploaded_by=user,
            )
            found = existing.get((probe_id, rec.build_id))
            if found is None:
                new.append(snapshot)
            elif found[1] == digest:
                unchanged += 1
            else:
                snapshot.pk = found[0]
                snapshot.updated = now  # bulk_update skips auto_now; the sweeper reads it
                changed.append(snapshot)
        # bulk_create skips save(), so sort_key is set above.
        HistogramSnapshot.objects.bulk_create(new, batch_size=INSERT_BATCH)
        HistogramSnapshot.objects.bulk_update(
            changed,
            ["edges", "counts", "normalised", "total", "sum", "source", "content_sha1",
             "uploaded_by", "updated"],
            batch_size=INSERT_BATCH,
        )
        created, replaced = len(new), len(changed)
    ids = sorted({p.pk for p in probes.values()})
    return StoredFile(name, created, replaced, unchanged, ids)


def _existing(
    records: list[HistogramRecord], probes: dict[str, Probe]
) -> dict[tuple[int, str], tuple[int, str]]:
    """(probe id, build id) -> (snapshot id, content digest) of the stored histograms.

    A file usually holds one build of many probes (a day's aggregates) or many builds of
    one probe: one query per build or per probe, whichever is fewer.
    """
    by_build: dict[str, list[int]] = {}
    by_probe: dict[int, list[str]] = {}
    for rec in records:
        by_build.setdefault(rec.build_id, []).append(probes[rec.probe].pk)
        by_probe.setdefault(probes[rec.probe].pk, []).append(rec.build_id)
    found: dict[tuple[int, str], tuple[int, str]] = {}
    fields = ("probe_id", "build_id", "id", "content_sha1")
    if len(by_build) <= len(by_probe):
        for build_id, ids in by_build.items():
            for chunk in batches(ids):
                rows = HistogramSnapshot.objects.filter(
                    build_id=build_id, probe_id__in=chunk
                ).values_list(*fields)
                found.update({(p, b): (pk, sha) for p, b, pk, sha in rows})
    else:
        for probe_id, builds in by_probe.items():
            for chunk in batches(builds):
                rows = HistogramSnapshot.objects.filter(
                    probe_id=probe_id, build_id__in=chunk
                ).values_list(*fields)
                found.update({(p, b): (pk, sha) for p, b, pk, sha in rows})
    return found


def _probes(records: Iterable[HistogramRecord]) -> dict[str, Probe]:
    """The Probe of every record's name, created if new, owner emails merged."""
    wanted: dict[str, HistogramRecord] = {}
    emails: dict[str, list[str]] = {}
    for rec in records:
        wanted.setdefault(rec.probe, rec)
        emails.setdefault(rec.probe, []).extend(rec.alert_emails)
    digests = {name_digest(n): n for n in wanted}
    found: dict[str, Probe] = {}
    keys = list(digests)
    for chunk in batches(keys):
        for p in Probe.objects.filter(name_sha1__in=chunk):
            found[p.name] = p
    missing = [
        Probe(
            name=n,
            name_sha1=d,
            alert_emails=list(dict.fromkeys(emails[n])),
            histogram_type=wanted[n].histogram_type or "",
        )
        for d, n in digests.items()
        if n not in found
    ]
    # Not ignore_conflicts: a concurrent creation raises, and the caller retries once.
    for p in Probe.objects.bulk_create(missing, batch_size=INSERT_BATCH):
        found[p.name] = p
    if any(p.pk is None for p in found.values()):  # backends that return no ids
        for chunk in batches(keys):
            for p in Probe.objects.filter(name_sha1__in=chunk):
                found[p.name] = p
    grown = []
    for n, p in found.items():
        merged = list(dict.fromkeys([*p.alert_emails, *emails[n]]))
        if merged != p.alert_emails:
            p.alert_emails = merged
            grown.append(p)
    Probe.objects.bulk_update(grown, ["alert_emails"], batch_size=INSERT_BATCH)
    return found
