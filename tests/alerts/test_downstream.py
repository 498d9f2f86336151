""""Downstream of" links between alert groups (``alerts.downstream``): not untriaged, not
emailed, no cycles, removable; merged groups keep their links; pages, API and checks."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core import mail
from django.test import Client

from deviations.alerts import notify, selectors, services
from deviations.alerts.downstream import link, unlink
from deviations.alerts.models import Alert, AlertGroup, SentAlert
from deviations.alerts.recording import record
from deviations.core.access import ForbiddenError
from deviations.core.errors import UserError
from deviations.core.models import ApiToken, Ownership
from deviations.core.packing import name_digest
from deviations.traces.models import Series
from tests.alerts.test_groups import series as series  # noqa: F401 (the fixture)
from tests.alerts.test_groups import subscribe, trace

pytestmark = pytest.mark.django_db


def user(name: str, **extra: Any) -> Any:
    return get_user_model().objects.create_user(name, f"{name}@example.org", "pw", **extra)


def groups(series: Series, *ranges: tuple[str, str]) -> list[AlertGroup]:
    record([trace(series, f"F{a}{b}", a, b) for a, b in ranges])
    return [Alert.objects.get(subject=f"F{a}{b}").group for a, b in ranges]


def test_a_downstream_group_is_not_untriaged_and_not_emailed_until_unlinked(series) -> None:
    subscribe()
    alice = user("alice")
    up, down = groups(series, ("2", "3"), ("4", "5"))
    link(down, up.pk, alice)
    assert [r.group.pk for r in selectors.untriaged_groups()] == [up.pk]
    untriaged = selectors.filtered_alerts(selectors.Filters(status="untriaged"))
    assert [a.group_id for a in untriaged] == [up.pk]
    rows = {r.group.pk: r for r in selectors.group_rows(Alert.objects.all())}
    assert (rows[up.pk].untriaged, rows[down.pk].untriaged) == (1, 0)
    assert notify.notify_due_groups() == 1
    (email,) = mail.outbox
    assert "F23" in email.subject
    assert AlertGroup.objects.get(pk=down.pk).notified_at is None
    api = Client().get("/api/alerts/?status=untriaged").json()
    assert [a["group"] for a in api] == [up.pk]
    unlink(AlertGroup.objects.get(pk=down.pk), alice)
    assert notify.notify_due_groups() == 1  # an ordinary group again, never emailed
    assert "F45" in mail.outbox[1].subject


def test_cycles_and_self_links_are_refused(series) -> None:
    alice = user("alice")
    a, b, c = groups(series, ("1", "2"), ("3", "4"), ("5", "6"))
    with pytest.raises(UserError, match="a group cannot be downstream of itself"):
        link(a, a.pk, alice)
    link(a, b.pk, alice)
    link(b, c.pk, alice)
    with pytest.raises(UserError, match=(
            rf"group #{a.pk} is already downstream of group #{c.pk} \(#{a.pk} → #{b.pk} → "
            rf"#{c.pk}\): the link would make a cycle")):
        link(AlertGroup.objects.get(pk=c.pk), a.pk, alice)
    assert AlertGroup.objects.get(pk=c.pk).upstream_id is None
    # Re-linking replaces: a downstream of c directly, then c downstream of b is still fine.
    link(AlertGroup.objects.get(pk=a.pk), c.pk, alice)
    assert AlertGroup.objects.get(pk=a.pk).upstream_id == c.pk


def test_a_digest_not_sent_yet_drops_a_group_linked_since(series) -> None:
    subscribe(digest=True)
    up, down = groups(series, ("2", "3"), ("4", "5"))
    notify.notify_due_groups()
    assert SentAlert.objects.filter(status=SentAlert.QUEUED).count() == 2
    link(down, up.pk, user("alice"))
    assert services.send_digests() == 1
    (digest,) = mail.outbox
    assert "F23" in digest.body
    assert "F45" not in digest.body
    assert not SentAlert.objects.filter(subject=f"group:{down.pk}").exists()


def test_merged_groups_keep_their_links_and_drop_the_one_between_them(series) -> None:
    alice = user("alice")
    up, left, right = groups(series, ("5", "6"), ("1", "2"), ("2", "3"))
    link(right, up.pk, alice)
    link(left, right.pk, alice)
    # A verdict over (1, 3] bridges left and right: one group, the older (left) one.
    record([dataclasses.replace(trace(series, "Bridge", "1", "3"), key="bridge")])
    merged = AlertGroup.objects.get(pk=left.pk)
    assert not AlertGroup.objects.filter(pk=right.pk).exists()
    # left's link pointed into the merged group (dropped); right's upstream is kept.
    assert merged.upstream_id == up.pk
    assert selectors.downstream_groups(AlertGroup.objects.get(pk=up.pk)) == [merged]


def test_the_group_pages_link_list_and_refuse(series) -> None:
    alice = user("alice")
    up, down = groups(series, ("2", "3"), ("4", "5"))
    page = Client()
    page.force_login(alice)
    assert page.post(f"/alerts/groups/{down.pk}/upstream/",
                     {"upstream": f"#{up.pk}"}).status_code == 302
    html = page.get(down.get_absolute_url()).content.decode()
    assert f"Downstream of <a href=\"/alerts/groups/{up.pk}/\">#{up.pk}" in html
    assert "linked by alice" in html
    html = page.get(up.get_absolute_url()).content.decode()
    assert f"Its downstream groups: <a href=\"/alerts/groups/{down.pk}/\">#{down.pk}" in html
    listing = page.get("/alerts/").content.decode()
    assert f"downstream of <a href=\"/alerts/groups/{up.pk}/\">#{up.pk}</a>" in listing
    refused = page.post(f"/alerts/groups/{up.pk}/upstream/", {"upstream": str(down.pk)})
    assert refused.status_code == 400
    assert "Not linked: group #" in refused.content.decode()
    assert "the link would make a cycle" in refused.content.decode()
    for bad, message in (("twelve", "upstream group: give its number"),
                         ("²", "upstream group: give its number"),
                         ("9" * 40, "upstream group: give its number"),
                         ("999999", "upstream group: there is no group #999999")):
        response = page.post(f"/alerts/groups/{up.pk}/upstream/", {"upstream": bad})
        assert response.status_code == 400
        assert message in response.content.decode()
    assert page.post(f"/alerts/groups/{up.pk}/upstream/",
                     {"upstream": "1\x00"}).status_code == 400
    # An id that str.isdigit() takes and int() does not: the triage form's message, no 500.
    odd = page.post(f"/alerts/groups/{up.pk}/triage/", {"alert": "²", "status": "invalid"})
    assert odd.status_code == 400
    assert "Not applied: select at least one alert" in odd.content.decode()
    assert page.post(f"/alerts/groups/{down.pk}/upstream/remove/").status_code == 302
    assert AlertGroup.objects.get(pk=down.pk).upstream_id is None


def test_api_and_who_may_link(series) -> None:
    alice, bob = user("alice"), user("bob")
    Ownership.objects.create(kind=Ownership.SERIES, name="s", name_sha1=name_digest("s"),
                             user=alice)
    up, down = groups(series, ("2", "3"), ("4", "5"))
    with pytest.raises(ForbiddenError, match="series 's' belongs to other users"):
        link(down, up.pk, bob)

    def api(u: Any, scope: str = "") -> Client:
        token = ApiToken.issue(u, "t", scope=scope)[1]
        return Client(headers={"Authorization": f"Bearer {token}"})

    url = f"/api/alerts/groups/{down.pk}/upstream"
    assert api(bob).post(url, {"upstream": up.pk},
                         content_type="application/json").status_code == 403
    scoped = api(alice, scope="team-*").post(url, {"upstream": up.pk},
                                             content_type="application/json")
    assert scoped.status_code == 403
    assert "matching 'team-*'" in scoped.json()["detail"]
    # Assigned all of the group's alerts, bob may link it (his token's scope still holds).
    Alert.objects.filter(group=down).update(assignee=bob)
    made = api(bob).post(url, {"upstream": up.pk}, content_type="application/json")
    assert made.status_code == 200, made.content
    assert made.json()["upstream"] == up.pk
    assert api(alice).get(f"/api/alerts/groups/{up.pk}").json()["downstream"] == [down.pk]
    cycle = api(alice).post(f"/api/alerts/groups/{up.pk}/upstream", {"upstream": down.pk},
                            content_type="application/json")
    assert cycle.status_code == 400
    assert "would make a cycle" in cycle.json()["detail"]
    missing = api(alice).post(url, {"upstream": 999999}, content_type="application/json")
    assert (missing.status_code, missing.json()["detail"]) == (
        400, "upstream group: there is no group #999999")
    assert api(bob).delete(url).json()["upstream"] is None
    assert Client().delete(url).status_code == 401


def test_a_huge_group_number_is_no_group(series) -> None:
    alice = user("alice")
    (down,) = groups(series, ("2", "3"))
    token = ApiToken.issue(alice, "t")[1]
    api = Client(headers={"Authorization": f"Bearer {token}"})
    response = api.post(f"/api/alerts/groups/{down.pk}/upstream", {"upstream": 10**30},
                        content_type="application/json")
    assert (response.status_code, response.json()["detail"]) == (
        400, f"upstream group: there is no group #{10**30}")
    assert api.get("/api/alerts/groups/99999999999999999999").status_code == 404
    page = Client()
    page.force_login(alice)
    assert page.post("/alerts/99999999999999999999/nudge/", {"side": "later"}).status_code == 404
