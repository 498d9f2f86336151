"""A plain CSV of results -> ``ResultSet``: header ``release,metric,value`` with optional
``unit`` and ``direction`` columns, in any order (a header is required; other columns
are an error naming them); one row per replicate.

- Rows with the same (release, metric) are that metric's replicates in that release, in
  file order; a metric's first row places it.
- ``release`` must be a valid release name (``deviations.core.versions.check_version``).
- ``unit`` (normalised spelling) and ``direction`` (``lower_is_better`` /
  ``higher_is_better``, or ``lower`` / ``higher``) belong to a metric: a blank cell says
  nothing, two different values for one metric anywhere in the file are an error naming
  the line. A metric without a unit has unit ""; without a direction, ``None``.
"""

from __future__ import annotations

import csv
import io
from typing import Any

from deviations.core.errors import UserError
from deviations.core.versions import check_version
from ingest.results.common import (
    Collector,
    Direction,
    ResultsError,
    ResultSet,
    check_name,
    check_number,
    check_unit,
)

FORMAT = "csv"
REQUIRED = ("release", "metric", "value")
OPTIONAL = ("unit", "direction")
_DIRECTIONS: dict[str, Direction] = {
    "lower_is_better": "lower_is_better", "lower": "lower_is_better",
    "higher_is_better": "higher_is_better", "higher": "higher_is_better",
}


def header_of(text: str) -> list[str] | None:
    """The first non-blank line's cells, lower-cased, when they hold the required columns."""
    for line in text.splitlines():
        if line.strip():
            cells = [c.strip().lower() for c in line.split(",")]
            return cells if set(REQUIRED) <= set(cells) else None
    return None


def parse_text(text: str, label: str) -> ResultSet:
    try:
        return _parse(csv.reader(io.StringIO(text, newline="")), label)
    except csv.Error as e:  # e.g. a NUL byte or a lone carriage return in a field
        raise ResultsError(f"{label}: not CSV ({e})") from None


def _parse(reader: Any, label: str) -> ResultSet:
    header: list[str] | None = None
    for row in reader:
        if any(c.strip() for c in row):
            header = [c.strip().lower() for c in row]
            break
    if header is None:
        raise ResultsError(f"{label}: the file is empty")
    line1 = f"line {reader.line_num}"
    missing = [c for c in REQUIRED if c not in header]
    extra = [c for c in header if c not in REQUIRED + OPTIONAL]
    if missing or extra:
        problem = (f"missing {', '.join(missing)}" if missing else
                   f"unknown column(s) {', '.join(repr(c) for c in extra)}")
        raise ResultsError(f"{label}: {line1}: the header must hold release, metric, value "
                           f"and optionally unit, direction ({problem})")
    if len(set(header)) != len(header):
        raise ResultsError(f"{label}: {line1}: a column appears twice in the header")
    col = {h: i for i, h in enumerate(header)}
    rows: list[tuple[str, str, float, str]] = []
    units: dict[str, str] = {}
    directions: dict[str, Direction] = {}
    for row in reader:
        where = f"line {reader.line_num}"
        if not any(c.strip() for c in row):
            continue
        if len(row) != len(header):
            raise ResultsError(
                f"{label}: {where}: {len(row)} fields where the header has {len(header)}")
        release = row[col["release"]].strip()
        try:
            check_version(release)
        except UserError as e:
            raise ResultsError(f"{label}: {where}: {e}") from None
        metric = check_name(row[col["metric"]], label, where, "metric")
        rows.append((release, metric, _value(row[col["value"]], label, where), where))
        if "unit" in col and row[col["unit"]].strip():
            _same(units, metric, check_unit(row[col["unit"]], label, where), "unit", label, where)
        if "direction" in col and row[col["direction"]].strip():
            text = row[col["direction"]].strip().lower()
            if text not in _DIRECTIONS:
                raise ResultsError(f"{label}: {where}: direction {text!r} is not "
                                   "lower_is_better or higher_is_better")
            _same(directions, metric, _DIRECTIONS[text], "direction", label, where)
    replicates: dict[tuple[str, str], list[float]] = {}
    first_where: dict[tuple[str, str], str] = {}
    for release, metric, value, where in rows:
        replicates.setdefault((release, metric), []).append(value)
        first_where.setdefault((release, metric), where)
    out = Collector(label, FORMAT)
    for (release, metric), values in replicates.items():
        out.add(metric, units.get(metric, ""), directions.get(metric), values,
                where=first_where[(release, metric)], release=release)
    return out.result("no rows after the header")


def _value(text: str, label: str, where: str) -> float:
    try:
        number = float(text.strip())
    except ValueError:
        raise ResultsError(f"{label}: {where}: value {text.strip()[:40]!r} is not a number"
                           ) from None
    return check_number(number, label, where)


def _same(seen: dict[str, Any], metric: str, value: Any, what: str, label: str,
          where: str) -> None:
    old = seen.setdefault(metric, value)
    if old != value:
        raise ResultsError(f"{label}: {where}: metric {metric!r} has {what} {value!r} here "
                           f"and {old!r} on an earlier line")
