"""Revisions of releases and log-URL templates of series: every way in (API, CLI, upload
form, manifests, the owners' settings page), conflicts, validation (lengths and NUL: run
on PostgreSQL too), and culprit ranges on pages and in exports."""

from __future__ import annotations

import csv
import io
import itertools
import json
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client

from deviations.alerts.models import Alert
from deviations.core.models import ApiToken
from deviations.traces.models import Release, Series
from tests.conftest import renderer_events

pytestmark = pytest.mark.django_db

GITHUB = "https://github.com/o/r/compare/{from}...{to}"
HASH_A, HASH_B = "a" * 40, "b" * 40


def user(name: str) -> Any:
    return get_user_model().objects.create_user(name, f"{name}@example.org", "pw")


def api(u: Any) -> Client:
    return Client(headers={"Authorization": f"Bearer {ApiToken.issue(u, 't')[1]}"})


def trace(paint_us: float = 100.0, k: int = 0) -> io.BytesIO:
    data = io.BytesIO(json.dumps({"traceEvents": renderer_events(
        [("Paint", 0, paint_us), ("Layout", 1000, 50 + k)])}).encode())
    data.name = f"run{paint_us}-{k}.json"
    return data


_FILES = itertools.count()


def upload(client: Client, version: str, committed: Any, **fields: Any) -> Any:
    """One new trace file (never a duplicate) as a run of ``version`` of series "s"."""
    return committed(client.post, f"/api/series/s/releases/{version}/runs",
                     {"file": trace(k=next(_FILES)), **fields})


# --- API ---------------------------------------------------------------------------------


def test_an_upload_sets_the_revision_and_a_conflicting_one_is_a_409(committed) -> None:
    alice = api(user("alice"))
    assert upload(alice, "1.0", committed, revision=HASH_A).status_code == 201
    assert Release.objects.get(version="1.0").revision == HASH_A
    # The same revision again, or none: fine.
    assert upload(alice, "1.0", committed, revision=HASH_A).status_code == 201
    assert upload(alice, "1.0", committed).status_code == 201
    refused = committed(alice.post, "/api/series/s/releases/1.0/runs",
                        {"file": trace(200.0), "revision": HASH_B})
    assert refused.status_code == 409
    detail = refused.json()["detail"]
    assert f"has revision '{HASH_A}', not '{HASH_B}'" in detail
    assert "PATCH /api/series/s/releases/1.0" in detail
    assert Release.objects.get(version="1.0").revision == HASH_A
    listed = alice.get("/api/series/s/releases").json()
    assert listed[0]["revision"] == HASH_A


def test_a_release_without_revision_takes_the_first_one_given(committed) -> None:
    alice = api(user("alice"))
    assert upload(alice, "1.0", committed).status_code == 201
    assert Release.objects.get(version="1.0").revision == ""
    assert upload(alice, "1.0", committed, revision="r1234").status_code == 201
    assert Release.objects.get(version="1.0").revision == "r1234"


def test_only_owners_change_a_revision_explicitly(committed) -> None:
    alice, bob = api(user("alice")), api(user("bob"))
    upload(alice, "1.0", committed, revision=HASH_A)
    url = "/api/series/s/releases/1.0"
    assert bob.patch(url, {"revision": HASH_B}, content_type="application/json"
                     ).status_code == 403
    changed = alice.patch(url, {"revision": HASH_B}, content_type="application/json")
    assert changed.status_code == 200, changed.content
    assert changed.json()["revision"] == HASH_B
    assert Release.objects.get(version="1.0").revision == HASH_B
    assert alice.patch(url, {"revision": ""}, content_type="application/json"
                       ).json()["revision"] == ""


@pytest.mark.parametrize("bad", ["a b", "a\x00b", "x" * 101, "tab\there", "\u200bzw"])
def test_bad_revisions_are_400s_naming_the_field(committed, bad: str) -> None:
    alice = api(user("alice"))
    refused = committed(alice.post, "/api/series/s/releases/1.0/runs",
                        {"file": trace(), "revision": bad})
    assert refused.status_code == 400
    assert "revision" in refused.json()["detail"]
    assert not Release.objects.exists()
    upload(alice, "1.0", committed)
    patched = alice.patch("/api/series/s/releases/1.0", {"revision": bad},
                          content_type="application/json")
    assert patched.status_code == 400
    assert "revision" in patched.json()["detail"]
    results = io.BytesIO(b"release,metric,value\n2.0,load,1.5\n")
    results.name = "r.csv"
    refused = alice.post("/api/series/m/results",
                         {"file": results, "release": "2.0", "revision": bad})
    assert refused.status_code == 400
    assert "revision" in refused.json()["detail"]


def test_the_longest_revision_and_template_are_stored(committed) -> None:
    """On PostgreSQL the columns' lengths are enforced: the limits must fit them."""
    alice = api(user("alice"))
    assert upload(alice, "1.0", committed, revision="r" * 100).status_code == 201
    template = "https://example.org/{from}/{to}/" + "x" * (500 - 32)
    assert len(template) == 500
    got = alice.patch("/api/series/s", {"log_url_template": template},
                      content_type="application/json")
    assert got.status_code == 200, got.content
    assert Series.objects.get(name="s").log_url_template == template


def test_results_uploads_carry_a_revision() -> None:
    alice = api(user("alice"))
    results = io.BytesIO(b"release,metric,value\n2.0,load,1.5\n")
    results.name = "r.csv"
    got = alice.post("/api/series/m/results", {"file": results, "release": "2.0",
                                               "revision": "deadbeef"})
    assert got.status_code == 201, got.content
    assert Release.objects.get(series__name="m", version="2.0").revision == "deadbeef"
    again = io.BytesIO(b"release,metric,value\n2.0,load,1.7\n")
    again.name = "r2.csv"
    conflict = alice.post("/api/series/m/results", {"file": again, "release": "2.0",
                                                    "revision": "cafe"})
    assert conflict.status_code == 409


@pytest.mark.parametrize(("bad", "why"), [
    ("ftp://example.org/{from}..{to}", "http:// or https://"),
    ("https://example.org/log/{from}", "must contain {from} and {to}"),
    ("https://example.org/{from}..{to}\x00", "no spaces or control characters"),
    ("https://example.org/{from} {to}", "no spaces or control characters"),
    ("https://example.org/{from}..{to}/" + "x" * 470, "at most 500 characters"),
])
def test_bad_log_url_templates_are_400s(committed, bad: str, why: str) -> None:
    alice = api(user("alice"))
    upload(alice, "1.0", committed)
    got = alice.patch("/api/series/s", {"log_url_template": bad},
                      content_type="application/json")
    assert got.status_code == 400
    assert why in got.json()["detail"]
    assert "log URL template" in got.json()["detail"]
    assert Series.objects.get(name="s").log_url_template == ""


def test_only_owners_set_the_log_url_template(committed) -> None:
    alice, bob = api(user("alice")), api(user("bob"))
    upload(alice, "1.0", committed)
    body = {"log_url_template": GITHUB}
    assert bob.patch("/api/series/s", body, content_type="application/json"
                     ).status_code == 403
    got = alice.patch("/api/series/s", body, content_type="application/json")
    assert got.json()["log_url_template"] == GITHUB
    assert alice.get("/api/series").json()[0]["log_url_template"] == GITHUB


# --- CLI and manifests ---------------------------------------------------------------------


def _trace_file(tmp_path: Path, name: str, paint_us: float, layout_us: float = 50) -> str:
    path = tmp_path / name
    path.write_text(json.dumps(renderer_events([("Paint", 0, paint_us),
                                                ("Layout", 1000, layout_us)])))
    return str(path)


def test_the_cli_sets_revisions_refuses_conflicts_and_changes_them_explicitly(
        tmp_path: Path) -> None:
    def ingest(revision: str, name: str) -> None:
        call_command("ingest_traces", "--series", "s", "--release", "1.0", "--revision",
                     revision, _trace_file(tmp_path, name, 100), stdout=io.StringIO())

    ingest("r1", "a.json")
    assert Release.objects.get(version="1.0").revision == "r1"
    with pytest.raises(CommandError, match="has revision 'r1', not 'r2'"):
        ingest("r2", "b.json")
    out = io.StringIO()
    call_command("series_settings", "--series", "s", "--release", "1.0", "--revision", "r2",
                 "--log-url-template", GITHUB, stdout=out)
    assert "1.0: revision r2" in out.getvalue()
    ingest("r2", "b.json")
    series = Series.objects.get(name="s")
    assert series.log_url_template == GITHUB
    with pytest.raises(CommandError, match="must contain"):
        call_command("series_settings", "--series", "s", "--log-url-template",
                     "https://x.org/", stdout=io.StringIO())
    with pytest.raises(CommandError, match="not valid"):
        call_command("series_settings", "--series", "s", "--release", "1.0", "--revision",
                     "a b", stdout=io.StringIO())
    out = io.StringIO()
    call_command("series_settings", "--series", "s", stdout=out)
    assert out.getvalue() == f"log URL template: {GITHUB}\n1.0\tr2\n"


def test_a_manifest_names_each_releases_revision(tmp_path: Path) -> None:
    for name, us in (("a.json", 100), ("b.json", 101), ("c.json", 200)):
        _trace_file(tmp_path, name, us)
    manifest = tmp_path / "runs.csv"
    manifest.write_text("release,file,revision\n1.0,a.json,abc123\n1.0,b.json,abc123\n"
                        "1.1,c.json,\n")
    call_command("ingest_traces", "--series", "s", "--manifest", str(manifest),
                 stdout=io.StringIO())
    assert dict(Release.objects.values_list("version", "revision")) == {
        "1.0": "abc123", "1.1": ""}


def test_ingest_results_takes_a_revision(tmp_path: Path) -> None:
    path = tmp_path / "r.csv"
    path.write_text("release,metric,value\n3.0,load,1.5\n")
    call_command("ingest_results", "--series", "m", "--release", "3.0", "--revision", "f00",
                 str(path), stdout=io.StringIO())
    assert Release.objects.get(version="3.0").revision == "f00"
    with pytest.raises(CommandError, match="--revision goes with --release"):
        call_command("ingest_results", "--series", "m", "--revision", "f00", str(path),
                     stdout=io.StringIO())


# --- The upload form and the settings page --------------------------------------------------


def test_the_upload_form_takes_a_revision(committed) -> None:
    page = Client()
    page.force_login(user("alice"))
    got = committed(page.post, "/upload/", {"series": "s", "release": "1.0",
                                            "revision": "beef", "files": [trace()],
                                            "thread_name": "CrRendererMain",
                                            "process_name": "Renderer"})
    assert got.status_code == 302, got.content
    assert Release.objects.get(version="1.0").revision == "beef"
    bad = page.post("/upload/", {"series": "s", "release": "1.0", "revision": "a\tb",
                                 "files": [trace()], "thread_name": "CrRendererMain",
                                 "process_name": "Renderer"})
    assert bad.status_code == 400
    assert "revision" in bad.content.decode()


def test_the_owners_settings_page(committed) -> None:
    alice, bob = user("alice"), user("bob")
    upload(api(alice), "1.0", committed)
    page = Client()
    page.force_login(alice)
    assert "commit-settings" in page.get("/series/s/settings/").content.decode()
    got = page.post("/series/s/settings/", {"log_url_template": GITHUB, "release": "1.0",
                                            "revision": "r9"})
    assert got.status_code == 302
    assert Series.objects.get(name="s").log_url_template == GITHUB
    assert Release.objects.get(version="1.0").revision == "r9"
    bad = page.post("/series/s/settings/", {"log_url_template": "javascript:{from}{to}"})
    assert bad.status_code == 400
    assert "http:// or https://" in bad.content.decode()
    other = Client()
    other.force_login(bob)
    refused = other.post("/series/s/settings/", {"log_url_template": ""})
    assert refused.status_code == 403
    assert Series.objects.get(name="s").log_url_template == GITHUB
    series_page = Client().get("/series/s/").content.decode()
    assert "/series/s/settings/" in series_page
    assert "<code>r9</code>" in series_page


def test_the_settings_page_saves_both_changes_or_neither(committed, monkeypatch) -> None:
    from deviations.core.errors import UserError
    from deviations.traces import services

    alice = user("alice")
    upload(api(alice), "1.0", committed)
    page = Client()
    page.force_login(alice)

    def refused(*args, **kwargs):
        raise UserError("the revision could not be set", status=409)

    monkeypatch.setattr(services, "set_release_revision", refused)
    got = page.post("/series/s/settings/", {"log_url_template": GITHUB, "release": "1.0",
                                            "revision": "r9"})
    assert got.status_code == 409
    assert "the revision could not be set" in got.content.decode()
    assert Series.objects.get(name="s").log_url_template == ""  # not saved alone


# --- Culprit ranges on pages, in exports and emails -------------------------------------------


@pytest.fixture
def regression(tmp_path: Path) -> Alert:
    """Series "s" (paper rule, GitHub template): Paint regresses from 1.1 to 1.2."""
    Series.objects.create(name="s", default_rule="paper", log_url_template=GITHUB)
    for i, (version, level) in enumerate((("1.0", 100), ("1.1", 100), ("1.2", 300),
                                          ("1.3", 300))):
        # Layout differs a little by release: no two files are the same bytes.
        files = [_trace_file(tmp_path, f"{version}-{k}.json", level + k, 50 + i)
                 for k in range(5)]
        call_command("ingest_traces", "--series", "s", "--release", version, "--revision",
                     f"c{version.replace('.', '')}", *files, stdout=io.StringIO())
    return Alert.objects.get(subject="Paint", from_label="1.1", to_label="1.2")


LINK = '<a href="https://github.com/o/r/compare/c11...c12" rel="noopener noreferrer">c11..c12</a>'


def test_pages_name_and_link_the_range(client: Client, regression: Alert) -> None:
    for url in ("/alerts/", regression.group.get_absolute_url(),
                regression.get_absolute_url(), "/series/s/releases/1.2/",
                f"/series/s/functions/{regression.function_id}/"):
        assert LINK in client.get(url).content.decode(), url
    # The matrix's hover names the range of each flag.
    assert "commits c11..c12" in client.get("/series/s/?rule=paper").content.decode()


def test_exports_carry_the_range(client: Client, regression: Alert) -> None:
    rows = client.get("/alerts/?format=json").json()
    row = next(r for r in rows if r["id"] == regression.pk)
    assert (row["last_good"], row["first_bad"], row["last_good_revision"],
            row["first_bad_revision"], row["culprit_range"], row["log_url"]) == (
        "1.1", "1.2", "c11", "c12", "c11..c12", "https://github.com/o/r/compare/c11...c12")
    listed = client.get("/api/alerts/?series=s").json()
    assert [(a["culprit_range"], a["log_url"]) for a in listed] == [
        ("c11..c12", "https://github.com/o/r/compare/c11...c12")]
    table = list(csv.DictReader(io.StringIO(
        client.get("/alerts/?format=csv").content.decode())))
    assert table[0]["culprit_range"] == "c11..c12"
    out = io.StringIO()
    call_command("export", "--series", "s", "--what", "deviations", "--rule", "paper",
                 stdout=out)
    flagged = [r for r in json.loads(out.getvalue()) if r["verdict"] == "regression"]
    assert [(r["function"], r["culprit_range"], r["log_url"]) for r in flagged] == [
        ("Paint", "c11..c12", "https://github.com/o/r/compare/c11...c12")]
    matrix = client.get("/series/s/?format=csv&rule=paper").content.decode()
    assert "c11..c12" in matrix
    function = client.get(f"/series/s/functions/{regression.function_id}/"
                          "?format=json&rule=paper").json()
    assert [(r["release"], r["culprit_range"]) for r in function] == [
        ("1.0", None), ("1.1", "c10..c11"), ("1.2", "c11..c12"), ("1.3", "c12..c13")]
    assert "culprit" not in function[0]
    changes = client.get("/series/s/releases/1.2/?format=json&rule=paper").json()
    assert changes[0]["culprit_range"] == "c11..c12"


def test_the_alert_email_names_the_range(regression: Alert) -> None:
    from deviations.alerts import notify
    from deviations.alerts.models import AlertGroup

    group = AlertGroup.objects.get(pk=regression.group_id)
    body = notify.group_body(group, [regression], "a test")
    assert "Commits: c11..c12 https://github.com/o/r/compare/c11...c12" in body


def test_a_token_scope_bounds_the_commit_settings(committed) -> None:
    alice = user("alice")
    upload(api(alice), "1.0", committed)
    scoped = Client(headers={
        "Authorization": f"Bearer {ApiToken.issue(alice, 's', scope='team-b-*')[1]}"})
    for url, body in (("/api/series/s", {"log_url_template": GITHUB}),
                      ("/api/series/s/releases/1.0", {"revision": "abc"})):
        refused = scoped.patch(url, body, content_type="application/json")
        assert refused.status_code == 403
        assert "matching 'team-b-*'" in refused.json()["detail"]
    assert Release.objects.get(version="1.0").revision == ""
