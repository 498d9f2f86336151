"""Queries over many keys, in batches the databases accept.

SQLite allows 32,766 bound parameters per statement (999 before 3.32); 900 keys a query
stays below both limits on every build, and an INSERT of rows of several columns each
uses a tenth of that.
"""

from collections.abc import Iterator, Sequence
from typing import TypeVar

T = TypeVar("T")

#: Keys per ``IN (...)`` query.
IN_BATCH = 900
#: Rows per INSERT of ``bulk_create``/``bulk_update`` (rows hold several parameters each).
INSERT_BATCH = IN_BATCH // 10


def batches(keys: Sequence[T], size: int = IN_BATCH) -> Iterator[Sequence[T]]:
    """Consecutive slices of ``keys`` of at most ``size`` items."""
    for i in range(0, len(keys), size):
        yield keys[i : i + size]
