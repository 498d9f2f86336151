"""The one entry of ``ingest`` for the rest of the project: the features import the pure
readers from here, never from ingest's other modules.

Every reader turns bytes into plain data and touches no database; the features own what
they write (``deviations.traces.uploads``: trace runs; ``deviations.histograms.store``:
histograms; ``deviations.experiments.ab.services``: A/B runs; the canaries' services:
observations). Traces: ``parse_trace`` (``FunctionTimes``); histograms:
``parse_histogram_file`` (``HistogramRecord``); A/B runs: ``parse_ab_file``; canary
observations: ``parse_observations`` (CSV); a series in one command: ``read_manifest``,
``read_folders``; benchmark results of CI tools (Google Benchmark, pytest-benchmark,
hyperfine, asv, Perfherder, Bencher's BMF, CSV): ``parse_results`` (``ResultSet`` of
``MetricValues``), ``detect_format``, ``direction_from_unit``, ``convert_values``. Errors
are ``UserError`` subclasses (``TraceError``, ``HistogramError``, ``ABFormatError``,
``ObservationsError``, ``ManifestError``, ``ResultsError``) with "<file>: <reason>"
messages.
"""

from ingest.ab import ABData, ABFormatError, parse_ab_file
from ingest.canaries import Observations, ObservationsError, parse_observations
from ingest.histograms import (
    HistogramError,
    HistogramRecord,
    bucket_lower_bounds,
    parse_histogram_file,
)
from ingest.manifest import ManifestEntry, ManifestError, read_folders, read_manifest
from ingest.reading import display_name
from ingest.results import (  # DEFAULT_MAX_BYTES and FORMATS: the results readers'
    DEFAULT_MAX_BYTES,
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
from ingest.traces import FunctionTimes, TraceError, parse_trace

__all__ = [
    "DEFAULT_MAX_BYTES",
    "FORMATS",
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
    "parse_ab_file",
    "parse_histogram_file",
    "parse_observations",
    "parse_results",
    "parse_trace",
    "read_folders",
    "read_manifest",
]
