"""Reading an uploaded file's bytes: bounded in size, plain or gzip, named in every error.

The one reader behind every parser of ``ingest`` (traces, histograms): a source is a path,
bytes, or a binary stream; gzip is recognised by its magic bytes and inflated in pieces
with a running limit, so a gzip bomb stops at ``max_bytes`` plus one piece instead of
filling memory; multi-member and zero-padded gzip files are read whole. Every failure
raises the caller's ``UserError`` subclass with "<file>: <reason>".
"""

from __future__ import annotations

import io
import os
import zlib
from collections.abc import Iterator
from typing import BinaryIO

from deviations.core.errors import TooLargeError, UserError

Source = str | os.PathLike[str] | bytes | bytearray | memoryview | BinaryIO

#: gzip input is read and inflated in pieces of this size.
CHUNK = 1 << 20
_GZIP_MAGIC = b"\x1f\x8b"


def display_name(source: object) -> str:
    """The name error messages give a source: a path's or stream's base name, else a
    placeholder."""
    if isinstance(source, str | os.PathLike):
        return os.path.basename(os.fspath(source))
    if isinstance(source, bytes | bytearray | memoryview):
        return "<bytes>"
    stream_name = getattr(source, "name", None)
    if isinstance(stream_name, str) and os.path.basename(stream_name):
        return os.path.basename(stream_name)
    return "<stream>"


def read_bounded(
    source: Source, name: str, max_bytes: int, error: type[UserError] = UserError
) -> bytes | bytearray:
    """The decompressed bytes of ``source``, refusing more than ``max_bytes`` at every stage.

    ``error`` is the class raised for unreadable or corrupt input; too many bytes raise a
    ``TooLargeError`` that is also an instance of ``error`` (so callers catching their parser's
    error catch it too).
    """
    too_large = _too_large_class(error)
    limit_msg = f"{name}: larger than the limit of {max_bytes:,} bytes"
    if isinstance(source, bytes | bytearray | memoryview):
        data = bytes(source) if isinstance(source, memoryview) else source
        if len(data) > max_bytes:
            raise too_large(limit_msg)
        if data[:2] == _GZIP_MAGIC:
            return _gunzip(io.BytesIO(data), name, max_bytes, error)
        return data
    if isinstance(source, str | os.PathLike):
        try:
            with open(source, "rb") as f:
                size = os.fstat(f.fileno()).st_size
                if size > max_bytes:
                    raise too_large(limit_msg + f" ({size:,} bytes on disk)")
                if f.read(2) == _GZIP_MAGIC:
                    f.seek(0)
                    return _gunzip(f, name, max_bytes, error)
                f.seek(0)
                data = f.read(max_bytes + 1)  # the file may have grown since fstat
                if len(data) > max_bytes:
                    raise too_large(limit_msg)
                return data
        except OSError as e:
            raise error(f"{name}: cannot read the file: {e.strerror or e}") from None
    # A binary stream of unknown length; read() may return less than asked before its end.
    head = source.read(2)
    if head == _GZIP_MAGIC:
        return _gunzip(_Prefixed(head, source), name, max_bytes, error)
    buf = bytearray(head)
    while chunk := source.read(CHUNK):
        if len(buf) + len(chunk) > max_bytes:
            raise too_large(limit_msg)
        buf += chunk
    return buf


def iter_chunks(f: BinaryIO, size: int = CHUNK) -> Iterator[bytes]:
    """The decompressed bytes of an open binary file, in pieces of at most about ``size``:
    gzip (by its magic bytes; multi-member and zero-padded as in ``read_bounded``) is
    inflated as it is read, so the whole file is never held. Raises ``zlib.error`` for a
    corrupt gzip stream and ``ValueError`` for a truncated one (without the file's name:
    ``read_bounded`` gives the message); the caller bounds the size."""
    head = f.read(2)
    if head != _GZIP_MAGIC:
        if head:
            yield head
        while chunk := f.read(size):
            yield chunk
        return
    d = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
    pending = head
    while True:
        if not pending:
            pending = f.read(size)
            if not pending:
                break
        if d.eof:
            if not pending.strip(b"\x00"):  # gzip files may be padded with zero bytes
                pending = b""
                continue
            d = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)  # another gzip member
        out = d.decompress(pending, size)
        if out:
            yield out
        pending = d.unused_data + d.unconsumed_tail if d.eof else d.unconsumed_tail
    if not d.eof:
        raise ValueError("truncated gzip stream")


_TOO_LARGE: dict[type[UserError], type[UserError]] = {}


def _too_large_class(error: type[UserError]) -> type[UserError]:
    """A subclass of both ``error`` and ``TooLargeError`` (cached), so one ``except`` catches it."""
    if issubclass(error, TooLargeError):
        return error
    if error not in _TOO_LARGE:
        _TOO_LARGE[error] = type(f"{error.__name__}TooLargeError", (error, TooLargeError), {})
    return _TOO_LARGE[error]


class _Prefixed(io.RawIOBase):
    """A stream whose first bytes were already read (to sniff the gzip magic)."""

    def __init__(self, head: bytes, rest: BinaryIO) -> None:
        self._head = head
        self._rest = rest

    def read(self, size: int = -1) -> bytes:
        if self._head:
            head, self._head = self._head, b""
            return head
        return self._rest.read(size)


def _gunzip(
    f: io.RawIOBase | BinaryIO, name: str, max_bytes: int, error: type[UserError]
) -> bytearray:
    """Inflate a (possibly multi-member) gzip stream in bounded pieces with a running limit."""
    too_large = _too_large_class(error)
    out = bytearray()
    compressed = 0
    d = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
    pending = b""
    try:
        while True:
            if not pending:
                pending = f.read(CHUNK) or b""
                if not pending:
                    break
                compressed += len(pending)
                if compressed > max_bytes:
                    raise too_large(f"{name}: larger than the limit of {max_bytes:,} bytes")
            if d.eof:
                if not pending.strip(b"\x00"):  # gzip files may be padded with zero bytes
                    pending = b""
                    continue
                d = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)  # another gzip member
            out += d.decompress(pending, CHUNK)
            if len(out) > max_bytes:
                raise too_large(
                    f"{name}: decompresses to more than the limit of {max_bytes:,} bytes"
                )
            pending = d.unused_data + d.unconsumed_tail if d.eof else d.unconsumed_tail
        if not d.eof:
            out += d.flush()  # at most one window of output can still be buffered
    except zlib.error as e:
        raise error(f"{name}: corrupt gzip stream ({e})") from None
    if not d.eof:
        raise error(f"{name}: truncated gzip stream")
    return out
