"""asv (airspeed velocity) results JSON -> ``ResultSet``: the file asv writes per run as
``results/<machine>/<commit>-<environment>.json``.

- Both layouts: asv 0.5 and later write ``"version": 2`` with ``result_columns`` naming
  the columns of each benchmark's row (``result``, ``params``, ..., ``samples``); older
  files hold a dict per benchmark (``result``, ``params``, ``samples``) or a bare number.
- A parametrised benchmark gives one metric per combination of its ``params`` (in
  ``itertools.product`` order, as asv stores ``result``), named
  ``"bench(p1, p2)"`` with asv's own spelling of the values (``"suite.time_x(10, 'a')"``).
- Values are the combination's ``samples`` when asv recorded them (``--record-samples``),
  else its ``result`` (asv's median) as one value, with a note.
- A combination whose result is ``null`` (failed) or ``NaN`` (skipped, not applicable) is
  left out with a note.
- Units: results files do not hold them (``benchmarks.json`` does, a separate file); the
  benchmark's name decides as asv's prefixes do: ``time_*``/``timeraw_*`` "s" and
  ``mem_*``/``peakmem_*`` "bytes" (lower is better), ``track_*`` and any other "" with no
  direction (a tracked number may go either way; its unit is in ``benchmarks.json``).
"""

from __future__ import annotations

import itertools
import math
from typing import Any

from ingest.results.common import (
    Collector,
    Direction,
    ResultsError,
    ResultSet,
    check_name,
    check_number,
    require_object,
    where_of,
)

FORMAT = "asv"
#: Parameter combinations of one benchmark: asv itself refuses far fewer.
_MAX_COMBINATIONS = 100_000


def looks_like(doc: Any) -> bool:
    return (isinstance(doc, dict) and "commit_hash" in doc
            and isinstance(doc.get("results"), dict))


def unit_of(name: str) -> tuple[str, Direction | None]:
    """The unit and direction asv's naming convention gives a benchmark."""
    short = name.rsplit(".", 1)[-1]
    if short.startswith(("time_", "timeraw_")):
        return "s", "lower_is_better"
    if short.startswith(("mem_", "peakmem_")):
        return "bytes", "lower_is_better"
    return "", None


def parse(doc: Any, label: str) -> ResultSet:
    doc = require_object(doc, label, "an asv results file")
    results = doc.get("results")
    if not isinstance(results, dict):
        if any(isinstance(v, dict) and "code" in v for v in doc.values()):
            raise ResultsError(f"{label}: this is asv's benchmarks.json (the list of "
                               "benchmarks), not a results file")
        raise ResultsError(f"{label}: not an asv results file: no \"results\" object")
    columns = doc.get("result_columns")
    if columns is not None and (not isinstance(columns, list)
                                or not all(isinstance(c, str) for c in columns)):
        raise ResultsError(f"{label}: result_columns must be a list of column names")
    out = Collector(label, FORMAT)
    missing = 0
    without_samples = 0
    for key, row in results.items():
        name = check_name(key, label, "results")
        where = where_of(name)
        result, params, samples = _fields(row, columns, label, where)
        combos = _combinations(params, label, where)
        if not isinstance(result, list):
            result = [result]
        if len(result) != len(combos):
            raise ResultsError(f"{label}: {where}: {len(result)} results for "
                               f"{len(combos)} parameter combinations")
        if samples is not None and (not isinstance(samples, list) or len(samples) != len(combos)):
            raise ResultsError(f"{label}: {where}: samples do not match the parameters")
        unit, direction = unit_of(name)
        for j, combo in enumerate(combos):
            metric = f"{name}({', '.join(combo)})" if combo else name
            cell = result[j]
            if cell is None or (isinstance(cell, float) and math.isnan(cell)):
                missing += 1
                continue
            value = check_number(cell, label, where_of(metric), "result")
            these = samples[j] if samples is not None else None
            if these is None:
                values: tuple[float, ...] = (value,)
                without_samples += 1
            elif isinstance(these, list) and these:
                values = tuple(check_number(v, label, where_of(metric), "sample")
                               for v in these)
            else:
                raise ResultsError(f"{label}: {where_of(metric)}: samples must be a "
                                   "non-empty list of numbers")
            out.add(check_name(metric, label, where), unit, direction, values,
                    where=where_of(metric))
    if missing:
        out.note(f"{missing} result(s) failed or skipped by asv (null or NaN) left out")
    if without_samples:
        out.note(f"{without_samples} result(s) without samples (asv run without "
                 "--record-samples): asv's median is read as one value, so there are no "
                 "replicates")
    return out.result()


def _fields(row: Any, columns: list[str] | None, label: str, where: str
            ) -> tuple[Any, Any, Any]:
    """``result``, ``params`` and ``samples`` of one benchmark, in either layout."""
    if columns is not None:
        if not isinstance(row, list):
            raise ResultsError(f"{label}: {where}: must be a row (a list) of result_columns")
        cells = dict(zip(columns, row, strict=False))
        if "result" not in cells:
            raise ResultsError(f"{label}: {where}: no result")
        return cells["result"], cells.get("params") or [], cells.get("samples")
    if isinstance(row, dict):
        if "result" not in row:
            raise ResultsError(f"{label}: {where}: no result")
        return row["result"], row.get("params") or [], row.get("samples")
    return row, [], None


def _combinations(params: Any, label: str, where: str) -> list[tuple[str, ...]]:
    if not isinstance(params, list) or not all(isinstance(p, list) for p in params):
        raise ResultsError(f"{label}: {where}: params must be a list of lists")
    count = math.prod(len(p) for p in params)
    if count > _MAX_COMBINATIONS:
        raise ResultsError(f"{label}: {where}: more than {_MAX_COMBINATIONS:,} parameter "
                           "combinations")
    spelled = [[_spell(v, label, where) for v in p] for p in params]
    return list(itertools.product(*spelled)) if params else [()]


def _spell(value: Any, label: str, where: str) -> str:
    """A parameter value as asv spells it: its repr text (old files: a bare number)."""
    if isinstance(value, str):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        return repr(value)
    raise ResultsError(f"{label}: {where}: a parameter value must be text")
