"""The trace storage's two backends (``deviations.core.storage``): a local folder, and
S3-compatible object storage on a real server on loopback (``s3_server``)."""

from __future__ import annotations

import errno
import io
import shutil
from pathlib import Path
from typing import Any

import pytest
from django.core.files.storage import storages

from deviations.core.storage import NoRoomError

NAME = "traces/ab/abcdef"


def _read(source: Any) -> bytes:
    if isinstance(source, Path):
        return source.read_bytes()
    return bytes(source.read())


def test_put_reader_stream_entries_delete(trace_storage: Any, tmp_path: Path) -> None:
    store = storages["traces"]
    store.put(NAME, io.BytesIO(b"first"))
    assert trace_storage.keys() == [NAME]
    store.put(NAME, io.BytesIO(b"second, longer"))  # replaces: names are digests
    with store.reader(NAME) as source:
        assert _read(source) == b"second, longer"
    local = tmp_path / "local.json.gz"
    local.write_bytes(b"\x1f\x8b from a path")
    store.put("traces/cd/cdef", local)
    stream = store.stream("traces/cd/cdef")
    assert stream.read() == b"\x1f\x8b from a path"
    stream.close()
    assert sorted(name for name, _ in store.entries("traces/")) == [NAME, "traces/cd/cdef"]
    assert trace_storage.read("traces/cd/cdef") == b"\x1f\x8b from a path"
    store.delete(NAME)
    assert not store.exists(NAME)
    with pytest.raises(FileNotFoundError), store.reader(NAME):
        pass
    with pytest.raises(FileNotFoundError):
        store.stream(NAME)


def test_a_large_object_goes_in_parts_and_comes_back_whole(s3: Any, tmp_path: Path) -> None:
    """boto3 sends files over 8 MB as a multipart upload, completed or aborted whole."""
    data = bytes(range(256)) * (40 * 1024 + 7)  # ~10 MB
    path = tmp_path / "big"
    path.write_bytes(data)
    storages["traces"].put(NAME, path)
    assert s3.read(NAME) == data


def test_a_full_disk_leaves_no_partial_file(
    settings: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings.MEDIA_ROOT = tmp_path / "media"
    real = shutil.copyfileobj

    def fill_up(source: Any, target: Any, length: int = 0) -> None:
        target.write(source.read(100))  # part of it reaches the disk, then no room
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(shutil, "copyfileobj", fill_up)
    with pytest.raises(NoRoomError, match="No space left"):
        storages["traces"].put(NAME, io.BytesIO(b"x" * 1000))
    monkeypatch.setattr(shutil, "copyfileobj", real)
    assert [p for p in (tmp_path / "media").rglob("*") if p.is_file()] == []


def test_the_object_store_saying_it_is_full_is_no_room(s3: Any) -> None:
    """An S3 service with no room answers 507 (MinIO: XMinioStorageFull): the answer is
    put on the wire by botocore's own hook before the request is sent."""
    from botocore.awsrequest import AWSResponse

    class Body(io.BytesIO):
        def stream(self, **kwargs: Any) -> Any:
            yield self.getvalue()

    xml = (b"<?xml version='1.0' encoding='UTF-8'?><Error><Code>XMinioStorageFull</Code>"
           b"<Message>drive full</Message></Error>")

    def insufficient(request: Any, **kwargs: Any) -> AWSResponse:
        return AWSResponse(request.url, 507, {"Content-Type": "application/xml"}, Body(xml))

    store = storages["traces"]
    events = store.connection.meta.client.meta.events
    events.register("before-send.s3.PutObject", insufficient)
    try:
        with pytest.raises(NoRoomError, match="drive full"):
            store.put(NAME, io.BytesIO(b"x"))
    finally:
        events.unregister("before-send.s3.PutObject", insufficient)
    assert s3.keys() == []


def test_a_prefix_keeps_the_objects_in_their_part_of_the_bucket(s3: Any, settings: Any) -> None:
    settings.STORAGES = {**settings.STORAGES, "traces": s3.storage_setting("deviations/prod")}
    store = storages["traces"]
    store.put(NAME, io.BytesIO(b"x"))
    assert s3.keys() == [f"deviations/prod/{NAME}"]
    assert [name for name, _ in store.entries("traces/")] == [NAME]


def test_prepare_storage_creates_the_bucket_and_checks_it(
    s3_server: str, settings: Any
) -> None:
    import uuid

    from django.core.management import call_command

    from tests.conftest import S3Bucket

    bucket = S3Bucket(s3_server, f"t-{uuid.uuid4().hex[:20]}")  # not created yet
    settings.STORAGES = {**settings.STORAGES, "traces": bucket.storage_setting("prod")}
    out = io.StringIO()
    call_command("prepare_storage", stdout=out)
    assert f"trace storage ready: s3://{bucket.name}/prod at {s3_server} (bucket created)" in (
        out.getvalue())
    assert bucket.keys() == []  # the probe is gone
    call_command("prepare_storage", stdout=out)  # a second time: the bucket is there
    assert out.getvalue().count("bucket created") == 1


def test_prepare_storage_says_when_the_storage_cannot_be_used(settings: Any) -> None:
    from django.core.management import call_command
    from django.core.management.base import CommandError

    from tests.conftest import S3Bucket

    nobody = S3Bucket("http://127.0.0.1:9", "nowhere")  # no server listens on port 9
    settings.STORAGES = {**settings.STORAGES, "traces": nobody.storage_setting()}
    with pytest.raises(CommandError, match="the trace storage cannot be used"):
        call_command("prepare_storage", stdout=io.StringIO())


def test_prepare_storage_makes_the_local_folder(settings: Any, tmp_path: Path) -> None:
    from django.core.management import call_command

    settings.MEDIA_ROOT = tmp_path / "media"
    out = io.StringIO()
    call_command("prepare_storage", stdout=out)
    assert f"trace storage ready: the folder {tmp_path / 'media'}" in out.getvalue()
    assert (tmp_path / "media").is_dir()
