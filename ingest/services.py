"""The one entry of ``ingest`` for the rest of the project: views, API, CLI and demo of
``deviations`` import what gets data in from here, never from ingest's other modules.

Traces: ``submit_uploads`` (page and API: register, then a task parses), ``get_release``
and ``ingest_local_file`` (CLI: parse here, now). Histograms: ``store_histogram_file``,
then ``queue_detection``. Signals sent once data is stored: ``run_stored``,
``histograms_stored``. A/B runs: ``parse_ab_file`` (``experiments.ab`` stores them).
Canary observations: ``parse_observations`` (CSV). Errors are ``UserError`` subclasses
(``IngestError``, ``TraceError``, ``HistogramError``, ``ABFormatError``,
``ObservationsError``) with "<file>: <reason>" messages.
"""

from ingest.ab import ABData, ABFormatError, parse_ab_file
from ingest.canaries import Observations, ObservationsError, parse_observations
from ingest.histogram_store import StoredFile, queue_detection, store_histogram_file
from ingest.histograms import HistogramError, bucket_lower_bounds
from ingest.manifest import ManifestEntry, ManifestError, read_folders, read_manifest
from ingest.runs import IngestError, Registered, ThreadOptions, get_release, ingest_local_file
from ingest.signals import histograms_stored, run_stored
from ingest.submit import Submission, submit_uploads
from ingest.traces import TraceError
from ingest.upload_handlers import check_upload_size

__all__ = [
    "ABData",
    "ABFormatError",
    "HistogramError",
    "IngestError",
    "ManifestEntry",
    "ManifestError",
    "Observations",
    "ObservationsError",
    "Registered",
    "StoredFile",
    "Submission",
    "ThreadOptions",
    "TraceError",
    "bucket_lower_bounds",
    "check_upload_size",
    "get_release",
    "histograms_stored",
    "ingest_local_file",
    "parse_ab_file",
    "parse_observations",
    "queue_detection",
    "read_folders",
    "read_manifest",
    "run_stored",
    "store_histogram_file",
    "submit_uploads",
]
