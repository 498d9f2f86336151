"""Release series and their runs.

A Series holds Releases; a Release holds Runs (one trace file each); a Run's per-function
self time, total time and call count are stored as one row of packed arrays (RunTimes),
indexed by Function ids of the series, and its call tree (time per caller and callee) as
another (RunCalls). docs/architecture.md says why (storage section).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.urls import reverse

from deviations.core import packing, versions
from deviations.core.forms import validated
from deviations.core.models import Annotation
from deviations.stats.releases.rules import (
    DEFAULT_RULE,
    MIN_ABSOLUTE_CHANGE_US,
    MIN_RELATIVE_CHANGE,
    RULE_NAMES,
    RULES,
)

if TYPE_CHECKING:  # numpy is imported where arrays are made, not when Django starts
    import numpy as np


#: The rules a series can show by default, with the words pages use for them
#: (``deviations.stats.releases.RULES``; docs/statistics.md).
RULE_CHOICES = [(name, RULES[name].label) for name in RULE_NAMES]


def _validate_series_name(value: str) -> None:
    validated(versions.check_series_name, value)


def _validate_version(value: str) -> None:
    validated(versions.check_version, value)


def _validate_revision(value: str) -> None:
    validated(versions.check_revision, value)


def _validate_log_url_template(value: str) -> None:
    validated(versions.check_log_url_template, value)


class Series(models.Model):
    """A release series, e.g. ``chromium-linux.example-load``: one workload on one platform.

    A *trace series* holds trace files (rows: functions, self and total time in µs); a
    *metric series* holds CI benchmark results (rows: named metrics, each with its unit and
    direction, :class:`Metric`; several replicates per file). Both are judged by the same
    release rules and shown by the same pages.
    """

    TRACES, METRICS = "traces", "metrics"
    KIND_CHOICES = [(TRACES, "trace series"), (METRICS, "metric series")]

    name = models.CharField(max_length=100, unique=True, validators=[_validate_series_name])
    kind = models.CharField(
        max_length=10, choices=KIND_CHOICES, default=TRACES,
        help_text="trace files, or benchmark results (set by the first upload)",
    )
    description = models.TextField(blank=True)
    created = models.DateTimeField(auto_now_add=True)
    #: The rule pages, exports and alerts use unless asked for another one
    #: (docs/statistics.md, "Comparing releases"): the level-shift rule unless set.
    default_rule = models.CharField(
        max_length=20, default=DEFAULT_RULE, choices=RULE_CHOICES,
        help_text="what pages, exports and alerts show unless a page or export asks for "
        "another rule",
    )
    #: The minimum practical change: a significant change smaller than either threshold
    #: is "significant, not a deviation", in the matrix, compare view, alerts and exports
    #: alike (docs/statistics.md says how the defaults were chosen by measurement).
    min_relative_change = models.FloatField(
        default=MIN_RELATIVE_CHANGE,
        validators=[MinValueValidator(0.0), MaxValueValidator(10.0)],
        help_text="fraction of the level before the change (0.02 = 2%); 0 keeps every "
        "significant change",
    )
    min_absolute_change_us = models.FloatField(
        default=MIN_ABSOLUTE_CHANGE_US, validators=[MinValueValidator(0.0)],
        help_text="microseconds; 0 keeps every significant change",
    )
    #: Where a range of commits is read: ``{from}`` and ``{to}`` are replaced by the
    #: revisions (URL-quoted) of the last good and the first bad release
    #: (``deviations.alerts.selectors.culprit_range``).
    log_url_template = models.CharField(
        max_length=versions.MAX_LOG_URL_TEMPLATE, blank=True,
        validators=[_validate_log_url_template],
        help_text="e.g. https://github.com/o/r/compare/{from}...{to}: links the commits "
        "between two releases' revisions; empty: no link",
    )
    #: The analysis task's last attempt (traces.attempts): when it started (cleared when it
    #: ends), the newest finished run it was asked to cover, and, when it did not finish,
    #: why and when. The sweeper sends no new attempt for the same runs after a failure.
    analysis_started = models.DateTimeField(null=True, blank=True, editable=False)
    analysis_runs_until = models.DateTimeField(null=True, blank=True, editable=False)
    analysis_failure = models.TextField(blank=True, editable=False)
    analysis_failed_at = models.DateTimeField(null=True, blank=True, editable=False)

    class Meta:
        ordering = ["name"]
        verbose_name_plural = "series"

    def __str__(self) -> str:
        return self.name

    def get_absolute_url(self) -> str:
        return reverse("series", args=[self.name])

    @property
    def is_metrics(self) -> bool:
        return self.kind == self.METRICS

    @property
    def row_word(self) -> str:
        """What a row of its matrix is called on pages."""
        return "metric" if self.is_metrics else "function"


class Release(models.Model):
    """One version of the software under test; its position comes from ``sort_key``."""

    series = models.ForeignKey(Series, on_delete=models.CASCADE, related_name="releases")
    version = models.CharField(max_length=100, validators=[_validate_version])
    order = models.PositiveBigIntegerField(
        null=True, blank=True, help_text="Sorts in place of the version when given."
    )
    sort_key = models.CharField(max_length=400, editable=False)
    #: The commit this release was built from (a hash or number); empty when not given.
    #: Set once by whoever sends the release; changed only by an explicit owner's update.
    revision = models.CharField(
        max_length=versions.MAX_REVISION, blank=True, validators=[_validate_revision],
        help_text="commit hash or number the release was built from",
    )
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["series", "sort_key", "id"]
        constraints = [
            models.UniqueConstraint(fields=["series", "version"], name="release_unique_version"),
        ]
        indexes = [models.Index(fields=["series", "sort_key"], name="release_series_order")]

    def __str__(self) -> str:
        return f"{self.series.name} {self.version}"

    def save(self, *args: object, **kwargs: object) -> None:
        self.sort_key = versions.sort_key(self.version, self.order)
        super().save(*args, **kwargs)  # type: ignore[arg-type]

    def get_absolute_url(self) -> str:
        return reverse("release", args=[self.series.name, self.version])


class Function(models.Model):
    """A function (trace event name) seen in a series. Names are untrusted text."""

    # No index of its own: the unique (series, name_sha1) index serves lookups by series, and
    # one index less to maintain is ~20% less server time for an ingest of new names.
    series = models.ForeignKey(
        Series, on_delete=models.CASCADE, related_name="functions", db_index=False
    )
    name = models.TextField()
    # Unique on a digest: PostgreSQL cannot index arbitrarily long text in a b-tree. On
    # PostgreSQL the column has the "C" collation (migration 0014: byte comparisons in the
    # index); a migration that alters this field must set it again.
    name_sha1 = models.CharField(max_length=40, editable=False)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["series", "name_sha1"], name="function_unique_name"),
        ]

    def __str__(self) -> str:
        return self.name

    def save(self, *args: object, **kwargs: object) -> None:
        self.name_sha1 = self.digest(self.name)
        super().save(*args, **kwargs)  # type: ignore[arg-type]

    digest = staticmethod(packing.name_digest)

    @staticmethod
    def storable(name: str) -> str:
        """``name`` as stored: NUL characters, which PostgreSQL text cannot hold, become
        U+FFFD on every database. Identity stays with the digest of the name as traced, so
        ``a\\0b`` and ``a\ufffdb`` remain two functions."""
        return name.replace("\x00", "\ufffd")


class Metric(models.Model):
    """The unit and direction of a row of a metric series (its :class:`Function`).

    ``direction`` says which way is worse: ``lower_is_better`` (times, bytes) or
    ``higher_is_better`` (throughput, scores). It comes from the results file where the
    format says it (``source`` "format"), else from the unit ("unit"); a user's choice
    ("user") is never overwritten by an upload. Values are stored in ``unit``: an upload
    in another unit of the same kind (ns and ms) is converted, another kind is refused.
    """

    DIRECTION_CHOICES = [("lower_is_better", "lower is better"),
                         ("higher_is_better", "higher is better")]
    SOURCE_CHOICES = [("format", "said by the results file"), ("unit", "from the unit"),
                      ("user", "set by a user")]

    function = models.OneToOneField(
        Function, on_delete=models.CASCADE, primary_key=True, related_name="metric"
    )
    unit = models.CharField(max_length=40, blank=True)
    direction = models.CharField(max_length=16, choices=DIRECTION_CHOICES,
                                 default="lower_is_better")
    source = models.CharField(max_length=6, choices=SOURCE_CHOICES, default="unit")
    #: The smallest change the results file asks to alert on (Perfherder's
    #: ``alertThreshold``), percent; the series' floor applies where it is not given.
    threshold_percent = models.FloatField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.function.name} ({self.unit or 'no unit'}, {self.direction})"


class Run(models.Model):
    """One trace file of one release: its identity (sha256), its state and its parse summary.

    In a metric series, one results file's values for one release: ``samples`` is the most
    replicates it holds of any metric (each replicate is one sample of the analysis).
    """

    PENDING, DONE, FAILED = "pending", "done", "failed"
    STATUS_CHOICES = [(PENDING, "pending"), (DONE, "done"), (FAILED, "failed")]

    series = models.ForeignKey(Series, on_delete=models.CASCADE, related_name="runs")
    release = models.ForeignKey(Release, on_delete=models.CASCADE, related_name="runs")
    sha256 = models.CharField(max_length=64)
    file_name = models.CharField(max_length=255)
    size_bytes = models.BigIntegerField()
    status = models.CharField(max_length=10, choices=STATUS_CHOICES, default=PENDING)
    error = models.TextField(blank=True)
    # Thread selection used by the parser: thread_name, process_name, all_threads.
    options = models.JSONField(default=dict)
    summary = models.JSONField(null=True, blank=True)
    # The file itself, kept whole in the trace storage under its sha256
    # (deviations.traces.uploads.files): a pending run's worker reads it there; afterwards
    # it stays for downloads and re-measurement until DEVIATIONS_KEEP_TRACE_DAYS expires it.
    file_stored = models.BooleanField(default=False)
    # When the kept file was deleted (its retention ran out); the times measured stay.
    file_removed = models.DateTimeField(null=True, blank=True)
    upload_batch = models.UUIDField(null=True, blank=True, db_index=True)
    uploaded_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    created = models.DateTimeField(auto_now_add=True)
    # When its ingest task last reached the broker (null: never; the sweeper sends it again).
    queued_at = models.DateTimeField(null=True, blank=True)
    started = models.DateTimeField(null=True, blank=True)
    finished = models.DateTimeField(null=True, blank=True)
    samples = models.PositiveIntegerField(default=1)

    class Meta:
        ordering = ["release", "created", "id"]
        constraints = [
            # The same bytes are one run of a series, whichever release they were sent to.
            models.UniqueConstraint(fields=["series", "sha256"], name="run_unique_content"),
        ]
        indexes = [
            models.Index(fields=["release", "status"], name="run_release_status"),
            # A kept file is one object per sha256 whichever series sent it: is another run
            # still referring to it?
            models.Index(fields=["sha256"], name="run_sha256"),
        ]

    def __str__(self) -> str:
        return f"{self.file_name} ({self.status})"

    def get_absolute_url(self) -> str:
        return reverse("run", args=[self.pk])


class RunTimes(models.Model):
    """Per-function self time, total time and calls of one run, as packed little-endian arrays.

    ``function_ids[i]`` is the Function whose times are ``self_us[i]``, ``total_us[i]`` and
    ``calls[i]``. A run is written once and always read whole (an analysis reads every run
    of a release), so one row per run replaces ~2,000 rows per run of a narrow table.
    """

    run = models.OneToOneField(
        Run, on_delete=models.CASCADE, primary_key=True, related_name="times"
    )
    function_ids = models.BinaryField()
    self_us = models.BinaryField()
    total_us = models.BinaryField()
    calls = models.BinaryField()

    INT, FLOAT = packing.INT, packing.FLOAT

    def __str__(self) -> str:
        return f"times of run {self.run_id}"

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(function_ids, self_us, total_us, calls) as numpy arrays (read-only views)."""
        return (
            packing.unpack(self.function_ids, self.INT),
            packing.unpack(self.self_us, self.FLOAT),
            packing.unpack(self.total_us, self.FLOAT),
            packing.unpack(self.calls, self.INT),
        )

    @classmethod
    def pack(
        cls,
        run: Run,
        function_ids: np.ndarray,
        self_us: np.ndarray,
        total_us: np.ndarray,
        calls: np.ndarray,
    ) -> RunTimes:
        return cls(
            run=run,
            function_ids=packing.pack(function_ids, cls.INT),
            self_us=packing.pack(self_us, cls.FLOAT),
            total_us=packing.pack(total_us, cls.FLOAT),
            calls=packing.pack(calls, cls.INT),
        )


class RunCalls(models.Model):
    """The call tree of one run aggregated by (caller, callee), as packed little-endian
    arrays, beside its :class:`RunTimes` (written in the same transaction).

    ``time_us[j]`` is the time of Function ``callee_ids[j]`` under Function
    ``caller_ids[j]`` on the measured threads (``ingest.traces``, "Call tree"): for every
    function, its total time is its self time plus its callees' times, recursion
    included. ``caller_ids[j] == ROOT`` (0, no Function has it) marks the slices at the top
    of a thread. A run ingested before the call tree was stored has no row (``manage.py
    reingest`` adds it); a metric series' runs never have one.
    """

    run = models.OneToOneField(
        Run, on_delete=models.CASCADE, primary_key=True, related_name="call_tree"
    )
    caller_ids = models.BinaryField()
    callee_ids = models.BinaryField()
    time_us = models.BinaryField()

    INT, FLOAT = packing.INT, packing.FLOAT
    #: The caller id of a thread's top-level slices (Function ids start at 1).
    ROOT = 0

    def __str__(self) -> str:
        return f"call tree of run {self.run_id}"

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(caller_ids, callee_ids, time_us) as numpy arrays (read-only views)."""
        return (
            packing.unpack(self.caller_ids, self.INT),
            packing.unpack(self.callee_ids, self.INT),
            packing.unpack(self.time_us, self.FLOAT),
        )

    @classmethod
    def pack(
        cls, run: Run, caller_ids: np.ndarray, callee_ids: np.ndarray, time_us: np.ndarray
    ) -> RunCalls:
        return cls(
            run=run,
            caller_ids=packing.pack(caller_ids, cls.INT),
            callee_ids=packing.pack(callee_ids, cls.INT),
            time_us=packing.pack(time_us, cls.FLOAT),
        )


class SeriesAnalysis(models.Model):
    """The stored analysis of a series: its shape and the bookkeeping of updates.

    One row per series. Rows of the matrices are ``function_ids`` (in the order they were
    first analysed: a full recompute sorts them, an update appends new functions), columns
    ``release_ids`` (the releases with at least one done run, in series order). The numbers
    live in :class:`AnalysisBlock` rows: every verdict depends on a bounded window of
    releases, so nothing is global. Bookkeeping of incremental updates: ``run_ids`` (the
    done runs of every column, in load order, split by ``run_counts``, which also say which
    verdicts are still provisional) and ``params`` (confidence, the version of what the
    stored arrays mean). ``generation`` is a random token that changes with every write:
    an update computed from one generation is stored only onto it, and readers check that
    it did not change while they read (docs/architecture.md, "Analysis: stored matrices,
    incremental updates").
    """

    series = models.OneToOneField(Series, on_delete=models.CASCADE, related_name="analysis")
    generation = models.BigIntegerField()
    release_ids = models.BinaryField()
    function_ids = models.BinaryField()
    run_ids = models.BinaryField()
    run_counts = models.BinaryField()
    params = models.BinaryField()
    # The analysis saw every run that finished before this instant.
    snapshot_at = models.DateTimeField()

    class Meta:
        verbose_name_plural = "series analyses"

    def __str__(self) -> str:
        return f"analysis of {self.series.name}"


class AnalysisBlock(models.Model):
    """The numbers of one release (a column) of a series' analysis, for some of its rows.

    One block per (metric, estimator, release) covers rows ``row_start .. row_start +
    rows`` of the matrix (usually all; a release analysed before new functions arrived
    gets a second block for their rows). Each field is a packed little-endian array of
    ``rows`` values: per release ``estimate``, ``lo``, ``hi`` (the estimator's interval; no
    interval for one run), ``order_lo``, ``order_hi`` (the interval the shift rule shows:
    order statistics for the median, the same as ``lo``/``hi`` for the mean), ``n``
    (int64); for the pair ending at this release (empty in the first column): ``gap``,
    ``diff``, ``diff_lo``, ``diff_hi``, ``paper_p``, ``paper_verdict`` (int8 codes of
    ``deviations.stats.releases``: the paper rule), and in the median blocks the shift
    rule's comparison at that boundary (``traces.store.SHIFT_FIELDS``). A new release
    rewrites its own blocks and those of the releases whose windows hold it (or are still
    provisional), never the whole matrix.
    """

    series = models.ForeignKey(Series, on_delete=models.CASCADE, related_name="+")
    release = models.ForeignKey(Release, on_delete=models.CASCADE, related_name="+")
    metric = models.CharField(max_length=10)
    estimator = models.CharField(max_length=10)
    row_start = models.IntegerField()
    rows = models.IntegerField()
    estimate = models.BinaryField()
    lo = models.BinaryField()
    hi = models.BinaryField()
    order_lo = models.BinaryField(default=b"")
    order_hi = models.BinaryField(default=b"")
    n = models.BinaryField()
    gap = models.BinaryField()
    diff = models.BinaryField()
    diff_lo = models.BinaryField()
    diff_hi = models.BinaryField()
    paper_p = models.BinaryField()
    paper_verdict = models.BinaryField()
    shift_verdict = models.BinaryField(default=b"")
    shift_diff = models.BinaryField(default=b"")
    shift_lo = models.BinaryField(default=b"")
    shift_hi = models.BinaryField(default=b"")
    shift_p = models.BinaryField(default=b"")
    shift_before = models.BinaryField(default=b"")
    shift_reach_before = models.BinaryField(default=b"")
    shift_reach_after = models.BinaryField(default=b"")
    shift_n_before = models.BinaryField(default=b"")
    shift_n_after = models.BinaryField(default=b"")
    shift_flags = models.BinaryField(default=b"")
    #: What the matrix ranks and filters by, per rule, for the pair ending at this release:
    #: the cells whose stored verdict is a regression or an improvement, as packed records
    #: (row in the block, verdict, diff, the rule's ``before``: ``traces.store.DEVIATION``),
    #: ``paper_deviations`` per estimator, ``shift_deviations`` in the median blocks. Null
    #: in blocks written before migration 0033 (readers then rank from the whole window).
    paper_deviations = models.BinaryField(null=True)
    shift_deviations = models.BinaryField(null=True)
    #: In the median blocks, the block's rows as fixed-size row-major records of the fields
    #: the matrix's default view reads (``traces.store.RECORD``: the shift rule with the
    #: median, 82 bytes a row), stored uncompressed (``STORAGE EXTERNAL`` on PostgreSQL) so
    #: that one ``substring`` fetches one row's record from its TOAST chunk: the matrix's
    #: shown rows read ~100 records a block, not the block's 13 column-major fields. Null
    #: in the mean blocks and in blocks written before migration 0035 (read the old way).
    records = models.BinaryField(null=True)
    #: 0: part of the stored analysis. Otherwise the blocks an analysis in chunks of rows
    #: (``traces.analysis``, issue 24) has written so far, invisible to readers until its
    #: last step makes them stage 0 in one transaction (``traces.store.publish``).
    stage = models.BigIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["series", "metric", "estimator", "release", "row_start", "stage"],
                name="analysis_block_unique",
            ),
        ]

    def __str__(self) -> str:
        return (f"{self.metric}/{self.estimator} of release {self.release_id}, rows "
                f"{self.row_start}..{self.row_start + self.rows}")


class ReleaseAnnotation(Annotation):
    """A note on a release of a series ("switched to headless"), shown on the matrix, the
    function charts and the release page; deleted with the release."""

    release = models.ForeignKey(Release, on_delete=models.CASCADE, related_name="annotations")

    class Meta(Annotation.Meta):
        indexes = [models.Index(fields=["release"], name="release_annotation_release")]

    def __str__(self) -> str:
        return f"{self.release}: {self.text}"
