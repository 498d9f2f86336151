"""Arrays stored as bytes, the digest that names untrusted text in unique keys, and the
sha256 that names a stored file (``sha256_of``, ``file_sha256``: Django-free, so that
``manage.py ingest_traces`` hashes before Django's set-up).

Per-run times and histogram snapshots are written once and always read whole, so they are
stored as packed little-endian arrays in binary columns (docs/architecture.md, "Storage of
per-run times"). Names (functions, probes) can be arbitrarily long text, which a b-tree
index cannot hold: their uniqueness is enforced on a SHA-1 of their UTF-8 bytes.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

# Dtypes by name: the models import this module, and numpy is imported where arrays are
# made, not when Django starts (a CLI call pays ~0.1 s for it; docs/architecture.md,
# "Start-up").
FLOAT = "<f8"
INT = "<i8"


def pack(values: Any, dtype: str = FLOAT) -> bytes:
    """``values`` as contiguous little-endian bytes of ``dtype``."""
    import numpy as np  # start-up: see FLOAT

    return np.ascontiguousarray(values, dtype=dtype).tobytes()


def unpack(data: Any, dtype: str = FLOAT) -> np.ndarray:
    """A read-only array view of bytes written by ``pack`` with the same ``dtype``."""
    import numpy as np  # start-up: see FLOAT

    return np.frombuffer(bytes(data), dtype=dtype)


def name_digest(name: str) -> str:
    """SHA-1 (hex) of the name's UTF-8 bytes; lone surrogates are kept, not refused."""
    return hashlib.sha1(name.encode("utf-8", "surrogatepass"), usedforsecurity=False).hexdigest()


_CHUNK = 1 << 20


def sha256_of(stream: IO[bytes]) -> tuple[str, int]:
    """(sha256 hex digest, size in bytes) of a seekable stream's bytes, read from its start
    in chunks; the stream is put back at its start."""
    digest = hashlib.sha256()
    size = 0
    stream.seek(0)
    while chunk := stream.read(_CHUNK):
        digest.update(chunk)
        size += len(chunk)
    stream.seek(0)
    return digest.hexdigest(), size


def file_sha256(path: Path) -> tuple[str, int]:
    """``sha256_of`` the file's bytes as they are on disk."""
    with path.open("rb") as stream:
        return sha256_of(stream)
