"""Benchmark result files that CI tools write -> ``ResultSet`` (metrics with replicates).

Pure readers: bytes in, plain data out; no Django, no database. One module per format
(``google_benchmark``, ``pytest_benchmark``, ``hyperfine``, ``asv``, ``perfherder``,
``bmf``, ``plain_csv``), ``common`` for what they share. ``parse_results`` reads a path,
bytes or a binary stream (gzip or not) through ``ingest.reading.read_bounded``, detects
the format from the content unless ``format`` names it, and returns the whole file or
raises ``ResultsError`` ("<file>: <reason>"): never half a result.

Detection looks at the content only (a file name says little: every format but CSV is
``.json``): a ``PERFHERDER_DATA:`` line is Perfherder; a JSON object with ``suites`` is
Perfherder, with ``commit_hash`` and a ``results`` object asv, with a ``results`` list of
``command``s hyperfine, with ``benchmarks`` whose entries hold ``stats`` (or
``machine_info``) pytest-benchmark, with ``benchmarks`` holding ``real_time`` /
``run_type`` (or a ``context``) Google Benchmark, an object of objects of measures with
``value`` Bencher's BMF; text whose first line holds ``release``, ``metric`` and
``value`` is the CSV.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, BinaryIO

from ingest.reading import display_name as name_of_source
from ingest.reading import read_bounded
from ingest.results import asv, bmf, google_benchmark, hyperfine, perfherder, plain_csv
from ingest.results import pytest_benchmark as pytest_bench
from ingest.results.common import (
    DEFAULT_MAX_BYTES,
    FORMATS,
    Direction,
    MetricValues,
    ResultsError,
    ResultSet,
    convert_values,
    decode_text,
    direction_from_unit,
    load_json,
)

__all__ = [
    "DEFAULT_MAX_BYTES",
    "FORMATS",
    "Direction",
    "MetricValues",
    "ResultSet",
    "ResultsError",
    "convert_values",
    "detect_format",
    "direction_from_unit",
    "parse_results",
]

#: The JSON formats in the order detection tries them (the most specific first).
_JSON_READERS: dict[str, tuple[Callable[[Any], bool], Callable[[Any, str], ResultSet]]] = {
    "perfherder": (perfherder.looks_like, perfherder.parse_doc),
    "asv": (asv.looks_like, asv.parse),
    "hyperfine": (hyperfine.looks_like, hyperfine.parse),
    "pytest-benchmark": (pytest_bench.looks_like, pytest_bench.parse),
    "google-benchmark": (google_benchmark.looks_like, google_benchmark.parse),
    "bmf": (bmf.looks_like, bmf.parse),
}


def detect_format(data: bytes, name: str) -> str:
    """The format of a results file (one of ``FORMATS``) from its content, gzip or not;
    ``name`` is the file's name for the error, which lists the formats when none matches."""
    return _detect(decode_text(read_bounded(data, name, DEFAULT_MAX_BYTES, ResultsError), name),
                   name)[0]


def _detect(text: str, label: str) -> tuple[str, Any]:
    """The format and, for a JSON format, the decoded document."""
    stripped = text.lstrip()
    if not stripped:
        raise ResultsError(f"{label}: the file is empty")
    # A task log's lines may start with "[task ...]": a log is what is not a JSON object.
    if not stripped.startswith("{") and perfherder.MARKER in text:
        return "perfherder", None
    if stripped.startswith(("{", "[")):
        doc = load_json(text, label)
        for fmt, (looks_like, _parse) in _JSON_READERS.items():
            if looks_like(doc):
                return fmt, doc
    elif plain_csv.header_of(text) is not None:
        return "csv", None
    raise ResultsError(
        f"{label}: not a results file of a known format ({', '.join(FORMATS)})")


def parse_results(
    source: str | os.PathLike[str] | bytes | BinaryIO,
    *,
    display_name: str | None = None,
    format: str | None = None,  # the contract's name (the CLI's --format), shadowing a builtin
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> ResultSet:
    """Read a whole results file; ``format`` (one of ``FORMATS``) skips detection.

    Raises ``ResultsError`` ("<file>: <reason>"), a ``TooLargeError`` too past
    ``max_bytes`` (compressed or inflated).
    """
    label = display_name or name_of_source(source)
    if format is not None and format not in FORMATS:
        raise ResultsError(f"{label}: unknown format {format!r}: one of {', '.join(FORMATS)}")
    text = decode_text(read_bounded(source, label, max_bytes, ResultsError), label)
    if format is None:
        found, doc = _detect(text, label)
        return _parse(found, text, doc, label)
    try:
        return _parse(format, text, None, label)
    except ResultsError as e:
        try:
            found = _detect(text, label)[0]
        except ResultsError:
            raise e from None
        if found == format:
            raise
        raise ResultsError(f"{e} (the content looks like {found}, not {format})") from None


def _parse(fmt: str, text: str, doc: Any, label: str) -> ResultSet:
    """Read ``text`` as ``fmt`` (``doc``: the JSON already decoded, or ``None``)."""
    if fmt == "csv":
        return plain_csv.parse_text(text, label)
    if doc is None:
        if fmt == "perfherder":
            return perfherder.parse_text(text, label)
        if not text.strip():
            raise ResultsError(f"{label}: the file is empty")
        doc = load_json(text, label)
    return _JSON_READERS[fmt][1](doc, label)
