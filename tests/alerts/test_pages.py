"""Alert pages: the home page's groups on the demo, /alerts/ (filters, exports), a group's
bulk triage (also in Chromium), explanations and the ignore button on the function page,
the API, and the migration that moves the histogram triage onto alerts."""

from __future__ import annotations

import csv
import io
import re
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from deviations.alerts.models import Alert, AlertGroup, Ignore
from deviations.alerts.recording import record
from deviations.core import versions
from deviations.core.models import ApiToken
from deviations.management.commands.demo import SERIES
from deviations.traces import demo
from deviations.traces.models import Function, Release, Series
from tests.alerts.test_groups import trace
from tests.conftest import ARTIFACTS

EVIL = '<img src=x onerror="alert(1)">'


@pytest.fixture
def alice() -> Any:
    return get_user_model().objects.create_user("alice", "alice@example.org", "correct horse")


@pytest.fixture
def demo_alerts(db: Any, committed: Any) -> None:
    """The demo, its histogram detection included (it runs on commit)."""
    committed(call_command, "demo", "--runs", "5", stdout=io.StringIO())


def paint_group() -> AlertGroup:
    return Alert.objects.filter(subject="Paint", to_label=demo.RELEASES[8]).first().group


@pytest.mark.django_db
def test_home_page_shows_the_planted_changes_as_groups_first(client, demo_alerts) -> None:
    page = client.get("/").content.decode()
    assert page.index("Untriaged alerts") < page.index("Release series")
    paint, layout = paint_group(), Alert.objects.get(subject="Layout", rule="shifts").group
    assert (paint.from_label, paint.to_label) == (demo.RELEASES[7], demo.RELEASES[8])
    assert (layout.from_label, layout.to_label) == (demo.RELEASES[11], demo.RELEASES[12])
    assert f'data-group="{paint.pk}"' in page
    assert f'data-group="{layout.pk}"' in page
    assert page.index(f'data-group="{layout.pk}"') < page.index("Release series")
    # Paint's group: Paint's regression, and V8.ScriptCompiler's return from its digression.
    subjects = set(paint.alerts.values_list("subject", flat=True))
    assert subjects == {"Paint", "V8.ScriptCompiler"}
    # Layout's group: Layout, and the task that runs it (its total time, 7% faster).
    assert set(layout.alerts.values_list("subject", flat=True)) == {
        "Layout", "ThreadControllerImpl::RunTask"}
    # With the demo metric series' two planted changes (higher is better for the second).
    assert set(Alert.objects.values_list("subject", flat=True)) == {
        "Paint", "Layout", "V8.ScriptCompiler", "ThreadControllerImpl::RunTask", "GC_MS",
        "TAB_SWITCH_MS", "BM_ParseJSON/64k", "BM_Tokenize items_per_second"}
    assert set(Alert.objects.filter(unit="items/s").values_list("direction", flat=True)) == {
        Alert.REGRESSION}
    assert not Alert.objects.filter(subject="GetRenderStyleForStrike").exists()
    # Triaged groups leave the home page.
    paint.alerts.update(status=Alert.ACKNOWLEDGED)
    assert f'data-group="{paint.pk}"' not in client.get("/").content.decode()


@pytest.mark.django_db
def test_alerts_page_filters_and_exports(client, demo_alerts) -> None:
    page = client.get("/alerts/").content.decode()
    assert page.count("data-group=") == AlertGroup.objects.count() == 7
    only = client.get("/alerts/?detector=histogram").content.decode()
    assert only.count("data-group=") == 2
    improvements = client.get(f"/alerts/?direction=improvement&family={SERIES}").content
    assert improvements.decode().count("data-group=") == 2  # Layout; V8's return
    rows = client.get("/alerts/?format=json&direction=regression&family=" + SERIES).json()
    assert {r["subject"] for r in rows} == {"Paint", "V8.ScriptCompiler"}
    paint = next(r for r in rows if r["subject"] == "Paint")
    assert (paint["metric"], paint["rule"]) == ("self and total", "shifts")
    assert paint["explanation"].startswith(
        f"Paint: self and total time rose {paint['effect_pct']:.0f}% (+")
    assert f"between {demo.RELEASES[7]} and {demo.RELEASES[8]}. level-shift rule: " \
        in paint["explanation"]
    assert paint["effect_lo"] < paint["effect"] < paint["effect_hi"]
    text = client.get("/alerts/?format=csv&status=untriaged").content.decode()
    table = list(csv.DictReader(io.StringIO(text)))
    assert len(table) == Alert.objects.count()
    assert client.get("/alerts/?status=fixed").content.decode().count("data-group=") == 0
    assert client.get("/alerts/?assignee=nobody").status_code == 200
    assert client.get("/alerts/?since=2000-01-01&until=bad").status_code == 200


@pytest.mark.django_db
def test_group_page_bulk_triage(client, demo_alerts, alice) -> None:
    group = paint_group()
    page = client.get(group.get_absolute_url()).content.decode()
    assert f"/series/{SERIES}/compare/?base={demo.RELEASES[7]}&amp;new={demo.RELEASES[8]}" \
        in page
    assert f"/series/{SERIES}/" in page
    assert "function page" in page
    sizes = [a.size for a in Alert.objects.filter(group=group)]
    order = [int(x) for x in re.findall(r'<tr data-alert="(\d+)"', page)]
    assert [Alert.objects.get(pk=pk).size for pk in order] == sorted(sizes, reverse=True)
    url = f"/alerts/groups/{group.pk}/triage/"
    ids = list(group.alerts.values_list("pk", flat=True))
    assert client.post(url, {"alert": ids, "status": "fixed"}).status_code == 302  # login
    assert set(group.alerts.values_list("status", flat=True)) == {"new"}
    client.force_login(alice)
    response = client.post(url, {"alert": ids[:2], "status": "acknowledged",
                                 "bug_url": "https://bugs.example.org/7", "note": "bisected"})
    assert response.status_code == 302
    chosen = Alert.objects.filter(pk__in=ids[:2])
    assert set(chosen.values_list("status", "bug_url")) == {
        ("acknowledged", "https://bugs.example.org/7")}
    assert Alert.objects.filter(pk__in=ids[2:], status="new").count() == len(ids) - 2
    assert chosen[0].notes.get().author == alice
    # An alert of another group is not triaged through this one.
    other = Alert.objects.exclude(group=group).first()
    client.post(url, {"alert": [other.pk], "status": "invalid"})
    assert Alert.objects.get(pk=other.pk).status == "new"
    alert_page = client.get(chosen[0].get_absolute_url()).content.decode()
    assert "bisected" in alert_page
    assert "https://bugs.example.org/7" in alert_page


@pytest.mark.django_db
def test_function_page_explains_and_ignores(client, demo_alerts, alice) -> None:
    paint = Function.objects.get(series__name=SERIES, name="Paint")
    url = f"/series/{SERIES}/functions/{paint.pk}/"
    page = client.get(url).content.decode()
    assert "Verdicts explained" in page
    assert "Paint: self and total time rose" in page
    assert "level-shift rule: the level changes at this release" in page  # the series' rule
    assert 'id="ignore"' not in page  # logged out
    client.force_login(alice)
    assert 'id="ignore"' in client.get(url).content.decode()
    response = client.post("/alerts/ignore/", {"kind": "function", "function": paint.pk,
                                               "next": url})
    assert response["Location"] == url
    assert set(Alert.objects.filter(subject="Paint").values_list("status", flat=True)) == {
        "ignored"}
    page = client.get(url).content.decode()
    assert "are <strong>ignored</strong>" in page
    listing = client.get("/alerts/ignored/").content.decode()
    assert "Paint" in listing
    ignored = Ignore.objects.get()
    client.post(f"/alerts/ignored/{ignored.pk}/undo/", {"next": url})
    assert not Ignore.objects.exists()
    assert 'id="ignore"' in client.get(url).content.decode()


@pytest.mark.django_db
def test_probe_page_ignore_button(client, demo_alerts, alice) -> None:
    client.force_login(alice)
    alert = Alert.objects.get(subject="GC_MS")
    url = f"/histograms/probes/{alert.probe_id}/"
    assert 'id="ignore"' in client.get(url).content.decode()
    client.post("/alerts/ignore/", {"kind": "probe", "probe": alert.probe_id})
    assert Alert.objects.get(pk=alert.pk).status == "ignored"
    assert "are <strong>ignored</strong>" in client.get(url).content.decode()


@pytest.mark.django_db
def test_names_are_escaped_on_alert_pages(client, alice) -> None:
    series = Series.objects.create(name="x")
    for v in ("1", "2"):
        Release.objects.create(series=series, version=v)
    record([trace(series, EVIL, "1", "2")])
    alert = Alert.objects.get()
    for url in ("/", "/alerts/", alert.group.get_absolute_url(), alert.get_absolute_url()):
        page = client.get(url).content.decode()
        assert EVIL not in page, url
        assert "&lt;img src=x" in page, url


@pytest.mark.django_db
def test_api_lists_and_triages(client, demo_alerts, alice) -> None:
    rows = client.get(f"/api/alerts/?family={SERIES}&direction=regression").json()
    assert {r["subject"] for r in rows} == {"Paint", "V8.ScriptCompiler"}
    # series= and probe= name a family of one detector; nothing is silently ignored.
    assert client.get(f"/api/alerts/?series={SERIES}&direction=regression").json() == rows
    assert {r["detector"] for r in client.get("/api/alerts/?probe=GC_MS").json()} == {
        "histogram"}
    assert client.get("/api/alerts/?probe=" + SERIES).json() == []
    for query, reason in (("serie=x", "unknown parameter: serie"),
                          ("status=bogus", "status must be one of"),
                          ("since=yesterday", "since must be a date"),
                          ("series=x&detector=histogram", "series alerts are trace alerts"),
                          ("series=x&family=y", "family and series name different things")):
        response = client.get("/api/alerts/?" + query)
        assert response.status_code == 400, query
        assert reason in response.json()["detail"], (query, response.json())
    group = client.get(f"/api/alerts/groups/{rows[0]['group']}").json()
    assert group["family"] == SERIES
    assert group["alerts"]
    token = ApiToken.issue(alice, "t")[1]
    ids = [a["id"] for a in group["alerts"]]
    response = client.post("/api/alerts/triage", {"alerts": ids, "status": "invalid"},
                           content_type="application/json",
                           headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 200, response.content
    assert response.json() == {"changed": len(ids)}
    assert set(Alert.objects.filter(pk__in=ids).values_list("status", flat=True)) == {"invalid"}
    bad = client.post("/api/alerts/triage", {"alerts": ids, "status": "nope"},
                      content_type="application/json",
                      headers={"Authorization": f"Bearer {token}"})
    assert bad.status_code == 400
    assert client.post("/api/alerts/triage", {"alerts": ids},
                       content_type="application/json").status_code == 401


@pytest.mark.django_db(transaction=True)
def test_migration_keeps_the_histogram_triage() -> None:
    """0009 → 0010: a triaged change keeps its state, who and when, on its alert."""
    executor = MigrationExecutor(connection)
    executor.migrate([("deviations", "0009_annotations")])
    old = executor.loader.project_state([("deviations", "0009_annotations")]).apps
    user = old.get_model("auth", "User").objects.create(username="tri")
    probe = old.get_model("deviations", "Probe").objects.create(name="GC_MS", name_sha1="g")
    change_model = old.get_model("deviations", "HistogramChange")
    for build, state in (("20260102", "fixed"), ("20260104", "new")):
        change_model.objects.create(
            probe=probe, build_id=build, sort_key=versions.sort_key(build),
            previous_build_id=str(int(build) - 1),
            distance=0.3, cutoff=0.1, kind="shift", shift_buckets=1.5, rule="adaptive",
            edges=b"", before=b"", after=b"", state=state, state_by=user if state != "new"
            else None,
        )
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())
    fixed, new = Alert.objects.order_by("to_label")
    assert (fixed.status, fixed.status_by.username, fixed.to_label, new.status) == (
        "fixed", "tri", "20260102", "new")
    assert fixed.group != new.group  # builds that do not overlap
    assert fixed.group.notified_at is not None  # the old notifier told people already
    assert "shifted by +1.50 buckets between builds 20260101 and 20260102" in fixed.explanation


# --- In Chromium ----------------------------------------------------------------------------


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_triaging_a_group_in_the_browser_changes_every_alert(page: Any) -> None:
    call_command("demo", "--runs", "5", stdout=io.StringIO())
    get_user_model().objects.create_user("alice", password="correct horse")
    group = paint_group()
    page.goto("/")
    page.screenshot(path=str(ARTIFACTS / "alerts-home.png"), full_page=True)
    page.locator(f"#home-groups tr[data-group='{group.pk}'] a").first.click()
    page.wait_for_url(f"**/alerts/groups/{group.pk}/")
    page.click("text=Log in")
    page.fill("#id_username", "alice")
    page.fill("#id_password", "correct horse")
    page.click("main form button[type=submit]")
    page.wait_for_url(f"**/alerts/groups/{group.pk}/")
    page.check("#select-all")
    assert page.locator("input[name=alert]:checked").count() == group.alerts.count()
    page.select_option("#triage-controls select[name=status]", "acknowledged")
    page.fill("#triage-controls input[name=bug_url]", "https://bugs.example.org/42")
    page.click("#triage-controls button[type=submit]")
    page.wait_for_url(f"**/alerts/groups/{group.pk}/")
    states = page.locator("#group-alerts td.status").evaluate_all(
        "cells => cells.map(c => c.dataset.status)")
    assert len(states) == group.alerts.count()
    assert set(states) == {"acknowledged"}
    page.screenshot(path=str(ARTIFACTS / "alerts-group.png"), full_page=True)
    assert set(group.alerts.values_list("status", "bug_url")) == {
        ("acknowledged", "https://bugs.example.org/42")}
    page.goto("/")
    assert page.locator(f"#home-groups tr[data-group='{group.pk}']").count() == 0


@pytest.mark.django_db
def test_a_refused_triage_keeps_the_form_and_names_the_reason(client, demo_alerts, alice) -> None:
    """Issue 23: triage errors were bare text 400 pages and the form was lost; the
    assignee field offers the users."""
    group = paint_group()
    ids = list(group.alerts.values_list("pk", flat=True))
    client.force_login(alice)
    url = f"/alerts/groups/{group.pk}/triage/"
    response = client.post(url, {"alert": ids[:1], "status": "acknowledged",
                                 "assignee": "nobody", "note": "kept <b>text</b>"})
    assert response.status_code == 400
    page = response.content.decode()
    assert '<p class="error" id="triage-error">Not applied: no user named' in page
    assert f'value="{ids[0]}" aria-label="select alert {ids[0]}" checked' in page
    assert '<option value="acknowledged" selected>' in page
    assert 'value="kept &lt;b&gt;text&lt;/b&gt;"' in page
    assert '<datalist id="assignees"><option value="alice">' in page
    nothing = client.post(url, {"status": "fixed"})
    assert nothing.status_code == 400
    assert "select at least one alert" in nothing.content.decode()
    assert set(group.alerts.values_list("status", flat=True)) == {"new"}


def test_alert_page_levels_have_no_sign_and_a_tag_revision_is_not_repeated(
    client, demo_alerts, alice
) -> None:
    """Before → after are levels, not changes ("+2.52 ms → +5.11 ms" read as changes); the
    demo's revisions are its version tags: "56.0.2905.0 at 56.0.2905.0" said nothing."""
    client.force_login(alice)
    paint = Alert.objects.get(subject="Paint", to_label=demo.RELEASES[8])
    html = client.get(f"/alerts/{paint.pk}/").content.decode()
    levels = re.search(r"<th>Before → after</th><td>(.*?)</td>", html).group(1)
    assert "+" not in levels
    assert re.fullmatch(r"\d+\.\d\d ms → \d+\.\d\d ms", levels)
    assert f"last good {demo.RELEASES[7]}, first bad {demo.RELEASES[8]})" in html
    assert f"{demo.RELEASES[7]} at {demo.RELEASES[7]}" not in html
    assert (f'href="https://chromium.googlesource.com/chromium/src/+log/'
            f'{demo.RELEASES[7]}..{demo.RELEASES[8]}"') in html
