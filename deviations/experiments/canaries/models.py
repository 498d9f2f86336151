"""Canaries: the experiment, its batches of observations, its stored sequential state.

Data path (docs/architecture.md): a batch is stored whole (``CanaryBatch``, numbered
``seq`` under the canary's row lock, so batches commit in ``seq`` order); a task applies
the batches after ``CanaryState.applied_seq`` to the sequential test and stores the new
state (one task message per burst of batches: ``Canary.update_queued``); the page reads
``CanaryState`` and ``CanaryPoint`` only.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.urls import reverse


class Canary(models.Model):
    """A candidate (arm B) compared live with the current build (arm A) on one metric."""

    HIGHER, LOWER, ANY = "higher", "lower", "any"
    BAD = [(HIGHER, "higher is worse"), (LOWER, "lower is worse"), (ANY, "any change is bad")]

    name = models.CharField(max_length=200)
    metric = models.CharField(max_length=200, blank=True)
    unit = models.CharField(max_length=40, blank=True)
    bad = models.CharField(max_length=6, choices=BAD, help_text="Which direction is bad.")
    alpha = models.FloatField(default=0.05, help_text="Probability of a false alarm over the "
                              "whole run, however often it is looked at.")
    tau = models.FloatField(
        null=True, blank=True,
        help_text="Tolerance on the distribution functions (0-1): accept 'no difference "
        "beyond tau' once the band on F_B - F_A lies within (-tau, tau). Empty: never accept.",
    )
    DKW, SIGNS, RANKS = "dkw", "signs", "ranks"
    METHODS = [
        (RANKS, "rank betting test (sequential ranks; fastest on shifts; reject only)"),
        (DKW, "distribution functions (time-uniform DKW bands; any difference; tau)"),
        (SIGNS, "sign test on pairs (mixture martingale; faster on shifts; reject only)"),
    ]
    #: New canaries' test when neither a tolerance tau nor quantiles ask for the DKW test
    #: (docs/statistics.md, "Canaries: the rank betting test": why it is the default).
    DEFAULT_METHOD = RANKS
    method = models.CharField(
        max_length=5, choices=METHODS, default=DEFAULT_METHOD, help_text="The sequential "
        "test that decides (docs/statistics.md, 'Canaries'); the bands are drawn either way.",
    )
    count = models.BooleanField(
        default=False, help_text="A count metric: batches carry event timestamps only, tested "
        "through the waiting times between events (Lindon et al. 2022, §3.4).",
    )
    quantile = models.FloatField(default=0.95, help_text="The quantile the headline words "
                                 "besides the median.")
    quantiles = models.JSONField(
        default=list, blank=True, help_text="Quantiles the canary is judged on, e.g. [0.5, "
        "0.9, 0.99]: each gets an anytime-valid decision (Bonferroni over them), and these "
        "decide the canary instead of the distribution-function test. Empty: not used.",
    )
    #: New canaries' resolution (docs/statistics.md, "Canaries: state in bounded memory");
    #: canaries created before it keep 0, so their stored checkpoints stay consistent.
    DEFAULT_RESOLUTION = 1e-4
    resolution = models.FloatField(
        default=DEFAULT_RESOLUTION,
        help_text="Relative resolution r of the values the tests hold: each "
        "observation is rounded down to a fixed grid whose steps are at most r relative, "
        "which keeps the false-alarm guarantee and bounds the worker's memory and the "
        "checkpoint whatever the run's length; changes smaller than r are not seen. 0: exact "
        "values (memory grows with the run).",
    )
    min_effect = models.FloatField(
        null=True, blank=True, help_text="The smallest change of the median worth knowing, in "
        "the metric's unit: the page says whether the interval is narrow enough for it.",
    )
    owners = models.JSONField(default=list, blank=True, help_text="Emails told of a rejection.")
    subscribers = models.JSONField(default=list, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    created = models.DateTimeField(auto_now_add=True)
    # Written by the batch service under this row's lock.
    batches_received = models.PositiveIntegerField(default=0)
    last_time_a = models.FloatField(null=True, blank=True)
    last_time_b = models.FloatField(null=True, blank=True)
    # An update_canary task message is on its way: set by the batch that sends one, cleared
    # by the task before it reads the batches, so a burst of batches sends one message
    # (state.py). A lost message leaves it set; the beat's sweeper sends another.
    update_queued = models.BooleanField(default=False)
    continued = models.BooleanField(
        default=False, help_text="Observations are still taken after the decision (the bands "
        "are time-uniform, so looking on stays valid).",
    )

    class Meta:
        ordering = ["-created", "-pk"]

    def __str__(self) -> str:
        return f"canary {self.pk}: {self.name}"

    def get_absolute_url(self) -> str:
        return reverse("canaries:detail", args=[self.pk])

    def rank_tuning(self) -> tuple[float, int] | None:
        """``(change, sides)`` the rank betting test of a new run is tuned to: the smallest
        change worth knowing (``min_effect``, a change of the values in the metric's unit),
        looked for on the bad side only (``bad`` higher: "B larger", +1; lower: -1; any:
        both, 0); None without one, for a count metric (its test runs on the waits between
        events, not the values), or where the rank test does not decide
        (docs/statistics.md, "Against the target": the held-out tuned bets)."""
        if (self.method != self.RANKS or self.min_effect is None or self.count
                or self.quantiles or not self.min_effect > 0):
            return None
        sides = {self.HIGHER: 1, self.LOWER: -1}.get(self.bad, 0)
        return float(self.min_effect), sides


class CanaryBatch(models.Model):
    """One batch of one arm, stored whole: values as packed float64 (for a count metric the
    waiting times computed from its timestamps when it arrived)."""

    canary = models.ForeignKey(Canary, on_delete=models.CASCADE, related_name="batches")
    seq = models.PositiveIntegerField()
    batch_id = models.CharField(max_length=200)
    arm = models.CharField(max_length=1, choices=[("A", "A (control)"), ("B", "B (candidate)")])
    n = models.PositiveIntegerField()
    values = models.BinaryField()
    # sha256 of what was sent: the same batch id sent again with other data is refused.
    digest = models.CharField(max_length=64)
    received = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["canary", "batch_id"], name="canary_batch_once"),
            models.UniqueConstraint(fields=["canary", "seq"], name="canary_batch_seq"),
        ]

    def __str__(self) -> str:
        return f"canary {self.canary_id} batch {self.batch_id} ({self.arm}, {self.n})"


class CanaryState(models.Model):
    """The sequential test's result after the batches up to ``applied_seq``, and what the
    page shows (``summary``: quantile bands on a grid, the headline's words)."""

    canary = models.OneToOneField(
        Canary, on_delete=models.CASCADE, primary_key=True, related_name="state"
    )
    applied_seq = models.PositiveIntegerField(default=0)
    n_a = models.PositiveBigIntegerField(default=0)
    n_b = models.PositiveBigIntegerField(default=0)
    statistic = models.FloatField(default=0.0)
    p_value = models.FloatField(default=1.0)
    p_value_now = models.FloatField(default=1.0)
    decision = models.CharField(max_length=8, default="continue")
    HEADLINES = [
        ("regression", "regression"), ("improvement", "improvement"),
        ("no_difference", "no difference beyond τ"), ("keep_going", "keep going"),
    ]
    headline = models.CharField(max_length=14, choices=HEADLINES, default="keep_going")
    decided_n_a = models.PositiveBigIntegerField(null=True, blank=True)
    decided_n_b = models.PositiveBigIntegerField(null=True, blank=True)
    decided_at = models.DateTimeField(null=True, blank=True)
    summary = models.JSONField(default=dict, blank=True)
    updated = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"canary {self.canary_id}: {self.decision} at {self.n_a}/{self.n_b}"


class CanaryCheckpoint(models.Model):
    """The test's data (distinct values, per-arm counts) after batch ``seq``: a cold worker
    starts from here and applies the batches after it, instead of all of them."""

    canary = models.OneToOneField(
        Canary, on_delete=models.CASCADE, primary_key=True, related_name="checkpoint"
    )
    seq = models.PositiveIntegerField()
    n_a = models.PositiveBigIntegerField()
    n_b = models.PositiveBigIntegerField()
    support = models.BinaryField()
    counts_a = models.BinaryField()
    counts_b = models.BinaryField()

    def __str__(self) -> str:
        return f"canary {self.canary_id} checkpoint at batch {self.seq}"


class CanaryPoint(models.Model):
    """The p-value after one update of the state (the page's p-value over time)."""

    canary = models.ForeignKey(Canary, on_delete=models.CASCADE, related_name="points")
    seq = models.PositiveIntegerField()
    n_a = models.PositiveBigIntegerField()
    n_b = models.PositiveBigIntegerField()
    p_value = models.FloatField()
    p_value_now = models.FloatField()
    at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["canary", "seq"], name="canary_point_once"),
        ]

    def __str__(self) -> str:
        return f"canary {self.canary_id} p={self.p_value:.3g} at {self.n_a}/{self.n_b}"
