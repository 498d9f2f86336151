"""Where the files users send are kept: a local folder, or S3-compatible object storage.

Both classes are Django storages (``storages["traces"]``, chosen in ``settings`` from the
environment: docs/deploy.md, "Trace files") with what a durable write path needs beyond
Django's API:

- ``put(name, content)``: the object appears whole or not at all, replacing an object of
  the same name (the names are content digests, so a replacement holds the same bytes).
  Django's ``FileSystemStorage.save`` leaves a partial file behind when the disk fills up
  and renames instead of replacing;
- ``reader(name)``: a path a parser reads from (the local file itself, or the object
  downloaded to a temporary file); ``stream(name)``: the bytes as a stream read as they
  arrive (a download); both raise ``FileNotFoundError`` when there is no such object;
- ``entries(prefix)``: every object under a prefix with its modification time (the sweep
  of objects no run refers to), partial files of an interrupted ``put`` included;
- ``prepare()``: create the bucket or folder if it is missing (``manage.py
  prepare_storage``), and say what the storage is.

A storage that is full raises ``NoRoomError``.
"""

from __future__ import annotations


class NoRoomError(OSError):
    """The storage has no room for the object (a full disk or quota, or an object store
    that answers 507 Insufficient Storage or its quota error)."""
