"""Interleaved A/B (and A/A) runs, CSV or JSON -> ``ABData``: per metric and build, one
value per slice pair.

Pure module: bytes in, numpy arrays out; no Django, no database. The format is documented
for users in ``docs/formats.md`` ("A/B runs"); this docstring records the decisions.

- One row (CSV) or record (JSON) is ``slice, build, metric, value``. ``slice`` names the
  pair a measurement belongs to: the A and B slices of one pair share it (seed 002's
  slices 0 and 1 are pair 0). ``build`` is ``A`` (the baseline) or any other name (a
  candidate: ``B``, ``C``, ...); when no build is called ``A``, the first build in the file
  is the baseline (JSON may name it: ``"baseline"``).
- A (slice, build, metric) given once is that slice's statistic (its p99, its requests per
  second). Given several times, the values are the slice's raw per-request values and the
  slice's statistic is their ``percentile`` (the metric's setting, default 99; linear
  interpolation, ``numpy.percentile``). Seed 002: the percentile is computed per slice,
  never on values pooled across slices.
- Every build must have every slice of every metric it appears in, so that each
  difference is a pair; a gap is an error naming the slice, not a silent drop.
- Optional per-metric settings: ``unit``, ``direction`` (``lower_is_better``, the
  default, or ``higher_is_better``), ``percentile``, as CSV columns (the same on every row
  of a metric) or in JSON's ``"metrics"`` object.
- All or nothing: ``parse_ab_file`` returns the whole file or raises ``ABFormatError``
  ("<file>: <where>: <reason>").
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from deviations.core.errors import UserError
from ingest.reading import Source, display_name, read_bounded

__all__ = ["DEFAULT_MAX_BYTES", "ABData", "ABFormatError", "MetricSpec", "parse_ab_file"]

#: Raw per-request values make large files; 256 MiB is the histogram parser's limit too.
DEFAULT_MAX_BYTES = 256 * 1024**2
#: Names (metrics, builds, slices) longer than this are refused: they are shown on pages.
MAX_NAME_CHARS = 200
#: A run compares at most this many (metric, candidate) pairs: Holm's levels at 1 - 0.05/m
#: need enough slices to mean anything, and the page shows one chart per comparison.
MAX_COMPARISONS = 50
DIRECTIONS = ("lower_is_better", "higher_is_better")
_REQUIRED = ("slice", "build", "metric", "value")


class ABFormatError(UserError):
    """An A/B run file that cannot be read; the message names the file and the reason."""

    code = "bad_ab_file"


@dataclass(frozen=True)
class MetricSpec:
    name: str
    unit: str = ""
    direction: str = "lower_is_better"
    percentile: float = 99.0
    raw: bool = False  # True when the slices' statistic was computed from raw values


@dataclass(frozen=True)
class ABData:
    """One run: ``values[(metric, build)]`` holds one statistic per slice of ``slices``.

    ``slices[metric]`` lists the slice names of that metric in file order; ``builds`` the
    candidates (every build but ``baseline``) in file order.
    """

    name: str
    baseline: str
    builds: tuple[str, ...]
    metrics: tuple[MetricSpec, ...]
    slices: dict[str, tuple[str, ...]]
    values: dict[tuple[str, str], np.ndarray] = field(repr=False)
    raw_counts: dict[tuple[str, str], np.ndarray] = field(repr=False, default_factory=dict)
    sha256: str = ""  # of the file's bytes as read (after gunzip)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON data (what ``ABRun.data`` stores and ``experiments.ab.analysis``
        reads): ``{"name", "baseline", "builds", "metrics": [{"name", "unit", "direction",
        "percentile", "raw"}], "slices": {metric: [...]}, "values": {metric: {build:
        [...]}}}``."""
        values: dict[str, dict[str, list[float]]] = {}
        for (m, b), v in self.values.items():
            values.setdefault(m, {})[b] = [float(x) for x in v]
        return {
            "name": self.name, "baseline": self.baseline, "builds": list(self.builds),
            "metrics": [
                {"name": m.name, "unit": m.unit, "direction": m.direction,
                 "percentile": m.percentile, "raw": m.raw} for m in self.metrics
            ],
            "slices": {m: list(s) for m, s in self.slices.items()},
            "values": values,
        }

    def comparisons(self) -> list[tuple[MetricSpec, str]]:
        """(metric, candidate) pairs in file order: the metric's builds other than A."""
        out = []
        for m in self.metrics:
            for b in self.builds:
                if (m.name, b) in self.values:
                    out.append((m, b))
        return out


def parse_ab_file(
    source: Source, *, name: str | None = None, max_bytes: int = DEFAULT_MAX_BYTES
) -> ABData:
    """Parse a CSV or JSON A/B run (recognised by its first non-blank byte: ``{`` or ``[``
    is JSON). Raises ``ABFormatError`` with "<file>: <reason>"."""
    label = name or display_name(source)
    data = read_bounded(source, label, max_bytes, ABFormatError)
    digest = hashlib.sha256(data).hexdigest()
    try:
        text = bytes(data).decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise ABFormatError(f"{label}: not UTF-8 text (byte {e.start})") from None
    stripped = text.lstrip()
    if not stripped:
        raise ABFormatError(f"{label}: the file is empty")
    if stripped[0] in "{[":
        rows, settings, baseline = _json_rows(text, label)
    else:
        rows, settings = _csv_rows(text, label)
        baseline = None
    return replace(_assemble(rows, settings, baseline, label), sha256=digest)


# --- reading rows ---------------------------------------------------------------------

_Row = tuple[str, str, str, float, str]  # slice, build, metric, value, where


def _name(value: Any, what: str, where: str, label: str) -> str:
    if isinstance(value, bool) or value is None or isinstance(value, dict | list):
        raise ABFormatError(f"{label}: {where}: {what} must be a name or a number")
    text = value if isinstance(value, str) else (
        str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)
    )
    text = text.strip()
    if not text:
        raise ABFormatError(f"{label}: {where}: {what} is empty")
    if len(text) > MAX_NAME_CHARS:
        raise ABFormatError(f"{label}: {where}: {what} is longer than {MAX_NAME_CHARS} characters")
    return text


#: The largest magnitude of a value: far beyond any latency, throughput or score, far below
#: where a sum of squares of a few thousand overflows (issue 23: such files parsed, then the
#: analysis crashed).
MAX_ABS_VALUE = 1e12


def _number(value: Any, where: str, label: str) -> float:
    if isinstance(value, bool):
        raise ABFormatError(f"{label}: {where}: value {value!r} is not a number")
    try:
        x = float(value)
    # OverflowError: an integer beyond float's range (found by tests/ingest/test_fuzz.py)
    except (TypeError, ValueError, OverflowError):
        raise ABFormatError(f"{label}: {where}: value {value!r} is not a number") from None
    if not math.isfinite(x):
        raise ABFormatError(f"{label}: {where}: value {value!r} is not a finite number")
    if abs(x) > MAX_ABS_VALUE:
        raise ABFormatError(f"{label}: {where}: value {value!r} is beyond ±{MAX_ABS_VALUE:g}")
    return x


def _csv_rows(text: str, label: str) -> tuple[list[_Row], dict[str, dict[str, Any]]]:
    reader = csv.reader(io.StringIO(text))
    try:
        header = [h.strip().lower() for h in next(reader)]
    except (StopIteration, csv.Error) as e:
        raise ABFormatError(f"{label}: no CSV header ({e})") from None
    missing = [c for c in _REQUIRED if c not in header]
    if missing:
        raise ABFormatError(
            f"{label}: line 1: the header needs the columns {', '.join(_REQUIRED)} "
            f"(missing: {', '.join(missing)}); optional: unit, direction, percentile"
        )
    col = {h: i for i, h in enumerate(header)}
    rows: list[_Row] = []
    settings: dict[str, dict[str, Any]] = {}
    try:
        for line_no, rec in enumerate(reader, start=2):
            if not rec or all(not c.strip() for c in rec):
                continue
            where = f"line {line_no}"
            if len(rec) != len(header):
                raise ABFormatError(
                    f"{label}: {where}: {len(rec)} fields where the header has {len(header)}"
                )
            metric = _name(rec[col["metric"]], "metric", where, label)
            rows.append((
                _name(rec[col["slice"]], "slice", where, label),
                _name(rec[col["build"]], "build", where, label),
                metric,
                _number(rec[col["value"]].strip(), where, label),
                where,
            ))
            for key in ("unit", "direction", "percentile"):
                if key in col and rec[col[key]].strip():
                    _setting(settings, metric, key, rec[col[key]].strip(), where, label)
    except csv.Error as e:
        raise ABFormatError(f"{label}: line {reader.line_num}: {e}") from None
    return rows, settings


def _json_rows(
    text: str, label: str
) -> tuple[list[_Row], dict[str, dict[str, Any]], str | None]:
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise ABFormatError(f"{label}: not valid JSON: {e.msg} at line {e.lineno}") from None
    except RecursionError:  # found by tests/ingest/test_fuzz.py: [[[[... thousands deep
        raise ABFormatError(f"{label}: JSON nested too deeply") from None
    baseline = None
    settings: dict[str, dict[str, Any]] = {}
    if isinstance(doc, dict):
        unknown = set(doc) - {"slices", "metrics", "baseline", "host", "description"}
        if unknown:
            raise ABFormatError(f"{label}: unknown key(s) {', '.join(sorted(unknown))}")
        if "slices" not in doc:
            raise ABFormatError(f"{label}: no \"slices\" list")
        if doc.get("baseline") is not None:
            baseline = _name(doc["baseline"], "baseline", "baseline", label)
        metrics = doc.get("metrics") or {}
        if not isinstance(metrics, dict):
            raise ABFormatError(f"{label}: \"metrics\" must be an object of metric settings")
        for metric, spec in metrics.items():
            if not isinstance(spec, dict):
                raise ABFormatError(f"{label}: metrics.{metric}: must be an object")
            for key, value in spec.items():
                if key not in ("unit", "direction", "percentile"):
                    raise ABFormatError(f"{label}: metrics.{metric}: unknown setting {key!r}")
                _setting(settings, metric, key, value, f"metrics.{metric}", label)
        records = doc["slices"]
    else:
        records = doc
    if not isinstance(records, list):
        raise ABFormatError(f"{label}: \"slices\" must be a list of records")
    rows: list[_Row] = []
    for i, rec in enumerate(records):
        where = f"slices[{i}]"
        if not isinstance(rec, dict):
            raise ABFormatError(f"{label}: {where}: must be an object")
        missing = [k for k in ("slice", "build", "metric") if k not in rec]
        if missing or ("value" in rec) == ("values" in rec):
            raise ABFormatError(
                f"{label}: {where}: needs slice, build, metric and either value or values"
            )
        s = _name(rec["slice"], "slice", where, label)
        b = _name(rec["build"], "build", where, label)
        m = _name(rec["metric"], "metric", where, label)
        if "value" in rec:
            rows.append((s, b, m, _number(rec["value"], where, label), where))
        else:
            values = rec["values"]
            if not isinstance(values, list) or not values:
                raise ABFormatError(f"{label}: {where}: values must be a non-empty list")
            for v in values:
                rows.append((s, b, m, _number(v, where, label), where))
    return rows, settings, baseline


def _setting(
    settings: dict[str, dict[str, Any]], metric: str, key: str, value: Any, where: str,
    label: str,
) -> None:
    if key == "direction":
        if value not in DIRECTIONS:
            raise ABFormatError(
                f"{label}: {where}: direction {value!r} is not one of {', '.join(DIRECTIONS)}"
            )
    elif key == "percentile":
        p = _number(value, where, label)
        if not 0 <= p <= 100:
            raise ABFormatError(f"{label}: {where}: percentile {p:g} is not within [0, 100]")
        value = p
    else:
        value = str(value).strip()
        if len(value) > 20:
            raise ABFormatError(f"{label}: {where}: unit {value[:30]!r} is over 20 characters")
    old = settings.setdefault(metric, {}).setdefault(key, value)
    if old != value:
        raise ABFormatError(
            f"{label}: {where}: metric {metric!r} has {key} {value!r} here and {old!r} before"
        )


# --- assembling -----------------------------------------------------------------------


def _assemble(
    rows: list[_Row], settings: dict[str, dict[str, Any]], baseline: str | None, label: str
) -> ABData:
    if not rows:
        raise ABFormatError(f"{label}: no measurements")
    cells: dict[tuple[str, str, str], list[float]] = {}
    builds: dict[str, None] = {}
    metric_order: dict[str, None] = {}
    slice_order: dict[str, dict[str, None]] = {}
    for s, b, m, v, _where in rows:
        cells.setdefault((m, b, s), []).append(v)
        builds.setdefault(b)
        metric_order.setdefault(m)
        slice_order.setdefault(m, {}).setdefault(s)
    unknown = set(settings) - set(metric_order)
    if unknown:
        raise ABFormatError(f"{label}: settings for metric(s) with no data: "
                            f"{', '.join(sorted(unknown))}")
    if baseline is None:
        baseline = "A" if "A" in builds else next(iter(builds))
    elif baseline not in builds:
        raise ABFormatError(f"{label}: the baseline build {baseline!r} has no measurements")
    candidates = tuple(b for b in builds if b != baseline)
    if not candidates:
        raise ABFormatError(
            f"{label}: only build {baseline!r}: an A/B (or A/A) run needs two builds, the "
            "baseline A and a candidate (in an A/A run, the same build on the second arm)"
        )
    metrics = []
    values: dict[tuple[str, str], np.ndarray] = {}
    raw_counts: dict[tuple[str, str], np.ndarray] = {}
    for m in metric_order:
        spec = settings.get(m, {})
        slices = tuple(slice_order[m])
        present = [b for b in builds if any((m, b, s) in cells for s in slices)]
        if baseline not in present:
            raise ABFormatError(f"{label}: metric {m!r} has no slices of the baseline {baseline!r}")
        if len(present) < 2:
            raise ABFormatError(f"{label}: metric {m!r} has only build {baseline!r}")
        raw = False
        percentile = float(spec.get("percentile", 99.0))
        for b in present:
            stat = np.empty(len(slices))
            counts = np.empty(len(slices), dtype=np.int64)
            for i, s in enumerate(slices):
                got = cells.get((m, b, s))
                if got is None:
                    have = [x for x in present if (m, x, s) in cells]
                    raise ABFormatError(
                        f"{label}: metric {m!r}, slice {s!r}: build {b!r} is missing "
                        f"(have: {', '.join(have)}); every slice pair needs every build"
                    )
                counts[i] = len(got)
                if len(got) > 1:
                    raw = True
                    stat[i] = float(np.percentile(np.asarray(got), percentile))
                else:
                    stat[i] = got[0]
            values[(m, b)] = stat
            raw_counts[(m, b)] = counts
        if len(slices) < 2:
            raise ABFormatError(
                f"{label}: metric {m!r} has {len(slices)} slice pair: at least 2 are needed"
            )
        metrics.append(MetricSpec(
            name=m, unit=str(spec.get("unit", "")),
            direction=str(spec.get("direction", "lower_is_better")),
            percentile=percentile, raw=raw,
        ))
    result = ABData(
        name=label, baseline=baseline, builds=candidates, metrics=tuple(metrics),
        slices={m: tuple(slice_order[m]) for m in metric_order}, values=values,
        raw_counts=raw_counts,
    )
    n_comparisons = len(result.comparisons())
    if n_comparisons > MAX_COMPARISONS:
        raise ABFormatError(
            f"{label}: {n_comparisons} (metric, build) comparisons: at most {MAX_COMPARISONS}"
        )
    return result
