"""Queries over many keys, in batches the databases accept; lz4 for large values.

SQLite allows 32,766 bound parameters per statement (999 before 3.32); 900 keys a query
stays below both limits on every build, and an INSERT of rows of several columns each
uses a tenth of that.
"""

import functools
from collections.abc import Iterator, Sequence
from typing import TypeVar

from django.db import connection

T = TypeVar("T")

#: Keys per ``IN (...)`` query.
IN_BATCH = 900
#: Rows per INSERT of ``bulk_create``/``bulk_update`` (rows hold several parameters each).
INSERT_BATCH = IN_BATCH // 10


def batches(keys: Sequence[T], size: int = IN_BATCH) -> Iterator[Sequence[T]]:
    """Consecutive slices of ``keys`` of at most ``size`` items."""
    for i in range(0, len(keys), size):
        yield keys[i : i + size]


@functools.cache
def _lz4_in(server_version: int) -> bool:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT 'lz4' = ANY(enumvals) FROM pg_settings "
            "WHERE name = 'default_toast_compression'"
        )
        found = cursor.fetchone()
    return bool(found and found[0])


def lz4_toast() -> None:
    """In the current transaction, large values are compressed with lz4 rather than pglz,
    on PostgreSQL built with lz4 (asked once per server version); nothing elsewhere.

    pglz compresses arrays of floats at ~15 MB/s, lz4 ~10x faster (the analysis store's
    blocks, a run's times).
    """
    if connection.vendor != "postgresql":
        return
    connection.ensure_connection()
    if _lz4_in(connection.pg_version):
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL default_toast_compression = 'lz4'")
