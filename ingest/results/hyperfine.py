"""hyperfine JSON (``--export-json FILE``) -> ``ResultSet``.

A metric per entry of ``results``, named by its ``command`` (the ``--command-name`` when
one was given); values are ``times``, every run's wall-clock time in seconds (unit "s",
lower is better). Files without ``times`` give the ``mean`` as one value, with a note; runs
that exited with a non-zero status (kept by ``hyperfine -i``) are read too, with a note.
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

FORMAT = "hyperfine"


def looks_like(doc: Any) -> bool:
    if not isinstance(doc, dict) or not isinstance(doc.get("results"), list):
        return False
    first = next((r for r in doc["results"] if isinstance(r, dict)), {})
    return "command" in first


def parse(doc: Any, label: str) -> ResultSet:
    doc = require_object(doc, label, "a hyperfine file")
    results = doc.get("results")
    if not isinstance(results, list):
        raise ResultsError(f"{label}: not hyperfine JSON: no \"results\" list")
    out = Collector(label, FORMAT)
    without_times = failed = 0
    for i, entry in enumerate(results):
        where = f"results[{i}]"
        if not isinstance(entry, dict):
            raise ResultsError(f"{label}: {where}: must be an object")
        name = check_name(entry.get("command"), label, where, "command")
        where = where_of(name)
        if entry.get("times") is not None:
            values = check_numbers(entry["times"], label, where, "times")
        elif "mean" in entry:
            values = (check_number(entry["mean"], label, where, "mean"),)
            without_times += 1
        else:
            raise ResultsError(f"{label}: {where}: neither times nor mean")
        if any(v < 0 for v in values):
            raise ResultsError(f"{label}: {where}: a negative time")
        codes = entry.get("exit_codes")
        if isinstance(codes, list) and any(c != 0 for c in codes):
            failed += 1
        out.add(name, "s", "lower_is_better", values, where=where)
    if failed:
        out.note(f"{failed} command(s) exited with a non-zero status in some runs "
                 "(hyperfine -i): their times are read as they are")
    if without_times:
        out.note(f"{without_times} command(s) without their runs' times: the mean is read "
                 "as one value, so there are no replicates")
    return out.result()
