"""What ingest announces once data is stored; the features listen and queue their analyses.

``ingest`` never imports a view or task of ``deviations``: it sends these signals, and
``deviations.traces.receivers`` / ``deviations.histograms.receivers`` (connected in
``deviations.apps``) queue the analysis of the series or the detection on the probes. Both
are sent after the data is committed.
"""

from django.dispatch import Signal

#: A run finished ingesting with status done. Arguments: ``series_id``.
run_stored = Signal()
#: Histograms were stored (new or replaced). Arguments: ``probe_ids``.
histograms_stored = Signal()
