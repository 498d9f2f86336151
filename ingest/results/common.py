"""What every reader of benchmark results shares: the result types, the error, units and
directions, and the checks of names and values.

Decisions that hold for every format:

- A value is a finite number with ``|v| <= MAX_ABS_VALUE`` (1e15: eleven days in
  nanoseconds, far beyond any benchmark, far below where the statistics' sums of squares
  overflow); anything else is an error naming the benchmark, never a silently dropped
  replicate.
- A name (metric, unit) is stripped; an empty name, one longer than ``MAX_NAME_CHARS``
  (1,000, the trace reader's limit), one holding a control character (NUL, line breaks,
  tabs, C1) or a lone surrogate (PostgreSQL's text cannot hold it) is an error. Names are
  refused, not shortened: a benchmark's name is chosen by a person and a shortened name
  would silently stop matching the next release's.
- A metric name appears once per file (per release in CSV); only Google Benchmark's
  repetitions repeat a name on purpose and are merged as replicates by its reader.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

from deviations.core.errors import UserError

Direction = Literal["lower_is_better", "higher_is_better"]
DIRECTIONS: tuple[Direction, ...] = ("lower_is_better", "higher_is_better")

FORMATS = ("google-benchmark", "pytest-benchmark", "hyperfine", "asv", "perfherder", "bmf", "csv")
#: Result files are small; the limit only refuses absurd uploads (the other readers' limit).
DEFAULT_MAX_BYTES = 256 * 1024**2
#: The trace reader's limit on names (a database index and a page cell hold them).
MAX_NAME_CHARS = 1_000
#: Units are short words ("ns", "ops/s", "score"); longer text is not a unit.
MAX_UNIT_CHARS = 40
#: The largest magnitude of a value (see the module docstring).
MAX_ABS_VALUE = 1e15

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_SURROGATE = re.compile(r"[\ud800-\udfff]")


class ResultsError(UserError):
    """A benchmark results file that cannot be read: ``str(e)`` is "<file>: <reason>"."""

    code = "bad_results"


@dataclass(frozen=True)
class MetricValues:
    """One metric of a results file: its replicates (finite, at least one) in ``unit``.

    ``direction`` is ``None`` when the format does not say which way is better;
    ``release`` is set by the CSV format only; ``threshold_percent`` is Perfherder's
    ``alertThreshold`` where given.
    """

    name: str
    unit: str
    direction: Direction | None
    values: tuple[float, ...]
    release: str | None = None
    threshold_percent: float | None = None


@dataclass(frozen=True)
class ResultSet:
    """A whole results file: its format (one of ``FORMATS``), its metrics in file order
    (names unique per release) and what a user should know about how it was read."""

    format: str
    metrics: tuple[MetricValues, ...]
    notes: tuple[str, ...]


# --- units and directions ---------------------------------------------------------------

#: Spellings of the same unit, mapped to the one this project uses.
_UNIT_SPELLINGS = {
    "nanoseconds": "ns", "nanosecond": "ns", "nsec": "ns",
    "µs": "us", "μs": "us", "usec": "us", "microseconds": "us", "microsecond": "us",
    "msec": "ms", "milliseconds": "ms", "millisecond": "ms",
    "sec": "s", "secs": "s", "second": "s", "seconds": "s",
    "b": "bytes", "byte": "bytes",
    "kb": "KB", "mb": "MB", "gb": "GB", "kib": "KiB", "mib": "MiB", "gib": "GiB",
    "ops/sec": "ops/s", "operations/second": "ops/s", "operations/s": "ops/s",
}
#: Nanoseconds per time unit, bytes per size unit: what ``convert_values`` converts between
#: (whole numbers, so that ms -> us is exactly x 1000).
_TIME = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9, "min": 6e10, "h": 3.6e12}
_SIZE = {"bytes": 1.0, "KB": 1e3, "MB": 1e6, "GB": 1e9, "KiB": 1024.0, "MiB": 1024.0**2,
         "GiB": 1024.0**3}
#: Units whose larger values are better (besides every rate "x/s").
_HIGHER = {"score", "fps", "ops", "hz", "rps", "qps", "points", "iterations"}


def normalize_unit(unit: str) -> str:
    """``unit`` in this project's spelling (``"µs"`` → ``"us"``, ``"seconds"`` → ``"s"``,
    ``"B"`` → ``"bytes"``); other units unchanged, only stripped."""
    text = unit.strip()
    return _UNIT_SPELLINGS.get(text.lower(), _UNIT_SPELLINGS.get(text, text))


def direction_from_unit(unit: str) -> Direction:
    """Which way is better for a value in ``unit``, when the format does not say.

    Times and sizes: lower. Throughput (any rate ``x/s``, "per second"), scores, frames
    per second, operations: higher. Any other unit: lower (most benchmarks measure a
    cost).
    """
    u = normalize_unit(unit).lower()
    if u.endswith(("/s", "/sec", "per second", "per_second")) or u in _HIGHER:
        return "higher_is_better"
    return "lower_is_better"


def convert_values(values: Iterable[float], from_unit: str, to_unit: str
                   ) -> tuple[float, ...] | None:
    """``values`` converted from ``from_unit`` to ``to_unit``: between time units (ns, us,
    ms, s, min, h) or between sizes (bytes, KB/MB/GB as powers of 1000, KiB/MiB/GiB as
    powers of 1024); unchanged between equal units (any unit); ``None`` otherwise."""
    a, b = normalize_unit(from_unit), normalize_unit(to_unit)
    if a == b:
        return tuple(float(v) for v in values)
    for table in (_TIME, _SIZE):
        if a in table and b in table:
            return tuple(float(v) * table[a] / table[b] for v in values)
    return None


# --- checks -----------------------------------------------------------------------------


def check_name(value: Any, label: str, where: str, what: str = "name") -> str:
    """A metric's name (or part of it): text, stripped, non-empty, short, printable."""
    if not isinstance(value, str):
        raise ResultsError(f"{label}: {where}: the {what} must be text, not {_kind(value)}")
    text = value.strip()
    if not text:
        raise ResultsError(f"{label}: {where}: the {what} is empty")
    if len(text) > MAX_NAME_CHARS:
        raise ResultsError(
            f"{label}: {where}: the {what} is longer than {MAX_NAME_CHARS:,} characters")
    _printable(text, label, where, what)
    return text


def check_unit(value: Any, label: str, where: str) -> str:
    """A unit as the format spells it, normalised (``normalize_unit``); ``""`` allowed."""
    if not isinstance(value, str):
        raise ResultsError(f"{label}: {where}: the unit must be text, not {_kind(value)}")
    text = normalize_unit(value)
    if len(text) > MAX_UNIT_CHARS:
        raise ResultsError(f"{label}: {where}: the unit is longer than {MAX_UNIT_CHARS} characters")
    _printable(text, label, where, "unit")
    return text


def _printable(text: str, label: str, where: str, what: str) -> None:
    if _CONTROL.search(text):
        raise ResultsError(
            f"{label}: {where}: the {what} holds a control character (NUL, line break, tab...)")
    if _SURROGATE.search(text):
        raise ResultsError(
            f"{label}: {where}: the {what} holds a lone surrogate (not Unicode text)")


def check_number(value: Any, label: str, where: str, what: str = "value") -> float:
    """A finite JSON number within ±``MAX_ABS_VALUE`` (booleans and strings refused)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ResultsError(f"{label}: {where}: the {what} must be a number, not {_kind(value)}")
    try:
        x = float(value)
    except OverflowError:  # an integer beyond float's range
        raise ResultsError(f"{label}: {where}: the {what} is beyond ±{MAX_ABS_VALUE:g}") from None
    if not math.isfinite(x):
        raise ResultsError(f"{label}: {where}: the {what} {x!r} is not a finite number")
    if abs(x) > MAX_ABS_VALUE:
        raise ResultsError(f"{label}: {where}: the {what} {x:g} is beyond ±{MAX_ABS_VALUE:g}")
    return x


def check_numbers(value: Any, label: str, where: str, what: str = "values") -> tuple[float, ...]:
    """A non-empty JSON list of numbers (each as ``check_number``)."""
    if not isinstance(value, list) or not value:
        raise ResultsError(f"{label}: {where}: {what} must be a non-empty list of numbers")
    return tuple(check_number(v, label, where, f"value in {what}") for v in value)


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    return {bool: "a boolean", str: "text", list: "a list", dict: "an object"}.get(
        type(value), "a number" if isinstance(value, int | float) else type(value).__name__)


def where_of(name: str) -> str:
    """How an error names a benchmark: quoted and cut to 80 characters."""
    shown = name if len(name) <= 80 else name[:77] + "..."
    return f"benchmark {shown!r}"


def decode_text(data: bytes | bytearray, label: str) -> str:
    """The file as text (UTF-8, an optional byte-order mark dropped)."""
    try:
        return bytes(data).decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise ResultsError(f"{label}: not UTF-8 text (byte {e.start})") from None


def load_json(text: str, label: str) -> Any:
    """JSON text as Python data. ``NaN`` and ``Infinity`` literals (Google Benchmark and asv
    write them) are read as floats, so only a value that is used is refused."""
    try:
        return json.loads(text)
    except RecursionError:  # [[[[... thousands deep
        raise ResultsError(f"{label}: JSON nested too deeply") from None
    except json.JSONDecodeError as e:
        raise ResultsError(
            f"{label}: not valid JSON ({e.msg} at line {e.lineno} column {e.colno})"
        ) from None
    except ValueError as e:  # an integer of more than 4,300 digits
        raise ResultsError(f"{label}: not valid JSON ({e})") from None


def require_object(doc: Any, label: str, what: str) -> dict[str, Any]:
    if not isinstance(doc, dict):
        raise ResultsError(f"{label}: {what} must be a JSON object, not {_kind(doc)}")
    return doc


# --- assembling -------------------------------------------------------------------------


class Collector:
    """Metrics in file order, each name once per release; the reader's notes once each."""

    def __init__(self, label: str, fmt: str) -> None:
        self.label = label
        self.format = fmt
        self._metrics: dict[tuple[str | None, str], MetricValues] = {}
        self._notes: dict[str, None] = {}

    def add(self, name: str, unit: str, direction: Direction | None,
            values: Iterable[float], *, where: str, release: str | None = None,
            threshold_percent: float | None = None, merge: bool = False) -> None:
        """Add a metric; with ``merge``, a name seen before gets these values as more
        replicates (its unit must be the same); otherwise a repeated name is an error."""
        vals = tuple(values)
        if not vals:
            raise ResultsError(f"{self.label}: {where}: no values")
        key = (release, name)
        old = self._metrics.get(key)
        if old is None:
            self._metrics[key] = MetricValues(name, unit, direction, vals, release,
                                              threshold_percent)
            return
        if not merge:
            in_release = f" in release {release!r}" if release is not None else ""
            raise ResultsError(
                f"{self.label}: {where}: the metric {name!r} appears twice{in_release}")
        if old.unit != unit:
            raise ResultsError(f"{self.label}: {where}: the metric {name!r} is in {unit!r} "
                               f"here and in {old.unit!r} before")
        self._metrics[key] = MetricValues(name, unit, direction, old.values + vals, release,
                                          threshold_percent)

    def note(self, text: str) -> None:
        self._notes.setdefault(text)

    def result(self, nothing: str = "no benchmark results") -> ResultSet:
        if not self._metrics:
            raise ResultsError(f"{self.label}: {nothing}")
        return ResultSet(self.format, tuple(self._metrics.values()), tuple(self._notes))
