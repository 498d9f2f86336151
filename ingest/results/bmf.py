"""Bencher Metric Format JSON -> ``ResultSet``:
``{"<benchmark>": {"<measure>": {"value": v, "lower_value": lo, "upper_value": hi}}}``.

- Measure ``latency`` is the benchmark's own metric, named "<benchmark>" (as the main
  time of every other format is), unit "ns", lower is better; every other measure is
  "<benchmark> <measure>": ``throughput`` "ops/s" higher is better, ``file-size``
  "bytes" and ``build-time`` "s" lower is better (Bencher's other built-in measures),
  any other measure unit "" with no direction (the file does not say).
- BMF holds one value per measure: ``value`` is read as one value (a note says so); the
  bounds, when given, are checked to be numbers and not read (they are not replicates).
  Several files of one release give the replicates.
"""

from __future__ import annotations

from typing import Any

from ingest.results.common import (
    Collector,
    Direction,
    ResultsError,
    ResultSet,
    check_name,
    check_number,
    where_of,
)

FORMAT = "bmf"
_MEASURES: dict[str, tuple[str, Direction | None]] = {
    "latency": ("ns", "lower_is_better"),
    "throughput": ("ops/s", "higher_is_better"),
    "file-size": ("bytes", "lower_is_better"),
    "build-time": ("s", "lower_is_better"),
}


def looks_like(doc: Any) -> bool:
    if not isinstance(doc, dict) or not doc:
        return False
    measures = next(iter(doc.values()))
    if not isinstance(measures, dict) or not measures:
        return False
    measure = next(iter(measures.values()))
    return isinstance(measure, dict) and "value" in measure


def parse(doc: Any, label: str) -> ResultSet:
    if not isinstance(doc, dict):
        raise ResultsError(f"{label}: Bencher Metric Format must be a JSON object of benchmarks")
    out = Collector(label, FORMAT)
    for key, measures in doc.items():
        bench = check_name(key, label, "a benchmark", "benchmark name")
        where = where_of(bench)
        if not isinstance(measures, dict) or not measures:
            raise ResultsError(f"{label}: {where}: must be an object of measures")
        for measure_key, entry in measures.items():
            measure = check_name(measure_key, label, where, "measure name")
            name = bench if measure == "latency" else f"{bench} {measure}"
            m_where = f"{where}, measure {measure!r}"
            if not isinstance(entry, dict) or "value" not in entry:
                raise ResultsError(f"{label}: {m_where}: must be an object with a value")
            value = check_number(entry["value"], label, m_where)
            for bound in ("lower_value", "upper_value"):
                if entry.get(bound) is not None:
                    check_number(entry[bound], label, m_where, bound)
            unit, direction = _MEASURES.get(measure, ("", None))
            out.add(check_name(name, label, m_where), unit, direction, [value], where=m_where)
    out.note("Bencher Metric Format holds one value per measure: each metric has one "
             "value here (several files of a release give its replicates)")
    return out.result()
