"""Every write is checked against its owner and the token's scope (issue 23): another
team's canary, A/B host, A/B run, alert note and annotation cannot be written to by a
signed-in user or a token that does not own them; owners and staff can."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from django.contrib.auth import get_user_model
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from deviations.alerts.models import Alert, AlertGroup, AlertNote
from deviations.alerts.recording import record
from deviations.core.models import ApiToken
from deviations.experiments.ab.models import AAFloorRecord, ABRun
from deviations.experiments.canaries import services as canaries
from deviations.experiments.canaries.models import Canary, CanaryBatch
from deviations.traces.models import Release, Run, Series
from tests.alerts.test_groups import trace
from tests.experiments.ab.test_ab import AB, _aa_csv

pytestmark = pytest.mark.django_db


def user(name: str, **extra: Any) -> Any:
    return get_user_model().objects.create_user(name, f"{name}@example.org", "pw", **extra)


def api(u: Any, scope: str = "") -> Client:
    token = ApiToken.issue(u, "t", scope=scope)[1] if scope else ApiToken.issue(u, "t")[1]
    return Client(headers={"Authorization": f"Bearer {token}"})


def test_only_a_canarys_owners_send_batches_and_continue_it() -> None:
    alice, bob, admin = user("alice"), user("bob"), user("admin", is_staff=True)
    made = api(alice).post("/api/canaries", {"name": "play", "bad": "higher"},
                           content_type="application/json")
    cid = made.json()["id"]
    batch = {"batch": "x", "arm": "B", "values": [1e9] * 50}
    refused = api(bob).post(f"/api/canaries/{cid}/observations", batch,
                            content_type="application/json")
    assert refused.status_code == 403
    assert "belongs to other users" in refused.json()["detail"]
    assert not CanaryBatch.objects.exists()  # bob cannot force a rejection
    assert api(bob).post(f"/api/canaries/{cid}/continue").status_code == 403
    page = Client()
    page.force_login(bob)
    assert page.post(f"/canaries/{cid}/continue/").status_code == 403
    assert not Canary.objects.get(pk=cid).continued
    ok = api(alice).post(f"/api/canaries/{cid}/observations", batch,
                         content_type="application/json")
    assert ok.status_code == 202
    assert api(admin).post(f"/api/canaries/{cid}/continue").status_code == 200
    # A canary made from the CLI (no creator) is anyone's until someone writes first.
    loose = canaries.create_canary("cli", bad="higher")
    assert api(bob).post(f"/api/canaries/{loose.pk}/continue").status_code == 200


def test_a_token_scope_bounds_canaries_by_name() -> None:
    alice = user("alice")
    cid = api(alice).post("/api/canaries", {"name": "team-a-play", "bad": "higher"},
                          content_type="application/json").json()["id"]
    scoped = api(alice, scope="team-b-*")
    response = scoped.post(f"/api/canaries/{cid}/continue")
    assert response.status_code == 403
    assert "matching 'team-b-*'" in response.json()["detail"]


def _aa(sd: float, seed: int) -> SimpleUploadedFile:
    return SimpleUploadedFile("aa.csv", _aa_csv(sd, seed), content_type="text/csv")


def test_only_a_hosts_owners_set_its_floor_and_change_its_runs() -> None:
    alice, bob = user("alice"), user("bob")
    first = api(alice).post("/api/ab/runs", {"aa": _aa(0.05, 1), "host": "alice-host"})
    assert first.status_code == 201, first.content
    floors = AAFloorRecord.objects.count()
    wide = api(bob).post("/api/ab/runs", {"aa": _aa(20.0, 2), "host": "alice-host"})
    assert wide.status_code == 403
    assert "A/B host 'alice-host' belongs to other users" in wide.json()["detail"]
    assert AAFloorRecord.objects.count() == floors  # alice's floor is untouched
    assert api(user("carol"), scope="other-*").post(
        "/api/ab/runs", {"aa": _aa(0.05, 3), "host": "fresh-host"}).status_code == 403
    run = api(alice).post("/api/ab/runs", {
        "file": SimpleUploadedFile("ab.csv", AB.read_bytes(), content_type="text/csv"),
        "host": "alice-host"}).json()["run"]["id"]
    page = Client()
    page.force_login(bob)
    assert page.post(f"/ab/runs/{run}/min-change/", {"min_change": "50"}).status_code == 403
    assert ABRun.objects.get(pk=run).min_change_pct == 1.0
    page.force_login(alice)
    assert page.post(f"/ab/runs/{run}/min-change/", {"min_change": "5"}).status_code == 302
    assert ABRun.objects.get(pk=run).min_change_pct == 5.0


def test_notes_on_alerts_and_annotations_are_writes_of_their_series() -> None:
    alice, bob = user("alice"), user("bob")
    series = Series.objects.create(name="team-a")
    for v in ("1", "2", "3"):
        Release.objects.create(series=series, version=v)
    from deviations.core.models import Ownership

    Ownership.objects.create(kind=Ownership.SERIES, name="team-a", name_sha1=_digest("team-a"),
                             user=alice)
    (pk,) = record([trace(series, "Paint", "2", "3")])
    page = Client()
    page.force_login(bob)
    page.post(f"/alerts/{pk}/notes/", {"text": "pinned by bob"})
    assert not AlertNote.objects.filter(alert_id=pk).exists()
    assert Alert.objects.get(pk=pk).status == Alert.NEW
    # A token scoped elsewhere cannot delete the series' annotations, even its own.
    note = api(alice).post("/api/series/team-a/releases/2/annotations", {"text": "new bot"},
                           content_type="application/json")
    assert note.status_code == 201, note.content
    scoped = api(alice, scope="other-*")
    gone = scoped.delete(f"/api/series/team-a/annotations/{note.json()['id']}")
    assert gone.status_code == 403


def _digest(name: str) -> str:
    from deviations.core.packing import name_digest

    return name_digest(name)


def test_canary_alerts_are_triaged_by_the_canarys_owners() -> None:
    alice, bob = user("alice"), user("bob")
    canary = canaries.create_canary("play", bad="higher", user=alice)
    rng = np.random.default_rng(3)
    from django.db import transaction

    with transaction.atomic():
        canaries.receive_batch(canary.pk, "a", "A", rng.normal(100, 10, 3000).tolist())
        canaries.receive_batch(canary.pk, "b", "B", rng.normal(104, 10, 3000).tolist())
    from deviations.experiments.canaries import tasks

    tasks.update_canary(canary.pk)
    alert = Alert.objects.get(detector=Alert.CANARY)
    page = Client()
    page.force_login(bob)
    page.post(f"/alerts/groups/{alert.group_id}/triage/", {"alert": [alert.pk],
                                                           "status": "invalid"})
    assert Alert.objects.get(pk=alert.pk).status == Alert.NEW
    page.force_login(alice)
    page.post(f"/alerts/groups/{alert.group_id}/triage/", {"alert": [alert.pk],
                                                           "status": "acknowledged"})
    assert Alert.objects.get(pk=alert.pk).status == Alert.ACKNOWLEDGED


def test_moving_an_alert_and_linking_groups_are_writes_of_their_series() -> None:
    alice, bob = user("alice"), user("bob")
    series = Series.objects.create(name="team-a")
    for v in ("1", "2", "3", "4"):
        release = Release.objects.create(series=series, version=v)
        Run.objects.create(series=series, release=release, sha256=v * 64, file_name=v,
                           size_bytes=1, status=Run.DONE)
    from deviations.core.models import Ownership

    Ownership.objects.create(kind=Ownership.SERIES, name="team-a", name_sha1=_digest("team-a"),
                             user=alice)
    record([trace(series, "Paint", "2", "3"), trace(series, "Layout", "3", "4")])
    first, second = (Alert.objects.get(subject=f).pk for f in ("Paint", "Layout"))
    page = Client()
    page.force_login(bob)
    assert page.post(f"/alerts/{first}/nudge/", {"side": "later"}).status_code == 403
    assert Alert.objects.get(pk=first).to_label == "3"
    groups = [Alert.objects.get(pk=pk).group_id for pk in (first, second)]
    assert page.post(f"/alerts/groups/{groups[1]}/upstream/",
                     {"upstream": groups[0]}).status_code == 403
    assert api(alice, scope="other-*").post(
        f"/api/alerts/groups/{groups[1]}/upstream", {"upstream": groups[0]},
        content_type="application/json").status_code == 403
    assert AlertGroup.objects.get(pk=groups[1]).upstream_id is None
    page.force_login(alice)
    assert page.post(f"/alerts/{first}/nudge/", {"side": "later"}).status_code == 302
    assert Alert.objects.get(pk=first).to_label == "4"
