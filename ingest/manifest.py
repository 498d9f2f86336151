"""A whole series in one command: which file is a run of which release.

Two forms, read without touching the database:

- a CSV manifest with a header ``release,file``, then optionally ``order`` and
  ``revision`` columns (one run per row; relative file paths are relative to the
  manifest's folder; ``order`` sorts the release by that number instead of its version;
  ``revision`` is the commit the release was built from, the same on each of its rows);
- a folder holding one folder per release, named by its version, with that release's
  trace files (``*.json``, ``*.json.gz``) inside.

Errors are ``ManifestError`` naming the manifest, the line and the reason; every release
name is checked before anything is ingested, so a typo stops the command at once.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

from deviations.core.errors import UserError
from deviations.core.versions import check_order, check_revision, check_version

_TRACE_SUFFIXES = (".json", ".json.gz", ".gz")
#: Benchmark results files a release folder may hold (``ingest.results``' formats).
RESULTS_SUFFIXES = (".json", ".json.gz", ".gz", ".csv", ".log", ".txt")


class ManifestError(UserError):
    """The manifest cannot be used. ``str(e)``: "<manifest>: <where>: <reason>"."""


@dataclass(frozen=True)
class ManifestEntry:
    release: str
    path: Path
    order: int | None = None
    revision: str | None = None


def read_manifest(path: Path) -> list[ManifestEntry]:
    """The runs a CSV manifest lists, in its order."""
    name = path.name
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise ManifestError(f"{name}: cannot read the manifest ({exc})") from None
    rows = csv.reader(text.splitlines())
    header = [h.strip().lower() for h in next(rows, [])]
    extra = header[2:]
    if header[:2] != ["release", "file"] or len(set(extra)) != len(extra) or not set(
            extra) <= {"order", "revision"}:
        raise ManifestError(
            f"{name}: line 1: the header must be 'release,file', then optionally 'order' "
            f"and 'revision' columns, not {','.join(header)!r}"
        )
    entries = []
    revisions: dict[str, str | None] = {}
    for line, row in enumerate(rows, start=2):
        if not any(cell.strip() for cell in row):
            continue
        if len(row) != len(header):
            raise ManifestError(f"{name}: line {line}: {len(row)} fields, expected "
                                f"{len(header)}")
        cells = dict(zip(header, (cell.strip() for cell in row), strict=True))
        release, file = cells["release"], cells["file"]
        revision = cells.get("revision") or None
        try:
            check_version(release)
            order = int(cells["order"]) if cells.get("order") else None
            check_order(order)
            if revision is not None:
                check_revision(revision)
        except ValueError as exc:  # UserError, or a non-integer order
            raise ManifestError(f"{name}: line {line}: {exc}") from None
        if not file:
            raise ManifestError(f"{name}: line {line}: no file")
        if revisions.setdefault(release, revision) != revision:
            raise ManifestError(
                f"{name}: line {line}: release {release!r} has revision "
                f"{revisions[release]!r} on an earlier line, {revision!r} here")
        entries.append(ManifestEntry(release, (path.parent / file), order, revision))
    if not entries:
        raise ManifestError(f"{name}: the manifest lists no runs")
    return entries


def read_folders(root: Path, suffixes: tuple[str, ...] = _TRACE_SUFFIXES
                 ) -> list[ManifestEntry]:
    """The runs of a folder of release folders, releases and files in name order: the
    files ending in one of ``suffixes`` (trace files unless told)."""
    if not root.is_dir():
        raise ManifestError(f"{root.name}: not a folder")
    entries = []
    for folder in sorted(p for p in root.iterdir() if p.is_dir()):
        try:
            check_version(folder.name)
        except UserError as exc:
            raise ManifestError(f"{root.name}: {folder.name}/: {exc}") from None
        files = sorted(f for f in folder.iterdir() if f.is_file()
                       and f.name.endswith(suffixes))
        entries += [ManifestEntry(folder.name, f) for f in files]
    if not entries:
        raise ManifestError(f"{root.name}: no release folder holds a "
                            f"{' or '.join(suffixes)} file")
    return entries
