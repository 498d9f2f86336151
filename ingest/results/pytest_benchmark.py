"""pytest-benchmark JSON (``--benchmark-json=FILE``, or a ``--benchmark-save`` file under
``.benchmarks/``) -> ``ResultSet``.

- A metric per entry of ``benchmarks``, named by its ``fullname``
  (``tests/test_parse.py::test_parse[big]``; ``name`` when absent): test names alone
  repeat across modules, the full name is unique and stays the same between releases.
- Values are ``stats.data``, every round's time per iteration in seconds (unit "s"):
  ``--benchmark-json`` always writes them, ``--benchmark-save`` only with
  ``--benchmark-save-data``. Without them the stats' ``median`` is read as one value and a
  note says the replicates are missing.
- Lower is better (times).
"""

from __future__ import annotations

from typing import Any

from ingest.results.common import (
    Collector,
    ResultsError,
    ResultSet,
    check_name,
    check_number,
    check_numbers,
    require_object,
    where_of,
)

FORMAT = "pytest-benchmark"


def looks_like(doc: Any) -> bool:
    if not isinstance(doc, dict) or not isinstance(doc.get("benchmarks"), list):
        return False
    if "machine_info" in doc:
        return True
    first = next((b for b in doc["benchmarks"] if isinstance(b, dict)), {})
    return isinstance(first.get("stats"), dict)


def parse(doc: Any, label: str) -> ResultSet:
    doc = require_object(doc, label, "a pytest-benchmark file")
    benchmarks = doc.get("benchmarks")
    if not isinstance(benchmarks, list):
        raise ResultsError(f"{label}: not pytest-benchmark JSON: no \"benchmarks\" list")
    out = Collector(label, FORMAT)
    without_data = 0
    for i, entry in enumerate(benchmarks):
        where = f"benchmarks[{i}]"
        if not isinstance(entry, dict):
            raise ResultsError(f"{label}: {where}: must be an object")
        name = check_name(entry.get("fullname", entry.get("name")), label, where)
        where = where_of(name)
        stats = entry.get("stats")
        if not isinstance(stats, dict):
            raise ResultsError(f"{label}: {where}: no \"stats\" object")
        if "data" in stats:
            values = check_numbers(stats["data"], label, where, "stats.data")
        elif "median" in stats:
            values = (check_number(stats["median"], label, where, "stats.median"),)
            without_data += 1
        else:
            raise ResultsError(f"{label}: {where}: stats have neither data nor median")
        if any(v < 0 for v in values):
            raise ResultsError(f"{label}: {where}: a negative time")
        out.add(name, "s", "lower_is_better", values, where=where)
    if without_data:
        out.note(f"{without_data} benchmark(s) without their rounds (saved without "
                 "--benchmark-save-data): the median of the rounds is read as one value, "
                 "so there are no replicates")
    return out.result()
