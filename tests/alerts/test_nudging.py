"""Moving an alert to a neighbouring boundary (``alerts.nudging``): where it goes, what
re-analysis and sync do to it, its group, pages, email, API and who may move it."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core import mail
from django.template.loader import render_to_string
from django.test import Client
from django.utils import timezone

from deviations.alerts import notify
from deviations.alerts.downstream import link
from deviations.alerts.models import Alert, AlertGroup, AlertNote
from deviations.alerts.nudging import neighbours, nudge
from deviations.alerts.recording import AlertData, record, sync
from deviations.core.access import ForbiddenError
from deviations.core.errors import UserError
from deviations.core.models import ApiToken, Ownership
from deviations.core.packing import name_digest
from deviations.histograms.models import HistogramSnapshot, Probe
from deviations.traces.models import Release, Run, Series
from tests.alerts.test_groups import series as series  # noqa: F401 (the fixture)
from tests.alerts.test_groups import subscribe, trace

pytestmark = pytest.mark.django_db


def user(name: str, **extra: Any) -> Any:
    return get_user_model().objects.create_user(name, f"{name}@example.org", "pw", **extra)


def with_runs(s: Series, versions: str = "123456") -> None:
    """A done run in each of these releases (the columns a boundary lies between)."""
    for v in versions:
        Run.objects.create(series=s, release=Release.objects.get(series=s, version=v),
                           sha256=f"{s.pk}{v}".rjust(64, "0"), file_name=f"{v}.json",
                           size_bytes=1, status=Run.DONE)


def stored(s: Series) -> Any:
    return Alert.objects.filter(detector=Alert.TRACE, series=s)


def test_a_nudged_alert_stays_moved_through_re_analysis_and_sync(series) -> None:
    with_runs(series)
    alice = user("alice")
    data = trace(series, "Paint", "3", "4")
    sync(stored(series), [data])
    alert = Alert.objects.get()
    assert [(b.side, b.from_label, b.to_label) for b in neighbours(alert)] == [
        ("earlier", "2", "3"), ("later", "4", "5")]
    moved = nudge(alert, alice, "later")
    assert (moved.from_label, moved.to_label) == ("4", "5")
    assert (moved.detected_from_label, moved.detected_to_label) == ("3", "4")
    assert moved.nudged_by == alice
    assert moved.key == data.key
    group = AlertGroup.objects.get()
    assert (group.from_label, group.to_label) == ("4", "5")
    assert AlertNote.objects.get().text == "Moved from 3 → 4 to 4 → 5."
    # A re-analysis still reporting the verdict at 3 → 4 updates its numbers, not its place.
    sync(stored(series), [dataclasses.replace(data, effect_pct=61.0)])
    again = Alert.objects.get()
    assert (again.from_label, again.to_label, again.effect_pct) == ("4", "5", 61.0)
    # A verdict that disappeared does not withdraw a moved alert (a sheriff placed it),
    # even without the note the move added.
    AlertNote.objects.all().delete()
    assert sync(stored(series), []) == (0, 0)
    assert Alert.objects.count() == 1
    # The detector now finding the change where the sheriff put it: still one alert.
    assert sync(stored(series), [trace(series, "Paint", "4", "5")]) == (0, 0)
    assert Alert.objects.get().pk == alert.pk
    # Another rule's verdict at that place is another alert.
    assert sync(stored(series), [trace(series, "Paint", "4", "5", rule="shifts")])[0] == 1


def test_moving_back_to_the_detectors_boundary_clears_the_move(series) -> None:
    with_runs(series)
    alice = user("alice")
    (pk,) = record([trace(series, "Paint", "3", "4")])
    nudge(Alert.objects.get(pk=pk), alice, "earlier")
    back = nudge(Alert.objects.get(pk=pk), alice, "later")
    assert (back.from_label, back.to_label, back.nudged, back.detected_from_label) == (
        "3", "4", False, "")
    assert list(AlertNote.objects.values_list("text", flat=True)) == [
        "Moved from 3 → 4 to 2 → 3.", "Moved from 2 → 3 to 3 → 4 (where the detector put it)."]


def test_neighbours_are_releases_with_data_and_the_edges_refuse(series) -> None:
    with_runs(series, "1245")  # 3 and 6 hold no done run
    alice = user("alice")
    (pk,) = record([trace(series, "Paint", "2", "4")])  # the analysis skipped 3
    alert = Alert.objects.get(pk=pk)
    assert [(b.from_label, b.to_label) for b in neighbours(alert)] == [("1", "2"), ("4", "5")]
    nudge(alert, alice, "later")
    with pytest.raises(UserError, match="no later boundary to move to: 5 is the newest "
                                        "release of the series with data"):
        nudge(Alert.objects.get(pk=pk), alice, "later")
    with pytest.raises(UserError, match="side must be one of earlier, later"):
        nudge(Alert.objects.get(pk=pk), alice, "up")
    (first,) = record([trace(series, "Layout", "1", "2")])
    with pytest.raises(UserError, match="no earlier boundary to move to: 1 is the oldest"):
        nudge(Alert.objects.get(pk=first), alice, "earlier")


def test_a_canarys_alert_cannot_be_moved(series) -> None:
    from deviations.experiments.canaries import services as canaries

    alice = user("alice")
    canary = canaries.create_canary("play", bad="higher", user=alice)
    data = dataclasses.replace(
        trace(series, "Paint", "3", "4"), key=f"canary:{canary.pk}", detector=Alert.CANARY,
        family="play", subject="play", canary=str(canary.pk), series_id=None,
        function_id=None)
    (pk,) = record([data])
    with pytest.raises(UserError, match="a canary's alert has no neighbouring boundary"):
        nudge(Alert.objects.get(pk=pk), alice, "later")
    page = Client()
    page.force_login(alice)
    response = page.get(f"/alerts/{pk}/")
    assert "has no neighbouring boundary" in response.content.decode()
    refused = page.post(f"/alerts/{pk}/nudge/", {"side": "later"})
    assert refused.status_code == 400
    assert "Not moved: a canary&#x27;s alert has no neighbouring boundary" in (
        refused.content.decode())


def test_a_moved_alert_changes_group_joins_merges_and_splits(series) -> None:
    with_runs(series)
    alice = user("alice")
    # (1, 3] bridges (1, 2] and (2, 3]: one group of three.
    record([trace(series, "Wide", "1", "3"), trace(series, "A", "1", "2"),
            trace(series, "B", "2", "3"), trace(series, "C", "4", "5")])
    assert AlertGroup.objects.count() == 2
    wide = Alert.objects.get(subject="Wide")
    c_group = Alert.objects.get(subject="C").group
    link(wide.group, c_group.pk, alice)
    nudge(wide, alice, "later")  # to (3, 4]: A and B no longer overlap: the group splits
    ranges = sorted(AlertGroup.objects.values_list("from_label", "to_label"))
    assert ranges == [("1", "2"), ("2", "3"), ("3", "4"), ("4", "5")]
    a_group, b_group = (Alert.objects.get(subject=f).group for f in ("A", "B"))
    assert a_group.pk != b_group.pk
    # Both parts were caused by C's group, the moved alert's new group is not.
    assert (a_group.upstream_id, b_group.upstream_id) == (c_group.pk, c_group.pk)
    assert Alert.objects.get(subject="Wide").group.upstream_id is None
    # Moved next to C: it joins C's group, and its own empty group is gone.
    nudge(Alert.objects.get(subject="Wide"), alice, "later")
    assert Alert.objects.get(subject="Wide").group_id == c_group.pk
    assert AlertGroup.objects.count() == 3
    # B alone in its group moves with it (same group, new range), into A's: one group.
    b = Alert.objects.get(subject="B")
    nudge(b, alice, "earlier")
    assert Alert.objects.get(subject="B").group_id == Alert.objects.get(subject="A").group_id
    assert sorted(AlertGroup.objects.values_list("from_label", "to_label")) == [
        ("1", "2"), ("4", "5")]


def test_a_moved_alert_out_of_an_emailed_group_is_not_emailed_again(series) -> None:
    with_runs(series)
    subscribe()
    record([trace(series, "Paint", "3", "4"), trace(series, "Layout", "3", "4")])
    assert notify.notify_due_groups() == 1
    nudge(Alert.objects.get(subject="Paint"), user("alice"), "later")
    assert AlertGroup.objects.count() == 2
    assert notify.notify_due_groups() == 0


def test_the_email_and_pages_show_the_moved_range(series) -> None:
    with_runs(series)
    subscribe()
    alice = user("alice")
    (pk,) = record([trace(series, "Paint", "3", "4")])
    nudge(Alert.objects.get(pk=pk), alice, "later")
    assert notify.notify_due_groups() == 1
    (email,) = mail.outbox
    assert "Paint (self time, paper rule): regression +50% (+500 µs) from 4 to 5" in email.subject
    assert ("Range 4 → 5: moved by alice from 3 → 4 (where the detector put it; the numbers "
            "above are the detector's there).") in email.body
    assert "compare/?base=4&new=5" in email.body
    client = Client()
    html = client.get(f"/alerts/{pk}/").content.decode()
    assert "moved by alice from 3 → 4" in html
    group = Alert.objects.get(pk=pk).group
    assert "moved by alice from 3 → 4" in client.get(group.get_absolute_url()).content.decode()
    verdicts = render_to_string("alerts/_explain.html", {  # the function page's section
        "series": series, "function": Alert.objects.get(pk=pk).function})
    assert "(moved by alice to 4 → 5)" in verdicts
    rows = client.get("/alerts/?format=json").json()
    assert (rows[0]["from"], rows[0]["detected_from"], rows[0]["nudged_by"]) == ("4", "3", "alice")


def test_the_alert_page_form_moves_it_and_shows_a_refusal(series) -> None:
    with_runs(series, "345")
    alice = user("alice")
    (pk,) = record([trace(series, "Paint", "4", "5")])
    page = Client()
    page.force_login(alice)
    html = page.get(f"/alerts/{pk}/").content.decode()
    assert 'value="earlier"' in html
    assert 'value="later"' not in html
    refused = page.post(f"/alerts/{pk}/nudge/", {"side": "later"})
    assert refused.status_code == 400
    assert "Not moved: no later boundary to move to: 5 is the newest" in refused.content.decode()
    assert page.post(f"/alerts/{pk}/nudge/", {"side": "earlier"}).status_code == 302
    assert Alert.objects.get(pk=pk).to_label == "4"
    assert page.post(f"/alerts/{pk}/nudge/", {"side": "earl\x00ier"}).status_code == 400
    assert page.post(f"/alerts/{pk}/nudge/", {"side": "e" * 5000}).status_code == 400
    assert Alert.objects.get(pk=pk).to_label == "4"


def test_owners_the_assignee_and_staff_move_others_and_scoped_tokens_do_not(series) -> None:
    with_runs(series)
    alice, bob, carol = user("alice"), user("bob"), user("carol")
    admin = user("admin", is_staff=True)
    Ownership.objects.create(kind=Ownership.SERIES, name="s", name_sha1=name_digest("s"),
                             user=alice)
    (pk,) = record([trace(series, "Paint", "3", "4")])
    with pytest.raises(ForbiddenError, match="series 's' belongs to other users"):
        nudge(Alert.objects.get(pk=pk), bob, "later")
    Alert.objects.filter(pk=pk).update(assignee=bob)
    assert nudge(Alert.objects.get(pk=pk), bob, "later").to_label == "5"
    assert nudge(Alert.objects.get(pk=pk), admin, "earlier").to_label == "4"
    with pytest.raises(ForbiddenError):
        nudge(Alert.objects.get(pk=pk), carol, "later")

    def api(u: Any, scope: str = "") -> Client:
        token = ApiToken.issue(u, "t", scope=scope)[1]
        return Client(headers={"Authorization": f"Bearer {token}"})

    scoped = api(bob, scope="other-*").post(f"/api/alerts/{pk}/nudge", {"side": "later"},
                                            content_type="application/json")
    assert scoped.status_code == 403
    assert "matching 'other-*'" in scoped.json()["detail"]
    foreign = api(carol).post(f"/api/alerts/{pk}/nudge", {"side": "later"},
                              content_type="application/json")
    assert foreign.status_code == 403
    assert Alert.objects.get(pk=pk).to_label == "4"
    ok = api(alice).post(f"/api/alerts/{pk}/nudge", {"side": "later"},
                         content_type="application/json")
    assert ok.status_code == 200, ok.content
    assert (ok.json()["to_label"], ok.json()["detected_to"], ok.json()["nudged_by"]) == (
        "5", "4", "alice")
    bad = api(alice).post(f"/api/alerts/{pk}/nudge", {"side": "sideways"},
                          content_type="application/json")
    assert bad.status_code == 400
    assert bad.json()["detail"] == "side must be one of earlier, later, not 'sideways'"
    assert api(alice).post("/api/alerts/999999/nudge", {"side": "later"},
                           content_type="application/json").status_code == 404
    assert Client().post(f"/api/alerts/{pk}/nudge", {"side": "later"},
                         content_type="application/json").status_code == 401


def test_a_histogram_alert_moves_between_builds_of_its_probe() -> None:
    probe = Probe.objects.create(name="GC_MS")
    for build in ("20240101", "20240102", "20240103", "20240104"):
        HistogramSnapshot.objects.create(probe=probe, build_id=build, edges=b"", counts=b"",
                                         source="t")
    keys = dict(HistogramSnapshot.objects.values_list("build_id", "sort_key"))
    data = AlertData(
        key="histogram:test", detector=Alert.HISTOGRAM, family="GC", subject="GC_MS",
        from_label="20240102", to_label="20240103", from_key=keys["20240102"],
        to_key=keys["20240103"], direction=Alert.CHANGE, method="m", explanation="e",
        data_at=timezone.now(), probe_id=probe.pk, distance=0.2, threshold=0.1)
    (pk,) = record([data])
    alice = user("alice")
    moved = nudge(Alert.objects.get(pk=pk), alice, "earlier")
    assert (moved.from_label, moved.to_label) == ("20240101", "20240102")
    with pytest.raises(UserError, match="20240101 is the oldest build of the probe"):
        nudge(moved, alice, "earlier")


def test_a_full_re_analysis_of_the_demo_leaves_a_moved_alert_moved() -> None:
    import io

    from django.core.management import call_command

    from deviations.management.commands.demo import SERIES

    quiet = {"stdout": io.StringIO(), "stderr": io.StringIO()}
    call_command("demo", "--runs", "5", **quiet)
    paint = Alert.objects.get(subject="Paint", detector=Alert.TRACE,
                              to_label="56.0.2906.0")
    before = Alert.objects.filter(detector=Alert.TRACE).count()
    moved = nudge(paint, user("sheriff", is_staff=True), "later")
    assert (moved.from_label, moved.to_label) == ("56.0.2906.0", "56.0.2907.0")
    call_command("analyse", "--series", SERIES, "--full", **quiet)
    from deviations.traces.notify import record_series_alerts

    # The analysis synced the series' alerts; syncing again creates and withdraws nothing.
    assert record_series_alerts(Series.objects.get(name=SERIES).pk) == (0, 0)
    again = Alert.objects.get(pk=paint.pk)
    assert (again.from_label, again.to_label, again.detected_to_label) == (
        "56.0.2906.0", "56.0.2907.0", "56.0.2906.0")
    assert again.explanation.startswith("Paint: ")
    assert Alert.objects.filter(detector=Alert.TRACE).count() == before
    assert Alert.objects.filter(subject="Paint", to_label="56.0.2906.0").count() == 0
