"""Who may write what: API tokens (``deviations.core.api.TokenAuth``) and owners of series
and probes (``deviations.core.access`` applies the rules, docs/deploy.md states them)."""

import hashlib
import secrets
from typing import Any

from django.conf import settings
from django.db import models

from deviations.core.packing import name_digest


class ApiToken(models.Model):
    """A token for the REST API. Only its sha256 is stored; the token is shown once."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE)
    name = models.CharField(max_length=100, help_text="What the token is for, e.g. 'CI'.")
    key_sha256 = models.CharField(max_length=64, unique=True, editable=False)
    scope = models.CharField(
        max_length=200, blank=True,
        help_text="Series and probe names (a pattern with * and ?) this token may write to; "
        "blank: everything its user may write to.",
    )
    created = models.DateTimeField(auto_now_add=True)
    last_used = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.name} ({self.user})"

    @staticmethod
    def hash_key(key: str) -> str:
        return hashlib.sha256(key.encode()).hexdigest()

    @classmethod
    def issue(cls, user: object, name: str, scope: str = "") -> tuple["ApiToken", str]:
        """Create a token; returns it and the clear key, which is not stored."""
        key = secrets.token_urlsafe(32)
        token = cls.objects.create(
            user=user, name=name, scope=scope.strip(), key_sha256=cls.hash_key(key)
        )
        return token, key


class Ownership(models.Model):
    """A user who may write to a series or a probe (upload, re-order, replace, triage).

    The first user to write to a series or probe that has no owner becomes its owner;
    owners and staff add others in the admin. Things created from the CLI (which needs
    shell access) have no owner until someone claims them by writing first.
    """

    SERIES, PROBE, CANARY, AB_HOST = "series", "probe", "canary", "abhost"
    KINDS = [(SERIES, "trace series"), (PROBE, "histogram probe"), (CANARY, "canary (by id)"),
             (AB_HOST, "A/B host")]

    kind = models.CharField(max_length=10, choices=KINDS)
    name = models.TextField()
    # Unique on a digest: probe names can be longer than a b-tree index holds.
    name_sha1 = models.CharField(max_length=40, editable=False)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="ownerships"
    )
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["kind", "name_sha1", "user"], name="owner_once"),
        ]
        indexes = [models.Index(fields=["kind", "name_sha1"], name="owner_lookup")]

    def __str__(self) -> str:
        return f"{self.user} owns {self.kind} {self.name}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        self.name_sha1 = name_digest(self.name)
        super().save(*args, **kwargs)


class Annotation(models.Model):
    """A note a user attaches to a point of a series ("switched to headless", "new bot").

    Abstract: each feature keeps its own table whose rows go with what they annotate
    (``traces.ReleaseAnnotation``, ``histograms.BuildAnnotation``); the rules (who may
    write and delete, the text's limits, the chart marks) are ``deviations.core.annotations``.
    """

    text = models.CharField(max_length=500)
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
        related_name="+",
    )
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        abstract = True
        ordering = ["created", "id"]
