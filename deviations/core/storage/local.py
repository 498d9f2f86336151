"""Files in a folder of this machine (the embedded default: ``MEDIA_ROOT``)."""

from __future__ import annotations

import errno
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import BinaryIO

from django.conf import settings
from django.core.files.storage import FileSystemStorage

from deviations.core.storage import NoRoomError

#: The suffix of a file being written; renamed to its name once whole.
PARTIAL = ".partial"
_FULL = (errno.ENOSPC, errno.EDQUOT)
_CHUNK = 1 << 20


class LocalStorage(FileSystemStorage):
    """``FileSystemStorage`` whose ``put`` writes a temporary file beside the target, flushes
    it to the disk and renames it over the target (atomic on POSIX), so a crash or a full
    disk never leaves a partial file under a real name."""

    def put(self, name: str, content: BinaryIO | Path) -> None:
        target = Path(self.path(name))
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, temporary = tempfile.mkstemp(dir=target.parent, prefix=target.name + ".",
                                         suffix=PARTIAL)
        try:
            with os.fdopen(fd, "wb") as out:
                if isinstance(content, Path):
                    with content.open("rb") as source:
                        shutil.copyfileobj(source, out, _CHUNK)
                else:
                    content.seek(0)
                    shutil.copyfileobj(content, out, _CHUNK)
                out.flush()
                os.fsync(out.fileno())  # whole on the disk before a run refers to it
            os.chmod(temporary, settings.FILE_UPLOAD_PERMISSIONS or 0o644)
            os.replace(temporary, target)
            directory = os.open(target.parent, os.O_RDONLY)
            try:
                os.fsync(directory)  # the rename itself survives a crash
            finally:
                os.close(directory)
        except BaseException as exc:
            Path(temporary).unlink(missing_ok=True)
            if isinstance(exc, OSError) and exc.errno in _FULL:
                raise NoRoomError(exc.errno, exc.strerror or str(exc)) from exc
            raise

    def stream(self, name: str) -> BinaryIO:
        return Path(self.path(name)).open("rb")

    @contextmanager
    def reader(self, name: str) -> Iterator[Path]:
        path = Path(self.path(name))
        if not path.is_file():
            raise FileNotFoundError(errno.ENOENT, "no such stored file", name)
        yield path

    def entries(self, prefix: str) -> Iterator[tuple[str, datetime]]:
        root = Path(self.location)
        top = Path(self.path(prefix))
        if not top.is_dir():
            return
        for folder, _, files in os.walk(top):
            for file in files:
                path = Path(folder) / file
                try:
                    modified = path.stat().st_mtime
                except FileNotFoundError:  # removed meanwhile
                    continue
                yield (path.relative_to(root).as_posix(),
                       datetime.fromtimestamp(modified, tz=UTC))

    def prepare(self) -> str:
        """Create the folder if it is missing; what this storage is, in words."""
        Path(self.location).mkdir(parents=True, exist_ok=True)
        return f"the folder {self.location}"
