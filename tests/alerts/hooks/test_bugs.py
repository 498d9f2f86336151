""""File a bug" links: Bugzilla, Jira and GitHub forms prefilled with the alert's words,
interval and range, under 8 kB; set by the family's owners (page and API)."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import pytest
from django.test import Client

from deviations.alerts.hooks import bugs, services
from deviations.alerts.hooks.models import BugTemplate
from deviations.alerts.models import Alert
from deviations.alerts.recording import record
from deviations.core.models import Ownership
from deviations.core.packing import name_digest
from tests.alerts.hooks.test_webhooks import api, series, user
from tests.alerts.test_groups import trace

pytestmark = pytest.mark.django_db


def _alert(explanation: str = "") -> Alert:
    s = series()
    (pk,) = record([trace(s, "Paint", "2", "3")])
    if explanation:
        Alert.objects.filter(pk=pk).update(explanation=explanation)
    Alert.objects.filter(pk=pk).update(effect_pct_lo=40.0, effect_pct_hi=60.0)
    return Alert.objects.select_related("group").get(pk=pk)


def _query(url: str) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(urlsplit(url).query).items()}


@pytest.mark.parametrize(("kind", "extra", "path", "title", "body"), [
    ("bugzilla", {"product": "Core", "component": "Performance"}, "/enter_bug.cgi",
     "short_desc", "comment"),
    ("jira", {"product": "10001", "component": "10004"},
     "/secure/CreateIssueDetails!init.jspa", "summary", "description"),
    ("github", {"labels": "perf,regression"}, "/acme/app/issues/new", "title", "body"),
])
def test_each_tracker_gets_a_prefilled_form(kind: str, extra: dict[str, str], path: str,
                                            title: str, body: str) -> None:
    alert = _alert()
    base = "https://github.com/acme/app" if kind == "github" else "https://bugs.example.org"
    services.set_bug_template(user("admin", is_staff=True), target="series", family="s",
                              kind=kind, base_url=base, **extra)
    url = bugs.link_for(alert)
    assert url is not None
    assert urlsplit(url).path == path
    q = _query(url)
    assert q[title] == "s: Paint (self time, paper rule): regression +50% (+500 µs) from 2 to 3"
    assert alert.explanation in q[body]
    assert "Effect: +50.0% (95% interval +40.0% to +60.0%)" in q[body]
    assert "Range: s: between 2 and 3" in q[body]
    assert f"/alerts/{alert.pk}/" in q[body]
    if kind == "bugzilla":
        assert (q["product"], q["component"]) == ("Core", "Performance")
    if kind == "jira":
        assert (q["pid"], q["issuetype"]) == ("10001", "10004")
    if kind == "github":
        assert q["labels"] == "perf,regression"


def test_a_long_description_is_cut_under_8_kb() -> None:
    alert = _alert(explanation="é&? " * 5000)
    services.set_bug_template(user("admin", is_staff=True), target="series", family="s",
                              kind="github", base_url="https://github.com/acme/app")
    url = bugs.link_for(alert)
    assert url is not None
    assert 7000 < len(url) < bugs.MAX_URL
    assert _query(url)["body"].endswith("[…cut: the alert page has the rest]")


def test_no_template_no_link() -> None:
    assert bugs.link_for(_alert()) is None


def test_links_on_alert_and_group_pages_and_owner_checks() -> None:
    alert = _alert()
    alice, bob = user("alice"), user("bob")
    Ownership.objects.create(kind=Ownership.SERIES, name="s", name_sha1=name_digest("s"),
                             user=alice)
    body = {"target": "series", "family": "s", "kind": "bugzilla",
            "base_url": "https://bugs.example.org", "product": "Core"}
    assert api(bob).put("/api/bug-templates", body,
                        content_type="application/json").status_code == 403
    assert api(alice, scope="other-*").put("/api/bug-templates", body,
                                           content_type="application/json").status_code == 403
    page = Client()
    page.force_login(bob)
    assert page.post("/hooks/bugs/", body).status_code == 403  # refused, form shown again
    assert not BugTemplate.objects.exists()
    made = api(alice).put("/api/bug-templates", body, content_type="application/json")
    assert made.status_code == 200, made.content
    for path in (f"/alerts/{alert.pk}/", f"/alerts/groups/{alert.group_id}/"):
        html = Client().get(path).content.decode()
        assert "https://bugs.example.org/enter_bug.cgi?product=Core" in html, path
    link = Client().get(f"/api/alerts/{alert.pk}/bug-link").json()["url"]
    assert link.startswith("https://bugs.example.org/enter_bug.cgi?")
    tid = made.json()["id"]
    assert page.post(f"/hooks/bugs/{tid}/delete/").status_code == 403
    assert api(alice).delete(f"/api/bug-templates/{tid}").status_code == 204
    assert Client().get(f"/api/alerts/{alert.pk}/bug-link").json()["url"] is None


@pytest.mark.parametrize(("field", "value", "message"), [
    ("base_url", "ftp://x", "http(s) URL"),
    ("product", "C\x00re", "product holds a control character"),
    ("component", "c" * 201, "component is longer than 200"),
    ("family", "nope", "no series named 'nope'"),
    ("kind", "trac", "kind must be one of"),
])
def test_bad_templates_are_refused(field: str, value: str, message: str) -> None:
    series()
    body = {"target": "series", "family": "s", "kind": "bugzilla",
            "base_url": "https://bugs.example.org", "product": "Core", field: value}
    response = api(user("alice")).put("/api/bug-templates", body,
                                      content_type="application/json")
    assert response.status_code == 400, response.content
    assert message in response.json()["detail"]
