"""Histogram pages: list, probe chart and overlay data, changes feed with triage; escaping of
probe names; the triage flow in Debian's Chromium (Playwright)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.contrib.auth import get_user_model

from deviations.alerts.models import Alert
from deviations.histograms import charts as histogram_charts
from deviations.histograms import demo as histogram_demo
from deviations.histograms.models import HistogramChange, Probe
from deviations.histograms.store import store_histogram_file
from tests.conftest import ARTIFACTS, plain_histogram

pytestmark = pytest.mark.django_db
EVIL = '<img src=x onerror="alert(1)">GC'


@pytest.fixture
def demo(committed) -> None:
    committed(histogram_demo.ingest_demo_histograms)


@pytest.fixture
def alice() -> Any:
    return get_user_model().objects.create_user("alice", "alice@example.org", "correct horse")


def test_list_shows_probes_with_changes_first(client, demo) -> None:
    page = client.get("/histograms/").content.decode()
    order = [page.index(n) for n in ["GC_MS", "TAB_SWITCH_MS", "PAGE_LOAD_MS", "STARTUP_MS"]]
    assert max(order[:2]) < order[2] < order[3]  # probes with changes first, then by name
    assert "Changes feed" in page
    assert "GC_MS" in client.get("/histograms/?q=gc").content.decode()
    assert "TAB_SWITCH_MS" not in client.get("/histograms/?q=gc").content.decode()


def test_probe_page_has_chart_and_histograms(client, demo) -> None:
    probe = Probe.objects.get(name="GC_MS")
    change = probe.changes.get()
    response = client.get(f"/histograms/probes/{probe.pk}/")
    assert response.status_code == 200
    page = response.content.decode()
    assert "plotly/plotly-basic.min.js" in page
    figure = json.loads(page.split('id="distance-figure" type="application/json">')[1]
                        .split("</script>")[0])
    names = [t["name"] for t in figure["data"]]
    assert names == ["distance", "cutoff", "detected change"]
    assert figure["data"][2]["x"] == [change.build_id]
    data = json.loads(page.split('id="probe-histograms" type="application/json">')[1]
                      .split("</script>")[0])
    assert data["builds"] == histogram_demo.build_ids()
    assert len(data["labels"]) == histogram_demo.BUCKETS
    assert data["labels"][-1] == "≥10000"
    assert sum(data["shares"][0]) == pytest.approx(1, abs=1e-4)
    assert f'data-chosen="{change.build_id}"' in page


def test_probe_names_are_escaped(client) -> None:
    records = [plain_histogram(EVIL, str(b), [10, 20, 30]) for b in range(1, 4)]
    store_histogram_file(json.dumps(records).encode(), display_name="x.json")
    probe = Probe.objects.get()
    page = client.get(f"/histograms/probes/{probe.pk}/").content.decode()
    assert EVIL not in page
    assert "&lt;img src=x" in page
    figure = histogram_charts.distance_figure(EVIL, {"builds": ["1"]}, [])
    assert "<img" not in figure["layout"]["title"]["text"]
    assert EVIL not in client.get("/histograms/").content.decode()


def test_triage_needs_login_and_records_who_and_when(client, demo, alice) -> None:
    change = HistogramChange.objects.get(probe__name="GC_MS")
    url = f"/histograms/changes/{change.pk}/state/"
    assert client.post(url, {"state": "fixed"}).status_code == 302  # to the login page
    assert HistogramChange.objects.get(pk=change.pk).alert.status == "new"  # triage: its alert
    client.force_login(alice)
    assert client.post(url, {"state": "bogus"}).status_code == 400
    response = client.post(url, {"state": "acknowledged", "next": "/histograms/changes/"})
    assert response.status_code == 302
    assert response["Location"] == "/histograms/changes/"
    alert = Alert.objects.get(change=change)
    assert (alert.status, alert.status_by, alert.status_at is not None) == (
        "acknowledged", alice, True
    )
    assert client.post(url, {"state": "fixed", "next": "//evil.example"})["Location"] == (
        "/histograms/changes/"
    )
    feed = client.get("/histograms/changes/?state=fixed").content.decode()
    assert "GC_MS" in feed
    assert "by alice" in feed
    assert "GC_MS" not in client.get("/histograms/changes/?state=new").content.decode()


def test_api_changes_and_triage(client, demo, alice) -> None:
    from deviations.core.models import ApiToken

    rows = client.get("/api/histograms/changes?probe=GC_MS").json()
    assert [(r["probe"], r["kind"], r["state"]) for r in rows] == [("GC_MS", "shift", "new")]
    token = ApiToken.issue(alice, "t")[1]
    response = client.post(
        f"/api/histograms/changes/{rows[0]['id']}/state", {"state": "invalid"},
        content_type="application/json", headers={"Authorization": f"Bearer {token}"},
    )
    assert response.status_code == 200
    assert response.json()["state_by"] == "alice"
    response = client.post(
        "/api/histograms/subscriptions", {"email": "alice@example.org", "pattern": "GC_*"},
        content_type="application/json", headers={"Authorization": f"Bearer {token}"},
    )
    assert response.status_code == 201
    assert response.json()["active"] is True
    # Someone else's address waits for its confirmation (tests/alerts/test_access.py).
    other = client.post(
        "/api/histograms/subscriptions", {"email": "a@example.org", "pattern": "GC_*"},
        content_type="application/json", headers={"Authorization": f"Bearer {token}"},
    )
    assert other.status_code == 201
    assert (other.json()["active"], other.json()["pending"]) == (False, True)


# --- The triage flow in the browser (the `page` fixture of conftest) ----------------------


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_triage_flow_in_the_browser(page: Any) -> None:
    histogram_demo.ingest_demo_histograms()  # committed: tasks run on commit
    get_user_model().objects.create_user("alice", password="correct horse")
    change = HistogramChange.objects.get(probe__name="TAB_SWITCH_MS")
    page.goto("/histograms/")
    page.click("text=TAB_SWITCH_MS")
    page.wait_for_selector("#distance-chart .main-svg")
    overlay = page.locator("#overlay-chart")
    page.wait_for_selector("#overlay-chart .main-svg")
    assert overlay.get_attribute("data-pair") == f"{change.previous_build_id}..{change.build_id}"
    # Clicking a build of the distance chart compares it with the one before it.
    # (Plotly's drag layer sits over the points: click where the point is drawn.)
    # Build 0 has no distance, so the 10th point drawn is build 10.
    box = page.locator("#distance-chart .scatterlayer .trace").first.locator(".point").nth(9)
    box = box.bounding_box()
    page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    builds = histogram_demo.build_ids()
    page.wait_for_function(
        "pair => document.getElementById('overlay-chart').dataset.pair === pair",
        arg=f"{builds[9]}..{builds[10]}",
    )
    page.screenshot(path=str(ARTIFACTS / "histogram-probe.png"), full_page=True)
    page.goto("/histograms/changes/")
    assert page.locator(".triage").count() == 0  # not logged in
    page.click("text=Log in")
    page.fill("#id_username", "alice")
    page.fill("#id_password", "correct horse")
    page.click("main form button[type=submit]")
    page.wait_for_url("**/histograms/changes/")
    row = page.locator(f"tr[data-change='{change.pk}']")
    row.locator("select[name=state]").select_option("acknowledged")
    row.locator("button[type=submit]").click()
    page.wait_for_url("**/histograms/changes/")
    row = page.locator(f"tr[data-change='{change.pk}']")
    assert row.locator("[data-state]").get_attribute("data-state") == "acknowledged"
    assert "by alice" in row.inner_text()
    page.screenshot(path=str(ARTIFACTS / "histogram-triage.png"), full_page=True)
    alert = Alert.objects.get(change=change)
    assert alert.status == "acknowledged"
    assert alert.status_by.username == "alice"


def test_rule_parameters_are_editable_in_the_admin(client, demo) -> None:
    admin = get_user_model().objects.create_superuser("root", "root@example.org", "pw")
    client.force_login(admin)
    probe = Probe.objects.get(name="GC_MS")
    page = client.get(f"/admin/deviations/probe/{probe.pk}/change/")
    assert page.status_code == 200
    assert b"Change rule" in page.content
    assert client.get("/admin/deviations/histogramruledefaults/add/").status_code == 200
    response = client.post("/admin/deviations/histogramruledefaults/add/", {
        "rule": "mozilla", "cutoff": "0.2",
    })
    assert response.status_code == 302, response.content
    assert client.get("/admin/deviations/histogramruledefaults/add/").status_code == 403
    assert client.get("/admin/deviations/histogramchange/").status_code == 200
    assert client.get("/admin/deviations/sentalert/").status_code == 200


def test_admin_refuses_parameters_the_rule_refuses(client) -> None:
    admin = get_user_model().objects.create_superuser("root", "root@example.org", "pw")
    client.force_login(admin)
    response = client.post("/admin/deviations/histogramruledefaults/add/", {
        "past_builds": "3", "min_past": "5",
    })
    assert response.status_code == 200
    assert b"rule parameters: min_past must be between 1 and past_builds" in response.content
