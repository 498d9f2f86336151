"""The one entry of ``ingest`` for the rest of the project: the features import the pure
readers from here, never from ingest's other modules.

Every reader turns bytes into plain data and touches no database; the features own what
they write (``deviations.traces.uploads``: trace runs and benchmark results;
``deviations.histograms.store``: histograms; ``deviations.experiments.ab.services``: A/B
runs; the canaries' services: observations). Traces (Chrome JSON or Perfetto protobuf):
``parse_trace`` (``FunctionTimes``); histograms: ``parse_histogram_file``
(``HistogramRecord``); A/B runs: ``parse_ab_file``; canary observations:
``parse_observations`` (CSV); benchmark results of CI tools (Google Benchmark,
pytest-benchmark, hyperfine, asv, Perfherder, Bencher's BMF, CSV): ``parse_results``
(``ResultSet`` of ``MetricValues``), ``detect_format``, ``direction_from_unit``,
``convert_values``; which of traces or results a file is: ``looks_like_trace``; a series
in one command: ``read_manifest``, ``read_folders``. Errors are ``UserError`` subclasses
(``TraceError``, ``HistogramError``, ``ABFormatError``, ``ObservationsError``,
``ManifestError``, ``ResultsError``) with "<file>: <reason>" messages.
"""

from importlib import import_module
from typing import TYPE_CHECKING, Any

# Each reader is loaded when a name of it is first used, not with this module: a CLI call
# that ingests traces does not pay for the histogram, A/B, canary and results readers
# (start-up, docs/architecture.md "Start-up"). The same names, as the imports below.
if TYPE_CHECKING:
    from ingest.ab import ABData, ABFormatError, parse_ab_file
    from ingest.canaries import Observations, ObservationsError, parse_observations
    from ingest.histograms import (
        HistogramError,
        HistogramRecord,
        bucket_lower_bounds,
        parse_histogram_file,
    )
    from ingest.manifest import (
        RESULTS_SUFFIXES,
        ManifestEntry,
        ManifestError,
        read_folders,
        read_manifest,
    )
    from ingest.reading import display_name
    from ingest.results import DEFAULT_MAX_BYTES as RESULTS_MAX_BYTES
    from ingest.results import (
        FORMATS,
        Direction,
        MetricValues,
        ResultsError,
        ResultSet,
        convert_values,
        detect_format,
        direction_from_unit,
        parse_results,
    )
    from ingest.sniff import HEAD_BYTES, looks_like_trace
    from ingest.traces import FunctionTimes, TraceError, parse_trace

_MODULES = {
    "ingest.ab": ("ABData", "ABFormatError", "parse_ab_file"),
    "ingest.canaries": ("Observations", "ObservationsError", "parse_observations"),
    "ingest.histograms": ("HistogramError", "HistogramRecord", "bucket_lower_bounds",
                          "parse_histogram_file"),
    "ingest.manifest": ("RESULTS_SUFFIXES", "ManifestEntry", "ManifestError", "read_folders",
                        "read_manifest"),
    "ingest.reading": ("display_name",),
    "ingest.results": ("RESULTS_MAX_BYTES", "FORMATS", "Direction", "MetricValues",
                       "ResultsError", "ResultSet", "convert_values", "detect_format",
                       "direction_from_unit", "parse_results"),
    "ingest.sniff": ("HEAD_BYTES", "looks_like_trace"),
    "ingest.traces": ("FunctionTimes", "TraceError", "parse_trace"),
}
_RENAMED = {"RESULTS_MAX_BYTES": "DEFAULT_MAX_BYTES"}
_WHERE = {name: module for module, names in _MODULES.items() for name in names}


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(_WHERE[name]), _RENAMED.get(name, name))
    globals()[name] = value
    return value


__all__ = [
    "FORMATS",
    "HEAD_BYTES",
    "RESULTS_MAX_BYTES",
    "RESULTS_SUFFIXES",
    "ABData",
    "ABFormatError",
    "Direction",
    "FunctionTimes",
    "HistogramError",
    "HistogramRecord",
    "ManifestEntry",
    "ManifestError",
    "MetricValues",
    "Observations",
    "ObservationsError",
    "ResultSet",
    "ResultsError",
    "TraceError",
    "bucket_lower_bounds",
    "convert_values",
    "detect_format",
    "direction_from_unit",
    "display_name",
    "looks_like_trace",
    "parse_ab_file",
    "parse_histogram_file",
    "parse_observations",
    "parse_results",
    "parse_trace",
    "read_folders",
    "read_manifest",
]
