"""Webhooks, their deliveries and attempts, bug templates and bisects.

A ``Webhook`` belongs to the user who made it. ``purpose`` "alerts": told of every alert
group of its target (a series, probes matching a pattern, a canary) once, when the group is
due (as email is); ``purpose`` "bisect": the one bisect service of a series, sent a range
when someone starts a bisect of a regression. Every message is a ``WebhookDelivery`` (the
exact body, signed when sent), tried up to ``DEVIATIONS_WEBHOOK_ATTEMPTS`` times; each try
is a ``DeliveryAttempt``.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

#: PostgreSQL enforces these; the services refuse longer values with a message first.
URL_CHARS = 2000
SECRET_CHARS = 200
PATTERN_CHARS = 1000
TOKEN_CHARS = 500


class Webhook(models.Model):
    SERIES, HISTOGRAM, CANARY = "series", "histogram", "canary"
    TARGETS = [(SERIES, "trace series"), (HISTOGRAM, "histogram probes"), (CANARY, "canary")]
    JSON, SLACK, MATRIX = "json", "slack", "matrix"
    FORMATS = [(JSON, "generic JSON"), (SLACK, "Slack incoming webhook"),
               (MATRIX, "Matrix room (client-server API)")]
    ALERTS, BISECT = "alerts", "bisect"
    PURPOSES = [(ALERTS, "alert groups"), (BISECT, "bisect service of a series")]

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                              related_name="webhooks")
    purpose = models.CharField(max_length=10, choices=PURPOSES, default=ALERTS)
    target = models.CharField(max_length=10, choices=TARGETS, default=SERIES)
    pattern = models.CharField(
        max_length=PATTERN_CHARS, help_text="Series name, probe name or pattern (GC_*), "
        "canary name; * and ? match any series or canary name too.")
    format = models.CharField(max_length=10, choices=FORMATS, default=JSON)
    url = models.CharField(max_length=URL_CHARS)
    secret = models.CharField(max_length=SECRET_CHARS,
                              help_text="Key of the HMAC-SHA256 signature of every body.")
    matrix_token = models.CharField(max_length=TOKEN_CHARS, blank=True,
                                    help_text="Matrix: the access token of the bot user.")
    improvements = models.BooleanField(default=False, help_text="Also groups of improvements.")
    active = models.BooleanField(default=True)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["purpose", "target", "pattern", "pk"]
        constraints = [
            # One bisect service per series: "start a bisect" has one place to go.
            models.UniqueConstraint(fields=["pattern"], condition=Q(purpose="bisect"),
                                    name="webhook_one_bisect_per_series"),
        ]

    def __str__(self) -> str:
        return f"{self.get_purpose_display()} {self.target} {self.pattern} → {self.url}"


class WebhookDelivery(models.Model):
    """One message to one webhook; ``(webhook, group)`` unique: a group is sent to a hook at
    most once (the claim), whoever inserts the row first."""

    GROUP, TEST, BISECT = "group", "test", "bisect"
    KINDS = [(GROUP, "alert group"), (TEST, "test delivery"), (BISECT, "bisect request")]
    PENDING, SENDING, DELIVERED, FAILED = "pending", "sending", "delivered", "failed"
    STATUSES = [(PENDING, "pending"), (SENDING, "sending"), (DELIVERED, "delivered"),
                (FAILED, "failed")]

    webhook = models.ForeignKey(Webhook, on_delete=models.CASCADE, related_name="deliveries")
    kind = models.CharField(max_length=10, choices=KINDS)
    group = models.ForeignKey("deviations.AlertGroup", null=True, blank=True,
                              on_delete=models.CASCADE, related_name="+")
    bisect = models.ForeignKey("deviations.Bisect", null=True, blank=True,
                               on_delete=models.CASCADE, related_name="deliveries")
    body = models.TextField(help_text="The exact bytes sent (UTF-8), signed as they are.")
    status = models.CharField(max_length=10, choices=STATUSES, default=PENDING)
    attempts = models.PositiveSmallIntegerField(default=0)
    next_at = models.DateTimeField(help_text="When the next attempt is due.")
    claimed_at = models.DateTimeField(null=True, blank=True)
    created = models.DateTimeField(auto_now_add=True)
    delivered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created", "-pk"]
        constraints = [
            models.UniqueConstraint(fields=["webhook", "group"], condition=Q(group__isnull=False),
                                    name="webhook_group_once"),
        ]
        indexes = [models.Index(fields=["status", "next_at"], name="delivery_due")]

    def __str__(self) -> str:
        return f"{self.kind} to webhook {self.webhook_id} ({self.status})"


class DeliveryAttempt(models.Model):
    delivery = models.ForeignKey(WebhookDelivery, on_delete=models.CASCADE,
                                 related_name="tries")
    number = models.PositiveSmallIntegerField()
    at = models.DateTimeField()
    status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    error = models.CharField(max_length=500, blank=True)
    duration_ms = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["number"]
        constraints = [models.UniqueConstraint(fields=["delivery", "number"],
                                               name="attempt_once")]

    def __str__(self) -> str:
        return f"attempt {self.number} of delivery {self.delivery_id}"


class BugTemplate(models.Model):
    """How to file a bug about an alert of a family (a series, a probe family): the
    tracker's kind and address and its fields; the alert's words fill the rest."""

    BUGZILLA, JIRA, GITHUB = "bugzilla", "jira", "github"
    KINDS = [(BUGZILLA, "Bugzilla"), (JIRA, "Jira"), (GITHUB, "GitHub issues")]
    SERIES, HISTOGRAM = "series", "histogram"
    TARGETS = [(SERIES, "trace series"), (HISTOGRAM, "probe family")]

    target = models.CharField(max_length=10, choices=TARGETS, default=SERIES)
    family = models.CharField(max_length=PATTERN_CHARS)
    kind = models.CharField(max_length=10, choices=KINDS)
    base_url = models.CharField(
        max_length=500, help_text="Bugzilla or Jira: the site (https://bugzilla.example.org); "
        "GitHub: the repository (https://github.com/owner/repo).")
    product = models.CharField(max_length=200, blank=True, help_text="Bugzilla product; "
                               "Jira project id (pid).")
    component = models.CharField(max_length=200, blank=True, help_text="Bugzilla component; "
                                 "Jira issue type id.")
    labels = models.CharField(max_length=200, blank=True, help_text="GitHub labels, "
                              "comma-separated.")
    by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                           on_delete=models.SET_NULL, related_name="+")
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["target", "family"]
        constraints = [models.UniqueConstraint(fields=["target", "family"],
                                               name="bug_template_once")]

    def __str__(self) -> str:
        return f"{self.get_kind_display()} template of {self.target} {self.family}"


class Bisect(models.Model):
    """A bisect of a regression's range, asked of the series' bisect service; its result
    comes back through the API with the bisect's own token."""

    REQUESTED, RUNNING, DONE, FAILED = "requested", "running", "done", "failed"
    STATUSES = [(REQUESTED, "requested"), (RUNNING, "running"), (DONE, "done"),
                (FAILED, "failed")]
    ACTIVE = (REQUESTED, RUNNING)

    alert = models.ForeignKey("deviations.Alert", on_delete=models.CASCADE,
                              related_name="bisects")
    status = models.CharField(max_length=10, choices=STATUSES, default=REQUESTED)
    culprit_revision = models.CharField(max_length=200, blank=True)
    details_url = models.CharField(max_length=URL_CHARS, blank=True)
    message = models.TextField(blank=True)
    requested_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                     on_delete=models.SET_NULL, related_name="+")
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)
    finished = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created", "-pk"]

    def __str__(self) -> str:
        return f"bisect {self.pk} of alert {self.alert_id} ({self.status})"
