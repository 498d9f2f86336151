"""Deleting series, releases and runs (issue 14): CLI, API and admin, with confirmation,
permission, the analysis updated and no upload left on disk."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client

from deviations.core.models import ApiToken
from deviations.traces import admin as traces_admin
from deviations.traces import services, store
from deviations.traces.models import Release, Run, Series, SeriesAnalysis
from deviations.traces.uploads import files, runs
from tests.conftest import renderer_events

pytestmark = pytest.mark.django_db


def _series(tmp_path: Path, committed: Any, releases: int = 3) -> Series:
    for r in range(releases):
        files = []
        for k in range(2):
            path = tmp_path / f"{r}-{k}.json"
            path.write_text(json.dumps(renderer_events([("Paint", k, 100 * (r + 1) + k)])))
            files.append(str(path))
        committed(call_command, "ingest_traces", "--series", "web", "--release", f"1.{r}",
                  *files, stdout=io.StringIO())
    return Series.objects.get(name="web")


def _analysed_versions(series: Series) -> list[str]:
    """The releases the stored analysis has columns for."""
    assert SeriesAnalysis.objects.filter(series=series).exists()
    ids = [int(i) for i in store.read_state(series.pk).release_ids]
    return list(Release.objects.filter(pk__in=ids).order_by("sort_key")
                .values_list("version", flat=True))


def test_cli_deletes_a_release_and_the_analysis_follows(tmp_path, committed) -> None:
    series = _series(tmp_path, committed)
    assert _analysed_versions(series) == ["1.0", "1.1", "1.2"]
    with pytest.raises(CommandError, match="pass --yes to confirm"):
        call_command("delete", "--series", "web", "--release", "1.1", stdout=io.StringIO())
    assert Release.objects.count() == 3
    out = io.StringIO()
    committed(call_command, "delete", "--series", "web", "--release", "1.1", "--yes",
              stdout=out)
    assert out.getvalue().strip() == "deleted 1 release(s) and 2 run(s) of web"
    assert _analysed_versions(series) == ["1.0", "1.2"]
    with pytest.raises(CommandError, match="no release '9'"):
        call_command("delete", "--series", "web", "--release", "9", "--yes")
    committed(call_command, "delete", "--series", "web", "--yes", stdout=io.StringIO())
    assert not Series.objects.exists()
    assert not Run.objects.exists()


def test_api_deletes_with_permission_only(tmp_path, committed, client: Client) -> None:
    owner = get_user_model().objects.create_user("owner")
    key = ApiToken.issue(owner, "ci")[1]
    upload = io.BytesIO(json.dumps(renderer_events([("Paint", 0, 10)])).encode())
    upload.name = "a.json"
    auth = {"Authorization": f"Bearer {key}"}
    run_id = committed(client.post, "/api/series/api/releases/1/runs", {"file": upload},
                       headers=auth).json()["run"]
    other = ApiToken.issue(get_user_model().objects.create_user("other"), "x")[1]
    assert client.delete(f"/api/runs/{run_id}",
                         headers={"Authorization": f"Bearer {other}"}).status_code == 403
    assert client.delete(f"/api/runs/{run_id}").status_code == 401
    response = committed(client.delete, f"/api/runs/{run_id}", headers=auth)
    assert response.json() == {"series": "api", "releases": 0, "runs": 1}
    assert committed(client.delete, "/api/series/api/releases/1", headers=auth).json()[
        "releases"] == 1
    assert committed(client.delete, "/api/series/api", headers=auth).status_code == 200
    assert not Series.objects.exists()


def test_a_pending_upload_is_removed_with_its_run(tmp_path, settings, committed) -> None:
    settings.MEDIA_ROOT = tmp_path / "media"
    release = runs.get_release("web", "1.0")
    data = io.BytesIO(json.dumps(renderer_events([("Paint", 0, 10)])).encode())
    run = runs.register_run(release, data, "p.json", runs.ThreadOptions()).run
    stored = Path(settings.MEDIA_ROOT) / files.key(run.sha256)
    assert stored.exists()
    committed(services.delete_run, run)
    assert not stored.exists()
    assert not Run.objects.exists()


def test_admin_deletions_go_through_the_services(tmp_path, committed, rf) -> None:
    series = _series(tmp_path, committed, releases=3)
    admin_site_release = traces_admin.ReleaseAdmin(Release, traces_admin.admin.site)
    committed(admin_site_release.delete_queryset, rf.post("/"),
              Release.objects.filter(version="1.0"))
    assert _analysed_versions(series) == ["1.1", "1.2"]
