"""The app's models, one module per feature; Django registers the models imported here.

- trace and metric series, ``deviations.traces.models``: Series, Release, Function, Metric,
  Run, RunTimes, RunCalls, SeriesAnalysis, AnalysisBlock, ReleaseAnnotation;
- Telemetry histograms, ``deviations.histograms.models``: HistogramRuleDefaults, Probe,
  HistogramSnapshot, HistogramChange, BuildAnnotation;
- alerts, ``deviations.alerts.models``: Subscription, SentAlert, AlertGroup, Alert,
  AlertNote, Ignore; their hooks, ``deviations.alerts.hooks.models``: Webhook,
  WebhookDelivery, DeliveryAttempt, BugTemplate, Bisect;
- API tokens, ``deviations.core.models``: ApiToken;
- paired A/B runs, ``deviations.experiments.ab.models``: ABHost, ABRun, AAFloorRecord;
- canaries, ``deviations.experiments.canaries.models``: Canary, CanaryBatch, CanaryState,
  CanaryCheckpoint, CanaryPoint.

Everything stays in the one app label ``deviations`` (its migrations are shared). Import a
model from its feature's module; this module only makes sure Django sees them all.
"""

from deviations.alerts.hooks.models import (
    Bisect,
    BugTemplate,
    DeliveryAttempt,
    Webhook,
    WebhookDelivery,
)
from deviations.alerts.models import (
    Alert,
    AlertGroup,
    AlertNote,
    Ignore,
    SentAlert,
    Subscription,
)
from deviations.core.models import ApiToken
from deviations.experiments.ab.models import AAFloorRecord, ABHost, ABRun
from deviations.experiments.canaries.models import (
    Canary,
    CanaryBatch,
    CanaryCheckpoint,
    CanaryPoint,
    CanaryState,
)
from deviations.histograms.models import (
    BuildAnnotation,
    HistogramChange,
    HistogramRuleDefaults,
    HistogramSnapshot,
    Probe,
)
from deviations.traces.models import (
    AnalysisBlock,
    Function,
    Metric,
    Release,
    ReleaseAnnotation,
    Run,
    RunCalls,
    RunTimes,
    Series,
    SeriesAnalysis,
)

__all__ = [
    "AAFloorRecord",
    "ABHost",
    "ABRun",
    "Alert",
    "AlertGroup",
    "AlertNote",
    "AnalysisBlock",
    "ApiToken",
    "Bisect",
    "BugTemplate",
    "BuildAnnotation",
    "Canary",
    "CanaryBatch",
    "CanaryCheckpoint",
    "CanaryPoint",
    "CanaryState",
    "DeliveryAttempt",
    "Function",
    "HistogramChange",
    "HistogramRuleDefaults",
    "HistogramSnapshot",
    "Ignore",
    "Metric",
    "Probe",
    "Release",
    "ReleaseAnnotation",
    "Run",
    "RunCalls",
    "RunTimes",
    "SentAlert",
    "Series",
    "SeriesAnalysis",
    "Subscription",
    "Webhook",
    "WebhookDelivery",
]
