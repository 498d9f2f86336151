"""API tokens: what the REST API's writes authenticate with (``deviations.api.TokenAuth``)."""

import hashlib
import secrets

from django.conf import settings
from django.db import models


class ApiToken(models.Model):
    """A token for the REST API. Only its sha256 is stored; the token is shown once."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE)
    name = models.CharField(max_length=100, help_text="What the token is for, e.g. 'CI'.")
    key_sha256 = models.CharField(max_length=64, unique=True, editable=False)
    created = models.DateTimeField(auto_now_add=True)
    last_used = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.name} ({self.user})"

    @staticmethod
    def hash_key(key: str) -> str:
        return hashlib.sha256(key.encode()).hexdigest()

    @classmethod
    def issue(cls, user: object, name: str) -> tuple["ApiToken", str]:
        """Create a token; returns it and the clear key, which is not stored."""
        key = secrets.token_urlsafe(32)
        token = cls.objects.create(user=user, name=name, key_sha256=cls.hash_key(key))
        return token, key
