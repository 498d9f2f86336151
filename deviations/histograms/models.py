"""Telemetry histograms: probes, one histogram per (probe, build), detected changes, alerts.

A Probe's builds sort by ``deviations.versions.sort_key`` of their build id. A snapshot's
edges and counts are packed little-endian float64 arrays, as ``RunTimes`` packs run times:
a histogram is written once per build and always read whole. docs/histograms.md describes
the flow (ingest, detection, alerts, triage).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.urls import reverse

from deviations.core import versions
from deviations.core.models import Annotation
from deviations.core.packing import name_digest, unpack
from deviations.histograms import rules
from deviations.histograms.rules import RULE_CHOICES

if TYPE_CHECKING:  # numpy is imported where arrays are made, not when Django starts
    import numpy as np


class RuleParameters(models.Model):
    """Parameters of the change rule; blank means "use the next level's value".

    A probe's blank values come from the global ``HistogramRuleDefaults`` row, whose blank
    values come from the defaults of ``deviations.stats.histograms`` (docs/statistics.md).
    """

    rule = models.CharField(max_length=10, choices=RULE_CHOICES, blank=True)
    min_count = models.FloatField(
        null=True, blank=True, help_text="Builds with a smaller total or largest bucket are "
        "left out (Mozilla: 1000)."
    )
    past_builds = models.PositiveSmallIntegerField(null=True, blank=True, help_text="Mozilla: 7")
    min_past = models.PositiveSmallIntegerField(null=True, blank=True, help_text="Mozilla: 4")
    future_builds = models.PositiveSmallIntegerField(
        null=True, blank=True, help_text="Later builds that must confirm a change (Mozilla: 2)."
    )
    cutoff = models.FloatField(
        null=True, blank=True, help_text="Fixed rule: Hellinger cutoff (Mozilla: 0.12)."
    )
    max_past_std = models.FloatField(
        null=True, blank=True, help_text="Fixed rule: largest std of the distances to the past "
        "builds (Mozilla: 0.01)."
    )
    k = models.FloatField(
        null=True, blank=True, help_text="Adaptive rule: robust z of a jump over the noise (5)."
    )
    floor = models.FloatField(
        null=True, blank=True, help_text="Adaptive rule: smallest cutoff (0.05)."
    )
    stability_ratio = models.FloatField(
        null=True, blank=True, help_text="Adaptive rule: allowed past spread in typical "
        "build-to-build distances (1)."
    )

    COMMON, FIXED, ADAPTIVE = rules.COMMON, rules.FIXED, rules.ADAPTIVE

    class Meta:
        abstract = True

    def clean(self) -> None:
        """Refuse parameters the rule would refuse (e.g. min_past > past_builds), so that
        one probe's settings never stop a detection pass over all probes."""
        defaults = self if isinstance(self, HistogramRuleDefaults) else (
            HistogramRuleDefaults.current()
        )
        rule, params = rules.rule_of(self, defaults)
        import numpy as np  # here, not at the top: Django's start-up imports this module

        try:
            rules.scan(rule, np.full((1, 3, 2), 1000.0), params)
        except ValueError as exc:
            raise ValidationError(f"rule parameters: {exc}") from exc


class HistogramRuleDefaults(RuleParameters):
    """The one row of global rule parameters (``HistogramRuleDefaults.current()``)."""

    class Meta:
        verbose_name = "histogram rule defaults"
        verbose_name_plural = "histogram rule defaults"

    def __str__(self) -> str:
        return "global histogram rule parameters"

    def save(self, *args: Any, **kwargs: Any) -> None:
        self.pk = 1
        super().save(*args, **kwargs)

    @classmethod
    def current(cls) -> HistogramRuleDefaults:
        return cls.objects.filter(pk=1).first() or cls(pk=1)


class Probe(RuleParameters):
    """A Telemetry probe (histogram name). Names are untrusted text from uploads."""

    name = models.TextField()
    # Unique on a digest: PostgreSQL cannot index arbitrarily long text in a b-tree.
    name_sha1 = models.CharField(max_length=40, unique=True, editable=False)
    alert_emails = models.JSONField(
        default=list, blank=True, help_text="Owners, told of every change unless they "
        "unsubscribe (Firefox's Histograms.json alert_emails)."
    )
    histogram_type = models.CharField(max_length=20, blank=True)
    created = models.DateTimeField(auto_now_add=True)
    # The last detection pass, stored for the chart: {"rule", "builds", "distance",
    # "cutoff", "reason"} per build of the series (null where undefined).
    scan = models.JSONField(null=True, blank=True, editable=False)
    detected_at = models.DateTimeField(null=True, blank=True, editable=False)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def save(self, *args: Any, **kwargs: Any) -> None:
        self.name_sha1 = name_digest(self.name)
        super().save(*args, **kwargs)

    def get_absolute_url(self) -> str:
        return reverse("histograms:probe", args=[self.pk])

    def clean(self) -> None:
        super().clean()
        emails = self.alert_emails
        if not isinstance(emails, list) or not all(isinstance(e, str) for e in emails):
            raise ValidationError({"alert_emails": "a list of email addresses"})


class HistogramSnapshot(models.Model):
    """The histogram of one probe for one build: packed edges (n+1) and counts (n)."""

    probe = models.ForeignKey(Probe, on_delete=models.CASCADE, related_name="snapshots")
    build_id = models.CharField(max_length=100)
    sort_key = models.CharField(max_length=400, editable=False)
    edges = models.BinaryField()
    counts = models.BinaryField()
    # Proportions (GLAM) rather than counts; ``total`` clients turns them into counts.
    normalised = models.BooleanField(default=False)
    total = models.FloatField(null=True, blank=True)
    sum = models.FloatField(null=True, blank=True)
    source = models.CharField(max_length=300, help_text="file and record it came from")
    content_sha1 = models.CharField(max_length=40, editable=False)
    uploaded_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["probe", "sort_key", "id"]
        constraints = [
            models.UniqueConstraint(fields=["probe", "build_id"], name="snapshot_unique_build"),
        ]
        indexes = [models.Index(fields=["probe", "sort_key"], name="snapshot_probe_order")]

    def __str__(self) -> str:
        return f"{self.probe.name} {self.build_id}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        self.sort_key = versions.sort_key(self.build_id)
        super().save(*args, **kwargs)

    def edges_array(self) -> np.ndarray:
        return unpack(self.edges)

    def counts_array(self) -> np.ndarray:
        return unpack(self.counts)


class HistogramChange(models.Model):
    """A change the rule reported at one build of a probe; stored once. Its alert (triage,
    explanation, group) is ``change.alert`` (``deviations.alerts.models.Alert``)."""

    KINDS = [
        ("shift", "shift"),
        ("shape", "shape change"),
        ("proportion", "share change"),
        ("volume", "client-volume change"),
    ]
    #: Kinds found by the count rule (``deviations.stats.proportions``) of boolean and
    #: enumerated probes; shift and shape come from the Hellinger rule.
    COUNT_KINDS = ("proportion", "volume")

    probe = models.ForeignKey(Probe, on_delete=models.CASCADE, related_name="changes")
    build_id = models.CharField(max_length=100)
    sort_key = models.CharField(max_length=400, editable=False)
    previous_build_id = models.CharField(max_length=100)
    # Hellinger distance to the previous usable build: what the cutoffs refer to.
    distance = models.FloatField()
    cutoff = models.FloatField()
    kind = models.CharField(max_length=10, choices=KINDS)
    shift_buckets = models.FloatField(null=True, blank=True)
    rule = models.CharField(max_length=10, choices=RULE_CHOICES)
    # Count changes (kind proportion or volume): the bucket whose share moved (its label,
    # "true" for a boolean probe), its share before (median of the past builds) and after
    # (mean of the build and its confirming builds) with the 95 % interval of the change,
    # and the clients a build before (geometric trimmed mean of the past builds) and after
    # (geometric mean of the build and its confirming builds). For these kinds distance and
    # cutoff are the Hellinger rule's at the build, for the chart.
    bucket = models.CharField(max_length=50, blank=True)
    share_before = models.FloatField(null=True, blank=True)
    share_after = models.FloatField(null=True, blank=True)
    diff_lo = models.FloatField(null=True, blank=True)
    diff_hi = models.FloatField(null=True, blank=True)
    clients_before = models.FloatField(null=True, blank=True)
    clients_after = models.FloatField(null=True, blank=True)
    # Count changes: the later builds it took to confirm the change (its window was this
    # build to this build + confirm_builds; 2 to 16 for a proportion, 4 to 16 for a volume
    # change, issue 22 part 5: the located start may precede the first build whose looks
    # passed by up to 8 builds).
    confirm_builds = models.PositiveSmallIntegerField(null=True, blank=True)
    # Mean normalised histogram of the usable past builds and of the build with its
    # confirming later builds (what the kind was judged on), on ``edges``.
    edges = models.BinaryField()
    before = models.BinaryField()
    after = models.BinaryField()
    detected_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-detected_at", "-id"]
        constraints = [
            # Detection runs again after every ingest: a change is stored once.
            models.UniqueConstraint(fields=["probe", "build_id"], name="change_unique_build"),
        ]

    def __str__(self) -> str:
        return f"{self.probe.name} at {self.build_id} ({self.kind}, {self.distance:.3f})"

    def save(self, *args: Any, **kwargs: Any) -> None:
        self.sort_key = versions.sort_key(self.build_id)
        super().save(*args, **kwargs)

    def get_absolute_url(self) -> str:
        return reverse("histograms:probe", args=[self.probe_id]) + f"?build={self.build_id}"

    def describe(self) -> str:
        """What changed, in words (pages, exports, alerts)."""
        if self.kind == "proportion" and self.share_before is not None:
            after = self.share_after or 0.0
            verb = "rose" if after >= self.share_before else "fell"
            interval = ""
            if self.diff_lo is not None and self.diff_hi is not None:
                interval = (f", 95% interval of the change {100 * self.diff_lo:+.1f} to "
                            f"{100 * self.diff_hi:+.1f} points")
            return (f"share of `{self.bucket}` {verb} from {100 * self.share_before:.1f}% "
                    f"to {100 * after:.1f}%{interval}")
        if self.kind == "volume" and self.clients_before and self.clients_after:
            ratio = self.clients_after / self.clients_before
            verb = "rose" if ratio >= 1 else "fell"
            return (f"clients reporting {verb} from {self.clients_before:,.0f} to "
                    f"{self.clients_after:,.0f} a build (x{ratio:.2f}), shares unchanged")
        if self.kind == "shift" and self.shift_buckets is not None:
            return f"the distribution shifted by {self.shift_buckets:+.2f} buckets"
        return "the distribution changed shape"


class BuildAnnotation(Annotation):
    """A note on a build of a probe ("new bot"), shown on the probe's chart and page;
    deleted with the probe."""

    probe = models.ForeignKey(Probe, on_delete=models.CASCADE, related_name="annotations")
    build_id = models.CharField(max_length=100)

    class Meta(Annotation.Meta):
        indexes = [models.Index(fields=["probe", "build_id"], name="build_annotation_build")]

    def __str__(self) -> str:
        return f"{self.probe.name} {self.build_id}: {self.text}"
