"""Who is told about what: subscriptions (to probes or series) and the alerts sent, once.

Shared by every detector: histogram changes and trace regressions today.
"""

from django.conf import settings
from django.db import models


class Subscription(models.Model):
    """Someone to tell about histogram changes (probe name or pattern) or trace regressions
    of a series. An inactive row records an unsubscribe (for owner emails too)."""

    HISTOGRAM, SERIES = "histogram", "series"
    TARGETS = [(HISTOGRAM, "histogram probes"), (SERIES, "trace series")]

    email = models.EmailField()
    target = models.CharField(max_length=10, choices=TARGETS, default=HISTOGRAM)
    pattern = models.CharField(
        max_length=1000, help_text="Probe name, or a pattern with * and ? (GC_*); for a trace "
        "series, the series name."
    )
    digest = models.BooleanField(default=False, help_text="One email a day instead of one "
                                 "per change.")
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
