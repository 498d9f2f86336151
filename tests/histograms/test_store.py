"""Histogram ingest: CLI, REST API and upload page store a file whole or not at all."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command

from deviations.core.models import ApiToken
from deviations.histograms.models import HistogramChange, HistogramSnapshot, Probe
from deviations.histograms.store import store_histogram_file
from deviations.histograms.tasks import detect_histogram_changes
from ingest.histograms import HistogramError
from tests.conftest import SHARED_DATA, plain_histogram

pytestmark = pytest.mark.django_db


def ingest(*paths, **kwargs) -> str:
    out = io.StringIO()
    call_command("ingest_histograms", *map(str, paths), stdout=out, **kwargs)
    return out.getvalue()


def test_cli_stores_mozilla_histograms_with_owners(write_histograms) -> None:
    record = {
        "probe": "GC_MS", "build_id": "20170130030205",
        "alert_emails": ["gc@example.org"],
        "histogram": {"bucket_count": 50, "histogram_type": 0, "range": [1, 10000],
                      "sum": 27551, "values": {"96": 1, "268": 7, "318": 15}},
    }
    out = ingest(write_histograms("a.json", [record]))
    assert out.strip() == "ok a.json: 1 histogram(s) of 1 probe(s): 1 new, 0 replaced, 0 unchanged"
    probe = Probe.objects.get()
    assert probe.name == "GC_MS"
    assert probe.alert_emails == ["gc@example.org"]
    snap = HistogramSnapshot.objects.get()
    assert snap.build_id == "20170130030205"
    assert len(snap.edges_array()) == 51
    assert np.isinf(snap.edges_array()[-1])
    assert snap.counts_array().sum() == 23
    assert snap.source == "a.json: records[0]"


def test_bad_record_stores_nothing_and_names_the_record(write_histograms) -> None:
    good = plain_histogram("P", "1", [1, 2, 3])
    bad = plain_histogram("Q", "1", [1, 2, 3])
    bad["counts"][1] = -2
    path = write_histograms("mixed.json", [good, bad])
    out = io.StringIO()
    with pytest.raises(CommandError, match="1 of 1 file"):
        call_command("ingest_histograms", str(path), stdout=out)
    assert out.getvalue().startswith("FAILED mixed.json: records[1]: counts[1]")
    assert not Probe.objects.exists()
    assert not HistogramSnapshot.objects.exists()


def test_one_bad_file_does_not_stop_the_others(write_histograms, tmp_path) -> None:
    good = write_histograms("good.json", [plain_histogram("P", "1", [1, 2])])
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    missing = tmp_path / "missing.json"
    out = io.StringIO()
    with pytest.raises(CommandError, match="2 of 3 file"):
        call_command("ingest_histograms", str(bad), str(good), str(missing), stdout=out)
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("FAILED bad.json: ")
    assert lines[1].startswith("ok good.json")
    assert lines[2].startswith("FAILED missing.json: ")
    assert HistogramSnapshot.objects.count() == 1


def test_reingest_replaces_and_identical_is_unchanged(write_histograms) -> None:
    first = write_histograms("a.json", [plain_histogram("P", "1", [1, 2]),
                                        plain_histogram("P", "2", [3, 4])])
    ingest(first)
    again = write_histograms("b.json", [plain_histogram("P", "1", [1, 2]),
                                        plain_histogram("P", "2", [5, 6], alert_emails=["o@x.org"]),
                                        plain_histogram("P", "3", [7, 8])])
    out = ingest(again)
    assert "1 new, 1 replaced, 1 unchanged" in out
    snaps = {s.build_id: s for s in HistogramSnapshot.objects.all()}
    assert list(snaps["2"].counts_array()) == [5, 6]
    assert snaps["2"].source == "b.json: records[1]"
    assert snaps["1"].source == "a.json: records[0]"
    assert Probe.objects.get().alert_emails == ["o@x.org"]


def test_owner_emails_accumulate() -> None:
    store_histogram_file(json.dumps(plain_histogram("P", "1", [1], alert_emails=["a@x.org"]))
                         .encode(), display_name="1.json")
    store_histogram_file(json.dumps(plain_histogram("P", "2", [1], alert_emails=["b@x.org"]))
                         .encode(), display_name="2.json")
    assert Probe.objects.get().alert_emails == ["a@x.org", "b@x.org"]


def test_builds_sort_by_version_order() -> None:
    records = [plain_histogram("P", b, [1]) for b in ["20170110", "20170109", "9"]]
    store_histogram_file(json.dumps(records).encode(), display_name="x.json")
    order = list(HistogramSnapshot.objects.order_by("sort_key").values_list("build_id", flat=True))
    assert order == ["9", "20170109", "20170110"]


def test_build_id_with_too_long_number_is_refused() -> None:
    rec = plain_histogram("P", "1" * 40, [1])
    with pytest.raises(HistogramError, match=r"^x.json: records\[0\]: build id"):
        store_histogram_file(json.dumps([rec]).encode(), display_name="x.json")
    assert not Probe.objects.exists()


def test_long_and_html_probe_names_are_kept(write_histograms) -> None:
    name = "<b>x</b>" + "n" * 990
    ingest(write_histograms("a.json", [plain_histogram(name, "1", [1])]))
    assert Probe.objects.get().name == name


@pytest.fixture
def token() -> str:
    user = get_user_model().objects.create_user("ci")
    return ApiToken.issue(user, "CI")[1]


def test_api_upload(client, token, committed) -> None:
    body = json.dumps([plain_histogram("P", "1", [1, 2]), plain_histogram("Q", "1", [3])])
    data = io.BytesIO(body.encode())
    data.name = "h.json"
    response = committed(
        client.post, "/api/histograms/upload", {"file": data},
        headers={"Authorization": f"Bearer {token}"},
    )
    assert response.status_code == 201, response.content
    assert response.json() == {
        "file": "h.json", "created": 1 + 1, "replaced": 0, "unchanged": 0,
        "probes": ["P", "Q"],
    }
    assert HistogramSnapshot.objects.count() == 2


def test_api_upload_needs_a_token_and_reports_errors(client, token) -> None:
    data = io.BytesIO(b"[1]")
    data.name = "h.json"
    assert client.post("/api/histograms/upload", {"file": data}).status_code == 401
    data.seek(0)
    response = client.post("/api/histograms/upload", {"file": data},
                           headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 400
    assert response.json()["detail"].startswith("h.json: ")
    assert not HistogramSnapshot.objects.exists()


def test_upload_page(client, committed) -> None:
    user = get_user_model().objects.create_user("alice", password="pw")
    assert client.get("/histograms/upload/").status_code == 302  # login first
    client.force_login(user)
    assert client.get("/histograms/upload/").status_code == 200
    good = io.BytesIO(json.dumps([plain_histogram("P", "1", [1, 2])]).encode())
    good.name = "good.json"
    bad = io.BytesIO(b"nope")
    bad.name = "bad.json"
    response = committed(client.post, "/histograms/upload/", {"files": [good, bad]})
    assert response.status_code == 200
    text = response.content.decode()
    assert "ok good.json" in text
    assert "bad.json: " in text
    assert HistogramSnapshot.objects.count() == 1


@pytest.mark.skipif(not (SHARED_DATA / "histograms").is_dir(), reason="shared data absent")
def test_real_mozilla_histograms_ingest_and_the_glam_baseline_stays_quiet() -> None:
    """The real pings and every GLAM file go in through the CLI; GLAM's per-build series (a
    no-change baseline with one-build spikes) gives no change under the default rule, and
    the per-version files make probes of their own (``@version``)."""
    folder = SHARED_DATA / "histograms"
    pings = sorted(folder.glob("moztelemetry__*.json"))
    builds = sorted(folder.glob("glam__*_build_id.json"))
    versions = sorted(folder.glob("glam__*_version.json"))
    out = io.StringIO()
    call_command("ingest_histograms", *map(str, pings + builds + versions), stdout=out)
    assert "FAILED" not in out.getvalue()
    assert HistogramSnapshot.objects.filter(build_id="20170130030205").count() > 400
    per_version = Probe.objects.filter(name__endswith="@version")
    assert per_version.count() >= len(versions)  # scalars: one per aggregation
    assert not HistogramSnapshot.objects.filter(
        probe__in=per_version, build_id__startswith="20"
    ).exists()
    glam = Probe.objects.exclude(snapshots__build_id="20170130030205").exclude(
        name__endswith="@version"
    )
    assert glam.exists()
    for probe in glam:
        assert probe.snapshots.count() >= 100, probe.name
    detect_histogram_changes()
    assert not HistogramChange.objects.filter(probe__in=glam).exists()
