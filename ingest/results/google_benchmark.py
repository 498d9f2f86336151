"""Google Benchmark JSON (``--benchmark_format=json`` or ``--benchmark_out=FILE``; the
Python bindings write the same) -> ``ResultSet``.

- Each ``run_type: "iteration"`` entry is one replicate of its ``run_name`` (``name`` in
  files older than 1.5): with ``--benchmark_repetitions=N`` a benchmark has N entries,
  merged as N replicates. Two entries of one name from different benchmarks (another
  ``family_index`` or ``per_family_instance_index``) are an error, not replicates.
- The value is ``real_time`` in ``time_unit`` (wall time: what a user waits for, and the
  only time of ``UseRealTime``/``UseManualTime`` benchmarks); ``cpu_time`` is not read (it
  undercounts waits and other threads).
- Aggregates (``run_type: "aggregate"``: mean, median, stddev, cv, BigO, RMS) are skipped
  with a note: the repetitions themselves are the replicates. A benchmark written with
  ``--benchmark_report_aggregates_only`` has no repetitions: its median (else mean)
  aggregate is read as one value, with a note.
- Skipped or failed benchmarks (``error_occurred`` / ``skipped``) are left out with a note.
- Counters become metrics of their own, "<name> <counter>": ``items_per_second`` (unit
  "items/s") and ``bytes_per_second`` ("bytes/s"), higher is better; user counters and the
  memory manager's fields with unit "" and no direction (the JSON does not say what they
  count).
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
    check_unit,
    require_object,
    where_of,
)

FORMAT = "google-benchmark"
_TIME_UNITS = ("ns", "us", "ms", "s")
#: Keys of an entry that are not counters.
_KNOWN = {
    "name", "family_index", "per_family_instance_index", "run_name", "run_type",
    "repetitions", "repetition_index", "threads", "iterations", "real_time", "cpu_time",
    "time_unit", "label", "error_occurred", "error_message", "skipped", "skip_message",
    "aggregate_name", "aggregate_unit", "big_o", "cpu_coefficient", "real_coefficient", "rms",
}
_RATES = {"items_per_second": "items/s", "bytes_per_second": "bytes/s"}


def looks_like(doc: Any) -> bool:
    if not isinstance(doc, dict) or not isinstance(doc.get("benchmarks"), list):
        return False
    if isinstance(doc.get("context"), dict) and "library_build_type" in doc["context"]:
        return True
    first = next((b for b in doc["benchmarks"] if isinstance(b, dict)), {})
    return bool({"real_time", "run_type", "time_unit"} & set(first))


def parse(doc: Any, label: str) -> ResultSet:
    doc = require_object(doc, label, "a Google Benchmark file")
    benchmarks = doc.get("benchmarks")
    if not isinstance(benchmarks, list):
        raise ResultsError(f"{label}: not Google Benchmark JSON: no \"benchmarks\" list")
    out = Collector(label, FORMAT)
    identity: dict[str, tuple[Any, Any]] = {}
    aggregates: dict[str, dict[str, dict[str, Any]]] = {}
    skipped_aggregates: set[str] = set()
    failed: list[str] = []
    for i, entry in enumerate(benchmarks):
        where = f"benchmarks[{i}]"
        if not isinstance(entry, dict):
            raise ResultsError(f"{label}: {where}: must be an object")
        name = check_name(entry.get("run_name", entry.get("name")), label, where)
        where = where_of(name)
        if entry.get("error_occurred") is True or entry.get("skipped") is True:
            failed.append(name)
            continue
        run_type = entry.get("run_type", "aggregate" if "aggregate_name" in entry
                             else "iteration")
        if run_type == "aggregate":
            kind = entry.get("aggregate_name")
            aggregates.setdefault(name, {})[str(kind)] = entry
            skipped_aggregates.add(str(kind))
            continue
        if run_type != "iteration":
            raise ResultsError(f"{label}: {where}: unknown run_type {run_type!r}")
        ident = (entry.get("family_index"), entry.get("per_family_instance_index"))
        if identity.setdefault(name, ident) != ident:
            raise ResultsError(
                f"{label}: {where}: two different benchmarks have this name")
        _add_entry(out, entry, name, where, label)
    for name, by_kind in aggregates.items():
        if name in identity:
            continue
        entry = by_kind.get("median") or by_kind.get("mean")
        if entry is None:
            continue
        where = where_of(name)
        _add_entry(out, entry, name, where, label)
        out.note(f"only aggregates were written (--benchmark_report_aggregates_only): the "
                 f"{entry.get('aggregate_name')} of the repetitions is read as one value")
    if skipped_aggregates:
        kinds = ", ".join(sorted(skipped_aggregates))
        out.note(f"aggregates skipped ({kinds}): the repetitions are the replicates")
    if failed:
        shown = ", ".join(failed[:5]) + (" ..." if len(failed) > 5 else "")
        out.note(f"{len(failed)} skipped or failed benchmark run(s) left out: {shown}")
    return out.result("no benchmark results (no successful iteration entry)")


def _add_entry(out: Collector, entry: dict[str, Any], name: str, where: str, label: str) -> None:
    unit = check_unit(entry.get("time_unit", "ns"), label, where)
    if unit not in _TIME_UNITS:
        raise ResultsError(f"{label}: {where}: time_unit {unit!r} is not one of ns, us, ms, s")
    if "real_time" not in entry:
        raise ResultsError(f"{label}: {where}: no real_time")
    value = check_number(entry["real_time"], label, where, "real_time")
    out.add(name, unit, "lower_is_better", [value], where=where, merge=True)
    for key, raw in entry.items():
        if key in _KNOWN or isinstance(raw, str | bool) or raw is None:
            continue
        counter = check_name(key, label, where, "counter name")
        direction: Direction | None = None
        counter_unit = ""
        if key in _RATES:
            counter_unit, direction = _RATES[key], "higher_is_better"
        out.add(f"{name} {counter}", counter_unit, direction,
                [check_number(raw, label, where, key)], where=where, merge=True)
