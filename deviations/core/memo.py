"""What pages assemble from a stored analysis, kept in the process for the next request.

A page of the matrix shows 100 functions but must read every stored block of its
(metric, estimator, rule) to rank them: at 300 releases × 5,000 functions that read is
~100 MB of arrays, most of a request. Pages keep what they assembled here, under a key
holding the series' analysis ``generation`` (random, new with every write of the
analysis): a key is never stale, a new analysis simply misses, and old entries leave by
age.

Django's cache framework is not the tool for this: every backend pickles on ``set`` and
unpickles on ``get`` (a copy of the ~100 MB at each request on local memory, the network
on Redis), where this keeps references to read-only arrays. The price: each process
(gunicorn worker) has its own, bounded by ``DEVIATIONS_PAGE_CACHE_MB`` (0 turns it off).
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

from django.conf import settings

T = TypeVar("T")
logger = logging.getLogger(__name__)

_lock = threading.Lock()
_entries: OrderedDict[Hashable, tuple[Any, int]] = OrderedDict()


def _limit() -> int:
    return int(getattr(settings, "DEVIATIONS_PAGE_CACHE_MB", 256)) * 1024**2


def remembered(key: Hashable, make: Callable[[], tuple[T, int] | None]) -> T | None:
    """The value kept under ``key``, else ``make()``'s (value, size in bytes), kept.

    ``make`` returning None (nothing to show yet) keeps nothing. The least recently used
    entries leave when the sizes add up to more than the limit; a value larger than the
    limit is returned without being kept. Values must not be modified by callers (arrays
    are made read-only by :func:`frozen`).
    """
    with _lock:
        found = _entries.get(key)
        if found is not None:
            _entries.move_to_end(key)
            return found[0]  # type: ignore[no-any-return]
    made = make()
    if made is None:
        return None
    value, size = made
    limit = _limit()
    if size > limit and limit:
        # Not silent (issue 24): every request of this page will read it again.
        logger.warning("page cache: %s of %.0f MB is larger than DEVIATIONS_PAGE_CACHE_MB "
                       "(%d): not kept", key[0] if isinstance(key, tuple) else key,
                       size / 1024**2, limit // 1024**2)
    if size <= limit:
        with _lock:
            _entries[key] = (value, size)
            total = sum(s for _, s in _entries.values())
            while total > limit:
                _, (_, dropped) = _entries.popitem(last=False)
                total -= dropped
    return value


def frozen(arrays: dict[str, Any]) -> tuple[dict[str, Any], int]:
    """``arrays`` made read-only (numpy arrays), and their size in bytes."""
    size = 0
    for value in arrays.values():
        if hasattr(value, "flags"):
            value.flags.writeable = False
            size += value.nbytes
    return arrays, size


def forget() -> None:
    """Drop every entry (tests, benchmarks)."""
    with _lock:
        _entries.clear()
