"""Hardening #4: nobody can silence or spam someone else's alerts.

The issue's attack: subscribe the victim's address to ``*``, then use the unsubscribe link
the attacker's own subscriptions page showed; re-subscribing undid a victim's unsubscribe;
a token could subscribe any address; unsubscribe links never expired.
"""

from __future__ import annotations

import re
from typing import Any
from unittest import mock

import pytest
from django.contrib.auth import get_user_model
from django.core import mail, signing

from deviations.alerts import notify as alert_notify
from deviations.alerts import services as alerts
from deviations.alerts.models import Alert, Subscription
from deviations.histograms import notify as histogram_notify
from deviations.histograms.models import HistogramChange, Probe

pytestmark = pytest.mark.django_db
VICTIM = "victim@example.org"


@pytest.fixture
def mallory(client: Any) -> Any:
    user = get_user_model().objects.create_user("mallory", "mallory@example.org", "pw")
    client.force_login(user)
    return user


def _probe_with_change() -> HistogramChange:
    probe = Probe.objects.create(name="GC_MS", alert_emails=[VICTIM])
    return HistogramChange.objects.create(
        probe=probe, build_id="2", sort_key="2", previous_build_id="1", distance=0.3,
        cutoff=0.1, kind="shift", rule="adaptive", edges=b"", before=b"", after=b"",
    )


def test_subscribing_someone_else_waits_for_their_confirmation(client: Any, mallory) -> None:
    response = client.post("/histograms/subscriptions/",
                           {"email": VICTIM, "target": "histogram", "pattern": "*"})
    assert response.status_code == 302
    sub = Subscription.objects.get(email=VICTIM)
    assert (sub.active, sub.pending) == (False, True)
    (message,) = mail.outbox
    assert message.to == [VICTIM]
    assert "Nothing is sent until you confirm" in message.body
    # The attacker's page offers no unsubscribe link for the victim's address.
    page = client.get("/histograms/subscriptions/").content.decode()
    assert "awaiting confirmation by victim@example.org" in page
    assert "/histograms/unsubscribe/" not in page
    # A pending request mutes nothing: the victim still gets their probe's alerts.
    change = _probe_with_change()
    histogram_notify.record_histogram_changes([change.pk])
    group = Alert.objects.get(change=change).group
    assert [r.email for r in alert_notify.probe_recipients(group)] == [VICTIM]
    # The victim confirms through the link.
    link = re.search(r"http://\S+/histograms/confirm/(\S+)/", message.body)
    assert link is not None
    confirm_url = f"/histograms/confirm/{link.group(1)}/"
    assert b"Nothing is sent until you confirm" in client.get(confirm_url).content
    assert client.post(confirm_url).status_code == 200
    sub.refresh_from_db()
    assert (sub.active, sub.pending) == (True, False)


def test_a_third_party_cannot_undo_an_unsubscribe(client: Any, mallory) -> None:
    alerts.subscribe(VICTIM, "GC_*")
    alerts.unsubscribe(alerts.unsubscribe_token(VICTIM, Subscription.HISTOGRAM, "GC_*"))
    client.post("/histograms/subscriptions/",
                {"email": VICTIM, "target": "histogram", "pattern": "GC_*"})
    sub = Subscription.objects.get(email=VICTIM)
    assert (sub.active, sub.pending) == (False, False)
    assert mail.outbox == []


def test_ones_own_address_and_staff_subscribe_at_once(client: Any) -> None:
    user = get_user_model().objects.create_user("bob", "Bob@Example.org", "pw")
    client.force_login(user)
    client.post("/histograms/subscriptions/",
                {"email": "bob@example.org", "target": "histogram", "pattern": "GC_*"})
    assert Subscription.objects.get(email="bob@example.org").active
    staff = get_user_model().objects.create_user("ops", "ops@example.org", "pw", is_staff=True)
    assert alerts.validated_subscribe("team@example.org", "X", "histogram", False, staff).active
    assert mail.outbox == []


def test_unsubscribe_links_expire(client: Any) -> None:
    alerts.subscribe(VICTIM, "GC_*")
    token = alerts.unsubscribe_token(VICTIM, Subscription.HISTOGRAM, "GC_*")
    assert client.get(f"/histograms/unsubscribe/{token}/").status_code == 200
    later = signing.time.time() + alerts.UNSUBSCRIBE_MAX_AGE + 60
    with mock.patch("django.core.signing.time.time", return_value=later):
        response = client.post(f"/histograms/unsubscribe/{token}/")
    assert response.status_code == 400
    assert b"has expired" in response.content
    assert Subscription.objects.get(email=VICTIM).active


def test_confirmation_links_expire(client: Any, mallory) -> None:
    client.post("/histograms/subscriptions/",
                {"email": VICTIM, "target": "histogram", "pattern": "*"})
    token = re.search(r"/histograms/confirm/(\S+)/", mail.outbox[0].body).group(1)
    later = signing.time.time() + alerts.CONFIRM_MAX_AGE + 60
    with mock.patch("django.core.signing.time.time", return_value=later):
        response = client.post(f"/histograms/confirm/{token}/")
    assert response.status_code == 400
    assert not Subscription.objects.get(email=VICTIM).active


def test_confirmation_emails_are_few_and_carry_no_chosen_text(mallory) -> None:
    """Issue 23: confirmation emails went to any address, again and again, with the
    caller's pattern (any text) in them."""
    for _ in range(3):  # the same request again sends nothing more
        alerts.validated_subscribe(VICTIM, "GC_*", Subscription.HISTOGRAM, False, mallory)
    assert len(mail.outbox) == 1
    with pytest.raises(alerts.UserError, match="probe pattern for someone else"):
        alerts.validated_subscribe("x@example.org", "Win a prize! http://evil",
                                   Subscription.HISTOGRAM, False, mallory)
    for k in range(alerts.CONFIRMATIONS_PER_HOUR - 1):
        alerts.validated_subscribe(f"v{k}@example.org", "GC_*", Subscription.HISTOGRAM, False,
                                   mallory)
    with pytest.raises(alerts.UserError, match="at most 10 confirmation emails an hour") as got:
        alerts.validated_subscribe("one-more@example.org", "GC_*", Subscription.HISTOGRAM,
                                   False, mallory)
    assert got.value.status == 429
    assert len(mail.outbox) == alerts.CONFIRMATIONS_PER_HOUR


def test_password_resets_are_throttled(client: Any) -> None:
    """Issue 23: password reset emails were unthrottled."""
    get_user_model().objects.create_user("v", VICTIM, "pw")
    from django.core.cache import cache

    cache.clear()
    for _ in range(3):
        assert client.post("/accounts/password_reset/", {"email": VICTIM}).status_code == 302
    assert len(mail.outbox) == 1  # one email an address per window
    for k in range(12):
        client.post("/accounts/password_reset/", {"email": f"n{k}@example.org"})
    blocked = client.post("/accounts/password_reset/", {"email": "last@example.org"})
    assert blocked.status_code == 429
    cache.clear()
