"""Recorded canary observations (CSV) -> plain arrays, no database.

Header ``arm,value`` or ``arm,value,timestamp`` (a count canary may send ``arm,timestamp``
alone); ``arm`` is ``A`` (control) or ``B`` (candidate). The whole file is checked before
anything is sent: a bad line raises ``ObservationsError`` with "<file>:<line>: <reason>".
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from deviations.core.errors import UserError

_HEADERS = (("arm", "value"), ("arm", "value", "timestamp"), ("arm", "timestamp"))


class ObservationsError(UserError):
    """A recorded-observations file that cannot be read (HTTP 400)."""

    code = "bad_observations"


@dataclass(frozen=True)
class Observations:
    """One row per observation, in file order: ``is_b`` (arm B), ``values`` and
    ``timestamps`` (``None`` when the column is absent)."""

    is_b: np.ndarray
    values: np.ndarray | None
    timestamps: np.ndarray | None


def _number(text: str, name: str, line: int, column: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ObservationsError(f"{name}:{line}: {column} {text!r} is not a number") from None
    if not math.isfinite(value):
        raise ObservationsError(f"{name}:{line}: {column} {text!r} is not a finite number")
    return value


def parse_observations(data: bytes, name: str) -> Observations:
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ObservationsError(f"{name}: not UTF-8 text ({exc.reason})") from None
    # csv.Error: e.g. a lone carriage return inside a field (found by tests/ingest/test_fuzz.py)
    try:
        return _parse_rows(csv.reader(io.StringIO(text)), name)
    except csv.Error as exc:
        raise ObservationsError(f"{name}: not CSV ({exc})") from None


def _parse_rows(rows: Iterator[list[str]], name: str) -> Observations:
    header = tuple(h.strip().lower() for h in next(rows, []))
    if header not in _HEADERS:
        raise ObservationsError(
            f"{name}:1: the header must be 'arm,value', 'arm,value,timestamp' or "
            f"'arm,timestamp', not {','.join(header)!r}"
        )
    has_value, has_time = "value" in header, "timestamp" in header
    arms: list[bool] = []
    values: list[float] = []
    times: list[float] = []
    for line, row in enumerate(rows, start=2):
        if not row or all(not cell.strip() for cell in row):
            continue
        if len(row) != len(header):
            raise ObservationsError(
                f"{name}:{line}: {len(row)} fields where the header has {len(header)}"
            )
        arm = row[0].strip().upper()
        if arm not in ("A", "B"):
            raise ObservationsError(f"{name}:{line}: arm {row[0]!r} is not A or B")
        arms.append(arm == "B")
        if has_value:
            values.append(_number(row[1].strip(), name, line, "value"))
        if has_time:
            times.append(_number(row[-1].strip(), name, line, "timestamp"))
    if not arms:
        raise ObservationsError(f"{name}: no observations after the header")
    return Observations(
        is_b=np.asarray(arms, dtype=bool),
        values=np.asarray(values, dtype=np.float64) if has_value else None,
        timestamps=np.asarray(times, dtype=np.float64) if has_time else None,
    )
