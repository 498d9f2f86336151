"""One HTTP attempt of a delivery: the signature, the target check, the POST (or Matrix's
PUT), and whether a failure is worth another attempt.

Signature: ``X-Deviations-Signature: sha256=<hex>``, the HMAC-SHA256 keyed with the
webhook's secret of ``<X-Deviations-Timestamp>.<body bytes>`` (the timestamp in Unix
seconds, a dot, the exact body), as Stripe and Slack sign theirs: a receiver recomputes it
over the raw body, compares in constant time and refuses a timestamp older than a few
minutes (a replayed request), and may drop a repeated ``X-Deviations-Delivery`` id.

Targets on private, loopback, link-local or reserved addresses are refused unless
``DEVIATIONS_WEBHOOK_ALLOW_PRIVATE`` is set: any signed-in user may add a webhook, and the
workers must not become a way to reach the site's internal network (SSRF). Redirects are
not followed, for the same reason.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import socket
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

import requests
import urllib3
from django.conf import settings

from deviations.core.errors import UserError

SIGNATURE_HEADER = "X-Deviations-Signature"
TIMESTAMP_HEADER = "X-Deviations-Timestamp"
DELIVERY_HEADER = "X-Deviations-Delivery"
EVENT_HEADER = "X-Deviations-Event"
#: Statuses worth another attempt: the receiver is down or asks to slow down; any other
#: 4xx says the request itself is wrong and would be refused again.
RETRY_STATUSES = frozenset({408, 425, 429})


def signature(secret: str, timestamp: int, body: bytes) -> str:
    """``sha256=<hex>``: HMAC-SHA256 of ``b"<timestamp>." + body`` keyed with ``secret``."""
    mac = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256)
    return "sha256=" + mac.hexdigest()


def check_url(url: str) -> None:
    """``UserError`` unless ``url`` is http(s) with a host (the syntax; where it points is
    checked when sending, as DNS may change)."""
    try:
        parts = urlsplit(url)
        host, _ = parts.hostname, parts.port  # a bad port or bracket raises ValueError here
    except ValueError as exc:
        raise UserError(f"the url is not a valid URL: {exc}") from exc
    if parts.scheme not in ("http", "https") or not host:
        raise UserError("the url must be an http(s) URL with a host")


def check_address(url: str) -> None:
    """``UserError`` if ``url`` is not http(s) with a host (:func:`check_url`), or its host
    resolves to a private, loopback, link-local, multicast or reserved address and
    ``DEVIATIONS_WEBHOOK_ALLOW_PRIVATE`` is off."""
    check_url(url)
    if settings.DEVIATIONS_WEBHOOK_ALLOW_PRIVATE:
        return
    parts = urlsplit(url)
    host = parts.hostname or ""
    try:
        infos = socket.getaddrinfo(host, parts.port or 443, proto=socket.IPPROTO_TCP)
    except (OSError, UnicodeError) as exc:
        raise UserError(f"the webhook's host {host!r} does not resolve: {exc}") from exc
    for info in infos:
        address = ipaddress.ip_address(str(info[4][0]).split("%")[0])
        if not address.is_global:
            raise UserError(
                f"the webhook's host {host!r} is a private address ({address}); the site's "
                "administrator may allow those (DEVIATIONS_WEBHOOK_ALLOW_PRIVATE)")


@dataclass(frozen=True)
class Outcome:
    status_code: int | None
    error: str
    duration_ms: int
    #: The target was refused before any request (its address): trying again changes
    #: nothing until the webhook or the setting does.
    refused: bool = False

    @property
    def delivered(self) -> bool:
        return self.status_code is not None and 200 <= self.status_code < 300

    @property
    def retryable(self) -> bool:
        """A connection error, a timeout, a 5xx or a 408/425/429 may go away."""
        if self.refused:
            return False
        if self.status_code is None:
            return True
        return self.status_code >= 500 or self.status_code in RETRY_STATUSES


def send(*, url: str, method: str, body: bytes, secret: str, delivery_id: int, event: str,
         bearer: str = "") -> Outcome:
    """One attempt; never raises for what the network or the receiver did."""
    started = time.monotonic()
    try:
        check_address(url)
    except UserError as exc:
        return Outcome(None, exc.message[:500], 0, refused=True)
    timestamp = int(time.time())
    headers = {
        "Content-Type": "application/json",
        "User-Agent": "deviations-webhook/1",
        TIMESTAMP_HEADER: str(timestamp),
        SIGNATURE_HEADER: signature(secret, timestamp, body),
        DELIVERY_HEADER: str(delivery_id),
        EVENT_HEADER: event,
    }
    if bearer:
        headers["Authorization"] = f"Bearer {bearer}"
    try:
        # Streamed: of the answer only its first bytes are read (an error's reason), so a
        # receiver that answers gigabytes costs nothing.
        with requests.request(
            method, url, data=body, headers=headers, allow_redirects=False,
            timeout=settings.DEVIATIONS_WEBHOOK_TIMEOUT_SECONDS, stream=True,
        ) as response:
            error = "" if 200 <= response.status_code < 300 else (
                f"HTTP {response.status_code}: "
                + response.raw.read(200, decode_content=True).decode("utf-8", "replace"))
    except (requests.RequestException, urllib3.exceptions.HTTPError) as exc:
        return Outcome(None, f"{type(exc).__name__}: {exc}"[:500], _ms(started))
    return Outcome(response.status_code, error[:500], _ms(started))


def _ms(started: float) -> int:
    return int((time.monotonic() - started) * 1000)
