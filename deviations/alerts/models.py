"""Alerts of every detector, their groups and triage; who is told about what, once.

One ``Alert`` per thing a detector flagged (a trace function at a release boundary for one
metric and rule, a histogram change, later a canary rejection), grouped with the alerts
of the same series (or probe family, or canary) whose ranges overlap (``AlertGroup``: the
unit users triage and are emailed about). ``Subscription`` says who wants to hear, and
``SentAlert`` makes "once" a database guarantee.
"""

from typing import Any

from django.conf import settings
from django.db import models
from django.urls import reverse

from deviations.core.packing import name_digest


class Subscription(models.Model):
    """Someone to tell about histogram changes (probe name or pattern) or trace regressions
    of a series. An inactive row records an unsubscribe (for owner emails too; a canary's
    subscribers are a list on the canary, so its rows are only unsubscribes, the pattern
    the canary's id or ``*``)."""

    HISTOGRAM, SERIES, CANARY = "histogram", "series", "canary"
    TARGETS = [(HISTOGRAM, "histogram probes"), (SERIES, "trace series"), (CANARY, "canary")]

    email = models.EmailField()
    target = models.CharField(max_length=10, choices=TARGETS, default=HISTOGRAM)
    pattern = models.CharField(
        max_length=1000, help_text="Probe name, or a pattern with * and ? (GC_*); for a trace "
        "series, the series name."
    )
    digest = models.BooleanField(default=False, help_text="One email a day instead of one "
                                 "per change.")
    improvements = models.BooleanField(
        default=False, help_text="Also email groups of improvements (recorded and shown "
        "on the alerts page either way)."
    )
    active = models.BooleanField(default=True)
    # Asked for by someone else for this address: inactive (and muting nothing) until the
    # address confirms through the signed link emailed to it.
    pending = models.BooleanField(default=False)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE
    )
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["email", "target", "pattern"]
        constraints = [
            models.UniqueConstraint(
                fields=["email", "target", "pattern"], name="subscription_unique"
            ),
        ]

    def __str__(self) -> str:
        state = " (awaiting confirmation)" if self.pending else (
            "" if self.active else " (unsubscribed)")
        return f"{self.email}: {self.target} {self.pattern}{state}"


class SentAlert(models.Model):
    """One alert about one thing to one address. The unique key makes "never twice" a
    database guarantee: whoever inserts the row first is the only one who sends it."""

    SENDING, SENT, QUEUED = "sending", "sent", "queued"
    STATUSES = [(SENDING, "sending"), (SENT, "sent"), (QUEUED, "queued for the digest")]

    # "histogram:<change id>" or "series:<series id>:<function id>:<to release id>"
    subject = models.CharField(max_length=200)
    email = models.EmailField()
    status = models.CharField(max_length=10, choices=STATUSES)
    change = models.ForeignKey(
        "deviations.HistogramChange", null=True, blank=True, on_delete=models.CASCADE,
        related_name="alerts",
    )
    summary = models.TextField(help_text="The line the digest shows.")
    url = models.CharField(max_length=2000, blank=True)
    created = models.DateTimeField(auto_now_add=True)
    sent_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["subject", "email"], name="alert_once"),
        ]
        indexes = [models.Index(fields=["status", "email"], name="alert_status_email")]

    def __str__(self) -> str:
        return f"{self.subject} -> {self.email} ({self.status})"


class AlertGroup(models.Model):
    """Alerts of one detector and family (a series, a probe family, a canary) whose ranges
    overlap: what users triage together and are emailed about once.

    The range is the union of its alerts' ranges, as sort keys (``from_key`` exclusive,
    ``to_key`` inclusive: a boundary between releases A and B is (A, B]).
    """

    detector = models.CharField(max_length=12)
    family = models.TextField(help_text="Series name, probe family or canary name.")
    from_label = models.CharField(max_length=200)
    to_label = models.CharField(max_length=200)
    from_key = models.CharField(max_length=400)
    to_key = models.CharField(max_length=400)
    created = models.DateTimeField(auto_now_add=True)
    # When the notifier emailed it (or decided nobody was to be told): set once.
    notified_at = models.DateTimeField(null=True, blank=True)
    # "Downstream of": the group whose cause this group's alerts share (same or another
    # family), set by a sheriff (``alerts.downstream``). A downstream group is triaged with
    # its upstream: it is not untriaged and not emailed while the link stands.
    upstream = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL,
                                 related_name="downstream")
    upstream_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                    on_delete=models.SET_NULL, related_name="+")
    upstream_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created", "-id"]
        indexes = [models.Index(fields=["detector", "created"], name="alertgroup_detector")]

    def __str__(self) -> str:
        return f"{self.family} {self.from_label} → {self.to_label}"

    def get_absolute_url(self) -> str:
        return reverse("alerts:group", args=[self.pk])


class Alert(models.Model):
    """One verdict of one detector about one thing, with its numbers, explanation and
    triage. ``key`` is natural and unique, so recording the same verdict twice is one row.

    Effects are later − earlier (B − A, candidate − baseline), in ``unit``; ``effect_pct``
    is the effect over the earlier value, its interval the effect's interval over the same
    value. Evidence: a p-value (or sequential p-value), or a distance and the ``threshold``
    it passed, with the ``method`` and its ``level`` (confidence, FDR or alpha).
    """

    TRACE, HISTOGRAM, CANARY = "trace", "histogram", "canary"
    DETECTORS = [(TRACE, "trace series"), (HISTOGRAM, "histogram"), (CANARY, "canary")]
    REGRESSION, IMPROVEMENT, CHANGE = "regression", "improvement", "change"
    DIRECTIONS = [(REGRESSION, "regression"), (IMPROVEMENT, "improvement"),
                  (CHANGE, "change (no better or worse)")]
    NEW, ACKNOWLEDGED, INVALID, FIXED, IGNORED = (
        "new", "acknowledged", "invalid", "fixed", "ignored")
    STATUSES = [(NEW, "new"), (ACKNOWLEDGED, "acknowledged"), (INVALID, "invalid"),
                (FIXED, "fixed"), (IGNORED, "ignored")]

    key = models.CharField(max_length=200, unique=True, editable=False)
    group = models.ForeignKey(AlertGroup, on_delete=models.PROTECT, related_name="alerts")
    detector = models.CharField(max_length=12, choices=DETECTORS)
    # What it is about: a function of a series, a probe (its change), or a canary (the
    # experiments feature fills ``canary`` and ``subject`` and records through
    # ``deviations.alerts.services.record`` with detector "canary").
    series = models.ForeignKey("deviations.Series", null=True, blank=True,
                               on_delete=models.CASCADE, related_name="+")
    function = models.ForeignKey("deviations.Function", null=True, blank=True,
                                 on_delete=models.CASCADE, related_name="+")
    probe = models.ForeignKey("deviations.Probe", null=True, blank=True,
                              on_delete=models.CASCADE, related_name="+")
    change = models.OneToOneField("deviations.HistogramChange", null=True, blank=True,
                                  on_delete=models.CASCADE, related_name="alert")
    canary = models.CharField(max_length=200, blank=True)
    subject = models.TextField(help_text="Function, probe or canary name (untrusted text).")
    # As long as the longest a detector accepts (a canary's metric and unit: 200 and 40);
    # PostgreSQL refused the alert of a canary with a longer one (issue 23).
    metric = models.CharField(max_length=200, blank=True)
    rule = models.CharField(max_length=40, blank=True)
    from_label = models.CharField(max_length=200)
    to_label = models.CharField(max_length=200)
    from_key = models.CharField(max_length=400)
    to_key = models.CharField(max_length=400)
    direction = models.CharField(max_length=12, choices=DIRECTIONS)
    unit = models.CharField(max_length=40, blank=True)
    before = models.FloatField(null=True, blank=True)
    after = models.FloatField(null=True, blank=True)
    effect = models.FloatField(null=True, blank=True)
    effect_lo = models.FloatField(null=True, blank=True)
    effect_hi = models.FloatField(null=True, blank=True)
    effect_pct = models.FloatField(null=True, blank=True)
    effect_pct_lo = models.FloatField(null=True, blank=True)
    effect_pct_hi = models.FloatField(null=True, blank=True)
    p_value = models.FloatField(null=True, blank=True)
    distance = models.FloatField(null=True, blank=True)
    threshold = models.FloatField(null=True, blank=True)
    method = models.CharField(max_length=200)
    level = models.FloatField(null=True, blank=True)
    n_before = models.IntegerField(null=True, blank=True)
    n_after = models.IntegerField(null=True, blank=True)
    explanation = models.TextField()
    provisional = models.BooleanField(default=False)
    #: Sent before its verdict is final, because the evidence was overwhelming (trace
    #: series: ``stats.releases.EARLY_ALPHA``); it may still be withdrawn.
    early = models.BooleanField(default=False)
    #: False: its detector no longer reports it (the verdict went away: new runs, a run or
    #: release deleted) but it is kept because it has notes (``recording.withdraw``); it is
    #: never emailed while False, and True again if the detector reports it again.
    reported = models.BooleanField(default=True)
    # When the newer side's data arrived (a release's creation, a change's detection): a
    # subscriber is told only of alerts whose data came after they subscribed.
    data_at = models.DateTimeField()
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)
    status = models.CharField(max_length=12, choices=STATUSES, default=NEW)
    status_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                  on_delete=models.SET_NULL, related_name="+")
    status_at = models.DateTimeField(null=True, blank=True)
    assignee = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                 on_delete=models.SET_NULL, related_name="assigned_alerts")
    bug_url = models.URLField(max_length=500, blank=True)
    # Nudged (``alerts.nudging``): a sheriff moved the alert to a neighbouring boundary.
    # ``from_*``/``to_*`` above are then where it stands (pages, groups, emails follow
    # them) and these keep where the detector put it (its key, numbers and explanation
    # are the detector's, so a re-analysis reporting the same verdict leaves it moved).
    detected_from_label = models.CharField(max_length=200, blank=True)
    detected_to_label = models.CharField(max_length=200, blank=True)
    detected_from_key = models.CharField(max_length=400, blank=True)
    detected_to_key = models.CharField(max_length=400, blank=True)
    nudged_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                  on_delete=models.SET_NULL, related_name="+")
    nudged_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created", "-id"]
        indexes = [
            models.Index(fields=["status", "created"], name="alert_status_time"),
            models.Index(fields=["series", "function"], name="alert_function"),
        ]

    def __str__(self) -> str:
        return f"{self.subject}: {self.direction} {self.from_label} → {self.to_label}"

    def get_absolute_url(self) -> str:
        return reverse("alerts:alert", args=[self.pk])

    @property
    def nudged(self) -> bool:
        return self.nudged_at is not None

    @property
    def size(self) -> float:
        """How large the effect is, to sort by: |%| where known, else the distance."""
        if self.effect_pct is not None:
            return abs(self.effect_pct)
        return abs(self.distance or 0.0) * 100


class AlertNote(models.Model):
    """A note on an alert, with its author and time."""

    alert = models.ForeignKey(Alert, on_delete=models.CASCADE, related_name="notes")
    author = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                               on_delete=models.SET_NULL, related_name="+")
    text = models.TextField()
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created", "id"]

    def __str__(self) -> str:
        return f"note on alert {self.alert_id}"


class Ignore(models.Model):
    """A function of a series, or a probe, that raises no more alerts: its new alerts are
    recorded as ``ignored`` (shown, never emailed) until the ignore is undone."""

    FUNCTION, PROBE, CANARY = "function", "probe", "canary"
    KINDS = [(FUNCTION, "function"), (PROBE, "probe"), (CANARY, "canary")]

    kind = models.CharField(max_length=10, choices=KINDS)
    family = models.TextField(help_text="The series name (functions); the probe or canary name.")
    subject = models.TextField(help_text="The function, probe or canary name.")
    subject_sha1 = models.CharField(max_length=40, editable=False)
    function = models.ForeignKey("deviations.Function", null=True, blank=True,
                                 on_delete=models.CASCADE, related_name="+")
    probe = models.ForeignKey("deviations.Probe", null=True, blank=True,
                              on_delete=models.CASCADE, related_name="+")
    by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                           on_delete=models.SET_NULL, related_name="+")
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["kind", "family", "subject"]
        constraints = [
            models.UniqueConstraint(fields=["kind", "family", "subject_sha1"],
                                    name="ignore_once"),
        ]

    def __str__(self) -> str:
        return f"ignored {self.kind} {self.subject} ({self.family})"

    def save(self, *args: Any, **kwargs: Any) -> None:
        self.subject_sha1 = name_digest(self.subject)
        super().save(*args, **kwargs)
