"""The one entry of ``ingest`` for the rest of the project: the features import the pure
readers from here, never from ingest's other modules.

Every reader turns bytes into plain data and touches no database; the features own what
they write (``deviations.traces.uploads``: trace runs; ``deviations.histograms.store``:
histograms; ``deviations.experiments.ab.services``: A/B runs; the canaries' services:
observations). Traces: ``parse_trace`` (``FunctionTimes``); histograms:
``parse_histogram_file`` (``HistogramRecord``); A/B runs: ``parse_ab_file``; canary
observations: ``parse_observations`` (CSV); CI benchmark results: ``parse_results``
(``ResultSet``, ``ingest.results``; ``looks_like_trace`` tells them from traces); a
series in one command: ``read_manifest``, ``read_folders``. Errors are ``UserError``
subclasses (``TraceError``, ``HistogramError``, ``ABFormatError``, ``ObservationsError``,
``ResultsError``, ``ManifestError``) with "<file>: <reason>" messages.
"""

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
from ingest.results import (
    FORMATS,
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

__all__ = [
    "ABData",
    "HEAD_BYTES",
    "FORMATS",
    "ABFormatError",
    "FunctionTimes",
    "HistogramError",
    "HistogramRecord",
    "ManifestEntry",
    "MetricValues",
    "ManifestError",
    "Observations",
    "ObservationsError",
    "RESULTS_SUFFIXES",
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
