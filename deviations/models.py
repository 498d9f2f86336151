"""The app's models, one module per feature; Django registers the models imported here.

- trace series, ``deviations.traces.models``: Series, Release, Function, Run, RunTimes,
  SeriesAnalysis, AnalysisBlock;
- Telemetry histograms, ``deviations.histograms.models``: HistogramRuleDefaults, Probe,
  HistogramSnapshot, HistogramChange;
- alerts, ``deviations.alerts.models``: Subscription, SentAlert;
- API tokens, ``deviations.core.models``: ApiToken;
- canaries, ``deviations.experiments.canaries.models``: Canary, CanaryBatch, CanaryState,
  CanaryCheckpoint, CanaryPoint.

Everything stays in the one app label ``deviations`` (its migrations are shared). Import a
model from its feature's module; this module only makes sure Django sees them all.
"""

from deviations.alerts.models import SentAlert, Subscription
from deviations.core.models import ApiToken
from deviations.experiments.canaries.models import (
    Canary,
    CanaryBatch,
    CanaryCheckpoint,
    CanaryPoint,
    CanaryState,
)
from deviations.histograms.models import (
    HistogramChange,
    HistogramRuleDefaults,
    HistogramSnapshot,
    Probe,
)
from deviations.traces.models import (
    AnalysisBlock,
    Function,
    Release,
    Run,
    RunTimes,
    Series,
    SeriesAnalysis,
)

__all__ = [
    "AnalysisBlock",
    "ApiToken",
    "Canary",
    "CanaryBatch",
    "CanaryCheckpoint",
    "CanaryPoint",
    "CanaryState",
    "Function",
    "HistogramChange",
    "HistogramRuleDefaults",
    "HistogramSnapshot",
    "Probe",
    "Release",
    "Run",
    "RunTimes",
    "SentAlert",
    "Series",
    "SeriesAnalysis",
    "Subscription",
]
