"""A whole series in one command (issue 14): a CSV manifest or a folder per release."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from deviations.traces.models import Release, Run, Series
from ingest.manifest import ManifestError, read_folders, read_manifest
from tests.conftest import renderer_events

pytestmark = pytest.mark.django_db


def _trace(path: Path, k: int) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(renderer_events([("Paint", 0, 100 + k), ("Layout", 500, 40)])))
    return path


def test_a_manifest_ingests_several_releases_at_once(tmp_path: Path) -> None:
    for k in range(4):
        _trace(tmp_path / "runs" / f"r{k}.json", k)
    manifest = tmp_path / "runs.csv"
    mixed = tmp_path / "mixed.csv"
    mixed.write_text("release,file,order\n1.0,runs/r0.json,\n1.0,runs/r1.json,\n"
                     "deadbeef,runs/r2.json,2\ndeadbeef,runs/r3.json,2\n")
    with pytest.raises(CommandError, match="gives an order to 1 release.s. and none to 1"):
        call_command("ingest_traces", "--series", "web", "--manifest", str(mixed),
                     stdout=io.StringIO())
    assert not Release.objects.exists()  # refused before anything was created
    manifest.write_text("release,file,order\n1.0,runs/r0.json,1\n1.0,runs/r1.json,1\n"
                        "deadbeef,runs/r2.json,2\ndeadbeef,runs/r3.json,2\n")
    out = io.StringIO()
    call_command("ingest_traces", "--series", "web", "--manifest", str(manifest), stdout=out)
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("1.0: ok r0.json")
    assert lines[-1].startswith("analysis: ")
    assert [r.version for r in Release.objects.order_by("sort_key")] == ["1.0", "deadbeef"]
    assert Release.objects.get(version="deadbeef").order == 2
    assert Run.objects.filter(status=Run.DONE).count() == 4


def test_a_folder_per_release(tmp_path: Path) -> None:
    for v, version in enumerate(("56.0.2909.0", "56.0.2910.0")):
        for k in range(2):
            _trace(tmp_path / "series" / version / f"run{k}.json", 10 * v + k)
    (tmp_path / "series" / "56.0.2910.0" / "notes.txt").write_text("not a trace")
    entries = read_folders(tmp_path / "series")
    assert [(e.release, e.path.name) for e in entries] == [
        ("56.0.2909.0", "run0.json"), ("56.0.2909.0", "run1.json"),
        ("56.0.2910.0", "run0.json"), ("56.0.2910.0", "run1.json"),
    ]
    call_command("ingest_traces", "--series", "web", "--folders", str(tmp_path / "series"),
                 stdout=io.StringIO())
    assert Run.objects.filter(status=Run.DONE).count() == 4


@pytest.mark.parametrize(("text", "says"), [
    ("version,path\n1.0,a.json\n", "line 1: the header must be"),
    ("release,file\n1.0,a.json\nbad/name,b.json\n", "line 3: release version 'bad/name'"),
    ("release,file,order\n1.0,a.json,-3\n", "line 2: release order must be"),
    ("release,file,order\n1.0,a.json,soon\n", "line 2: invalid literal"),
    ("release,file\n1.0\n", "line 2: 1 fields, expected 2"),
    ("release,file\n", "lists no runs"),
])
def test_a_bad_manifest_stops_before_anything_is_ingested(
    tmp_path: Path, text: str, says: str
) -> None:
    _trace(tmp_path / "a.json", 0)
    manifest = tmp_path / "m.csv"
    manifest.write_text(text)
    with pytest.raises(ManifestError, match=f"^m.csv: .*{says}"):
        read_manifest(manifest)
    with pytest.raises(CommandError, match=says):
        call_command("ingest_traces", "--series", "web", "--manifest", str(manifest),
                     stdout=io.StringIO())
    assert not Series.objects.exists()


def test_release_and_manifest_are_exclusive(tmp_path: Path) -> None:
    with pytest.raises(CommandError, match="not allowed with argument"):
        call_command("ingest_traces", "--series", "web", "--release", "1",
                     "--manifest", str(tmp_path / "m.csv"), stdout=io.StringIO())
    with pytest.raises(CommandError, match="FILE arguments go with --release"):
        call_command("ingest_traces", "--series", "web", "--folders", str(tmp_path), "x.json",
                     stdout=io.StringIO())


def test_a_manifest_may_name_revisions(tmp_path: Path) -> None:
    manifest = tmp_path / "m.csv"
    manifest.write_text("release,file,order,revision\n1.0,a.json,1,abc\n1.0,b.json,1,abc\n"
                        "2.0,c.json,2,\n")
    got = read_manifest(manifest)
    assert [(e.release, e.order, e.revision) for e in got] == [
        ("1.0", 1, "abc"), ("1.0", 1, "abc"), ("2.0", 2, None)]
    manifest.write_text("release,file,revision\n1.0,a.json,abc\n")
    assert read_manifest(manifest)[0].revision == "abc"


@pytest.mark.parametrize(("text", "error"), [
    ("release,file,revision\n1.0,a.json,abc\n1.0,b.json,def\n",
     "line 3: release '1.0' has revision 'abc' on an earlier line, 'def' here"),
    ("release,file,revision\n1.0,a.json,a b\n", "line 2: revision 'a b' is not valid"),
    ("release,file,revision,revision\n1.0,a.json,a,a\n", "line 1: the header must be"),
    ("release,file,branch\n1.0,a.json,x\n", "line 1: the header must be"),
])
def test_bad_revisions_in_a_manifest(tmp_path: Path, text: str, error: str) -> None:
    manifest = tmp_path / "m.csv"
    manifest.write_text(text)
    with pytest.raises(ManifestError, match=re.escape(error)):
        read_manifest(manifest)
