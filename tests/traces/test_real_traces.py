"""Every real trace in ../shared/data/traces goes through the CLI ingest (not only the parser).

The TracerBench runs form a real release series (Chrome canary builds, several runs each):
they are ingested release by release, as a user would, and every run must be stored. The
fixtures each become one run: done when they hold a CrRendererMain thread (MANIFEST), failed
with a reason naming the file otherwise.
"""

from __future__ import annotations

import csv
import io
import json
from collections import defaultdict
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from deviations.traces.models import Release, Run
from tests.conftest import SHARED_DATA

TRACES = SHARED_DATA / "traces"
pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(not TRACES.is_dir(), reason=f"{TRACES} is absent (shared data)"),
]


def manifest() -> dict[str, dict[str, str]]:
    with (SHARED_DATA / "MANIFEST_traces.csv").open() as f:
        return {Path(row["file"]).name: row for row in csv.DictReader(f)}


def test_tracerbench_release_series() -> None:
    by_version: dict[str, list[Path]] = defaultdict(list)
    with (TRACES / "tracerbench_runs_INDEX.csv").open() as f:
        for row in csv.DictReader(f):
            by_version[row["chrome"]].append(TRACES / "tracerbench_runs" / row["file"])
    for version, files in by_version.items():
        call_command("ingest_traces", "--series", "tracerbench", "--release", version,
                     *map(str, files), stdout=io.StringIO())
    assert Run.objects.filter(status=Run.DONE).count() == sum(map(len, by_version.values()))
    versions = list(Release.objects.values_list("version", flat=True))
    assert versions == sorted(by_version, key=lambda v: tuple(int(p) for p in v.split(".")))
    out = io.StringIO()
    call_command("export", "--series", "tracerbench", "--what", "selftimes", stdout=out)
    rows = json.loads(out.getvalue())
    assert {r["run"] for r in rows} == {p.name for files in by_version.values() for p in files}
    assert all(r["self_us"] >= 0 and r["total_us"] >= r["self_us"] - 1e-6 for r in rows)


def test_fixtures_ingest_or_fail_with_a_reason() -> None:
    info = manifest()
    folders = [TRACES / "fixtures", TRACES / "cross_version"]
    files = sorted(p for folder in folders for p in folder.iterdir())
    out = io.StringIO()
    with pytest.raises(CommandError):  # some fixtures have no renderer main thread
        call_command("ingest_traces", "--series", "fixtures", "--release", "1",
                     *map(str, files), stdout=out)
    for path in files:
        run = Run.objects.get(file_name=path.name)
        has_main = int(info[path.name]["crrenderermain_threads"]) > 0
        assert (run.status == Run.DONE) == has_main, (path.name, run.error)
        if not has_main:
            assert run.error.startswith(f"{path.name}: "), run.error
            assert f"FAILED {path.name}: " in out.getvalue()
