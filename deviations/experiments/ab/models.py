"""A/B runs, benchmark hosts and their A/A floors.

``ABRun.result`` is the stored analysis (``analysis.analyse``), written once at upload (or
when the smallest change that matters is changed) and read by pages, the API and exports:

``{"confidence", "method", "min_change_pct", "comparisons": [{"metric", "label", "build",
"baseline", "unit", "direction", "n", "slices", "a", "b", "differences", "diff",
"diff_lo", "diff_hi", "level", "relative", "p_value", "holm_p", "sign_test_p",
"n_positive", "n_negative", "median", "median_lo", "median_hi", "median_level",
"aa_floor", "floor_source", "verdict", "line", "warning", "precision"}]}``; ``precision`` is
None or ``{"estimand", "scale", "unit", "min_change", "lo", "hi", "width", "narrow_enough",
"excludes_zero", "more_needed", "sentence"}`` (``estimand`` "change of the geometric mean",
unit %, when every value is > 0, else "difference of means"; results stored before issue 22
part 4 have no ``estimand``/``scale``/``unit`` and are on the difference of means).

``ABRun.data`` keeps what was uploaded, per metric and build, one value per slice pair.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models


class ABHost(models.Model):
    """A benchmark host: A/A runs on it set the floor its A/B runs are held to."""

    name = models.CharField(max_length=200, unique=True)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class ABRun(models.Model):
    AB, AA = "ab", "aa"
    KINDS = [(AB, "A/B run"), (AA, "A/A run")]

    host = models.ForeignKey(ABHost, null=True, blank=True, on_delete=models.SET_NULL,
                             related_name="runs")
    kind = models.CharField(max_length=2, choices=KINDS, default=AB)
    name = models.CharField(max_length=255, help_text="the uploaded file's name")
    # sha256 of the A/B file, ":" and the sha256 of its A/A file (or nothing): the same
    # upload sent twice to one host is one run.
    content_key = models.CharField(max_length=130, editable=False)
    aa_name = models.CharField(max_length=255, blank=True)
    aa_run = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL,
                               related_name="+", help_text="the A/A run uploaded with it")
    baseline = models.CharField(max_length=200)
    data = models.JSONField(default=dict)
    result = models.JSONField(default=dict)
    min_change_pct = models.FloatField(
        default=1.0, help_text="smallest change that matters, % of the baseline's mean"
    )
    uploaded_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                    on_delete=models.SET_NULL, related_name="+")
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["host", "kind", "content_key"],
                                    name="ab_run_once_per_host"),
        ]

    def __str__(self) -> str:
        return f"{self.get_kind_display()} {self.name}"


class AAFloorRecord(models.Model):
    """The floor one A/A run set for one metric of a host. The newest per (host, metric)
    is the host's current floor; ``moved`` flags one whose A/A differences differ from the
    previous A/A run's in spread or centre (``stats.paired.floor_change``, ``change`` holds
    the tests)."""

    host = models.ForeignKey(ABHost, on_delete=models.CASCADE, related_name="floors")
    metric = models.CharField(max_length=200)
    run = models.ForeignKey(ABRun, on_delete=models.CASCADE, related_name="floors")
    floor = models.FloatField()
    lo = models.FloatField()
    hi = models.FloatField()
    estimate = models.FloatField()
    n = models.IntegerField()
    confidence = models.FloatField()
    biased = models.BooleanField(default=False)
    previous = models.FloatField(null=True, blank=True)
    moved = models.BooleanField(default=False)
    change = models.JSONField(null=True, blank=True)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["host", "metric", "-created", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["run", "metric"], name="aa_floor_once_per_run"),
        ]
        indexes = [models.Index(fields=["host", "metric", "-created"], name="aa_floor_latest")]

    def __str__(self) -> str:
        return f"{self.host} {self.metric} ±{self.floor:g}"
