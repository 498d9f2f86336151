"""Objects in S3-compatible object storage through django-storages (web and workers on
different hosts: docs/deploy.md, "Several hosts"). Imported only when configured: boto3 is
an optional dependency (``pip install deviations[s3]``)."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any, BinaryIO

from botocore.exceptions import ClientError
from storages.backends.s3 import S3Storage as _S3Storage
from storages.utils import clean_name

from deviations.core.storage import NoRoomError

#: Answers of a store that has no room: HTTP 507, AWS's quota error, MinIO's full disk.
_FULL_CODES = {"QuotaExceeded", "XMinioStorageFull", "InsufficientStorage"}
_PARAMS = {"ContentType": "application/octet-stream"}


def _missing(err: ClientError) -> bool:
    return err.response.get("ResponseMetadata", {}).get("HTTPStatusCode") == 404 or (
        err.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"))


class S3Storage(_S3Storage):
    """django-storages' ``S3Storage`` with ``put``, ``reader`` and ``entries``.

    A ``put`` is one PUT, or a multipart upload that boto3 completes or aborts as a whole:
    an object is visible whole or not at all.
    """

    def _key(self, name: str) -> str:
        return str(self._normalize_name(clean_name(name)))

    def put(self, name: str, content: BinaryIO | Path) -> None:
        obj = self.bucket.Object(self._key(name))
        try:
            if isinstance(content, Path):
                obj.upload_file(str(content), ExtraArgs=_PARAMS, Config=self.transfer_config)
            else:
                content.seek(0)
                obj.upload_fileobj(content, ExtraArgs=_PARAMS, Config=self.transfer_config)
        except ClientError as err:
            status = err.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            if status == 507 or err.response.get("Error", {}).get("Code") in _FULL_CODES:
                raise NoRoomError(28, err.response.get("Error", {}).get(
                    "Message", "the object store is full")) from err
            raise

    def stream(self, name: str) -> Any:
        """The object's body, read as it arrives (``open`` would first copy the whole
        object into a temporary file)."""
        try:
            return self.bucket.Object(self._key(name)).get()["Body"]
        except ClientError as err:
            if _missing(err):
                raise FileNotFoundError(2, "no such stored object", name) from None
            raise

    @contextmanager
    def reader(self, name: str) -> Iterator[Path]:
        """The object downloaded to a file of the machine's temporary folder (boto3 fetches
        large objects in parallel ranges), deleted afterwards. A parser reads a file of
        known size into one buffer; from a stream of unknown length its buffer grows by
        copies, up to about twice the file at the peak."""
        with tempfile.TemporaryDirectory(prefix="deviations-") as folder:
            path = Path(folder) / "object"
            try:
                self.bucket.Object(self._key(name)).download_file(
                    str(path), Config=self.transfer_config)
            except ClientError as err:
                if _missing(err):
                    raise FileNotFoundError(2, "no such stored object", name) from None
                raise
            yield path

    def entries(self, prefix: str) -> Iterator[tuple[str, datetime]]:
        root = str(self.location or "").strip("/")
        start = len(root) + 1 if root else 0
        paginator = self.connection.meta.client.get_paginator("list_objects_v2")
        for page in paginator.paginate(Bucket=self.bucket_name,
                                       Prefix=f"{root}/{prefix}" if root else prefix):
            for entry in page.get("Contents", ()):
                yield entry["Key"][start:], entry["LastModified"]

    def prepare(self) -> str:
        """Create the bucket if it is missing; what this storage is, in words."""
        client = self.connection.meta.client
        try:
            client.head_bucket(Bucket=self.bucket_name)
            created = ""
        except ClientError as err:
            if err.response.get("ResponseMetadata", {}).get("HTTPStatusCode") != 404:
                raise
            region = client.meta.region_name
            params: dict[str, Any] = {}
            if region and region != "us-east-1":  # S3 wants the region said, except this one
                params["CreateBucketConfiguration"] = {"LocationConstraint": region}
            client.create_bucket(Bucket=self.bucket_name, **params)
            created = " (bucket created)"
        where = self.endpoint_url or "AWS"
        prefix = f"/{self.location.strip('/')}" if self.location else ""
        return f"s3://{self.bucket_name}{prefix} at {where}{created}"
