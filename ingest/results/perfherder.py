"""Perfherder's ``PERFHERDER_DATA`` -> ``ResultSet``: the JSON object itself, or a task log
with lines holding ``PERFHERDER_DATA: {...}`` (the object runs to the end of its line;
several lines are merged, their suites in log order).

- A suite with a ``value`` or ``replicates`` is metric "<suite>"; each subtest is metric
  "<suite>/<subtest>". ``extraOptions`` (``["fission", "e10s"]``) are part of Perfherder's
  identity of a suite, so they are part of its name: "<suite> [fission, e10s]".
- Values are ``replicates`` when present and non-empty, else ``[value]`` with a note.
- ``unit`` as written (a subtest without one takes its suite's); ``lowerIsBetter`` gives
  the direction (a subtest without it takes its suite's). Where neither says, the
  direction is ``None`` (Perfherder itself would assume lower; the unit decides here, so
  a "score" without the flag is not judged backwards); ``alertThreshold`` (percent) is
  ``threshold_percent``, the suite's for its own metric, the subtest's for a subtest.
- A suite name repeated (in one object or across lines) with the same options is an error.
"""

from __future__ import annotations

import json
from typing import Any

from ingest.results.common import (
    Collector,
    Direction,
    ResultsError,
    ResultSet,
    check_name,
    check_number,
    check_numbers,
    check_unit,
    load_json,
    where_of,
)

FORMAT = "perfherder"
MARKER = "PERFHERDER_DATA:"


def looks_like(doc: Any) -> bool:
    return isinstance(doc, dict) and isinstance(doc.get("suites"), list)


def objects_of_log(text: str, label: str) -> list[tuple[str, Any]]:
    """(where, object) of every ``PERFHERDER_DATA:`` line of a log."""
    decoder = json.JSONDecoder()
    found = []
    for line_no, line in enumerate(text.splitlines(), start=1):
        at = line.find(MARKER)
        if at < 0:
            continue
        where = f"line {line_no}"
        rest = line[at + len(MARKER):].lstrip()
        try:
            doc, _end = decoder.raw_decode(rest)
        except RecursionError:
            raise ResultsError(f"{label}: {where}: JSON nested too deeply") from None
        except json.JSONDecodeError as e:
            raise ResultsError(f"{label}: {where}: PERFHERDER_DATA is not valid JSON "
                               f"({e.msg} at column {e.colno})") from None
        except ValueError as e:
            raise ResultsError(f"{label}: {where}: PERFHERDER_DATA is not valid JSON "
                               f"({e})") from None
        found.append((where, doc))
    if not found:
        raise ResultsError(f"{label}: no line holds {MARKER}")
    return found


def parse_text(text: str, label: str) -> ResultSet:
    """A log with ``PERFHERDER_DATA:`` lines, or one JSON object."""
    if MARKER in text:
        return parse_objects(objects_of_log(text, label), label)
    return parse_doc(load_json(text, label), label)


def parse_doc(doc: Any, label: str) -> ResultSet:
    """One PERFHERDER_DATA object (the file is the JSON itself)."""
    return parse_objects([("PERFHERDER_DATA", doc)], label)


def parse_objects(objects: list[tuple[str, Any]], label: str) -> ResultSet:
    out = Collector(label, FORMAT)
    for where, doc in objects:
        if not isinstance(doc, dict) or not isinstance(doc.get("suites"), list):
            raise ResultsError(f"{label}: {where}: PERFHERDER_DATA needs a \"suites\" list")
        for i, suite in enumerate(doc["suites"]):
            _suite(out, suite, f"{where}: suites[{i}]", label)
    return out.result("no suites with values")


def _suite(out: Collector, suite: Any, where: str, label: str) -> None:
    if not isinstance(suite, dict):
        raise ResultsError(f"{label}: {where}: must be an object")
    name = check_name(suite.get("name"), label, where, "suite name")
    options = suite.get("extraOptions") or []
    if not isinstance(options, list):
        raise ResultsError(f"{label}: {where}: extraOptions must be a list")
    if options:
        name += " [" + ", ".join(check_name(o, label, where, "extra option")
                                 for o in options) + "]"
    at, where = where, f"{where} ({where_of(name)})"
    unit = check_unit(suite.get("unit", ""), label, where)
    direction = _direction(suite, label, where)
    subtests = suite.get("subtests") or []
    if not isinstance(subtests, list):
        raise ResultsError(f"{label}: {where}: subtests must be a list")
    if "value" in suite or suite.get("replicates"):
        out.add(name, unit, direction, _values(suite, out, label, where), where=where,
                threshold_percent=_threshold(suite, label, where))
    elif not subtests:
        raise ResultsError(f"{label}: {where}: a suite with neither a value nor subtests")
    for j, sub in enumerate(subtests):
        sub_where = f"{at}: subtests[{j}]"
        if not isinstance(sub, dict):
            raise ResultsError(f"{label}: {sub_where}: must be an object")
        sub_name = f"{name}/{check_name(sub.get('name'), label, sub_where, 'subtest name')}"
        sub_where = f"{at}: subtests[{j}] ({where_of(sub_name)})"
        sub_unit = check_unit(sub["unit"], label, sub_where) if "unit" in sub else unit
        sub_direction = _direction(sub, label, sub_where) if "lowerIsBetter" in sub else direction
        if "value" not in sub and not sub.get("replicates"):
            raise ResultsError(f"{label}: {sub_where}: neither value nor replicates")
        out.add(sub_name, sub_unit, sub_direction, _values(sub, out, label, sub_where),
                where=sub_where, threshold_percent=_threshold(sub, label, sub_where))


def _values(entry: dict[str, Any], out: Collector, label: str, where: str
            ) -> tuple[float, ...]:
    if entry.get("replicates"):
        values = check_numbers(entry["replicates"], label, where, "replicates")
        if "value" in entry:
            check_number(entry["value"], label, where)
        return values
    out.note("suites or subtests without replicates: their value is read as one value")
    return (check_number(entry["value"], label, where),)


def _direction(entry: dict[str, Any], label: str, where: str) -> Direction | None:
    if "lowerIsBetter" not in entry:
        return None
    flag = entry["lowerIsBetter"]
    if not isinstance(flag, bool):
        raise ResultsError(f"{label}: {where}: lowerIsBetter must be true or false")
    return "lower_is_better" if flag else "higher_is_better"


def _threshold(entry: dict[str, Any], label: str, where: str) -> float | None:
    if entry.get("alertThreshold") is None:
        return None
    value = check_number(entry["alertThreshold"], label, where, "alertThreshold")
    if value < 0:
        raise ResultsError(f"{label}: {where}: alertThreshold {value:g} is negative")
    return value
